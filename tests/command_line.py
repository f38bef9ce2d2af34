"""The toolkit's command lines run as a user types them, for the tests: a subprocess, its exit status and output, and
the check every bad input must pass (exit status 2, one line on stderr, no traceback)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_module(module: str, *args, cwd=ROOT, timeout: float = 600, env=None) -> tuple[int, str, str]:
    """``python -m MODULE ARGS...`` in ``cwd``: exit status, stdout, stderr."""
    p = subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def run_realtrace_without(missing: tuple[str, ...], *args, timeout: float = 120) -> tuple[int, str, str]:
    """``python -m realtrace ARGS...`` with the ``missing`` modules unimportable, as on a machine without the
    optional extras that provide them."""
    code = "".join(f"sys.modules[{m!r}] = None; " for m in missing)
    code = f"import sys; {code}from realtrace.cli import main; sys.exit(main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def interruptible(argv: list, **kwargs) -> subprocess.Popen:
    """Start ``argv`` for a Ctrl-C test with SIGINT at its default disposition in the child.  A test suite started as
    a background job of a non-interactive shell runs with SIGINT ignored, and a child inherits an ignored signal:
    it would never see the interrupt, and the test would test the caller's shell instead of the command."""
    return subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)


def wait_until_importing(p: subprocess.Popen, marker: str = "numpy", timeout: float = 60.0) -> None:
    """Wait until the child ``p`` has mapped a shared library whose path contains ``marker`` (Linux ``/proc``): it is
    past the interpreter's own start-up and inside the command's imports.  A Ctrl-C during CPython's start-up (before
    ``site`` is imported) is a fatal error of the interpreter, outside any command's reach; on a loaded machine that
    phase alone took over 0.3 s."""
    import time

    deadline = time.monotonic() + timeout
    maps = Path(f"/proc/{p.pid}/maps")
    while time.monotonic() < deadline and p.poll() is None:
        try:
            if marker in maps.read_text():
                return
        except OSError:
            return  # no /proc: fall back to the caller's own delay
        time.sleep(0.01)


def is_one_line_error(code: int, err: str, needle: str = "") -> bool:
    """Exit status 2 and exactly one non-empty line on stderr, containing ``needle``, with no traceback."""
    return (code == 2 and err.count("\n") == 1 and err.endswith("\n") and err.strip() != ""
            and "Traceback" not in err and needle in err)

"""A recompute's steps as processes forked from one that has imported the model's libraries already.

Every step of ``--full``'s recompute (:mod:`paper_check.inputs`) is a command -- ``python -m paper_check quality
...`` or ``python -c SCRIPT ...`` -- and as a new interpreter each paid about 3 s of CPU importing torch and
transformers before its work (docs/performance.md).  A host process (``python -m paper_check.step_host``) imports them
once (:data:`PRELOAD`); each step is then a child forked from it: a new process that starts with those modules in
memory (copy on write) and runs the command as the interpreter would -- ``-m`` by :func:`runpy.run_module`, ``-c``
by ``exec`` -- with stdin from ``/dev/null``, stdout and stderr on the step's files, and exits with the command's
code.  A step changes nothing in the host or in the next step: each is its own process.

The host imports, and once the quality cache (``$KV_QUALITY_CACHE``, as the steps use it) holds the model's
de-quantized copy -- the first model step makes it -- loads the model from it into the quality worker's slot
(:func:`realtrace.quality.run.preload_model`) before its next fork, so each later step starts with the model in
memory instead of reading and checking the copy (about 2.8 s of CPU a step).  No tensor operation and no tokenizer
use happen in the host (loading with one torch thread runs no parallel region), so no OpenMP or tokenizer thread
exists to be lost in the child (a process forked after such threads started can hang; ``tests/test_step_host.py``
counts the host's threads).  POSIX only (fork).

Protocol, one line each way per message on the host's stdin and stdout: the client writes a request ``{"argv",
"stdout", "stderr"}`` as JSON; the host forks, answers the child's pid, waits for it, and answers its exit code
(negative: the signal that ended it).  End of input ends the host.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

# what every model step imports before its work (measured with python -X importtime): the libraries, transformers'
# lazily imported parts the model and its tokenizer load, and this project's quality modules
PRELOAD = ("numpy", "scipy.optimize", "numba", "torch", "transformers", "transformers.models.auto.tokenization_auto",
           "transformers.models.auto.modeling_auto", "transformers.models.llama.modeling_llama",
           "transformers.generation.utils", "paper_check.cli", "realtrace.quality.cli", "realtrace.quality.run")


class HostFailed(Exception):
    """The host process ended or answered out of protocol; the message is one line."""


# ---- the host --------------------------------------------------------------------------------------------------------

def serve() -> None:
    """The host's loop (module docstring).  Ctrl-C is the client's to handle: it ends the host by closing its input."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 -- e.g. no torch in a core install: a step then imports (and fails) itself
            pass
    answers = os.dup(1)  # fd 1 becomes each child's stdout; the answers keep their own descriptor
    loaded = False
    for line in sys.stdin:
        request = json.loads(line)
        loaded = loaded or _load_model()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(answers)
            _child(request)
        os.write(answers, f"{pid}\n".encode())
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        os.write(answers, f"{code}\n".encode())


def _load_model() -> bool:
    """The model loaded from the quality cache's copy (module docstring); False while there is no copy to load, so
    the next request tries again.  True also when it cannot be loaded here (no ``[real]`` extra, an unusable cache
    directory, a failed load): the steps then load it, or fail, themselves."""
    try:
        from realtrace.quality.cache import cache_dir
        from realtrace.quality.run import preload_model

        return preload_model(cache_dir())
    except Exception:  # noqa: BLE001 -- whatever it is, a step meets it again and reports it as a step should
        return True


def _child(request: dict) -> None:
    """Run one step in the forked child and leave with its exit code (never returns)."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            opened = os.open(path, flags, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        code = _command(request["argv"])
    except BaseException:  # noqa: BLE001 -- whatever the step raised is its stderr, as the interpreter would print it
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 -- a full disk must not keep the child from exiting
                pass
        os._exit(code)


def _command(argv: list[str]) -> int:
    """Run ``python -m MODULE ARGS`` or ``python -c CODE ARGS`` in this process: the exit code the interpreter would
    give (``SystemExit``'s code; a message is printed to stderr and gives 1)."""
    if len(argv) < 3 or argv[1] not in ("-m", "-c"):
        raise ValueError(f"a step must be 'python -m MODULE ...' or 'python -c CODE ...', not {argv[1:2]}")
    try:
        if argv[1] == "-m":
            sys.argv = [argv[2], *argv[3:]]
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *argv[3:]]
            exec(compile(argv[2], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102 -- a declared step
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    return 0


# ---- the client ------------------------------------------------------------------------------------------------------

class StepHost:
    """One host process, started in the directory ``cwd`` (its steps' working directory), and the step it runs (one
    at a time)."""

    def __init__(self, cwd: Path):
        self._proc = subprocess.Popen([sys.executable, "-m", "paper_check.step_host"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, cwd=cwd, bufsize=0)
        self._pending = b""

    def _answer(self, stop: threading.Event | None, pid: int | None) -> int:
        """The host's next answer line as an integer; while it is awaited, ``stop`` being set terminates ``pid``."""
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                chunk = os.read(fd, 256)
                if not chunk:
                    raise HostFailed(f"the step host ended (exit code {self._proc.wait()})")
                self._pending += chunk
            elif stop is not None and pid is not None and stop.is_set():
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:  # it ended meanwhile
                    pass
                stop = None  # once is enough: the host reports the code
        line, self._pending = self._pending.split(b"\n", 1)
        try:
            return int(line)
        except ValueError:
            raise HostFailed(f"the step host answered {line[:80]!r}, not a number") from None

    def run(self, argv: list[str], stdout: str, stop: threading.Event | None = None) -> tuple[int, str]:
        """Run ``argv`` (``python -m ...`` or ``python -c ...``) in a child with its stdout on the file ``stdout``:
        ``(exit code, stderr)``.  ``stop`` set while it runs terminates it (SIGTERM)."""
        with tempfile.NamedTemporaryFile("r", prefix="step-stderr-", suffix=".txt") as err:
            request = json.dumps({"argv": list(argv), "stdout": str(stdout), "stderr": err.name}) + "\n"
            try:
                self._proc.stdin.write(request.encode())
            except BrokenPipeError:
                raise HostFailed(f"the step host ended (exit code {self._proc.wait()})") from None
            pid = self._answer(None, None)
            code = self._answer(stop, pid)
            return code, Path(err.name).read_text(errors="replace")

    def close(self) -> None:
        """End the host (after the step it runs, if any: terminate that first)."""
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        self._proc.wait()


class HostPool:
    """Hosts (in the directory ``cwd``) for steps that run at the same time: :meth:`run` takes an idle host or starts
    one; :meth:`close` ends them all.  A host that failed is dropped and the next step starts a new one."""

    def __init__(self, cwd: Path):
        self._cwd = cwd
        self._idle: list[StepHost] = []
        self._all: list[StepHost] = []
        self._lock = threading.Lock()

    def run(self, argv: list[str], stdout: str, stop: threading.Event | None = None) -> tuple[int, str]:
        with self._lock:
            host = self._idle.pop() if self._idle else None
            if host is None:
                host = StepHost(self._cwd)
                self._all.append(host)
        try:
            result = host.run(argv, stdout, stop)
        except HostFailed:
            with self._lock:
                self._all.remove(host)
            host.close()
            raise
        with self._lock:
            self._idle.append(host)
        return result

    def close(self) -> None:
        with self._lock:
            hosts, self._all, self._idle = self._all, [], []
        for host in hosts:
            host.close()


if __name__ == "__main__":
    serve()

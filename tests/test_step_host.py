"""The step host (paper_check.step_host): a recompute's steps run in children forked from one process that imported
the model's libraries once.  Each step behaves as the command run by a new interpreter -- its arguments, its
``__main__``, its stdout and stderr on its own files, its exit code -- and leaves nothing behind for the next step;
a step can be stopped; a host that dies is reported in one line and replaced."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from paper_check.step_host import HostFailed, HostPool, StepHost
from tests.command_line import ROOT
from tests.model_fixture import shared_model

SHOW = "import json, sys; print(json.dumps({'argv': sys.argv, 'name': __name__})); sys.stderr.write('to stderr\\n')"


@pytest.fixture
def host():
    h = StepHost(ROOT)
    yield h
    h.close()


def test_a_c_step_is_what_the_interpreter_would_run(host, tmp_path):
    out = tmp_path / "out.json"
    code, err = host.run([sys.executable, "-c", SHOW, "a", "b c"], str(out))
    plain = subprocess.run([sys.executable, "-c", SHOW, "a", "b c"], capture_output=True, text=True, cwd=ROOT)
    assert code == plain.returncode == 0
    assert json.loads(out.read_text()) == json.loads(plain.stdout) == {"argv": ["-c", "a", "b c"], "name": "__main__"}
    assert err == plain.stderr == "to stderr\n"


def test_a_module_step_and_exit_codes(host, tmp_path):
    data = tmp_path / "in.json"
    data.write_text('{"b": 1, "a": [1, 2]}')
    out = tmp_path / "out.json"
    assert host.run([sys.executable, "-m", "json.tool", "--sort-keys", str(data)], str(out)) == (0, "")
    assert out.read_text() == subprocess.run([sys.executable, "-m", "json.tool", "--sort-keys", str(data)],
                                             capture_output=True, text=True).stdout
    assert host.run([sys.executable, "-c", "import sys; sys.exit(3)"], os.devnull) == (3, "")
    assert host.run([sys.executable, "-c", "import sys; sys.exit('no model here')"], os.devnull) == (1, "no model here\n")
    code, err = host.run([sys.executable, "-c", "raise ValueError('broken step')"], os.devnull)
    assert code == 1 and err.startswith("Traceback") and err.endswith("ValueError: broken step\n")
    # stdin is empty, not the host's request pipe
    code, _ = host.run([sys.executable, "-c", "import sys; sys.exit(len(sys.stdin.read()))"], os.devnull)
    assert code == 0


def test_a_step_leaves_nothing_for_the_next(host, tmp_path):
    """Each step is its own process: what one changes in a module the host imported, the next does not see."""
    out = tmp_path / "out.txt"
    assert host.run([sys.executable, "-c", "import numpy; numpy.LEFT_BEHIND = 1; print(1)"], str(out))[0] == 0
    assert host.run([sys.executable, "-c", "import numpy; print(hasattr(numpy, 'LEFT_BEHIND'))"], str(out))[0] == 0
    assert out.read_text() == "False\n"


def test_the_model_libraries_are_imported_before_the_step():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("no torch: the host has nothing heavy to import")
    pool = HostPool(ROOT)
    try:
        code, err = pool.run([sys.executable, "-c", "import sys; sys.exit(0 if 'torch' in sys.modules else 5)"],
                             os.devnull)
    finally:
        pool.close()
    assert code == 0, err


def test_a_stopped_step_is_terminated(host):
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    t0 = time.monotonic()
    code, _ = host.run([sys.executable, "-c", "import time; time.sleep(60)"], os.devnull, stop)
    assert code == -signal.SIGTERM and time.monotonic() - t0 < 20
    assert host.run([sys.executable, "-c", "pass"], os.devnull) == (0, "")  # the host serves the next step


def test_a_host_that_dies_is_one_line_and_replaced(tmp_path):
    pool = HostPool(ROOT)
    try:
        killer = f"import os, signal; os.kill(os.getppid(), signal.SIGKILL); import time; time.sleep(5)"
        with pytest.raises(HostFailed, match=r"^the step host ended \(exit code -9\)$"):
            pool.run([sys.executable, "-c", killer], os.devnull)
        assert pool.run([sys.executable, "-c", "print('again')"], str(tmp_path / "o.txt")) == (0, "")
        assert (tmp_path / "o.txt").read_text() == "again\n"
    finally:
        pool.close()


def host_threads(host: StepHost) -> int:
    return len(os.listdir(f"/proc/{host._proc.pid}/task"))


def test_once_the_cache_holds_the_models_copy_each_step_starts_with_the_model(tmp_path, monkeypatch):
    """Before the quality cache holds the model's copy a step finds the quality worker's slot empty; once it does
    (the first model step makes it), the host loads the model from it before the next fork and the step finds it
    there -- the copy's model: its logits equal those of the GGUF's model in this process, computed in the child --
    and the load started no thread in the host (a thread lost in a fork can hang the child)."""
    lm = shared_model()
    from realtrace.quality.cache import copy_key, digest, write_model_copy

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("KV_QUALITY_CACHE", str(cache))
    probe = ("import hashlib; from realtrace.quality import run; "
             "lm = next((m for (t, _), m in run._MODEL.items() if t == 1), None); "
             "print(sorted(t for t, _ in run._MODEL)); "
             "print(lm and hashlib.sha256(lm.forward([1, 2, 3, 4]).logits.numpy().tobytes()).hexdigest())")
    out = tmp_path / "out.txt"
    host = StepHost(ROOT)
    try:
        assert host.run([sys.executable, "-c", probe], str(out)) == (0, "")
        assert out.read_text().split() == ["[]", "None"]
        before = host_threads(host)
        write_model_copy(cache / f"model-{digest(copy_key(lm.gguf))}", copy_key(lm.gguf), lm)
        assert host.run([sys.executable, "-c", probe], str(out)) == (0, "")
        want = hashlib.sha256(lm.forward([1, 2, 3, 4]).logits.numpy().tobytes()).hexdigest()
        assert out.read_text().split() == ["[1]", want]
        assert host_threads(host) == before
    finally:
        host.close()

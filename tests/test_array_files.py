"""The one reader of array files a user hands in (:func:`kvcore.trace_files.load_arrays`; issue 51): schedules,
LU-KV budget curves and ``.npz`` traces.  Every bad file is one line in the toolkit's words naming the file -- never
numpy's advice to load a pickle "unsafely" -- and a good one reads back exactly what was saved."""

from __future__ import annotations

import numpy as np
import pytest

from kvcore.errors import ParameterError, TraceError
from kvcore.trace_files import load_arrays, load_trace
from tests.command_line import is_one_line_error, run_module
from tests.test_quality_cli import run_without_real


def bad_files(d) -> list[tuple[object, str]]:
    """``(path, the reason)`` for each kind of file that is not a plain array file."""
    rng = np.random.default_rng(0)
    noise = d / "noise.npy"
    noise.write_bytes(rng.bytes(4096))
    zipped_noise = d / "zipped.npz"
    zipped_noise.write_bytes(b"PK\x03\x04" + rng.bytes(4096))
    objects_npy = d / "objects.npy"
    np.save(objects_npy, np.array([None, 1], dtype=object), allow_pickle=True)
    objects_npz = d / "objects.npz"
    np.savez(objects_npz, fine=np.arange(3), bad=np.array([None, 1], dtype=object))
    cut = d / "cut.npy"
    np.save(cut, np.arange(1000.0))
    cut.write_bytes(cut.read_bytes()[:500])
    return [(noise, "not an .npy or .npz array file"), (zipped_noise, "cannot read it: damaged"),
            (objects_npy, "holds Python objects, which are never loaded"),
            (objects_npz, "array bad holds Python objects"), (cut, "cannot read it: damaged"),
            (d / "missing.npy", "cannot read it (No such file or directory)"), (d, "is a directory, not a file")]


def test_every_bad_file_is_one_line_in_the_toolkits_words(tmp_path):
    for path, reason in bad_files(tmp_path):
        with pytest.raises(ParameterError) as info:
            load_arrays(path, "LU-KV curve", ParameterError)
        message = str(info.value)
        assert message.startswith(f"LU-KV curve {path}: ") and reason in message, (path, message)
        assert "\n" not in message and "pickle" not in message, message


def test_good_files_read_back_exactly(tmp_path):
    a, b = np.arange(12, dtype=np.int32).reshape(3, 4), np.linspace(0, 1, 7)
    np.save(tmp_path / "a.npy", a)
    np.savez_compressed(tmp_path / "ab.npz", a=a, b=b)
    got = load_arrays(tmp_path / "a.npy", "curve")
    assert got.dtype == a.dtype and np.array_equal(got, a)
    both = load_arrays(tmp_path / "ab.npz", "schedule")
    assert sorted(both) == ["a", "b"] and np.array_equal(both["a"], a) and np.array_equal(both["b"], b)


def test_an_npz_trace_of_objects_is_refused_without_pickle_advice(tmp_path):
    path = tmp_path / "t.npz"
    np.savez(path, kind="paging", items=np.array([1, None], dtype=object))
    with pytest.raises(TraceError, match="array items holds Python objects") as info:
        load_trace(path)
    assert "pickle" not in str(info.value)


def test_a_random_lukv_curve_on_the_command_line(tmp_path):
    """The issue's case: ``quality press:LUKV=FILE`` with random bytes in FILE -- one line, no pickle advice, before
    the model (torch, transformers and kvpress are unimportable here)."""
    for path, reason in bad_files(tmp_path):
        code, out, err = run_without_real(f"press:LUKV={path}", "--budget", "8", "--prompts", "kv-24-12",
                                          "--workers", "0")
        assert is_one_line_error(code, err, reason), (path, code, err)
        assert str(path) in err and "pickle" not in err and out == ""


def test_a_bad_npz_trace_on_the_command_line(tmp_path):
    path = tmp_path / "t.npz"
    np.savez(path, kind="paging", items=np.array([1, None], dtype=object))
    code, out, err = run_module("paper_check", "simulate", "--policy", "LRU", "-k", "2", path, timeout=60)
    assert is_one_line_error(code, err, "array items holds Python objects") and "pickle" not in err, err

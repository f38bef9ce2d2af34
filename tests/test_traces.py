"""kvcore.traces: validation of every bad input, file round trips, atomic saves, RM requests from attention.

Every bad input must give a one-line TraceError naming the file (or ``<trace>`` in memory) and, where the problem
sits at a step, that step.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from kvcore.errors import ParameterError, TraceError
from kvcore.trace_files import load_trace, save_trace
from kvcore.traces import AttentionTrace, PagingTrace, recompute_weights, rm_requests_from_attention


def _error(path, *parts):
    """Load ``path``, expect a one-line TraceError containing the file name and every part."""
    with pytest.raises(TraceError) as e:
        load_trace(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert str(path) in msg
    for p in parts:
        assert p in msg, (p, msg)
    return msg


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def _attention_npz(path, rows_indices, rows_weights, **extra):
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows_indices])])
    return _npz(path, kind="attention", indptr=indptr, indices=np.concatenate(rows_indices),
                weights=np.concatenate(rows_weights), **extra)


# -- bad inputs ---------------------------------------------------------------------------------------------------


def test_negative_id_npy(tmp_path):
    p = tmp_path / "neg.npy"
    np.save(p, np.array([3, 1, -2, 4]))
    _error(p, "step 2", "negative item id -2")


def test_negative_id_txt_names_step_and_line(tmp_path):
    p = tmp_path / "neg.txt"
    p.write_text("# ids\n3\n\n1\n-5\n")
    _error(p, "step 2", "line 5", "negative item id -5")


def test_not_an_integer_txt(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("3\n1.5\n")
    _error(p, "step 1", "line 2", "'1.5' is not an integer id")


def test_negative_token_attention(tmp_path):
    p = _attention_npz(tmp_path / "negtok.npz", [np.array([0]), np.array([-1, 1])], [np.array([1.0]),
                                                                                       np.array([0.5, 0.5])])
    _error(p, "step 1", "negative token id -1")


@pytest.mark.parametrize("arr", [np.array([1.0, 2.0]), np.array([True, False]), np.array(["1", "2"])])
def test_wrong_dtype_npy(tmp_path, arr):
    p = tmp_path / "dtype.npy"
    np.save(p, arr)
    _error(p, "must hold integers", str(arr.dtype))


def test_wrong_dtype_npz_items_and_weights(tmp_path):
    p = _npz(tmp_path / "items.npz", kind="paging", items=np.array([0.0, 1.0]))
    _error(p, "items must hold integers")
    p = _npz(tmp_path / "w.npz", kind="attention", indptr=np.array([0, 1]), indices=np.array([0]),
             weights=np.array(["x"]))
    _error(p, "weights must hold numbers")


def test_row_not_summing_to_one(tmp_path):
    p = _attention_npz(tmp_path / "sum.npz", [np.array([0]), np.array([0, 1])], [np.array([1.0]),
                                                                                  np.array([0.5, 0.4])])
    _error(p, "step 1", "row sums to 0.9")


def test_residual_completes_a_row_and_a_trailing_empty_row(tmp_path):
    # a captured trace may store nothing of a row and put all its mass in the residual (fixed: used to crash)
    p = _attention_npz(tmp_path / "res.npz", [np.array([0]), np.array([], dtype=np.int64)],
                       [np.array([1.0]), np.array([])], residual=np.array([0.0, 1.0]))
    tr = load_trace(p)
    assert tr.T == 2 and tr.nnz == 1
    p = _attention_npz(tmp_path / "empty_row.npz", [np.array([0]), np.array([], dtype=np.int64)],
                       [np.array([1.0]), np.array([])])
    _error(p, "step 1", "row sums to 0")


def test_future_token(tmp_path):
    p = _attention_npz(tmp_path / "future.npz", [np.array([0]), np.array([0, 2])], [np.array([1.0]),
                                                                                     np.array([0.5, 0.5])])
    _error(p, "step 1", "references future token 2")


def test_nan_weight_and_nan_cost(tmp_path):
    p = _attention_npz(tmp_path / "nanw.npz", [np.array([0]), np.array([0, 1])], [np.array([1.0]),
                                                                                   np.array([np.nan, 1.0])])
    _error(p, "step 1", "weight is nan")
    p = _npz(tmp_path / "nanc.npz", kind="paging", items=np.array([0, 1, 2]), costs=np.array([1.0, 1.0, np.nan]))
    _error(p, "step 2", "fault cost is nan")


def test_duplicate_request_in_a_step(tmp_path):
    p = _npz(tmp_path / "dup.npz", kind="paging", items=np.array([0, 1, 2, 1]), offsets=np.array([0, 1, 3, 4]),
             costs=np.ones(4))
    assert load_trace(p).T == 3
    p = _npz(tmp_path / "dup2.npz", kind="paging", items=np.array([0, 1, 1, 2]), offsets=np.array([0, 1, 3, 4]))
    _error(p, "step 1", "requested twice in the same step")


@pytest.mark.parametrize("suffix", [".npz", ".npy"])
def test_truncated_file(tmp_path, suffix):
    full = tmp_path / f"full{suffix}"
    save_trace(PagingTrace.unit(np.arange(500) % 17), full)
    data = full.read_bytes()
    p = tmp_path / f"cut{suffix}"
    p.write_bytes(data[: len(data) // 2])
    _error(p, "cannot read")


def test_corrupt_compressed_member(tmp_path):
    full = tmp_path / "full.npz"
    save_trace(PagingTrace.unit(np.arange(2000) % 37), full)
    data = bytearray(full.read_bytes())
    for j in range(200, 220):
        data[j] ^= 0xFF
    p = tmp_path / "corrupt.npz"
    p.write_bytes(bytes(data))
    _error(p, "cannot read")


def test_unknown_extension_missing_file_and_directory(tmp_path):
    p = tmp_path / "trace.csv"
    p.write_text("1\n2\n")
    _error(p, "unknown trace format '.csv'")
    _error(tmp_path / "nope.npy", "no such file")
    _error(tmp_path, "is a directory")


def test_in_memory_float_ids_are_not_truncated():
    # fixed: PagingTrace.unit / from_steps used np.fromiter(dtype=int64), which turned 1.5 into 1
    with pytest.raises(TraceError, match="step 1: item id 1.5 is not an integer"):
        PagingTrace.unit([0, 1.5])
    with pytest.raises(TraceError, match="step 2: item id 1.5 is not an integer"):
        PagingTrace.from_steps([[0], [4, 2], [1.5, 2]])
    with pytest.raises(TraceError, match="must hold integers"):
        PagingTrace.unit(np.array([0, 1.5]))


# -- long traces: no needless copies ----------------------------------------------------------------------------------


def test_npy_is_memory_mapped_and_unit_costs_take_no_memory(tmp_path):
    from kvcore import kernels

    p = tmp_path / "u.npy"
    np.save(p, np.arange(1000, dtype=np.int64) % 7)
    tr = load_trace(p)
    base = tr.items
    while not isinstance(base, np.memmap) and base.base is not None:
        base = base.base
    assert isinstance(base, np.memmap)  # the items are the file's pages, not a copy
    assert tr.is_unit_single and tr.costs.strides == (0,)  # a broadcast view of 1.0
    assert tr.costs.tolist() == [1.0] * 1000 and tr.offsets.tolist() == list(range(1001))
    ids, n = kernels.dense_ids(tr.items)
    assert n == 7 and np.shares_memory(ids, tr.items)  # compact ids go to the kernels as they are


def test_explicit_unit_costs_and_single_offsets_are_recognised():
    items = np.array([3, 1, 3])
    assert PagingTrace(items, np.ones(3), np.arange(4)).is_unit_single
    assert not PagingTrace(items, np.array([1.0, 2.0, 1.0])).is_unit_single
    multi = PagingTrace(np.array([3, 1, 3]), None, np.array([0, 2, 3]))
    assert not multi.is_unit_single and multi.T == 2 and [q.tolist() for _, q, _ in multi.steps()] == [[3, 1], [3]]
    assert PagingTrace.unit(items).prefix(2).items.tolist() == [3, 1]


# -- round trips ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".npy", ".txt", ".npz"])
def test_unit_round_trip(tmp_path, suffix):
    tr = PagingTrace.unit([5, 0, 3, 5, 2**40, 0])
    back = load_trace(save_trace(tr, tmp_path / f"u{suffix}"))
    assert isinstance(back, PagingTrace)
    assert back.items.tolist() == tr.items.tolist()
    assert back.costs.tolist() == [1.0] * 6 and back.offsets.tolist() == list(range(7))


def test_weighted_multi_request_round_trip(tmp_path):
    tr = PagingTrace.from_steps([[0, 4], [1], [4, 2, 3]], [[0.0, 2.5], [1.0], [1 / 3, 7.0, 0.125]])
    back = load_trace(save_trace(tr, tmp_path / "w.npz"))
    for name in ("items", "costs", "offsets"):
        assert np.array_equal(getattr(back, name), getattr(tr, name))


def test_attention_round_trip(tmp_path):
    tr = AttentionTrace(np.array([0, 1, 3, 4]), np.array([0, 0, 1, 2]), np.array([1.0, 0.25, 0.5, 0.9]),
                        np.array([0.0, 0.25, 0.1]))
    back = load_trace(save_trace(tr, tmp_path / "a.npz"))
    assert isinstance(back, AttentionTrace)
    for name in ("indptr", "indices", "weights", "residual"):
        assert np.array_equal(getattr(back, name), getattr(tr, name))


def test_non_unit_trace_refuses_npy_and_txt(tmp_path):
    tr = PagingTrace.from_steps([[0, 1]])
    for suffix in (".npy", ".txt"):
        with pytest.raises(TraceError, match="use .npz"):
            save_trace(tr, tmp_path / f"x{suffix}")
    with pytest.raises(TraceError, match="unknown trace format"):
        save_trace(tr, tmp_path / "x.json")
    assert list(tmp_path.iterdir()) == []


def test_save_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "t.npz"
    save_trace(PagingTrace.unit([1, 2, 3]), target)
    before = target.read_bytes()

    def write_half_then_fail(fh, **arrays):
        fh.write(b"PK\x03\x04 partial")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez_compressed", write_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        save_trace(PagingTrace.unit([7, 8, 9]), target)
    with pytest.raises(OSError):
        save_trace(PagingTrace.unit([7, 8, 9]), tmp_path / "new.npz")
    assert sorted(os.listdir(tmp_path)) == ["t.npz"]  # no temporary file, no half-written new file
    assert target.read_bytes() == before  # the old file is untouched


# -- RM requests from attention ---------------------------------------------------------------------------------------


ROWS = [{0: 1.0}, {0: 0.7, 1: 0.3}, {0: 0.1, 1: 0.5, 2: 0.4}]


def test_rm_requests_hand_worked():
    # theta = 0.3, T = 3, default w_i = 1 + (i+1)/3 (0-based i): w_0 = 4/3, w_1 = 5/3.
    # Q_0 = {0} (arrival, free).  Q_1 = {1 (arrival, free), 0 (0.7 >= 0.3, cost w_0)}; a[1,1] = 0.3 is the arrival
    # itself, not a second request.  Q_2 = {2 (free), 1 (0.5, cost w_1)}; a[2,0] = 0.1 < 0.3 is not requested.
    rm = rm_requests_from_attention(AttentionTrace.from_rows(ROWS), 0.3)
    assert rm.offsets.tolist() == [0, 1, 3, 5]
    assert rm.items.tolist() == [0, 1, 0, 2, 1]
    assert np.allclose(rm.costs, [0.0, 0.0, 4 / 3, 0.0, 5 / 3], rtol=0, atol=1e-12)
    assert np.allclose(recompute_weights(3), [4 / 3, 5 / 3, 2.0], rtol=0, atol=1e-12)


def test_rm_requests_threshold_is_inclusive_and_weights_configurable():
    att = AttentionTrace.from_rows(ROWS)
    # theta = 0.5: a[1,0] = 0.7 and a[2,1] = 0.5 (equal counts) qualify; custom weights are used as given
    rm = rm_requests_from_attention(att, 0.5, weights=np.array([10.0, 20.0, 30.0]))
    assert rm.items.tolist() == [0, 1, 0, 2, 1] and rm.costs.tolist() == [0.0, 0.0, 10.0, 0.0, 20.0]
    # theta = 0.75: no earlier token qualifies, only arrivals remain
    assert rm_requests_from_attention(att, 0.75).items.tolist() == [0, 1, 2]


@pytest.mark.parametrize("theta", [0.0, -0.1, 1.5])
def test_rm_requests_bad_theta(theta):
    with pytest.raises(ParameterError, match="theta"):
        rm_requests_from_attention(AttentionTrace.from_rows(ROWS), theta)


def test_rm_requests_bad_weights_shape():
    with pytest.raises(TraceError, match="one entry per token"):
        rm_requests_from_attention(AttentionTrace.from_rows(ROWS), 0.3, weights=np.ones(2))

"""Miss counts identical to libCacheSim for LRU, FIFO, LFU and Belady (unit sizes, cache size = k objects).

libCacheSim is an optional, bench-only dependency (``pip install -e '.[bench]'``); without it this module is
skipped with that reason.  Its Belady is fed next-access times through an oracleGeneral trace
(bench/libcachesim_adapter.py).  Both sides are also checked against the plain engine on the small trace, so a
disagreement points at the side that moved.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("libcachesim", reason="libcachesim is not installed (optional bench extra: pip install -e '.[bench]')")

from bench import libcachesim_adapter as lcs  # noqa: E402
from bench.workloads import zipf_items  # noqa: E402
from kvcore.engine import run_rm  # noqa: E402
from kvcore.traces import PagingTrace  # noqa: E402
from policies import make  # noqa: E402
from policies.fast import simulate_fast  # noqa: E402

POLICIES = ("lru", "fifo", "lfu", "belady")


@pytest.fixture(scope="module")
def zipf_trace(tmp_path_factory):
    items = zipf_items(20_000, 2_000, 1.0, seed=7)
    path = lcs.write_oracle_general(items, tmp_path_factory.mktemp("lcs") / "zipf.oracleGeneral")
    return items, path


@pytest.mark.parametrize("k", [1, 17, 250, 1999])
@pytest.mark.parametrize("name", POLICIES)
def test_kernel_misses_equal_libcachesim(zipf_trace, name, k):
    items, path = zipf_trace
    theirs, _ = lcs.misses(name, path, items.size, k)
    assert simulate_fast(name, PagingTrace.unit(items), k) == theirs


@pytest.mark.parametrize("name", ["LRU", "FIFO", "LFU"])
def test_engine_misses_equal_libcachesim(tmp_path, name):
    items = zipf_items(3_000, 300, 1.0, seed=11)
    path = lcs.write_oracle_general(items, tmp_path / "small.oracleGeneral")
    theirs, _ = lcs.misses(name, path, items.size, 40)
    assert run_rm(make(name), PagingTrace.unit(items), 40).misses == theirs


def test_belady_needs_next_access_times(tmp_path):
    # Without next-access times (every record says "never requested again") libCacheSim's Belady has nothing to
    # order by and its count differs from the optimum: the reason the adapter writes them.
    items = zipf_items(5_000, 500, 1.0, seed=3)
    good = lcs.write_oracle_general(items, tmp_path / "good.oracleGeneral")
    blind = np.fromfile(good, dtype=lcs.ORACLE_GENERAL)
    blind["next"] = -1
    blind.tofile(tmp_path / "blind.oracleGeneral")
    with_times, _ = lcs.misses("belady", good, items.size, 50)
    without_times, _ = lcs.misses("belady", tmp_path / "blind.oracleGeneral", items.size, 50)
    assert with_times == simulate_fast("belady", PagingTrace.unit(items), 50)
    assert without_times > with_times


def test_libcachesim_pipeline_of_the_end_to_end_bench(tmp_path):
    # bench/e2e.py times libCacheSim's whole pipeline: its LRU on a file without next-access times, its own
    # converter computing them, its Belady on the converted file.  Both counts must be ours.
    from bench import e2e

    items = zipf_items(8_000, 900, 1.0, seed=5)
    blind = e2e.write_blind_oracle(items, tmp_path / "blind.oracleGeneral")
    theirs = e2e.MODES["lcs"](str(blind), "64")
    trace = PagingTrace.unit(items)
    assert (theirs["misses"], theirs["opt_misses"]) == (simulate_fast("lru", trace, 64),
                                                        simulate_fast("belady", trace, 64))

"""The main job on several cores (paper_check.runner, theorems.tables.shared_between_processes).

The outputs of a parallel and a serial run are compared byte for byte by the two end-to-end tests (both against the
committed files: ``tests/test_paper_check_run.py`` on every core, ``tests/test_portable_artifacts.py`` with
``--jobs 1``).  Here: the workers' table sharing, which keeps a parallel run from computing a table twice."""

import multiprocessing
import time
from pathlib import Path

from paper_check.runner import figure_files, run_items, usable_cores
from theorems import tables
from theorems.claims import Context
from theorems.profile import QUICK
from tests.command_line import is_one_line_error, run_module

_LOG: Path | None = None


def slow_table(n: int) -> list[int]:
    """A table that says each time it is computed, and takes long enough for a second process to ask meanwhile."""
    with open(_LOG, "a") as f:
        f.write(f"slow {n}\n")
    time.sleep(0.5)
    return list(range(n))


def outer_table(n: int, inner: int) -> int:
    """A table made from another."""
    with open(_LOG, "a") as f:
        f.write(f"outer {n}\n")
    time.sleep(0.3)
    return n + sum(tables.cached(slow_table, n=inner))


def _ask(args):
    which, n, inner = args
    return tables.cached(slow_table, n=n) if which == "slow" else tables.cached(outer_table, n=n, inner=inner)


def _in_two_processes(tmp_path, jobs):
    global _LOG
    _LOG = tmp_path / "log"
    _LOG.write_text("")
    with tables.shared_between_processes(tmp_path / "shared"), \
            multiprocessing.get_context("fork").Pool(2) as pool:
        (tmp_path / "shared").mkdir()
        out = pool.map_async(_ask, jobs, chunksize=1).get(timeout=30)  # a deadlock would time out
    return out, sorted(_LOG.read_text().split("\n")[:-1])


def test_a_table_two_workers_need_is_made_once(tmp_path):
    out, log = _in_two_processes(tmp_path, [("slow", 4, None), ("slow", 4, None)])
    assert out == [[0, 1, 2, 3]] * 2
    assert log == ["slow 4"], log


def test_a_table_made_inside_two_others_is_made_once_and_nothing_waits_forever(tmp_path):
    """Both workers make an outer table that needs slow(3): one makes slow(3) while holding its outer table's lock,
    the other waits for it while holding its own -- along the tables' dependencies, so both finish."""
    out, log = _in_two_processes(tmp_path, [("outer", 1, 3), ("outer", 2, 3)])
    assert out == [1 + 3, 2 + 3]
    assert log == ["outer 1", "outer 2", "slow 3"], log


def test_figures_and_a_claim_in_two_workers(tmp_path):
    assert "fork" in multiprocessing.get_all_start_methods()
    ctx = Context(QUICK, tmp_path)
    built, results, section = run_items(["2", "8"], ["eq6-det-lower-bound"], ctx, tmp_path / "figures", jobs=2)
    assert section is None  # no real-trace section asked for
    assert built == {"2": figure_files("2"), "8": figure_files("8")} == ctx.figures
    assert built["8"] == ["figures/fig08_k_vs_hk.png", "figures/fig08_k_vs_hk.svg"]
    assert all((tmp_path / p).is_file() for p in built["2"] + built["8"])
    assert results["eq6-det-lower-bound"].verdict == "holds"


def test_jobs_is_a_positive_whole_number_and_defaults_to_the_usable_cores():
    assert usable_cores() >= 1
    code, out, err = run_module("paper_check", "--jobs", "0")
    assert is_one_line_error(code, err, "--jobs"), err


def test_an_item_reads_only_the_input_sets_it_declares(tmp_path):
    """With nothing recomputed the main job runs readers of input sets beside the rest, each item held to its
    declaration (``held``/``readers``): a reader left out of the declaration fails as it fails beside a recompute."""
    import pytest
    from realtrace import InputPending

    ctx = Context(QUICK, tmp_path)
    held = {"quality_benchmark"}
    readers = {("claim", "tracking-benchmark"), ("figure", "bench")}
    built, results, _ = run_items(["bench"], ["tracking-benchmark"], ctx, tmp_path / "figures", held=held,
                                  readers=readers)
    assert results["tracking-benchmark"].verdict and built["bench"] == figure_files("bench")
    tables._TABLES.clear()  # read the set again
    with pytest.raises(InputPending, match="quality_benchmark"):
        run_items([], ["tracking-benchmark"], Context(QUICK, tmp_path), tmp_path / "figures", held=held,
                  readers={("figure", "bench")})

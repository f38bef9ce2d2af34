"""The main job on several cores (paper_check.runner, theorems.tables.shared_between_processes).

The outputs of a parallel and a serial run are compared byte for byte by the two end-to-end tests (both against the
committed files: ``tests/test_paper_check_run.py`` on every core, ``tests/test_portable_artifacts.py`` with
``--jobs 1``).  Here: the workers' table sharing, which keeps a parallel run from computing a table twice."""

import multiprocessing
import time
from contextlib import contextmanager
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


def slower_table(n: int) -> list[int]:
    """As :func:`slow_table`, long enough that a worker started late under load still finds it being made."""
    with open(_LOG, "a") as f:
        f.write(f"slower {n}\n")
    time.sleep(2)
    return list(range(n))


def outer_table(n: int, inner: int) -> int:
    """A table made from another."""
    with open(_LOG, "a") as f:
        f.write(f"outer {n}\n")
    time.sleep(0.3)
    return n + sum(tables.cached(slow_table, n=inner))


def outer_of_slower(n: int, inner: int) -> int:
    """A table made from a slower one, which it asks for at once."""
    with open(_LOG, "a") as f:
        f.write(f"outer {n}\n")
    return n + sum(tables.cached(slower_table, n=inner))


def _ask(args):
    which, n, inner = args
    if which in ("slow", "slower"):
        return tables.cached(slow_table if which == "slow" else slower_table, n=n)
    return tables.cached(outer_table if which == "outer" else outer_of_slower, n=n, inner=inner)


def _fresh_log(tmp_path) -> None:
    global _LOG
    _LOG = tmp_path / "log"
    _LOG.write_text("")


@contextmanager
def _workers_sharing_tables(tmp_path, processes: int):
    """A pool of forked workers that share tables through ``tmp_path/shared``; the tables log to a fresh log."""
    _fresh_log(tmp_path)
    with tables.shared_between_processes(tmp_path / "shared"), \
            multiprocessing.get_context("fork").Pool(processes) as pool:
        (tmp_path / "shared").mkdir()
        yield pool


def _in_two_processes(tmp_path, jobs):
    with _workers_sharing_tables(tmp_path, 2) as pool:
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


def _ask_deferring(args):
    """As :func:`_ask`, but preferring other work to a wait: "busy" when another process is making the table."""
    with tables.deferring():
        try:
            return _ask(args)
        except tables.TableBusy:
            return "busy"


def test_a_busy_table_is_reported_instead_of_waited_for_unless_a_table_is_being_made(tmp_path):
    """The second process asks for slower(4) while the first makes it: "busy", at once.  The third asks, from inside
    outer(1) which it is making, for slower(4): it holds a lock, so it waits rather than abandon outer(1)."""
    with _workers_sharing_tables(tmp_path, 3) as pool:
        first = pool.apply_async(_ask, (("slower", 4, None),))
        time.sleep(0.2)  # slower(4) is being made (2 s)
        t0 = time.perf_counter()
        second = pool.apply_async(_ask_deferring, (("slower", 4, None),)).get(timeout=30)
        waited = time.perf_counter() - t0
        third = pool.apply_async(_ask_deferring, (("outer-of-slower", 1, 4),)).get(timeout=30)
        assert first.get(timeout=30) == [0, 1, 2, 3]
    assert second == "busy" and waited < 1, (second, waited)
    assert third == 1 + 6
    assert sorted(_LOG.read_text().split("\n")[:-1]) == ["outer 1", "slower 4"]


def test_an_item_whose_table_is_busy_goes_back_in_the_queue_and_a_core_is_not_left_idle(tmp_path, monkeypatch):
    """Items a and b need one slower table, c needs nothing.  On two workers b finds the table busy and goes back to
    the queue; c runs meanwhile, and b runs last, once the table is made (it is made once)."""
    from paper_check import runner

    _fresh_log(tmp_path)

    def made(kind, ident):
        if ident == "c":
            with open(_LOG, "a") as f:
                f.write("c\n")
            return "c"
        return len(tables.cached(slower_table, n=5))

    monkeypatch.setattr(runner, "_made", made)
    monkeypatch.setattr(runner, "_RUN", runner._Run(QUICK, tmp_path, Context(QUICK, tmp_path)))
    done = [(ident, value) for _, ident, value, _ in runner._each([("claim", "a"), ("claim", "b"), ("claim", "c")], 2)]
    assert done[0] == ("c", "c") and sorted(done[1:]) == [("a", 5), ("b", 5)], done
    assert sorted(_LOG.read_text().split("\n")[:-1]) == ["c", "slower 5"]


def test_the_budget_claims_share_their_solved_curve_points_between_processes(monkeypatch):
    """``regret-curve-convex`` and the allocation claims solve the same curve points; a parallel run shares a table
    as it was made (pickled), so the points are solved inside ``flow_curves``: given that table as another process
    would read it, the allocation study solves no further point."""
    import pickle

    from theorems.claims.allocation import CURVE_SIZES, SIZES
    from theorems.results.allocation import allocation_study, flow_curves

    quick = {name: pair[0] for name, pair in {**SIZES, **CURVE_SIZES}.items()}
    made = pickle.loads(pickle.dumps(flow_curves(quick["curve_steps"], "complete")))
    solved = [sorted(c._values) for c in made]
    monkeypatch.setattr(tables, "_TABLES", {(flow_curves, (("rows", "complete"), ("upto", quick["curve_steps"]))): made})
    allocation_study(tuple(quick["per_head_ks"]), quick["dp_per_head"], quick["curve_steps"], "complete")
    assert [sorted(c._values) for c in made] == solved
    assert all(s == list(range(quick["curve_steps"] + 1)) for s in solved)


def test_a_busy_item_goes_back_where_the_order_puts_it_behind_one_other(tmp_path, monkeypatch):
    """a and b need the slower table, c and d nothing; the order is a, b, c, d by length.  The one of a and b that
    finds the table busy goes back before d (its place by length) but behind c (one other item first, so that its
    worker does not spin)."""
    from paper_check import runner

    _fresh_log(tmp_path)

    def made(kind, ident):
        with open(_LOG, "a") as f:
            f.write(f"{ident}\n")
        return len(tables.cached(slower_table, n=5)) if ident in "ab" else ident

    monkeypatch.setattr(runner, "_made", made)
    monkeypatch.setattr(runner, "_RUN", runner._Run(QUICK, tmp_path, Context(QUICK, tmp_path)))
    seconds = {"a": 9.0, "b": 5.0, "c": 1.0, "d": 0.5}
    items = [("claim", i) for i in "abcd"]
    list(runner._each(items, 2, lambda item: -seconds[item[1]]))
    tries = [line for line in _LOG.read_text().split("\n")[:-1] if not line.startswith("slower")]
    (busy,) = {i for i in "ab" if tries.count(i) > 1}  # b, or a when b took the table's lock first
    assert sorted(tries[:2]) == ["a", "b"] and tries[2:4] == ["c", busy], tries
    assert tries.count("d") == 1 and tries.index("d") > 3


def test_items_are_handed_out_longest_first_by_the_last_run_here(tmp_path, monkeypatch, capsys):
    """The order comes from the timings the last run kept (``$XDG_CACHE_HOME``); without them, or with a file that
    does not read, it is the registry's; every run keeps its own timings."""
    import json

    from paper_check import runner

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    def order(stored):
        if stored is not None:
            runner._seconds_file().parent.mkdir(parents=True, exist_ok=True)
            runner._seconds_file().write_text(stored)
        tables._TABLES.clear()
        run_items(["2", "8"], [], Context(QUICK, tmp_path), tmp_path / "figures", jobs=1)
        err = capsys.readouterr().err
        return sorted(("2", "8"), key=lambda f: err.index(f"] {f}:"))

    assert order(None) == ["2", "8"]
    kept = json.loads(runner._seconds_file().read_text())["quick"]
    assert set(kept) == {"figure:2", "figure:8"} and all(v >= 0 for v in kept.values())
    assert order(json.dumps({"quick": {"figure:2": 0.1, "figure:8": 9.0}})) == ["8", "2"]
    assert order(json.dumps({"full": {"figure:2": 0.1, "figure:8": 9.0}})) == ["2", "8"]  # another profile's
    assert order("{not json") == ["2", "8"]
    assert set(json.loads(runner._seconds_file().read_text())["quick"]) == {"figure:2", "figure:8"}

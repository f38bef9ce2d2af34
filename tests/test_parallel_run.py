"""The main job on several cores (paper_check.runner): items in forked workers, their tables sent back.

The outputs of a parallel and a serial run are compared byte for byte by the two end-to-end tests (both against the
committed files: ``tests/test_paper_check_run.py`` on every core, ``tests/test_portable_artifacts.py`` with
``--jobs 1``); here the mechanism that keeps the parallel run from computing a shared table twice."""

import multiprocessing

from paper_check.runner import run_items, usable_cores
from theorems import tables
from theorems.claims import Context
from theorems.profile import QUICK
from theorems.results import classic
from tests.command_line import is_one_line_error, run_module


def test_a_workers_tables_are_adopted_so_a_later_claim_reads_them(tmp_path):
    assert "fork" in multiprocessing.get_all_start_methods()
    ctx = Context(QUICK, tmp_path)
    made_here = tables.made_count()
    built, _ = run_items(["2", "8"], [], ctx, tmp_path / "figures", jobs=2)
    assert built == {"2": ["figures/fig02_kv_bytes.png", "figures/fig02_kv_bytes.svg"],
                     "8": ["figures/fig08_k_vs_hk.png", "figures/fig08_k_vs_hk.svg"]}
    assert ctx.figures == built and all((tmp_path / p).is_file() for p in built["8"])
    assert tables.made_count() == made_here, "the figures ran in this process, not in workers"
    adopted = {fn for fn, _ in tables._TABLES}
    assert {classic.marking_table, classic.eq6_table} <= adopted  # Fig. 8's tables, computed by a worker
    _, results = run_items([], ["eq6-det-lower-bound"], ctx, tmp_path / "figures", jobs=1)
    assert results["eq6-det-lower-bound"].verdict == "holds"
    assert classic.eq6_table not in {fn for fn, _ in tables.made_since(made_here)}, "eq6_table computed again"


def test_jobs_is_a_positive_whole_number_and_defaults_to_the_usable_cores():
    assert usable_cores() >= 1
    code, out, err = run_module("paper_check", "--jobs", "0")
    assert is_one_line_error(code, err, "--jobs"), err

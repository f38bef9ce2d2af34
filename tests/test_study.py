"""The real-trace study (realtrace.study): needle retention on a hand-built recall trace with answers known from the
policies' definitions, every number of a solve against its independent source (the engine, the optimum's lower
bound), the command line (help, one-line errors, outputs), and the cluster runs -- a local cluster, an existing
cluster through --scheduler, and a worker killed mid-study -- writing exactly the serial result."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

from kvcore.engine import run_nm
from kvcore.errors import ParameterError, TraceError
from kvcore.tasks import TaskPool, dask_available, map_tasks
from kvcore.traces import AttentionTrace
from policies import all_policies, make
from realtrace.study import (
    Needles,
    StudyParams,
    format_markdown,
    merge,
    needle_retention,
    plan,
    run_study,
    run_task,
    solve_trace,
)
from realtrace.traceset import save_traceset
from tests.command_line import is_one_line_error, run_module

needs_dask = pytest.mark.skipif(not dask_available(), reason="dask.distributed is not installed (the [dist] extra)")

T, NEEDLE, QUESTION = 60, (5, 8), 50
SEGMENTS = {"intro": (0, 5), "code": NEEDLE, "passage": (8, QUESTION), "question": (QUESTION, T)}


def recall_trace(shift: int = 0) -> AttentionTrace:
    """The question rows (t >= 50) put half their mass on themselves and half evenly on the needle tokens 5, 6, 7;
    a passage row t puts half on itself and half on token ``t - 1 - shift`` when that token comes after the needle;
    every other row attends to itself alone.  So nothing attends to the needle between its arrival and the question.
    ``shift`` gives traces of the same shape that differ."""
    indptr, indices, weights = [0], [], []
    for t in range(T):
        if t >= QUESTION:
            row = {t: 0.5, **{i: 0.5 / 3 for i in range(*NEEDLE)}}
        elif t - 1 - shift >= NEEDLE[1]:
            row = {t: 0.5, t - 1 - shift: 0.5}
        else:
            row = {t: 1.0}
        idx = sorted(row)
        indices += idx
        weights += [row[i] for i in idx]
        indptr.append(len(indices))
    return AttentionTrace(np.array(indptr), np.array(indices), np.array(weights), source=f"recall-{shift}")


@pytest.fixture(scope="module")
def traceset_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("study") / "recall"
    traces = {(layer, f"kv{h}"): recall_trace(shift=layer + h) for layer in (0, 1) for h in (0, 1)}
    save_traceset(d, traces, SEGMENTS, {"model": {"name": "hand-built"}})
    return d


PARAMS = StudyParams(budgets=(4, 16), seeds=3, windows=(4, 32))


# -- needles and the numbers of one solve ----------------------------------------------------------------------------


def test_needle_retention_by_hand():
    tr = recall_trace()
    needles = Needles.from_segments(SEGMENTS, T)
    assert needles.spans == {"code": NEEDLE} and needles.query == (QUESTION, T)
    assert needle_retention(tr, [], needles) == {"code": {"resident": 1.0, "kept": 1.0}}
    # token 5 dropped at step 20: one needle token of three gone, a third of the question's needle mass lost
    got = needle_retention(tr, [(20, 5)], needles)["code"]
    assert got["resident"] == pytest.approx(2 / 3) and got["kept"] == pytest.approx(2 / 3)
    # dropped during the question (step 55): resident when it starts, 5 of the 10 question rows lost for it
    got = needle_retention(tr, [(55, 6)], needles)["code"]
    assert got["resident"] == 1.0 and got["kept"] == pytest.approx(1 - 5 / 30)


def test_needle_segments_of_the_long_prompt():
    # builtin:needles names each needle's lead, digits and tail, and `code` repeats the asked needle's digits
    segs = {"key": (0, 10), "text_0": (10, 100), "needle_0": (100, 107), "needle_0_code": (107, 117),
            "needle_0_tail": (117, 121), "text_1": (121, 300), "needle_1": (300, 307), "needle_1_code": (307, 317),
            "needle_1_tail": (317, 321), "text_2": (321, 400), "question": (400, 420), "code": (107, 117)}
    needles = Needles.from_segments(segs, 450)
    assert needles.spans == {"needle_0_code": (107, 117), "needle_1_code": (307, 317)}
    assert needles.query == (400, 450)


def test_a_needle_the_query_ignores_has_no_kept_share():
    needles = Needles({"code": NEEDLE, "other_code": (20, 22)}, (QUESTION, T))
    got = needle_retention(recall_trace(), [(30, 20)], needles)
    assert got["other_code"] == {"resident": 0.5, "kept": None} and got["code"]["kept"] == 1.0


def test_segments_without_a_question_mark_no_needles():
    assert Needles.from_segments({"code": (0, 3), "passage": (3, 9)}, 9) == Needles()
    assert Needles.from_segments({"passage": (0, 9), "question": (9, 12)}, 12) == Needles()


def test_solve_matches_the_engine_the_optimum_and_the_policies_definitions():
    tr = recall_trace()
    needles = Needles.from_segments(SEGMENTS, T)
    res, seconds = solve_trace(tr, 16, PARAMS, needles)
    # 16 slots hold the 3 needle tokens, the previous token and the arrival: the optimum loses nothing
    assert res["opt_regret"] == pytest.approx(0.0, abs=1e-7)
    assert res["needles"]["OPT"]["code"] == {"resident": 1.0, "kept": 1.0}
    assert list(res["policies"]) == [i.name for i in all_policies("nm")]
    for info in all_policies("nm"):
        row = res["policies"][info.name]
        assert row["gap"] >= -res["opt_gap_bound"] - 1e-9  # the optimum is a lower bound on every policy
        if info.deterministic:
            assert row["regret"] == pytest.approx(run_nm(make(info.name), tr, 16).cost, abs=1e-12)
            assert row["runs"] == 1
        else:
            assert row["runs"] == PARAMS.seeds and row["ci_low"] <= row["regret"] <= row["ci_high"]
    # NM LIFO keeps the first k tokens forever; StreamingLLM's window (16 - 4 sinks) has long passed the needle;
    # LRU (any observed entry is a use) has not seen the needle used since its arrival
    assert res["needles"]["LIFO"]["code"] == {"resident": 1.0, "kept": 1.0}
    assert res["needles"]["StreamingLLM"]["code"] == {"resident": 0.0, "kept": 0.0}
    assert res["needles"]["LRU"]["code"] == {"resident": 0.0, "kept": 0.0}
    # losing the needle costs its whole question mass: 10 rows x 0.5
    assert res["policies"]["StreamingLLM"]["regret"] == pytest.approx(5.0)
    assert set(res["theorem4"]) == {"4", "32"} and {"optimum", "policies", "theorem4"} <= set(seconds)


def test_plan_orders_solves_first_and_checks_its_input(traceset_dir, tmp_path):
    tasks, sets = plan([str(traceset_dir)], PARAMS)
    assert [t.kind for t in tasks] == ["solve"] * 8 + ["profile"] * 4
    assert sets["recall"]["needles"] == {"code": list(NEEDLE)} and sets["recall"]["query"] == [QUESTION, T]
    with pytest.raises(TraceError, match="not a trace set"):
        plan([str(tmp_path)], PARAMS)
    for bad, message in (({"budgets": (1,)}, "budget = 1"), ({"budgets": (8, 8)}, "each budget once"),
                         ({"seeds": 0}, "seeds = 0"), ({"windows": (0,)}, "window = 0"), ({"tau": 0.0}, "tau = 0")):
        with pytest.raises(ParameterError, match=message):
            StudyParams(**bad)


def test_serial_study_document(traceset_dir):
    study, timings = run_study([str(traceset_dir)], PARAMS, workers=0, progress=False)
    assert [(e["layer"], e["head"]) for e in study["traces"]] == [(0, "kv0"), (0, "kv1"), (1, "kv0"), (1, "kv1")]
    assert study["policies"] == [i.name for i in all_policies("nm")]
    assert all(set(e["budgets"]) == {"4", "16"} and "profile" in e for e in study["traces"])
    md = format_markdown(study)
    for name in study["policies"]:
        assert f"| {name} |" in md
    assert "### Needles" in md and "recall:code @8%" in md
    assert timings["solve task"]["tasks"] == 8


# -- the command line ------------------------------------------------------------------------------------------------


def run_cli(*args):
    return run_module("realtrace", *args)


def test_help_lists_the_study():
    code, out, _ = run_cli("--help")
    assert code == 0 and "realtrace study --traces DIR" in out
    code, out, _ = run_cli("study", "--help")
    assert code == 0 and "--scheduler ADDRESS" in out and "--workers" in out


@pytest.mark.parametrize("args, message", [
    (["--budgets", "4,x"], "argument --budgets: 'x' is not an integer"),
    (["--budgets", "1_024"], "argument --budgets: '1_024' is not an integer"),
    (["--tau", "nan"], "argument --tau: 'nan' is not a decimal number"),
    (["--budgets", "1"], "budget = 1: must be an integer >= 2"),
    (["--seeds", "0"], "seeds = 0"),
    (["--workers", "-2"], "workers = -2"),
])
def test_bad_input_is_one_line_and_exit_2(traceset_dir, tmp_path, args, message):
    code, out, err = run_cli("study", "--traces", traceset_dir, "--out", tmp_path / "o", "--quiet", *args)
    assert is_one_line_error(code, err, message) and out == "", err


def test_a_missing_trace_set_is_one_line(tmp_path):
    code, _, err = run_cli("study", "--traces", tmp_path / "nothing", "--out", tmp_path / "o", "--workers", "0")
    assert is_one_line_error(code, err) and err.strip().endswith("not a trace set (no manifest.json)"), err


def test_cli_writes_the_study_and_its_figures(traceset_dir, tmp_path):
    out = tmp_path / "o"
    code, stdout, err = run_cli("study", "--traces", traceset_dir, "--budgets", "4,16", "--seeds", "3",
                                "--windows", "4,32", "--workers", "0", "--out", out, "--json")
    assert code == 0, err
    study = json.loads(stdout)
    assert study == json.loads((out / "study.json").read_text())
    assert "study: 12/12 tasks" in err and "solve task: 8 tasks" in err
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["study.json", "study.md"] + [f"study_{s}.{x}" for s in ("opt_regret", "tracking_gap",
                                                                                   "theorem4", "needles")
                                                          for x in ("png", "svg")])
    assert not any(n.startswith(".") for n in names)  # no temporary file left behind


# -- on a cluster ----------------------------------------------------------------------------------------------------


@needs_dask
def test_cli_on_an_existing_cluster_writes_the_serial_bytes(traceset_dir, tmp_path):
    from distributed import LocalCluster

    common = ["study", "--traces", traceset_dir, "--budgets", "4,16", "--seeds", "3", "--windows", "4,32", "--quiet"]
    assert run_cli(*common, "--workers", "0", "--out", tmp_path / "serial")[0] == 0
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                      dashboard_address=":0") as cluster:
        code, _, err = run_cli(*common, "--scheduler", cluster.scheduler_address, "--out", tmp_path / "cluster")
    assert code == 0, err
    for f in sorted((tmp_path / "serial").iterdir()):
        assert f.read_bytes() == (tmp_path / "cluster" / f.name).read_bytes(), f.name


@needs_dask
def test_cli_unreachable_scheduler_is_one_line(traceset_dir, tmp_path):
    code, _, err = run_cli("study", "--traces", traceset_dir, "--out", tmp_path / "o", "--quiet",
                           "--scheduler", "garbage://x")  # unreachable ones wait for the timeout: see test_tasks
    assert is_one_line_error(code, err, "scheduler garbage://x: cannot connect: unknown address scheme"), err


@needs_dask
def test_a_worker_killed_mid_study_does_not_change_the_study(traceset_dir):
    tasks, sets = plan([str(traceset_dir)], PARAMS)
    serial = merge(tasks, map_tasks(run_task, tasks, workers=0, progress=False), sets, PARAMS)
    killed = []
    with TaskPool(workers=2) as pool:
        def kill_a_busy_worker(index, result):
            if killed:
                return
            busy = [addr for addr, keys in pool.client.processing().items() if keys]
            if busy:
                pid = pool.worker_pids()[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        results = pool.map(run_task, tasks, progress=False, on_result=kill_a_busy_worker)
    assert killed, "no worker was busy after the first result"
    assert merge(tasks, results, sets, PARAMS) == serial

"""The task layer (kvcore.tasks): serial runs without dask, a local Dask cluster returning exactly the serial list in
task order, a worker killed mid-run (the task is re-run elsewhere, the result is unchanged; with no retries the run
stops with one line), and one-line errors for every bad request.  The cluster tests need the [dist] extra and are
skipped without it; the serial ones run everywhere."""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

import kvcore.tasks as tasks_mod
from kvcore.errors import ParameterError
from kvcore.tasks import Progress, TaskPool, WorkerLost, dask_available, map_tasks

needs_dask = pytest.mark.skipif(not dask_available(), reason="dask.distributed is not installed (the [dist] extra)")


HELD = 0  # the task a worker-kill test holds running until its worker has been killed


def seeded_draw(task):
    """A task carrying its own seed; the later tasks finish first when run in parallel (they sleep less).  With a
    marker directory, every attempt leaves a file ``<index>-<pid>``, and task ``HELD`` waits while the file ``hold``
    exists (so a test can kill its worker while it is certainly running)."""
    index, seed, pause, marker_dir = task
    if marker_dir is not None:
        Path(marker_dir, f"{index}-{os.getpid()}").touch()
        deadline = time.monotonic() + 60
        while index == HELD and Path(marker_dir, "hold").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    time.sleep(pause)
    return index, float(np.random.default_rng(seed).normal())


def raise_parameter_error(task):
    raise ParameterError(f"task {task}: deliberately bad")


def make_tasks(n, pause=0.0, marker_dir=None):
    return [(i, 1000 + i, pause * (n - i) / n, marker_dir) for i in range(n)]


def expected(n):
    return [(i, float(np.random.default_rng(1000 + i).normal())) for i in range(n)]


# -- serial: no dask needed ------------------------------------------------------------------------------------------


def test_serial_run_is_the_plain_loop_in_order(capsys):
    seen = []
    out = map_tasks(seeded_draw, make_tasks(5), workers=0, on_result=lambda i, r: seen.append(i), key="draws")
    assert out == expected(5)
    assert seen == [0, 1, 2, 3, 4]
    err = capsys.readouterr().err
    assert "draws: 5 tasks, serially in this process" in err and "draws: 5/5 tasks" in err


def test_workers_one_is_serial_and_quiet_without_progress(capsys):
    assert map_tasks(seeded_draw, make_tasks(3), workers=1, progress=False) == expected(3)
    assert capsys.readouterr().err == ""


def test_without_dask_the_default_runs_serially_and_a_cluster_request_is_one_line(monkeypatch):
    monkeypatch.setattr(tasks_mod, "dask_available", lambda: False)
    assert TaskPool().serial and "dask not installed" in TaskPool().describe()
    assert TaskPool().slots() == 1
    assert map_tasks(seeded_draw, make_tasks(3), progress=False) == expected(3)
    for kwargs, what in (({"workers": 2}, "2 workers"), ({"scheduler": "tcp://127.0.0.1:8786"}, "scheduler")):
        with pytest.raises(ParameterError, match=rf"{what}.*dask.distributed is not installed \(pip install"):
            TaskPool(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"workers": -1}, "workers = -1"), ({"workers": "2"}, "workers = '2'"), ({"workers": True}, "workers = True"),
    ({"retries": -1}, "retries = -1"), ({"workers": 2, "scheduler": "tcp://x:1"}, "not both"),
    ({"scheduler": ""}, "scheduler = ''"),
])
def test_bad_arguments_are_one_line_parameter_errors(kwargs, message):
    with pytest.raises(ParameterError, match=message) as info:
        TaskPool(**kwargs)
    assert "\n" not in str(info.value)


def test_a_task_error_arrives_as_itself_serially():
    with pytest.raises(ParameterError, match="task 0: deliberately bad"):
        map_tasks(raise_parameter_error, [0, 1], workers=0, progress=False)


def test_progress_prints_a_line_per_tenth_when_not_a_terminal():
    stream = io.StringIO()
    bar = Progress("p", 20, stream=stream)
    for _ in range(20):
        bar.advance()
    lines = stream.getvalue().splitlines()
    # the first result (so an estimate shows early), then one line per tenth
    assert [line.split()[1] for line in lines] == ["1/20"] + [f"{2 * i}/20" for i in range(1, 11)]
    assert "left" in lines[0] and "left" not in lines[-1]


# -- on a local cluster ----------------------------------------------------------------------------------------------


@needs_dask
def test_in_process_cluster_returns_the_serial_list_in_task_order():
    # later tasks sleep less, so they complete first: the order must come from the merge, not from completion
    done = []
    out = map_tasks(seeded_draw, make_tasks(8, pause=0.2), workers=2, processes=False, progress=False,
                    on_result=lambda i, r: done.append(i))
    assert out == expected(8)
    assert sorted(done) == list(range(8))
    with TaskPool(workers=2, processes=False) as pool:
        assert pool.slots() == 2


@needs_dask
def test_a_task_error_arrives_as_itself_from_the_cluster():
    with pytest.raises(ParameterError, match="deliberately bad"):
        map_tasks(raise_parameter_error, [0, 1, 2], workers=2, processes=False, retries=0, progress=False)


@needs_dask
def test_an_existing_cluster_is_used_through_its_address():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        with TaskPool(scheduler=cluster.scheduler_address) as pool:
            assert pool.describe() == f"cluster at {cluster.scheduler_address}"
            assert pool.slots() == 2  # one worker with two threads, as the scheduler reports it
            assert pool.map(seeded_draw, make_tasks(4), progress=False) == expected(4)


@needs_dask
@pytest.mark.parametrize("address", ["tcp://127.0.0.1:9", "no-such-host.invalid:8786", "garbage://x"])
def test_an_unreachable_scheduler_is_one_line(address):
    with pytest.raises(ParameterError, match=rf"scheduler {address}: cannot connect") as info:
        with TaskPool(scheduler=address, connect_timeout=1):
            pass
    assert "\n" not in str(info.value)


def _kill_the_held_worker(marker_dir: Path, killed: list):
    """on_result hook: at the first result, SIGKILL the process running task HELD, then let its re-run proceed."""

    def hook(index, result):
        if killed:
            return
        deadline = time.monotonic() + 30
        while not (started := list(marker_dir.glob(f"{HELD}-*"))) and time.monotonic() < deadline:
            time.sleep(0.02)
        pid = int(started[0].name.split("-")[1])
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        (marker_dir / "hold").unlink()

    return hook


@needs_dask
def test_a_worker_killed_mid_run_does_not_change_the_result(tmp_path):
    (tmp_path / "hold").touch()
    killed = []
    with TaskPool(workers=2, retries=2) as pool:
        out = pool.map(seeded_draw, make_tasks(6, pause=0.1, marker_dir=tmp_path), progress=False,
                       on_result=_kill_the_held_worker(tmp_path, killed))
    assert out == expected(6)
    attempts = sorted(f.name for f in tmp_path.glob(f"{HELD}-*"))
    # the held task was running on the killed process and ran again, to the same result, on another one
    assert len(attempts) == 2 and f"{HELD}-{killed[0]}" in attempts


@needs_dask
def test_with_no_retries_a_killed_worker_stops_the_run_with_one_line(tmp_path):
    (tmp_path / "hold").touch()
    killed = []
    with TaskPool(workers=2, retries=0) as pool:
        # the held task, or one already queued on the same worker, is reported
        with pytest.raises(WorkerLost, match=r"task \d+ ran on 1 worker\(s\) and each died") as info:
            pool.map(seeded_draw, make_tasks(6, pause=0.1, marker_dir=tmp_path), progress=False,
                     on_result=_kill_the_held_worker(tmp_path, killed))
    assert killed and "\n" not in str(info.value)


def started_then_slept(task):
    """``(index, start time)`` of a task that sleeps ``task[1]`` seconds."""
    t = time.monotonic()
    time.sleep(task[1])
    return task[0], t


@needs_dask
def test_a_local_pool_starts_the_tasks_in_order():
    """While a long first task occupies one worker, the other runs the next tasks one after another in task order
    (dask's default worker saturation sent a second task to the busy worker, which held it until the long one
    ended: tasks started out of order, so "the costliest first" did not hold)."""
    durations = [3.0] + [0.25] * 9
    with TaskPool(2, processes=False, retries=0) as pool:
        got = pool.map(started_then_slept, list(enumerate(durations)), progress=False)
    t0 = got[0][1]
    during = [i for i, t in sorted(got[1:], key=lambda r: r[1]) if t < t0 + durations[0] - 0.3]
    assert len(during) >= 5 and during == list(range(1, len(during) + 1)), got

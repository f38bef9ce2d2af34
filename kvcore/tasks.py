"""One task layer for the toolkit's embarrassingly parallel studies, built on ``dask.distributed`` (the ``[dist]``
extra) and running serially without it.

A study is a list of independent *tasks* and one function: ``results[i] = fn(tasks[i])``.  Every task carries all
it needs, its seed included, so a task's result does not depend on where or when it ran, and the results come back
in task order: a run on a cluster returns exactly the list the serial run returns.

Where the tasks run (:class:`TaskPool`, or the one-shot :func:`map_tasks`):

* serially in this process, when ``workers`` is 0 or 1, or when ``workers`` is left unset and dask is not installed;
* on a local cluster of ``workers`` single-threaded worker *processes* (the default when dask is installed: one per
  core; the toolkit's simulators are pure Python, so threads would share one GIL);
* on an existing cluster, given its scheduler address (``scheduler="tcp://host:8786"``).  Its workers import the
  project like this process does and must see the same paths for any file a task names.

Worker loss: each result is fetched as soon as its task finishes and kept here, so finished work survives a worker
that dies; the scheduler re-runs the tasks that were on it (up to ``retries`` times on a local cluster, after which
the study stops with :class:`WorkerLost`; an existing cluster's scheduler applies its own
``distributed.scheduler.allowed-failures``, 3 by default).  A task that *raises* is also retried ``retries`` times (a transient failure such as memory
exhaustion can pass); a deterministic error raises the same exception again and is reported as it is.

Progress goes to stderr: a self-rewriting line on a terminal; otherwise a line at the first result and one per
tenth of the tasks.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import uuid
from typing import Any, Callable, Iterable, Sequence, TextIO

from .errors import KVToolkitError, ParameterError
from .numbers import integer

INSTALL_HINT = "pip install -e '.[dist]'"


class WorkerLost(KVToolkitError, RuntimeError):
    """A task whose worker died more often than ``retries`` allows (the study stops; finished work was kept)."""


def dask_available() -> bool:
    """True when ``dask.distributed`` can be imported (the ``[dist]`` extra is installed)."""
    return importlib.util.find_spec("dask") is not None and importlib.util.find_spec("distributed") is not None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class Progress:
    """``label: done/total tasks, elapsed, ~remaining`` on ``stream``; silent when ``enabled`` is false."""

    def __init__(self, label: str, total: int, enabled: bool = True, stream: TextIO | None = None):
        self.label, self.total, self.enabled = label, total, enabled and total > 0
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.shown_tenth = -1
        self.done = 0

    @staticmethod
    def _clock(seconds: float) -> str:
        s = int(round(seconds))
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        text = f"{self.label}: {self.done}/{self.total} tasks, {self._clock(elapsed)} elapsed"
        if 0 < self.done < self.total:
            text += f", ~{self._clock(elapsed / self.done * (self.total - self.done))} left"
        return text

    def advance(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r" + self.line() + ("\n" if self.done == self.total else ""))
        else:
            tenth = self.done * 10 // self.total
            if tenth == self.shown_tenth:
                return
            self.shown_tenth = tenth
            self.stream.write(self.line() + "\n")
        self.stream.flush()


class TaskPool:
    """Where tasks run; use as a context manager so a local cluster is started once and shut down at the end.

    ``workers``: ``None`` = a local cluster with one process per core when dask is installed, else serial; ``0`` or
    ``1`` = serial in this process; ``N >= 2`` = a local cluster of ``N`` processes (needs dask).
    ``scheduler``: the address of an existing cluster's scheduler (needs dask; excludes ``workers``).
    ``processes=False`` runs a local cluster's workers as threads of this process (quick to start; for tests).
    ``connect_timeout``: seconds to wait for a scheduler before failing with one line naming the address.

    Every problem (dask missing when a cluster is asked for, a scheduler that cannot be reached, bad arguments) is a
    :class:`~kvcore.errors.ParameterError` with a one-line message.
    """

    def __init__(self, workers: int | None = None, scheduler: str | None = None, *, retries: int = 2,
                 processes: bool = True, connect_timeout: float = 10.0):
        self.workers = None if workers is None else integer(workers, "workers", 0)
        self.retries = integer(retries, "retries", 0)
        self.scheduler = scheduler
        self.processes = processes
        self.connect_timeout = connect_timeout
        if scheduler is not None and self.workers is not None:
            raise ParameterError("give the number of local workers or a scheduler address, not both")
        if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
            raise ParameterError(f"scheduler = {scheduler!r}: must be an address such as tcp://host:8786")
        cluster_asked = scheduler is not None or (self.workers is not None and self.workers >= 2)
        if cluster_asked and not dask_available():
            what = f"scheduler {scheduler}" if scheduler is not None else f"{self.workers} workers"
            raise ParameterError(f"{what}: dask.distributed is not installed ({INSTALL_HINT})")
        self.why_serial = ""
        if scheduler is None and self.workers is None:
            cores = os.cpu_count() or 1
            self.workers = cores if dask_available() and cores >= 2 else 1
            if cores >= 2 and self.workers == 1:
                self.why_serial = f" (dask not installed; {INSTALL_HINT})"
        self.client = None
        self.cluster = None

    @property
    def serial(self) -> bool:
        return self.scheduler is None and self.workers <= 1

    def describe(self) -> str:
        """Where the tasks run, in a few words (for the progress header)."""
        if self.scheduler is not None:
            return f"cluster at {self.scheduler}"
        if self.serial:
            return "serially in this process" + self.why_serial
        return f"local cluster of {self.workers} worker {'processes' if self.processes else 'threads'}"

    def __enter__(self) -> TaskPool:
        if self.serial:
            return self
        import dask
        from distributed import Client, LocalCluster

        # a task whose worker dies is re-run on another one at most `retries` times; a worker is sent a task only
        # when it has a thread free (saturation 1.0; dask's default 1.1 queues a second task behind a running one,
        # so a long task holds the next one hostage while another worker idles: the tasks would not start in order)
        with dask.config.set({"distributed.scheduler.allowed-failures": self.retries,
                              "distributed.scheduler.worker-saturation": 1.0}):
            if self.scheduler is not None:
                self._probe_scheduler()
                try:
                    self.client = Client(self.scheduler, timeout=self.connect_timeout, set_as_default=False)
                except Exception as exc:
                    raise ParameterError(f"scheduler {self.scheduler}: cannot connect: {_first_line(exc)}") from None
            else:
                import logging

                self.cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=self.processes,
                                            dashboard_address=":0", silence_logs=logging.ERROR)
                self.client = Client(self.cluster, set_as_default=False)
        return self

    def _probe_scheduler(self) -> None:
        """Open and close one connection first: a ``Client`` that fails half-built blocks for 20 s on exit."""
        import asyncio

        from distributed.comm import connect

        async def probe():
            comm = await connect(self.scheduler, timeout=self.connect_timeout)
            await comm.close()

        try:
            asyncio.run(probe())
        except Exception as exc:  # OSError (unreachable, timed out), ValueError (malformed address), ...
            raise ParameterError(f"scheduler {self.scheduler}: cannot connect: {_first_line(exc)}") from None

    def __exit__(self, *exc) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.client = self.cluster = None

    def slots(self) -> int:
        """How many tasks run at once: 1 serially, else the cluster's worker threads (a local cluster's workers;
        an entered pool asks the scheduler)."""
        if self.serial:
            return 1
        if self.client is not None:
            return max(1, sum(self.client.nthreads().values()))
        return self.workers or 1

    def worker_pids(self) -> dict[str, int]:
        """Worker address -> process id (empty when serial); a test kills one to check recovery."""
        if self.client is None:
            return {}
        return self.client.run(os.getpid)

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any], *, key: str = "task", progress: bool = True,
            on_result: Callable[[int, Any], None] | None = None) -> list:
        """``[fn(t) for t in tasks]``, computed where this pool runs tasks, in task order.

        ``fn`` must be importable by the workers (a module-level function).  ``key`` names the tasks in the
        progress line and in the Dask keys (``key-<run>-<index>``).  ``on_result(index, result)`` is called here,
        in completion order, as each result arrives (for saving partial results).  The first task that fails after
        its retries raises its exception; the remaining tasks are cancelled.
        """
        tasks = list(tasks)
        bar = Progress(key, len(tasks), progress)
        if progress and tasks:
            bar.stream.write(f"{key}: {len(tasks)} tasks, {self.describe()}\n")
        results: list[Any] = [None] * len(tasks)
        if self.serial:
            for i, task in enumerate(tasks):
                results[i] = fn(task)
                if on_result is not None:
                    on_result(i, results[i])
                bar.advance()
            return results
        if self.client is None:
            raise RuntimeError("TaskPool.map on a cluster needs the pool to be entered (use `with TaskPool(...)`)")
        from distributed import KilledWorker, as_completed

        run = uuid.uuid4().hex[:8]
        keys = [f"{key}-{run}-{i}" for i in range(len(tasks))]
        index = {k: i for i, k in enumerate(keys)}
        futures = self.client.map(fn, tasks, key=keys, retries=self.retries, pure=False)
        try:
            for fut, res in as_completed(futures, with_results=True, loop=self.client.loop):
                i = index[fut.key]
                results[i] = res
                fut.release()  # the result lives here now; the worker may drop it
                if on_result is not None:
                    on_result(i, res)
                bar.advance()
        except KilledWorker as exc:
            self.client.cancel(futures)
            where = getattr(exc.last_worker, "address", exc.last_worker)
            raise WorkerLost(f"{key}: task {index.get(exc.task, exc.task)} ran on {exc.allowed_failures + 1} "
                             f"worker(s) and each died while running it (retries = {self.retries}; last worker "
                             f"{where}); {bar.done}/{len(tasks)} tasks had finished") from None
        except BaseException:
            self.client.cancel(futures)
            raise
        return results


def map_tasks(fn: Callable[[Any], Any], tasks: Sequence[Any], *, workers: int | None = None,
              scheduler: str | None = None, progress: bool = True, retries: int = 2, key: str = "task",
              processes: bool = True, on_result: Callable[[int, Any], None] | None = None) -> list:
    """``[fn(t) for t in tasks]`` in task order, run by a :class:`TaskPool` made for this one call (see there for
    ``workers``, ``scheduler``, ``retries``, ``processes``; see :meth:`TaskPool.map` for ``key``, ``progress`` and
    ``on_result``)."""
    with TaskPool(workers, scheduler, retries=retries, processes=processes) as pool:
        return pool.map(fn, tasks, key=key, progress=progress, on_result=on_result)


__all__ = ["INSTALL_HINT", "Progress", "TaskPool", "WorkerLost", "dask_available", "map_tasks"]

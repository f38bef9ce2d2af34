"""The fuzzer's processes: the caller (the *supervisor*) forks a *worker* that runs the search
(:class:`verify.search.Search`) and streams its events through a pipe; the supervisor folds them into a
:class:`~verify.report.FuzzReport`.

Budget
    The supervisor kills the worker (and every process it uses) ``GRACE`` seconds after the budget, so ``seconds``
    bounds everything, constructions and shrinking included, whatever the policy or the optimum does.  Nothing
    inside the worker is interrupted asynchronously -- a half-finished import or JIT compilation would poison the
    rest of the run; the worker checks the clock between traces and the supervisor's kill is the backstop.
Isolation
    A ``module:Class`` or ``path/to/file.py:Class`` policy runs in its own process
    (:class:`verify.isolated.PolicyHost`), created here before any trace exists and before the worker is forked,
    receiving only the engine's five calls.  Registered policies are project code and run inside the worker.
Events (tuples, first element the kind)
    ``info``, ``stage``, ``construction``, ``measured``, ``examples``, ``worst``, ``longest``, ``deepest``,
    ``shrunk``, ``minimal``, ``finding``, ``note``, ``cut`` (what the budget cut short), ``usage`` (a
    :class:`~kvcore.errors.ParameterError` found in the worker: re-raised here), ``done``.
Environment
    The worker ignores SIGINT (the supervisor owns Ctrl-C), sends stray prints to stderr so they never mix into a
    report on stdout, and gives hypothesis a temporary home directory (no database), removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from multiprocessing.connection import Pipe

import policies
from kvcore.errors import ParameterError

from .config import FuzzConfig
from .isolated import PolicyHost
from .report import FuzzReport
from .search import Search, internal_error_line

GRACE = 0.5                 # seconds after the budget before the worker is killed


def process_started() -> float:
    """The monotonic-clock time at which this process started (Linux ``/proc/self/stat``; elsewhere: now).  A command
    line counts its budget from there, so its imports are inside ``--seconds`` too."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic()
    return time.monotonic() - min(max(0.0, age), 60.0)


def supervise(cfg: FuzzConfig, started: float | None = None) -> FuzzReport:
    """Run the search for a checked ``cfg`` in a worker process within ``cfg.seconds`` (+ ``GRACE``) counted from
    ``started`` (monotonic clock; default now) and return the report; a bad argument the worker finds (e.g. a policy
    that does not declare the model) is raised here as a :class:`~kvcore.errors.ParameterError`."""
    start = time.monotonic() if started is None else started
    deadline = start + cfg.seconds
    rep = FuzzReport(cfg.target, cfg.model, cfg.k, cfg.mode, cfg.seed, cfg.against)
    for spec in (cfg.target, cfg.against):
        if spec is not None and ":" not in spec:
            try:
                policies.get(spec)  # an unknown name fails here, before any process starts
            except ParameterError as exc:
                raise ParameterError(f"{exc}; a target is {policies.registry.TARGET_FORMS}") from None
    hosts: dict[str, PolicyHost] = {}
    home = tempfile.mkdtemp(prefix="kv-fuzz-hypothesis-")
    worker = None
    try:
        for spec in dict.fromkeys(s for s in (cfg.target, cfg.against) if s and ":" in s):
            hosts[spec] = PolicyHost(spec, call_timeout=cfg.call_timeout)   # before any trace exists
        rx, tx = Pipe(duplex=False)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _worker(cfg, hosts, tx, rx, deadline, home)  # never returns
        worker = pid
        tx.close()
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        for h in hosts.values():
            h.detach()
        _collect(rep, rx, deadline, start)
    finally:
        if worker is not None:
            try:
                os.killpg(worker, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(worker, 0)
            except ChildProcessError:
                pass
        for h in hosts.values():
            h.close()
        shutil.rmtree(home, ignore_errors=True)
    rep.seconds = time.monotonic() - start
    if rep.usage_error:
        raise ParameterError(rep.usage_error)
    return rep


def _collect(rep: FuzzReport, rx, deadline: float, start: float) -> None:
    while True:
        left = deadline + GRACE - time.monotonic()
        if left <= 0 or not rx.poll(left):
            rep.cut_short.append(f"the worker, killed during {rep.stage}")
            rep.notes.append(f"the budget ran out during {rep.stage}")
            return
        try:
            event = rx.recv()
        except (EOFError, OSError):
            rep.apply(("finding", "internal error", "the fuzzer's worker process ended unexpectedly", None))
            return
        if event[0] == "done":
            return
        rep.apply(event)
        if rep.first_violation_seconds is None and rep.violation:
            rep.first_violation_seconds = time.monotonic() - start


def _worker(cfg: FuzzConfig, hosts: dict, tx, rx, deadline: float, home: str) -> None:
    """The worker process: run the search, stream events, never return into the caller's code."""
    try:
        rx.close()
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor owns Ctrl-C
        os.dup2(2, 1)  # stray prints (a registered policy's, a library's) must not mix into the report on stdout
        from hypothesis.configuration import set_hypothesis_home_dir

        set_hypothesis_home_dir(home)
        Search(cfg, hosts, tx.send, deadline).run()
    except ParameterError as exc:
        _try_send(tx, ("usage", str(exc)))
    except BaseException as exc:  # noqa: BLE001 -- the fuzzer's own failure: reported, never a traceback
        _try_send(tx, ("finding", "internal error", internal_error_line(exc), None))
    finally:
        _try_send(tx, ("done",))
        os._exit(0)


def _try_send(tx, event) -> None:
    try:
        tx.send(event)
    except (OSError, ValueError):
        pass

"""The figures and claims of a run, on one core or on several (issue 54: the main job uses the cores it has).

Figures and claims are independent computations that share tables (:func:`theorems.tables.cached`: Fig. 8 and
``eq9-randomized`` read one marking table, the seed-002 figure and the block claims one block study).  With ``jobs``
above 1 the run forks that many worker processes and hands each the next item as it frees up (one at a time, longest
first: Order, below).  The workers share tables through a temporary directory
(:func:`theorems.tables.shared_between_processes`): each table is made by the first worker that needs it -- so, as
in a serial run, every table is computed once.  An item that needs a table another worker is making goes back into
the queue (:class:`theorems.tables.TableBusy`) while other items are left, and waits for it only when none is: a
worker is not left idle behind a lock.  A claim names
its figures' files before they are written (``ctx.figures`` holds the names every figure is written under, from the
registry's stems and :data:`kvcore.atomic.FIGURE_FORMATS`); the run fails if a figure wrote others.

Order.  A worker left with a long item while the others have nothing to do wastes a core, so the items are handed
out longest first (the greedy longest-processing-time order; Graham, SIAM J. Appl. Math. 1969), by the seconds each
took in the last run of the same profile on this machine, kept in ``item-seconds.json`` of
:func:`kvcore.user_cache.user_cache_root` (a missing or unreadable file is ignored: items never timed go first, the
readers of input sets among them, then in registry order).  The order changes no output.

The output does not depend on ``jobs``: every figure and counterexample is written by the one item that makes it,
under the same name; results are put back in registry order; tables are pure functions of their sizes.  Progress
lines are printed as items finish, numbered in that order, with the seconds the item took in its worker.  Workers
ignore SIGINT: a Ctrl-C reaches the parent (alone, or with its whole process group), which terminates them and exits
as a serial run does.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import signal
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from kvcore.atomic import FIGURE_FORMATS, write_text
from kvcore.user_cache import user_cache_root
from theorems.claims import CLAIMS, ClaimResult, Context
from theorems.profile import Profile
from theorems.tables import TableBusy, deferring, shared_between_processes

from .report import progress, real_trace_section


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, which a container or ``taskset`` narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass
class _Run:
    """What a worker needs, set in the parent before it forks (fork copies it; nothing is pickled)."""

    profile: Profile
    fig_dir: Path
    ctx: Context
    staging: Any = None  # the run's Staging, for the real-trace section
    held: frozenset[str] = frozenset()  # the input sets an item not in `readers` may not read
    readers: frozenset[tuple[str, str]] = frozenset()  # the items that read them (declared)


_RUN: _Run | None = None


def _item(item: tuple[str, str], may_defer: bool = False) -> tuple[str, str, Any, float]:
    """Build one figure or decide one claim: (kind, id, files or result, seconds); with ``may_defer``, ("busy", id,
    item, seconds) when a table it needs is being made by another worker (:class:`theorems.tables.TableBusy`)."""
    from realtrace import inputs_pending

    kind, ident = item
    t0 = time.perf_counter()
    try:
        with deferring(may_defer):
            if not _RUN.held:  # the caller holds what is pending (two phases beside a recompute, or nothing to hold)
                return kind, ident, _made(kind, ident), time.perf_counter() - t0
            reader = item in _RUN.readers
            # what reads no input set still may not read one (the check of the declarations), nor name a reader's
            # figure
            _RUN.ctx.waiting = frozenset() if reader else frozenset(f for k, f in _RUN.readers if k == "figure")
            with inputs_pending(frozenset() if reader else _RUN.held, only=True):
                return kind, ident, _made(kind, ident), time.perf_counter() - t0
    except TableBusy:
        return "busy", ident, item, time.perf_counter() - t0


def _made(kind: str, ident: str) -> Any:
    import figures
    from theorems.results.overlays import figure_data

    if kind == "figure":
        paths = figures.build(ident, _RUN.fig_dir, data=figure_data(ident, _RUN.profile))
        return [f"figures/{p.name}" for p in paths]
    if kind == "claim":
        return CLAIMS[ident].run(_RUN.ctx)
    return real_trace_section(_RUN.profile, _RUN.staging)  # it prints its own progress line


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _each(items: list[tuple[str, str]], jobs: int, longer_first=lambda item: 0.0):
    """Each item's outcome as it finishes: in this process when ``jobs`` is 1 (or there is one item), else in
    ``jobs`` forked workers sharing their tables; a worker's exception is raised here.  Items are handed out one at
    a time as workers free up, in the order given.  An item that asks for a table another worker is making, while
    other items are still to be handed out, goes back into the queue instead of leaving its core idle: where its
    ``longer_first`` key (the order's) puts it, but behind at least one other item, so that its worker does
    something else before it asks again; when nothing else is left it waits for the table."""
    if jobs <= 1 or len(items) <= 1:
        yield from map(_item, items)
        return
    queue, outcomes, running = deque(items), SimpleQueue(), 0
    with tempfile.TemporaryDirectory(prefix="paper_check-tables-") as shared, shared_between_processes(shared), \
            multiprocessing.get_context("fork").Pool(min(jobs, len(items)), initializer=_ignore_interrupts) as pool:
        while queue or running:
            while queue and running < jobs:
                item = queue.popleft()
                pool.apply_async(_item, (item, bool(queue)), callback=outcomes.put, error_callback=outcomes.put)
                running += 1
            outcome = outcomes.get()
            running -= 1
            if isinstance(outcome, BaseException):
                raise outcome
            if outcome[0] == "busy":
                item = outcome[2]
                at = next((i for i, other in enumerate(queue) if longer_first(other) > longer_first(item)), len(queue))
                queue.insert(max(1, at), item)
            else:
                yield outcome
    # leaving the block terminates the workers, also when an exception or a Ctrl-C ends the loop


def figure_files(fig_id: str) -> list[str]:
    """The files figure ``fig_id`` is written to, relative to the output root."""
    import figures

    return [f"figures/{figures.spec(fig_id).stem}.{fmt}" for fmt in FIGURE_FORMATS]


def run_items(figure_ids: list[str], claim_ids: list[str], ctx: Context, fig_dir: Path, *, jobs: int = 1,
              first: tuple[int, int] = (1, 1), totals: tuple[int, int] | None = None, real_traces: Any = None,
              held: frozenset[str] = frozenset(), readers: frozenset[tuple[str, str]] = frozenset()
              ) -> tuple[dict[str, list[str]], dict[str, ClaimResult], dict | None]:
    """Build the figures and decide the claims, and with ``real_traces`` (the run's Staging) make the report's
    real-trace section.  Returns (figure id -> files relative to the output root, claim id -> result, the section
    or None), the first two in the order given.  Progress lines number figures and claims from ``first`` of
    ``totals`` (default: these alone).  The items are handed out longest first (module docstring: Order); this
    run's timings are kept for the next.
    ``held``: input sets (``realtrace.input_dir``) that only the ``readers`` (``("claim"|"figure", id)``) may read,
    and whose figures only they may name -- the run's check that every reader is declared, item by item."""
    global _RUN
    if "fork" not in multiprocessing.get_all_start_methods():
        jobs = 1
    totals = totals or (len(figure_ids), len(claim_ids))
    ctx.figures.update({f: figure_files(f) for f in figure_ids})
    _RUN = _Run(ctx.profile, fig_dir, ctx, real_traces, frozenset(held), frozenset(readers))
    built: dict[str, list[str]] = {}
    results: dict[str, ClaimResult] = {}
    section = None
    done = {"figure": first[0], "claim": first[1]}
    items = [("claim", c) for c in claim_ids] + [("figure", f) for f in figure_ids]
    items += [("real", "")] if real_traces is not None else []
    last = _last_seconds(ctx.profile.name)

    def longer_first(item):
        return -last.get(_timed(item), math.inf), item not in readers

    items.sort(key=longer_first)
    took: dict[str, float] = {}
    for kind, ident, value, seconds in _each(items, jobs, longer_first):
        took[_timed((kind, ident))] = seconds
        if kind == "real":
            section = value
            continue
        if kind == "figure":
            if value != ctx.figures[ident]:
                raise RuntimeError(f"figure {ident} wrote {value}, not the {ctx.figures[ident]} its claims name")
            built[ident] = value
            what = ", ".join(Path(p).name for p in value)
        else:
            results[ident] = value
            what = value.verdict
        progress(f"[{kind} {done[kind]}/{totals[0 if kind == 'figure' else 1]}] {ident}: {what} ({seconds:.1f} s)")
        done[kind] += 1
    _remember_seconds(ctx.profile.name, took)
    return {f: built[f] for f in figure_ids}, {c: results[c] for c in claim_ids}, section


def _seconds_file() -> Path:
    return user_cache_root() / "item-seconds.json"


def _timed(item: tuple[str, str]) -> str:
    return f"{item[0]}:{item[1]}"


def _last_seconds(profile: str) -> dict[str, float]:
    """The seconds each item took when last run at ``profile`` here (module docstring: Order); {} when unknown."""
    try:
        stored = json.loads(_seconds_file().read_text())[profile]
        return {str(k): float(v) for k, v in stored.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _remember_seconds(profile: str, took: dict[str, float]) -> None:
    """Add this run's timings to the file the next run orders its items by; a file that cannot be written is left
    (the order is a matter of speed only)."""
    if not took:
        return
    try:
        stored = json.loads(_seconds_file().read_text())
        stored = stored if isinstance(stored, dict) else {}
    except (OSError, ValueError):
        stored = {}
    mine = stored.get(profile) if isinstance(stored.get(profile), dict) else {}
    stored[profile] = {**mine, **{k: round(v, 3) for k, v in took.items()}}
    try:
        _seconds_file().parent.mkdir(parents=True, exist_ok=True)
        write_text(_seconds_file(), json.dumps(stored, indent=0, sort_keys=True))
    except OSError:
        pass

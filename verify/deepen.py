"""Depth within the budget (issue 32): after the base-length constructions and the targeted search, the fuzzer
spends the rest of its budget on longer and longer traces, until a violation is found or the budget is spent.

Rounds
    Round ``r`` runs every construction of the model at ``scale = 2^r`` times its base length (:meth:`adversary.
    constructions.Construction.built`), adaptive ones first, alone or after a warm-up of :mod:`adversary.warmups`
    (benign, random, another construction) as long as its base length times ``scale``: an adaptive construction
    alone and after every warm-up (it drives the policy through the warm-up itself, so it answers the policy's
    state after thousands of evictions), any other once per round, alone or after one warm-up kind, in turn from
    round to round.  A (construction, warm-up) pair is dropped once its next run -- predicted from its last one, linear
    in the length -- would not fit in what is left.
Climbing (recompute model)
    Between rounds, :class:`Climber` runs a hill-climbing search on unit paging traces of the round's length: the
    current trace is mutated (a request changed, a motif of the trace tiled over a segment, a segment copied
    elsewhere, two neighbours swapped, one item renamed everywhere by an id of :mod:`adversary.relabel`'s families)
    and the mutant kept when its value is at least the current one, so plateaus
    are crossed.  Its first trace is the worst paging trace found so far, tiled to the new length.  Beside it, the
    periodic climber (:mod:`verify.periodic`) climbs over short periods judged repeated -- after the first round
    and the depth probe, for ``PERIODIC_FIRST_SHARE`` of what is left, then in the slices between rounds.  When no construction
    fits any more, the two climbers take the rest of the budget in turns.
Depth probe
    After the first round, the first adaptive construction runs once alone at the largest scale that fits in
    ``DEPTH_PROBE_SHARE`` of what is left (:meth:`Deepening.probe`), so the longest trace does not wait for every
    pair of every round: about 10^5 requests or more at the default budget for a plain-Python policy in its own
    process.

Every trace goes through the search's ``evaluate`` (so the worst value, the events and the cache are shared); the
longest trace measured is reported.  The NM model has no climber: its rounds are the constructions and warm-ups.
"""

from __future__ import annotations

import math
import time

import numpy as np

from adversary import constructions, relabel
from adversary.warmups import NM_WARMUPS, RM_WARMUPS, nm_warmup, rm_warmup
from kvcore.traces import PagingTrace

from .periodic import PeriodClimber

GROWTH = 2                  # each round doubles the constructions' length
MAX_SCALE = 2 ** 14         # at k = 3 that is about 10^6 requests per RM construction
CLIMB_SHARE = 0.25          # the climber's slice per round, as a share of the round's constructions' time
CLIMB_MIN_SECONDS = 0.5     # ... and at least this (for each climber)
CLIMB_SLICE_SECONDS = 4.0   # once no construction fits: the climbers take turns in slices this long
PERIODIC_SHARE = 0.5        # of each slice, for the periodic climber
PERIODIC_FIRST_SHARE = 0.4  # of what is left after the depth probe, for the periodic climber before round 2
DEPTH_PROBE_SHARE = 0.5     # of what is left after the first round, for one adaptive construction as long as fits
PROBE_STEP = 1.25           # the depth probe runs again only at least this many times longer than its last run


def base_length(k: int, model: str) -> int:
    """Length of a warm-up at scale 1: the RM constructions' base length ``20 (k + 1)``, NM ``4 k`` rows."""
    return 20 * (k + 1) if model == "rm" else 4 * k


class Deepening:
    """The deepening stage of ``search`` (a :class:`verify.search.Search`), run by :meth:`run` until ``until``."""

    def __init__(self, search):
        self.s = search
        self.model = "rm" if search.cfg.model == "rm" else "nm"
        self.last: dict[tuple, tuple[float, int]] = {}     # (construction, warm-up) -> (seconds, scale) last run
        self.dropped: set[tuple] = set()
        self.climber = Climber(search) if self.model == "rm" else None
        self.periodic = PeriodClimber(search) if self.model == "rm" else None

    def done(self) -> bool:
        s = self.s
        return s.stopped or s.objective.exceeds(s.worst)

    def run(self, until: float) -> None:
        s = self.s
        s.emit(("stage", "deepening"))
        scale, reached = GROWTH, None
        while scale <= MAX_SCALE and not self.done() and time.monotonic() < until:
            started = time.monotonic()
            ran = self.round(scale, until)
            reached = scale if ran else reached
            if self.climber is not None and not self.done():
                climb = max(CLIMB_MIN_SECONDS, CLIMB_SHARE * (time.monotonic() - started))
                self.periodic.climb(min(until, time.monotonic() + climb))
                self.climber.climb(base_length(s.k, "rm") * scale, min(until, time.monotonic() + climb))
            if not ran:
                break
            if scale == GROWTH:     # after the first round: depth first, then periods
                self.probe(until)
                if self.periodic is not None and not self.done():
                    self.periodic.climb(time.monotonic() + PERIODIC_FIRST_SHARE * (until - time.monotonic()))
            scale *= GROWTH
        while self.climber is not None and not self.done() and time.monotonic() < until:
            # what is left: the two climbers in turn, PERIODIC_SHARE of each slice on periods
            slice_end = min(until, time.monotonic() + CLIMB_SLICE_SECONDS)
            self.periodic.climb(time.monotonic() + PERIODIC_SHARE * (slice_end - time.monotonic()))
            self.climber.climb(self.climber.length or base_length(s.k, "rm"), slice_end)
        if reached is not None:
            s.emit(("deepest", reached))
        if not self.done():     # it would have gone on: deeper, or climbing longer
            s.emit(("cut", "deepening" + (f", at {reached}x the constructions' base length" if reached else "")))

    def round(self, scale: int, until: float) -> bool:
        """The pairs of this round that still fit, at ``scale``; False when none ran.  An adaptive construction runs
        alone and after every warm-up; any other once, alone or after one warm-up kind, in turn by round."""
        s, ran = self.s, False
        kinds = (None,) + (RM_WARMUPS if self.model == "rm" else NM_WARMUPS)
        turn = kinds[scale.bit_length() % len(kinds)]
        for c in sorted(constructions(self.model), key=lambda c: not c.adaptive):
            for kind in (kinds if c.adaptive else (turn,)):
                key = (c.name, kind)
                if key in self.dropped or self.done():
                    continue
                seconds, at_scale = self.last.get(key, (0.0, scale))
                if seconds * scale / at_scale > until - time.monotonic():
                    self.dropped.add(key)
                    continue
                prefix = self.warmup(kind, scale)
                label = f"construction {c.name!r} x{scale}" + (f" after a {kind} warm-up" if kind else "")
                t0 = time.monotonic()
                if s.run_construction(c, label, scale, prefix, deep=True):
                    self.last[key] = (time.monotonic() - t0, scale)
                    ran = True
                else:
                    self.dropped.add(key)
                if s.stopped:
                    return ran
        return ran

    def probe(self, until: float) -> None:
        """Depth first: the first adaptive construction, alone, at the largest scale whose run -- predicted from its
        last run, linear in the length -- fits in ``DEPTH_PROBE_SHARE`` of what is left (any whole scale, not only
        a power of two: a doubling would waste up to half the share), again while one at least
        ``PROBE_STEP`` times longer fits, so a flaw that needs 10^5 requests is reached within the budget however
        slow the policy's rounds are.  The prediction is re-made from each run: a short run overestimates the cost
        per request (its fixed costs are spread over fewer requests)."""
        s = self.s
        adaptive = [c for c in constructions(self.model) if c.adaptive]
        if not adaptive or (adaptive[0].name, None) not in self.last or self.done():
            return
        c = adaptive[0]
        end = time.monotonic() + DEPTH_PROBE_SHARE * (until - time.monotonic())
        while not self.done():
            seconds, at_scale = self.last[(c.name, None)]
            left = end - time.monotonic()
            scale = MAX_SCALE if seconds <= 0 else min(MAX_SCALE, int(at_scale * left / seconds))
            if scale < PROBE_STEP * at_scale:
                return
            t0 = time.monotonic()
            if not s.run_construction(c, f"construction {c.name!r} x{scale} (depth probe)", scale, None, deep=True):
                return
            self.last[(c.name, None)] = (time.monotonic() - t0, scale)

    def warmup(self, kind: str | None, scale: int):
        if kind is None:
            return None
        T = base_length(self.s.k, self.model) * scale
        seed = self.s.cfg.seed
        return rm_warmup(kind, self.s.k, T, seed) if self.model == "rm" else nm_warmup(kind, T, seed)


class Climber:
    """Hill climbing on unit paging traces (module docstring), seeded by the search's ``seed``."""

    def __init__(self, search):
        self.s = search
        self.rng = np.random.default_rng(search.cfg.seed)
        self.items: np.ndarray | None = None
        self.value = -math.inf
        self.length = 0
        self.seconds = 0.0      # of the last judgement: one predicted to end past ``until`` is not started

    def climb(self, length: int, until: float) -> None:
        """Climb at ``length`` (at the current length when a first judgement at ``length`` would not fit) until
        ``until``, a violation, or a finding that stopped the search."""
        s = self.s
        if length != self.length and (not self.length or
                                      time.monotonic() + self.seconds * length / self.length < until):
            self.length = length
            self.items = self.start(length)
            self.value = self.try_items(self.items)
        while time.monotonic() + self.seconds < until and not s.stopped and not s.objective.exceeds(s.worst):
            mutant = self.mutate(self.items)
            v = self.try_items(mutant)
            if v >= self.value:
                self.items, self.value = mutant, v

    def try_items(self, items: np.ndarray) -> float:
        t0 = time.monotonic()
        trace = PagingTrace.unit(items, f"climbing search (T = {items.size})")
        value = self.s.evaluate_guarded(trace, f"climbing search, T = {items.size}")
        self.seconds = time.monotonic() - t0
        return value

    def start(self, length: int) -> np.ndarray:
        """The worst unit paging trace so far tiled to ``length``, or uniform requests over ``k + 1`` items."""
        seed = self.items if self.items is not None else self.s.worst_unit_items
        if seed is None or seed.size == 0:
            return self.rng.integers(0, self.s.k + 1, size=length, dtype=np.int64)
        return np.resize(seed, length)

    def mutate(self, items: np.ndarray) -> np.ndarray:
        out, rng, n = items.copy(), self.rng, items.size
        span = int(min(n, max(2, rng.geometric(4.0 / n) if n > 4 else n)))
        a = int(rng.integers(0, n - span + 1))
        move = rng.integers(5 if relabel.ID_FAMILIES else 4)
        if move == 0:                                    # one request changed: to an id of the trace, or a new one
            out[int(rng.integers(n))] = self.some_id(items)
        elif move == 1:                                  # a motif of the trace tiled over a segment
            m = int(rng.integers(2, 2 * self.s.k + 3))
            b = int(rng.integers(0, max(1, n - m)))
            out[a:a + span] = np.resize(items[b:b + m], span)
        elif move == 2:                                  # a segment copied elsewhere
            b = int(rng.integers(0, n - span + 1))
            out[b:b + span] = items[a:a + span]
        elif move == 3:                                  # two neighbours swapped
            i = int(rng.integers(max(1, n - 1)))
            out[i], out[min(i + 1, n - 1)] = items[min(i + 1, n - 1)], items[i]
        else:                                            # one item renamed everywhere, by an id of some family
            old = items[int(rng.integers(n))]
            family = relabel.ID_FAMILIES[int(rng.integers(len(relabel.ID_FAMILIES)))]
            new = int(relabel.new_ids(1, family, rng)[0])
            if new not in set(np.unique(items).tolist()):
                out[items == old] = new
        return out

    def some_id(self, items: np.ndarray) -> int:
        """An id of ``items`` (3 times in 4), else a new small one (``k + 1 ... 3 k``): the climber may widen the
        alphabet a little, and renaming gives the new ids their values."""
        if self.rng.random() < 0.75:
            return int(items[int(self.rng.integers(items.size))])
        return int(self.rng.integers(self.s.k + 1, 3 * self.s.k + 1))

"""Exact expected cost of a randomized policy: a Markov chain over the policy's own states.

A randomized policy's run is a function of its random draws.  Instead of sampling seeds, :func:`expected_cost`
runs the policy itself (any object of the engine interface, e.g. a registered policy) through the engine's step-wise
simulator (:class:`kvcore.engine.RMSimulator` or :class:`~kvcore.engine.NMSimulator`) and, at every step,
enumerates every outcome of the step's random
draws: the policy's generator is replaced by a scripted one that answers ``integers(n)`` with each value of
``0..n-1`` in turn (a uniform draw, probability ``1/n`` each).  Runs that reach the same state -- the resident set
and the policy's attributes apart from its generator, compared as pickled bytes -- are merged, so the work is
(reachable states) x (steps), not (paths).  The result is the exact distribution of the policy's state after every
step and the exact expected cost ``E[ALG] = sum_t sum_s P(s at t) * cost(step t | s)`` (RM: fault cost; NM: the
regret of Eq. 4), in rational arithmetic (:class:`fractions.Fraction`; costs and weights enter as the exact
rationals of their doubles).

Limits, each a one-line :class:`NotEnumerable` rather than a wrong number: a policy that draws anything but uniform
integers (e.g. a continuous ``random()``), more than ``max_draws`` draws in one step (rejection sampling that keeps
rejecting), or more than ``max_states`` reachable states.  Callers then fall back to sampling with an interval
(:func:`kvcore.measure.measure`).

Used where sampling cannot decide: the paper's Eq. 9 and its Section 4 marking argument at small ``k`` (claims
``eq9-randomized`` and ``marking-hk-sum``), where a confidence interval of a seed mean straddles the bound, and the
NM adversaries of claim ``nm-det-unbounded``.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from fractions import Fraction

from .engine import MODELS, NMSimulator, RMSimulator
from .errors import ParameterError
from .traces import AttentionTrace, PagingTrace, require_trace


class NotEnumerable(ParameterError):
    """The policy's randomness or state space cannot be enumerated exactly (the message says which)."""


class _ScriptedDraws:
    """A stand-in for ``numpy.random.Generator`` that answers the ``j``-th ``integers`` call with ``script[j]``
    (0 past the end of the script) and records the number of outcomes of every call."""

    def __init__(self, script: list[int], max_draws: int):
        self.script, self.arities, self.max_draws = script, [], max_draws

    def integers(self, low, high=None, size=None, dtype=None, endpoint=False):
        if size is not None:
            raise NotEnumerable("the policy draws an array of integers at once; only scalar draws are enumerated")
        if high is None:
            low, high = 0, low
        n = int(high) - int(low) + (1 if endpoint else 0)
        if n < 1:
            raise NotEnumerable(f"the policy draws from an empty range [{low}, {high})")
        j = len(self.arities)
        if j >= self.max_draws:
            raise NotEnumerable(f"more than {self.max_draws} random draws in one step (rejection sampling?)")
        self.arities.append(n)
        return int(low) + (self.script[j] if j < len(self.script) else 0)

    def __getattr__(self, name):
        raise NotEnumerable(f"the policy draws with Generator.{name}; only uniform integers are enumerated")


def _next_script(script: list[int], arities: list[int]) -> list[int] | None:
    """The next outcome sequence in odometer order, or None after the last (``arities`` are the last run's)."""
    full = script + [0] * (len(arities) - len(script))
    for j in range(len(arities) - 1, -1, -1):
        if full[j] + 1 < arities[j]:
            return full[:j] + [full[j] + 1]
    return None


def _state_key(sim: RMSimulator | NMSimulator) -> bytes:
    """What the future of a run depends on: the resident set and the policy's attributes apart from its draws."""
    state = {k: v for k, v in vars(sim.policy).items() if k != "rng"}
    return pickle.dumps((sorted(sim.resident), sorted(state.items())))


@dataclass
class ExactExpectation:
    """``cost`` is ``E[ALG]`` exactly (``float(cost)`` for a number); ``per_step[t]`` the expected cost of step ``t``; ``states`` the largest number
    of distinct reachable states at any step; ``branches`` the number of (state, draw outcome) pairs simulated."""

    policy: str
    model: str
    capacity: int
    cost: Fraction
    per_step: list[Fraction]
    states: int
    branches: int


def expected_cost(policy, trace: PagingTrace | AttentionTrace, capacity: int, model: str = "rm", *,
                  max_states: int = 20000, max_draws: int = 16) -> ExactExpectation:
    """Exact ``E[cost]`` of ``policy`` (an instance of the engine interface; it is reset here) on ``trace`` with
    ``capacity`` slots in ``model`` (RM: a paging trace; NM: an attention trace, cost = regret), over every outcome
    of its uniform integer draws (module docstring)."""
    if model not in MODELS:
        raise ParameterError(f"model = {model!r}: must be one of {MODELS}")
    if model == "rm":
        require_trace(trace, "trace", (PagingTrace,))
        start = RMSimulator(policy, capacity, seed=0)
        steps = [(items.tolist(), costs.tolist(), None) for _, items, costs in trace.steps()]
    else:
        require_trace(trace, "trace", (AttentionTrace,))
        start = NMSimulator(policy, capacity, seed=0)
        steps = [(idx, w, float(r)) for (_, idx, w), r in zip(trace.rows(), trace.residual.tolist())]
    start.policy.rng = None
    frontier: dict[bytes, tuple[Fraction, RMSimulator | NMSimulator]] = {_state_key(start): (Fraction(1), start)}
    per_step: list[Fraction] = []
    most, branches = 1, 0
    for step in steps:
        nxt: dict[bytes, tuple[Fraction, RMSimulator | NMSimulator]] = {}
        step_cost = Fraction(0)
        for prob, sim in frontier.values():
            script: list[int] | None = []
            while script is not None:
                run = copy.deepcopy(sim)
                draws = run.policy.rng = _ScriptedDraws(script, max_draws)
                paid = run._serve(*step)
                p = prob
                for n in draws.arities:
                    p /= n
                run.policy.rng = None
                step_cost += p * Fraction(paid)
                key = _state_key(run)
                old = nxt.get(key)
                nxt[key] = (p, run) if old is None else (old[0] + p, old[1])
                branches += 1
                script = _next_script(script, draws.arities)
        if len(nxt) > max_states:
            raise NotEnumerable(f"more than {max_states} reachable states at step {len(per_step)}")
        frontier = nxt
        most = max(most, len(frontier))
        per_step.append(step_cost)
    return ExactExpectation(start.name, model, start.capacity, sum(per_step, Fraction(0)), per_step, most, branches)

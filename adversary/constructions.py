"""The registry of worst-case constructions a policy is run against before any search (the fuzzer's first stage).

A construction is a function ``build(k, make, scale, prefix) -> trace`` (RM: one paging trace, judged by the ratio to
the optimum) or ``-> [trace, ...]`` (NM: a family that only lengthens a suffix, judged by the growth of the tracking
gap per added step).  ``make`` is a zero-argument policy factory; an *adaptive* construction drives a fresh instance
through the public simulators (:mod:`kvcore.engine`), the others ignore it.  ``scale`` (1, 2, 4, ...) multiplies
the construction's length, so the fuzzer can run it at growing lengths; ``prefix`` is a warm-up trace
(:mod:`adversary.warmups`) an adaptive construction drives the policy through before it starts, ``None`` for none.
Call :meth:`Construction.built`, which puts the prefix before a non-adaptive construction's trace.  Register one
with :func:`construction`; the fuzzer reads :data:`CONSTRUCTIONS`, so a new construction is picked up with no other
edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .decoy_sleeper import decoy_and_sleeper
from .lfu_priming import lfu_priming
from .lower_bounds import adaptive_k_plus_one, cyclic_k_plus_one, two_new_per_phase, uniform_k_plus_one
from .topics import topic_shift
from .warmups import concat_attention, concat_paging


@dataclass(frozen=True)
class Construction:
    name: str
    model: str          # "rm": a trace judged by its ratio; "nm": a suffix family judged by tracking-gap growth
    adaptive: bool      # drives the policy under test
    source: str
    build: Callable[..., Any]

    def built(self, k: int, make: Callable[[], Any], scale: int = 1, prefix=None):
        """The construction at ``scale`` times its base length, after the warm-up ``prefix`` (or none): an adaptive
        one drives the policy through the prefix itself; any other gets the prefix put in front (NM: of every
        member of its family)."""
        if self.adaptive or prefix is None:
            return self.build(k, make, scale, prefix)
        out = self.build(k, make, scale, None)
        if self.model == "rm":
            return concat_paging(prefix, out)
        return [concat_attention(prefix, tr) for tr in out]


CONSTRUCTIONS: dict[str, Construction] = {}


def construction(name: str, model: str, source: str, adaptive: bool = False):
    """Decorator registering ``build(k, make)`` under ``name``."""
    if model not in ("rm", "nm"):
        raise ValueError(f"construction {name!r}: model must be 'rm' or 'nm'")

    def deco(fn):
        if name in CONSTRUCTIONS:
            raise ValueError(f"construction {name!r} registered twice")
        CONSTRUCTIONS[name] = Construction(name, model, adaptive, source, fn)
        return fn

    return deco


def constructions(model: str) -> list[Construction]:
    return [c for c in CONSTRUCTIONS.values() if c.model == model]


@construction("adaptive k+1", "rm", "Sleator & Tarjan 1985 (paper Eq. 6)", adaptive=True)
def _adaptive(k, make, scale, prefix):
    return adaptive_k_plus_one(make(), k, 20 * (k + 1) * scale, prefix=prefix)


@construction("cyclic k+1", "rm", "LRU/FIFO's oblivious worst case (SPEC section 5)")
def _cyclic(k, make, scale, prefix):
    return cyclic_k_plus_one(k, 20 * (k + 1) * scale)


@construction("uniform k+1", "rm", "Yao's lower bound H_k (SPEC section 5)")
def _uniform(k, make, scale, prefix):
    return uniform_k_plus_one(k, 20 * (k + 1) * scale, seed=0)


@construction("two new items per phase", "rm", "Marking's worst case, ratio -> 2H_k - 1 (Achlioptas, Chrobak & "
              "Noga, TCS 2000)")
def _two_new(k, make, scale, prefix):
    return two_new_per_phase(max(k, 2), 20 * scale, seed=0)


@construction("LFU priming m=k^2", "rm", "Borodin & El-Yaniv 1998: LFU is not competitive")
def _lfu(k, make, scale, prefix):
    return lfu_priming(k, k * k * scale)


@construction("decoy-and-sleeper", "nm", "paper Theorem 2 (filler-first order)")
def _decoy(k, make, scale, prefix):
    return [decoy_and_sleeper(k, 0.01, L * scale) for L in (8 * k, 16 * k)]


@construction("topic shift, no tail", "nm", "paper Section 5 (topic shifts); stale accumulated attention")
def _topic_shift(k, make, scale, prefix):
    # all of every row's mass on the current topic's (k-1)//2 heavy tokens, uniformly: no light tail to hide a loss
    # behind, and two topics fit the window's union (k - 1) -- a policy ranking tokens by accumulated attention
    # keeps the old topic's tokens and drops the new one's
    L = 4 * k
    return [topic_shift(n * L, L, max(1, (k - 1) // 2), zipf_s=0.0, sinks=0, sink_mass=0.0, self_mass=0.0,
                        seed=0).trace for n in (4 * scale, 8 * scale)]

"""Slow exact references for ``tests/test_hk_policy.py`` (OnlineMin, the H_k-competitive policy, and Marking).

Nothing here shares code with ``policies/online_min.py``: the layers are kept as explicit sets and updated by
the Koutsoupias-Papadimitriou rule, and OnlineMin's cache is recomputed from scratch as the selection process
defines it (greedy in increasing priority under Lemma 4.1's constraints), for every priority order at once.

- :func:`kp_update` -- the layer update (Koutsoupias & Papadimitriou, FOCS 1994, as restated by Brodal, Moruz &
  Negoescu 2011): the offline optimum pays exactly on requests to ``L_0``.
- :func:`lowest_priority_configuration` -- OnlineMin's cache for one priority order.
- :func:`online_min_exact` / :func:`exhaustive_online_min` -- the exact cache distribution and expected cost,
  averaging over all orders of the requested items (the priorities are i.i.d. continuous, so every order is
  equally likely and the cache at each step is a function of the layers and the order).
- :func:`marking_exact_cost` -- Marking's exact expected cost, tracking the distribution of (cache, marks).

Empty start: k phantom pages ``-1 .. -k`` (never requested) fill the layers ``L_1 .. L_k``; they rank after every
real page.  Exact arithmetic uses Fractions, so a bound is compared without rounding slack.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from itertools import permutations
from typing import Iterator, Sequence




Layers = tuple[frozenset, ...]  # L_1 .. L_k; L_0 is every page in none of them


def harmonic_fraction(k: int) -> Fraction:
    """``H_k`` as an exact fraction."""
    return sum((Fraction(1, i) for i in range(1, k + 1)), Fraction(0))


def initial_layers(k: int) -> Layers:
    """Phantom page ``-j`` alone in layer ``L_j``: the offset function of an empty cache."""
    return tuple(frozenset({-j}) for j in range(1, k + 1))


def kp_update(layers: Layers, page: int) -> tuple[Layers, bool]:
    """Layers after a request to ``page`` and whether ``page`` was in ``L_0`` (then the optimum pays one fault).

    ``page`` in ``L_i`` (i > 0): ``L_{i-1}`` and ``L_i \\ {page}`` merge (into ``L_0`` when i = 1), the layers above
    move down one place, ``{page}`` becomes ``L_k``.  ``page`` in ``L_0``: ``L_{k-1}`` and ``L_k`` merge.
    """
    k = len(layers)
    top = (frozenset({page}),)
    for i, layer in enumerate(layers, start=1):
        if page in layer:
            if i == 1:
                return layers[1:] + top, False
            return layers[:i - 2] + (layers[i - 2] | (layer - {page}),) + layers[i:] + top, False
    if k == 1:
        return top, True
    return layers[:k - 2] + (layers[k - 2] | layers[k - 1],) + top, True


def lowest_priority_configuration(layers: Layers, rank: dict[int, int]) -> frozenset:
    """OnlineMin's cache: the pages of ``L_1 .. L_k`` in increasing ``rank`` (phantoms last), each kept when the
    kept set still meets ``|C ∩ (L_0 ∪ ... ∪ L_j)| <= j`` for every j (the Koutsoupias-Papadimitriou lemma)."""
    k = len(layers)
    index = {p: j for j, layer in enumerate(layers, start=1) for p in layer}
    below = [0] * (k + 1)  # below[j] = |kept ∩ (L_1 ∪ ... ∪ L_j)|
    kept = []
    for p in sorted(index, key=lambda p: (p < 0, rank.get(p, 0), p)):
        if all(below[j] < j for j in range(index[p], k + 1)):
            for j in range(index[p], k + 1):
                below[j] += 1
            kept.append(p)
    return frozenset(kept)


@dataclass(frozen=True)
class ExactRun:
    """OnlineMin on one sequence: per step, the exact distribution of the resident real pages after the step and
    the probability that the step's request faults; ``opt`` counts the requests to ``L_0``."""

    distributions: tuple[dict[frozenset, Fraction], ...]
    miss_probability: tuple[Fraction, ...]
    opt: int

    @property
    def expected_cost(self) -> Fraction:
        return sum(self.miss_probability, Fraction(0))


def _orders(items: Sequence[int]) -> list[dict[int, int]]:
    return [{p: r for r, p in enumerate(order)} for order in permutations(sorted(set(items)))]


def online_min_exact(requests: Sequence[int], k: int) -> ExactRun:
    """Exact cache distributions and expected cost of OnlineMin with cache ``k`` (both start empty)."""
    ranks = _orders(requests)
    layers = initial_layers(k)
    caches = [frozenset(-j for j in range(1, k + 1))] * len(ranks)
    dists, misses, opt = [], [], 0
    for r in requests:
        missed = sum(r not in c for c in caches)
        layers, pays = kp_update(layers, r)
        opt += pays
        caches = [lowest_priority_configuration(layers, rank) for rank in ranks]
        dist: dict[frozenset, Fraction] = {}
        for c in caches:
            real = frozenset(p for p in c if p >= 0)
            dist[real] = dist.get(real, Fraction(0)) + Fraction(1, len(ranks))
        dists.append(dist)
        misses.append(Fraction(missed, len(ranks)))
    return ExactRun(tuple(dists), tuple(misses), opt)


def exhaustive_online_min(k: int, n_items: int, max_len: int) -> Iterator[tuple[tuple[int, ...], Fraction, int]]:
    """``(sequence, exact expected cost, L_0 count)`` for every sequence of length 1..max_len over ``n_items`` items
    up to renaming (each new item is the smallest unused id; expected costs and optima do not depend on the names,
    so this covers every sequence).  Prefixes share their work."""
    ranks = _orders(range(n_items))
    start = [frozenset(-j for j in range(1, k + 1))] * len(ranks)

    def walk(seq, layers, caches, cost, opt):
        if seq:
            yield seq, cost, opt
        if len(seq) == max_len:
            return
        used = max(seq) + 1 if seq else 0
        for r in range(min(used + 1, n_items)):
            new_layers, pays = kp_update(layers, r)
            step = Fraction(sum(r not in c for c in caches), len(ranks))
            new_caches = [lowest_priority_configuration(new_layers, rank) for rank in ranks]
            yield from walk(seq + (r,), new_layers, new_caches, cost + step, opt + pays)

    yield from walk((), initial_layers(k), start, Fraction(0), 0)


def marking_exact_cost(requests: Sequence[int], k: int) -> Fraction:
    """Marking's exact expected cost (Fiat et al. 1991): mark on request, evict a uniform unmarked page, unmark all
    when none is left; the distribution of (cache, marked set) is carried step by step."""
    states = {(frozenset(), frozenset()): Fraction(1)}
    cost = Fraction(0)
    for r in requests:
        nxt: dict[tuple[frozenset, frozenset], Fraction] = {}
        for (cache, marked), p in states.items():
            if r in cache:
                outcomes = [(cache, marked | {r})]
            else:
                cost += p
                if len(cache) < k:
                    outcomes = [(cache | {r}, marked | {r})]
                else:
                    unmarked = cache - marked
                    if not unmarked:
                        marked, unmarked = frozenset(), cache
                    outcomes = [((cache - {v}) | {r}, marked | {r}) for v in unmarked]
            for o in outcomes:
                nxt[o] = nxt.get(o, Fraction(0)) + p / len(outcomes)
        states = nxt
    return cost



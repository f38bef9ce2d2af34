"""Topic shifts: benign persistent attention whose heavy set moves at topic boundaries (paper Section 5, "the
adversary is not only adversarial": a topic change is decoy-and-sleeper arising without an adversary)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kvcore.engine import make_rng
from kvcore.errors import ParameterError
from kvcore.numbers import integer
from kvcore.traces import AttentionTrace

from ._build import attention_from_rows
from .persistence import check_row_masses, sinks_self_zipf_row


class TopicShiftTrace(NamedTuple):
    """A topic-shift trace, the steps where a new topic starts (step 0 excluded), and each topic's heavy set."""

    trace: AttentionTrace
    boundaries: tuple[int, ...]
    heavy_sets: tuple[tuple[int, ...], ...]


def topic_shift(T: int, topic_length: int, heavy_size: int, *, zipf_s: float = 1.0, sinks: int = 1,
                sink_mass: float = 0.1, self_mass: float = 0.1,
                seed: int | np.random.Generator | None = 0) -> TopicShiftTrace:
    """Attention in topics of ``topic_length`` steps; within a topic a fixed heavy set carries the mass.

    Topic ``j`` spans steps ``[j L, (j+1) L)`` (``L = topic_length``; the last may be shorter).  Its heavy set is
    the first ``heavy_size`` tokens of the topic (the first topic skips the sinks), ranked by a seeded random
    permutation fixed for the topic.  Row ``t``: ``sink_mass`` split evenly over the sinks ``0..sinks-1`` present;
    ``self_mass`` on token ``t``; the rest by :func:`adversary.persistence.zipf_weights` (exponent ``zipf_s``)
    over the heavy tokens of the current topic that have arrived, by rank (onto token ``t`` while none has).  At
    a boundary the heavy set moves to the new topic's tokens and the old one gets no mass again: a policy ranking
    tokens by accumulated mass holds the old topic's tokens and loses the new one's, while a cache of
    ``sinks + heavy_size + 1`` tokens that follows the topics loses nothing.  Within a topic a heavy token is
    attended at every step from its arrival on, so the trace is persistent inside topics.
    Returns the trace, the boundary steps ``L, 2L, ...`` (those below ``T``) and the heavy sets.
    """
    T = integer(T, "T", 0)
    L = integer(topic_length, "topic_length", 1)
    heavy_size = integer(heavy_size, "heavy_size", 1)
    sinks, sink_mass, self_mass = check_row_masses(sinks, sink_mass, self_mass)
    if sinks + heavy_size > L:
        raise ParameterError(f"topic_length = {L}: a topic must fit its {heavy_size} heavy tokens "
                             f"(and the first topic also the {sinks} sinks)")
    rng = make_rng(seed)
    rows: list[dict[int, float]] = []
    heavy_sets = []
    for start in range(0, T, L):
        first = start + (sinks if start == 0 else 0)
        heavy = list(range(first, first + heavy_size))
        ranked = [heavy[i] for i in rng.permutation(heavy_size)]
        heavy_sets.append(tuple(i for i in heavy if i < T))
        for t in range(start, min(start + L, T)):
            rows.append(sinks_self_zipf_row(t, [i for i in ranked if i <= t], sinks, sink_mass, self_mass, zipf_s))
    trace = attention_from_rows(rows, f"topic_shift(T={T}, L={L}, heavy={heavy_size}, s={zipf_s:g}, sinks={sinks})")
    return TopicShiftTrace(trace, tuple(range(L, T, L)), tuple(heavy_sets))

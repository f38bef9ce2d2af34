"""From what a kvpress press kept to an eviction schedule in the NM model (pure numpy; no torch, no kvpress).

A run of a press is recorded as the model sees it (:class:`PressRecord`): the forward passes in order, each feeding
the logical positions of its tokens (a prefill feeds ``0..P-1``, a decoding step one position), and, after a
forward, the compressions the press made on some layer and KV head.  A compression is recorded in *cache slots*,
not positions: ``kept_slots[j]`` is the slot (row of the cache before the compression) that became row ``j`` after
it.  kvpress gathers the kept rows in ``scores.topk`` order (``ScorerPress.compress``), so after a compression the
cache is not in position order, and the slots of a later compression index that reordered cache plus the rows
appended since.  :func:`replay` re-indexes after every compression to recover positions.  A head-wise press
(``AdaKVPress``) does not shorten the cache: it masks ``(KV head, slot)`` pairs, recorded as ``masked_slots``; a
masked slot is dead from then on (kvpress replaces its key by one whose attention weight underflows to 0 for every
later query) although its row stays in the cache.

NM reading (SPEC section 2).  A compression made in the forward whose last position is ``t`` acts after row ``t``
was computed with the full cache (kvpress compresses in a forward hook, after the attention output), so a position
dropped there is absent from step ``t + 1`` on: the schedule holds ``(t + 1, position)``.  A dropped position never
comes back (kvpress has no refetch), which is exactly the NM model's rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvcore.errors import KVToolkitError


class PressRecordError(KVToolkitError):
    """A recorded press run is inconsistent (a slot out of range, kept twice, an unknown layer)."""


@dataclass
class Compression:
    """One compression of one layer's cache for one KV head, after forward number ``forward``."""

    forward: int
    layer: int
    head: int
    kept_slots: np.ndarray | None = None  # rows of the cache before, in the order of the cache after
    masked_slots: np.ndarray | None = None  # head-wise presses: rows that became dead (cache length unchanged)


@dataclass
class PressRecord:
    """Everything needed to replay a press run: positions fed per forward, then the compressions."""

    forwards: list[list[int]]
    compressions: list[Compression] = field(default_factory=list)
    layers: tuple[int, ...] = ()
    kv_heads: int = 0

    @property
    def T(self) -> int:
        return 1 + max((max(p) for p in self.forwards if p), default=-1)


@dataclass
class HeadSchedule:
    """The replay of one layer and KV head: the drop step of every position (``T`` = never dropped) and, per
    compression, the step it took effect and the positions kept, in cache order."""

    drop: np.ndarray
    kept: list[tuple[int, np.ndarray]]

    def evictions(self) -> list[tuple[int, int]]:
        """``[(step, position)]`` sorted by step, then position (the toolkit's schedule format)."""
        T = self.drop.size
        tok = np.flatnonzero(self.drop < T)
        order = np.lexsort((tok, self.drop[tok]))
        return list(zip(self.drop[tok][order].tolist(), tok[order].tolist()))

    def resident_counts(self) -> np.ndarray:
        """Per step ``t``, the number of positions ``i <= t`` resident at ``t`` (``drop[i] > t``)."""
        T = self.drop.size
        diff = np.zeros(T + 1, dtype=np.int64)
        diff[np.arange(T)] += 1
        np.add.at(diff, self.drop, -1)
        return np.cumsum(diff)[:T]


def reindex(slot_positions: np.ndarray, kept_slots: np.ndarray, where: str = "") -> np.ndarray:
    """Positions of the cache after a compression: ``slot_positions[kept_slots]``, checking that the slots are
    distinct and in range."""
    kept_slots = np.asarray(kept_slots, dtype=np.int64)
    n = slot_positions.size
    if kept_slots.size and (kept_slots.min() < 0 or kept_slots.max() >= n):
        raise PressRecordError(f"{where}: kept slot out of range 0..{n - 1}")
    if np.unique(kept_slots).size != kept_slots.size:
        raise PressRecordError(f"{where}: a slot is kept twice")
    return slot_positions[kept_slots]


def replay(record: PressRecord, layer: int, head: int) -> HeadSchedule:
    """Replay ``record`` for one layer and KV head (module docstring): positions appended per forward, every
    compression re-indexed through the current slot order, masked slots dead from the next step on."""
    T = record.T
    drop = np.full(T, T, dtype=np.int64)
    by_forward: dict[int, list[Compression]] = {}
    for c in record.compressions:
        if c.layer == layer and c.head == head:
            by_forward.setdefault(c.forward, []).append(c)
    slots = np.zeros(0, dtype=np.int64)
    kept: list[tuple[int, np.ndarray]] = []
    for f, positions in enumerate(record.forwards):
        slots = np.concatenate([slots, np.asarray(positions, dtype=np.int64)])
        step = max(positions) + 1
        for c in by_forward.get(f, []):
            where = f"layer {layer} KV head {head}, forward {f}"
            if c.masked_slots is not None:
                dead = reindex(slots, c.masked_slots, where)
                drop[dead] = np.minimum(drop[dead], step)
            if c.kept_slots is not None:
                new = reindex(slots, c.kept_slots, where)
                gone = np.setdiff1d(slots, new)
                drop[gone] = np.minimum(drop[gone], step)
                slots = new
                kept.append((step, new.copy()))
    return HeadSchedule(drop, kept)

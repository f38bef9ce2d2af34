"""EMA block scorer with recency decay: the figure page's (seed 002) attention-aware block eviction, an LRFU reading.

Rules (seed 002; SPEC section 6, claims ``blk-*``):

* Score: on every step a block's score follows ``score <- alpha * new + (1 - alpha) * score``
  (:func:`ema_update`).  The page gives ``new`` only for steps where the block is attended.  On a step where the
  block is *not* attended we take ``new = 0``, so an unattended step multiplies the score by ``1 - alpha``
  (:func:`ema_decayed`).  This is the reading that makes the rule LRFU: Lee et al. (ACM SIGMETRICS 1999) define a
  block's combined recency-frequency value as ``C(t) = sum_i F(t - t_i)`` over its past references, decaying in
  *time* between references (``C(t) = F(t - t_last) * C(t_last)``).  With ``new = 0`` on unattended steps the score
  is exactly ``alpha * sum_i a_i (1 - alpha)^(t - t_i)``: LRFU's value with ``F(x) = (1 - alpha)^x``
  (``lambda = -log2(1 - alpha)``) and each reference weighted by its attention ``a_i``.  This is the default,
  ``unattended="decay"``.  The other reading, ``unattended="hold"`` (the score changes only when the block is
  observed), counts observations instead of time and is not LRFU; it is kept because the page's own worked examples
  use it: block A is scored 0.059 (its EMA at its last access) although it was accessed 50 steps ago, and block B
  keeps a score of 0.02 after 2000 idle steps, which under time decay would need an impossible earlier score.
* Half-life of the score: ``ln 0.5 / ln(1 - alpha)`` steps (:func:`ema_half_life`).
* Recency decay: ``1 - exp(-beta * age)`` with ``age`` = steps since the block's last access (:func:`recency_decay`).
* Eviction priority: ``p = (1 - score) * (1 - exp(-beta * age))`` (:func:`eviction_priority`); evict the resident,
  unprotected block with the highest ``p``; ties go to the older last access, then to the smaller item id.

Timing inside an engine step (kvcore.engine, RM): requests are served, victims are chosen, misses are admitted, then
the step's attention is observed.  So a victim chosen at step ``t`` is scored with the score after step ``t - 1``
(step ``t``'s attention does not exist yet) and its age is ``t - (last request step)``.  An *access* is a request
(admission or hit); an observation updates the score only, because in RM from attention every resident block gets
some small weight each step and would otherwise never age.  A block admitted and never observed has score 0.

Victim search (exact; better than a full scan in the usual case under ``"decay"``, a full scan under ``"hold"``).
``p`` changes with time for every block, so no time-invariant key orders the blocks.  The ``"decay"`` search prunes
with an upper bound that is exact in floating point (``1 - x``, ``expm1`` and products of non-negative numbers are
monotone under rounding), so it returns the same block as a full scan of :meth:`EMABlock.priority` with the tie rule
above (``"hold"`` is such a scan).

* ``"decay"``: ``p <= 1 - exp(-beta * age)`` because ``score >= 0``, and that bound falls along the LRU order.  Walk
  resident blocks from the least recently accessed; stop at the first whose bound is below the best ``p`` found.
  Cost ``O(1)`` per request or observation, ``O(m)`` per victim, ``m`` = blocks visited.  Under this reading a block
  last observed ``g`` steps ago has score at most ``(1 - alpha)^(g - 1)``, so old blocks sit close to their bound and
  ``m`` is typically a handful (worst case all resident blocks).
* ``"hold"``: scores do not decay, so old blocks keep their scores and the bound above prunes little.  A pruned
  search over score buckets (LRU lists per score range, visited in order of ``(1 - low score) * recency``) was tried:
  exact, but on the block study's workload the oldest blocks of many buckets are near-ties, so it evaluated ~40
  blocks per victim in Python and was slower than a vectorized scan.  The search is therefore a full scan over the
  resident blocks, vectorized with numpy: ``1 - score`` and the last access live in per-slot arrays updated in
  ``O(1)`` per request or observation, and a victim costs one ``O(n)`` array pass (~50 us at ``n`` = 6553).  Ties
  are resolved by the rule above among the blocks whose priority equals the maximum.

Persistable: the exported state is ``(score, step of that score)``; importing it restores the score as if the
block had stayed resident and unattended over its absence (under ``"decay"`` the time decay keeps running over the
gap; under ``"hold"`` the score comes back unchanged), so with persistence a returning block resumes its value
instead of starting at 0.

Consequences.  Under the LRFU reading a block idle for ``g`` steps keeps at most ``(1 - alpha)^(g - 1)`` of its score,
and a block read about every ``g`` steps with share ``w`` holds a score of at most about ``w / g``; while
``beta * age << 1`` a score ``s`` buys a block a factor ``1 / (1 - s)`` of age, so about ``w`` extra steps.  The policy
then evicts almost like LRU: on the serving and the anchored workloads of theorems/results/blocks.py every alpha
hits within 0.01 points of LRU, and the score shows only where few blocks are read every few steps in a small cache
(its ``alpha-control-decay``).  Under the "hold" reading a block keeps its per-read attention average however long
it idles, so where attention is concentrated and recency saturates (``beta * age`` of order 1) the score reorders
old blocks (its ``anchored`` workload).  As ``alpha -> 0`` every score tends to 0 and the policy becomes LRU, not LFU
(tests/test_block_study.py).  The block study runs this rule through an array kernel that is checked, eviction by
eviction, against this class (kvcore/block_kernel.py, tests/test_block_study.py).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from kvcore.errors import ParameterError
from kvcore.formulas import ema_decayed, ema_update, eviction_priority, recency_decay
from kvcore.numbers import real

from .base import Policy
from .registry import register


@register
@dataclass
class EMABlock(Policy):
    """Evict the block with the highest ``(1 - EMA attention score) * (1 - exp(-beta * age))`` (LRFU reading).

    ``alpha`` in ``(0, 1]`` is the EMA weight of a new attention score (default 0.05, the page's value); ``beta > 0``
    the recency-decay rate per step (default 0.001, the page's uncalibrated value); ``unattended`` is ``"decay"``
    (LRFU reading: ``new = 0`` on unattended steps, the default) or ``"hold"`` (score unchanged until the block is
    observed again; the reading of the page's worked examples).  Full rules and the cost of the victim search: see
    the module docstring.  Checked against the figure page's worked numbers (tests/test_figure_page_numbers.py) and
    against a full scan of :meth:`priority` (tests/test_persistent_state.py).
    """

    alpha: float = 0.05
    beta: float = 0.001
    unattended: str = "decay"

    name = "EMA-Block"
    signal = "hybrid"
    models = frozenset({"rm"})
    citation = ("Lee, Choi, Kim, Noh, Min, Cho, Kim: On the existence of a spectrum of policies that subsumes the "
                "LRU and LFU policies, ACM SIGMETRICS 1999")
    persistable = True

    def __post_init__(self) -> None:
        real(self.alpha, f"policy {self.name}: alpha", 0.0, 1.0, open_low=True)
        real(self.beta, f"policy {self.name}: beta", 0.0, open_low=True)
        if self.unattended not in ("decay", "hold"):
            raise ParameterError(f"policy {self.name}: unattended = {self.unattended!r}: must be 'decay' or 'hold'")
        self._hold = self.unattended == "hold"
        # under "hold" an unattended step leaves the score as it is: the same formulas with no decay
        self._decay_alpha = 0.0 if self._hold else self.alpha

    def on_reset(self) -> None:
        self._last_access: OrderedDict[int, int] = OrderedDict()  # LRU order: oldest access first
        self._score: dict[int, tuple[float, int]] = {}  # item -> (score after step u, u)
        if self._hold:
            k = self.k
            self._slot: dict[int, int] = {}
            self._free = list(range(k - 1, -1, -1))
            self._item_at = np.zeros(k, dtype=np.int64)
            self._keep = np.zeros(k)  # 1 - score
            self._accessed = np.zeros(k)  # last access step
            self._live = np.zeros(k, dtype=bool)

    # -- the quantities of the rule ----------------------------------------------------------------------------------
    def score(self, item: int, t: int) -> float:
        """The item's score after step ``t`` when it is not attended between its last update and ``t``."""
        s, u = self._score[item]
        return ema_decayed(s, t - u, self._decay_alpha)

    def age(self, item: int, t: int) -> int:
        """Steps since the item's last request."""
        return t - self._last_access[item]

    def priority(self, item: int, t: int) -> float:
        """The priority of a resident item when a victim is chosen at step ``t`` (score after step ``t - 1``)."""
        return eviction_priority(self.score(item, t - 1), self.age(item, t), self.beta)

    # -- hooks -------------------------------------------------------------------------------------------------------
    def _set_score(self, item: int, score: float, u: int) -> None:
        self._score[item] = (score, u)
        if self._hold:
            self._keep[self._slot[item]] = 1.0 - score

    def _touch(self, item: int, t: int) -> None:
        self._last_access[item] = t
        self._last_access.move_to_end(item)
        if self._hold:
            self._accessed[self._slot[item]] = t

    def on_admit(self, t, item, cost):
        if self._hold:
            slot = self._free.pop()
            self._slot[item] = slot
            self._item_at[slot] = item
            self._live[slot] = True
        self._touch(item, t)
        self._set_score(item, 0.0, t - 1)  # score 0 before this step's attention

    def on_hit(self, t, item, cost):
        self._touch(item, t)

    def on_observe(self, t, items, weights):
        alpha, decay = self.alpha, self._decay_alpha
        for item, w in zip(items.tolist(), weights.tolist()):
            s, u = self._score[item]
            # "decay": steps u+1..t-1 were unattended (new = 0); then the EMA step of step t
            self._set_score(item, ema_update(ema_decayed(s, t - 1 - u, decay), w, alpha), t)

    def on_evict(self, t, item):
        del self._score[item]
        del self._last_access[item]
        if self._hold:
            slot = self._slot.pop(item)
            self._live[slot] = False
            self._free.append(slot)

    def export_state(self, item):
        return self._score[item]

    def import_state(self, t, item, state):
        s, u = state
        self._set_score(item, float(s), int(u))

    # -- victim search (module docstring) ----------------------------------------------------------------------------
    def victim(self, t, protected):
        if self._hold:
            return int(self._item_at[self._best_slot(self._priorities(t, protected))])
        return self._victim_by_recency_bound(t, protected)

    def victims(self, t, need, protected):
        if not self._hold:
            return super().victims(t, need, protected)
        # dropping a block changes no other block's priority, so one pass serves every victim of the step
        p = self._priorities(t, protected)
        chosen = []
        for _ in range(need):
            slot = self._best_slot(p)
            p[slot] = -np.inf
            item = int(self._item_at[slot])
            self.drop(t, item)
            chosen.append(item)
        return chosen

    def _victim_by_recency_bound(self, t, protected):
        beta, best = self.beta, None
        for item, accessed in self._last_access.items():
            if best is not None and recency_decay(t - accessed, beta) < best[0]:
                break  # every later item is accessed no earlier, so its priority is at most its bound
            if item in protected:
                continue
            cand = (self.priority(item, t), -accessed, -item)
            if best is None or cand > best:
                best = cand
        if best is None:
            raise RuntimeError("no evictable item")
        return -best[2]

    def _priorities(self, t, protected) -> np.ndarray:
        """Per-slot priorities (``"hold"``): eviction_priority elementwise, ``-inf`` for free or protected slots."""
        p = self._keep * -np.expm1(-self.beta * (t - self._accessed))
        p[~self._live] = -np.inf
        for item in protected:
            slot = self._slot.get(item)
            if slot is not None:
                p[slot] = -np.inf
        return p

    def _best_slot(self, p: np.ndarray) -> int:
        top = p.max()
        if top == -np.inf:
            raise RuntimeError("no evictable item")
        tied = np.flatnonzero(p == top)
        if tied.size == 1:
            return int(tied[0])
        return int(min(zip(self._accessed[tied].tolist(), self._item_at[tied].tolist(), tied.tolist()))[2])

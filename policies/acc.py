"""ACC: undecayed accumulated observed attention (the paper's Section 5 rule)."""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import ParameterError

from .base import Policy
from .decay import LazyDecay, RisingKeyHeap
from .registry import register


@register
@dataclass
class ACC(Policy):
    """Evict the resident item with the smallest accumulated observed attention ``S_i = sum_s a[s, i]``.

    Rule (paper Section 5, Theorem 2: heavy-hitter selection with no recency window and no decay; the score is
    H2O's accumulated attention, Zhang et al., NeurIPS 2023):

    * an item's score is 0 when it is admitted (an NM arrival, an RM fetch) and grows by every weight the policy
      observes on it (``observe``: NM rows; RM rows when the run has them).  Hits add nothing: the score is
      attention mass, not a request count;
    * victim: the unprotected resident item of least score; ties go to the smaller item id (in NM: the earlier
      token);
    * the arriving token (NM): with ``protect_arrival = True`` (default) it is not a candidate at its own arrival
      step.  It has no observed attention yet because the drop precedes row ``t`` (SPEC section 2), whereas the
      heavy-hitter systems score it with the current row before dropping.  Without this rule the arrival's score 0
      makes ACC drop every new token unless an older token was never attended -- decay then changes nothing at all
      in NM, and the paper's Theorem 2 construction fails (the filler token, not the sleeper, would be dropped).
      ``protect_arrival = False`` gives the literal argmin over ``R_{t-1} U {t}`` (used by GD-A's third Fig. 12
      setting).  In RM the rule is void: the fetched item is admitted after the eviction.

    Cost: ``O(nnz)`` dictionary updates per step and amortized ``O(log k)`` per eviction
    (:class:`policies.decay.RisingKeyHeap`).  Checked against hand-worked NM traces
    (``tests/test_attention_policies.py``) and against a brute-force argmin of the accumulated scores on generated
    traces.  Persistable: the exported state is the score; :meth:`import_state` adds it back on re-admission.
    """

    protect_arrival: bool = True

    name = "ACC"
    signal = "importance"
    models = frozenset({"rm", "nm"})
    citation = ("the paper, Section 5 (Theorem 2); score of Zhang et al., H2O: Heavy-Hitter Oracle, NeurIPS 2023")
    persistable = True

    def __post_init__(self) -> None:
        if not isinstance(self.protect_arrival, bool):
            raise ParameterError(f"policy {self.name}: protect_arrival = {self.protect_arrival!r} must be a bool")

    def _gamma(self) -> float:
        return 1.0

    def on_reset(self) -> None:
        self._decay = LazyDecay(self._gamma())
        self._heap = RisingKeyHeap()
        self._now = 0
        # the latest admission, kept out of the heap while it is protected: (step, item) or None
        self._pending: tuple[int, int] | None = None

    def score(self, item: int) -> float:
        """The current (decayed) score of a resident item."""
        return self._decay.true_value(self._heap.key[item], self._now)

    def _flush(self) -> None:
        if self._pending is not None:
            item = self._pending[1]
            self._heap.add(item, self._heap.key[item])
            self._pending = None

    def on_admit(self, t, item, cost):
        self._now = t
        if self.protect_arrival:
            # the item gets its key now (observations add to it) but no heap entry until it may be evicted
            self._flush()
            self._heap.key[item] = 0.0
            self._pending = (t, item)
        else:
            self._heap.add(item, 0.0)

    def on_observe(self, t, items, weights):
        self._now = t
        decay, heap = self._decay, self._heap
        s = decay.scale(t)
        if s > decay.LIMIT:
            f = decay.renormalize(t)
            heap.rebuild(lambda x: x * f)
            s = 1.0
        key = heap.key
        for i, a in zip(items.tolist(), (weights * s).tolist()):
            key[i] += a

    def on_evict(self, t, item):
        self._heap.remove(item)
        if self._pending is not None and self._pending[1] == item:  # dropped through ``drop`` without ``victim``
            self._pending = None

    def victim(self, t, protected):
        self._now = t
        if self._pending is not None and self._pending[0] < t:
            self._flush()
        return self._heap.min(protected)

    def export_state(self, item):
        return (self.score(item), self._now)

    def import_state(self, t, item, state):
        value, t_saved = state
        g = self._gamma()
        self._heap.key[item] += value * (g ** (t - t_saved)) * self._decay.scale(t)

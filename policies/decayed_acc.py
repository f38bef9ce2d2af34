"""DecayedACC: geometrically decayed accumulated attention (the paper's Lemma 1)."""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.numbers import real

from .acc import ACC
from .registry import register


@register
@dataclass
class DecayedACC(ACC):
    """Evict the resident item with the smallest decayed score ``S_i <- gamma * S_i + a[t, i]``.

    Rule (paper Section 5, Lemma 1): every step multiplies every score by ``gamma`` and adds the observed weight, so
    ``S_i(t) = sum_s gamma^(t-s) a[s, i]``; the victim is the unprotected resident item of least score, ties to the
    smaller item id; the arriving token is handled as in ACC (``protect_arrival``).  A score starts at 0 on
    admission.  ``gamma = 1`` would be ACC, hence ``0 < gamma < 1``;
    the half-life is ``ln 2 / ln(1/gamma)`` steps (``gamma = 0.9``: 6.6 steps).

    The decay is a lazy multiplicative offset (:class:`policies.decay.LazyDecay`): a step is ``O(nnz)``
    dictionary updates plus amortized ``O(log k)`` per eviction, with a rescale of all ``k`` values once every
    ``256 ln 2 / ln(1/gamma)`` steps to stay clear of overflow.  Checked against hand-worked NM traces and against
    a direct ``O(k)``-per-step recomputation of the decayed scores on generated traces
    (``tests/test_attention_policies.py``).  Persistable: the exported state is ``(score, step)``; on re-admission
    the score is restored decayed by ``gamma^(elapsed steps)``.
    """

    gamma: float = 0.9

    name = "DecayedACC"
    signal = "importance"
    citation = "the paper, Section 5 (Lemma 1)"

    def __post_init__(self) -> None:
        super().__post_init__()
        real(self.gamma, f"policy {self.name}: gamma", 0.0, 1.0, open_low=True, open_high=True)

    def _gamma(self) -> float:
        return self.gamma

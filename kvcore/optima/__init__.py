"""Exact offline optima of the two cost models (SPEC section 3), the future-mass heuristic, brute-force references.

``belady``   unit-cost paging, one request per step: furthest-in-future, ``O(T log h)`` (exact by Belady's exchange
             argument, so its result is ``certified``).
``rm_opt``   recompute/paging model with per-request costs and several requests per step: min-cost flow.
``nm_opt``   no-refetch model: min-cost flow with each token's chain contracted to one node, ``O(nnz)`` arcs;
             ``cost`` is the optimum's regret (paper Eq. 4); ``nm_opt_costs`` the same flow with any non-negative
             cost per (step, token) (a dense lower-triangular array, rows need not sum to 1).
``optimum``  dispatcher.
``future_mass_heuristic``  the paper's Section 4 "keep the k tokens with most future mass" rule (NM; not optimal).
``furthest_next_heuristic``  the paper's Section 4 "evict the furthest next above-threshold attention" rule (RM;
             optimal only with unit costs).
``access_graph``  exact competitive ratios of LRU and FIFO on small access graphs (a module of its own).
``brute_rm``, ``brute_nm``  exhaustive references for tiny instances.

Every function takes the cache size as ``capacity`` (``h`` of Eq. 8 when compared with an online policy of size
``k``) and returns an :class:`OptResult`.  Both optima start from an empty cache and count cold misses, like the
engine.
"""

from __future__ import annotations

from ..engine import MODELS
from ..errors import ParameterError
from ..traces import AttentionTrace, PagingTrace, require_trace, rm_requests_from_attention
from .belady import belady
from .brute import brute_nm, brute_rm
from .furthest_next import furthest_next_heuristic
from .future_mass import future_mass_heuristic
from .nm_flow import nm_opt, nm_opt_costs
from .result import OptResult
from .rm_flow import rm_opt

__all__ = ["OptResult", "belady", "brute_nm", "brute_rm", "furthest_next_heuristic", "future_mass_heuristic", "nm_opt",
           "nm_opt_costs", "optimum", "rm_opt"]


def optimum(trace: PagingTrace | AttentionTrace, capacity: int, model: str = "rm", theta: float = 0.1,
            record: bool = False) -> OptResult:
    """The exact offline optimum of ``trace`` in ``model`` with ``capacity`` slots.

    RM on a paging trace: Belady when every step requests one item at cost 1, otherwise :func:`rm_opt`.  RM on an
    attention trace: the requests ``Q_t = {t} U {i < t : a[t, i] >= theta}`` with free arrivals and position-growing
    recompute costs (:func:`kvcore.traces.rm_requests_from_attention`), then :func:`rm_opt`.  NM: :func:`nm_opt`
    (attention traces only).
    """
    require_trace(trace, "trace")
    if model not in MODELS:
        raise ParameterError(f"model = {model!r}: must be one of {MODELS}")
    if model == "nm":
        if not isinstance(trace, AttentionTrace):
            raise ParameterError("model 'nm' needs an attention trace (a paging trace has no attention rows)")
        return nm_opt(trace, capacity, record=record)
    if isinstance(trace, AttentionTrace):
        trace = rm_requests_from_attention(trace, theta)
    elif trace.is_unit_single:
        return belady(trace, capacity, record=record)
    return rm_opt(trace, capacity, record=record)

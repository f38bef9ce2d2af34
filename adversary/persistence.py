"""Persistent attention and the quantities of Theorem 4 (paper Section 7).

Definitions (paper Section 7, reconstructed from its words; 0-based steps):

* heavy set ``H_t(x) = {i : a[t, i] >= x}``;
* light-tail mass ``M_t(tau) = sum_{i : a[t, i] < tau} a[t, i]`` (stored weights; a trace's unattributed
  ``residual`` mass is not included: add ``trace.residual.sum()`` for an upper bound);
* ``(rho, W)``-persistence at threshold ``tau``: every token ``i < t`` with ``a[t, i] >= tau`` had
  ``a[s, i] >= rho * tau`` at some step ``s`` in ``[max(0, t-W), t-1]``.

Convention where the paper is silent: the arriving token ``i = t`` is exempt.  No earlier row can attend it, so
without the exemption row 0 (always ``{0: 1}``) would violate persistence in every trace; in NM the arriving token
is resident when its row is charged unless the policy drops it on purpose.  ``W >= 1`` and ``0 < rho <= 1``.

The Theorem 4 union is taken over ``[t-W, t]`` as the paper writes it (``heavy_union_size``); note that the proof
only needs ``[t-W, t-1]``, the part an online policy can know before step ``t``.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from kvcore import portable_math
from kvcore.engine import make_rng
from kvcore.errors import ParameterError
from kvcore.numbers import integer, real
from kvcore.traces import AttentionTrace

from ._build import attention_from_rows


def _check_persistence_params(rho: float, W: int, tau: float, *, strict_rho: bool = False) -> tuple[float, int,
                                                                                                          float]:
    rho = real(rho, "rho", 0.0, 1.0, open_low=True, open_high=strict_rho)
    W = integer(W, "W", 1)
    tau = real(tau, "tau", 0.0, 1.0, open_low=True)
    return rho, W, tau


# ---------------------------------------------------------------------------------------------------------------------
# Theorem 4's quantities (exact, plain)
# ---------------------------------------------------------------------------------------------------------------------


def persistence_violations(trace: AttentionTrace, rho: float, W: int, tau: float,
                           chain: bool = False) -> list[tuple[int, int]]:
    """All ``(t, i)`` with ``i < t`` and ``a[t, i] >= tau`` that the persistence premise does not cover.

    ``chain=False`` -- the paper's ``(rho, W)``-persistence (Section 7): some ``s`` in ``[t-W, t-1]`` has
    ``a[s, i] >= rho tau``.  ``chain=True`` -- the premise Theorem 4 needs in NM ("chain persistence"): a chain of
    warm steps ``i = s_0 < s_1 < ... < s_m < t`` with ``a[s_j, i] >= rho tau``, consecutive gaps ``<= W`` and
    ``t - s_m <= W`` -- the token was warm at its own arrival row and never went ``W`` rows without being warm.  The
    paper's premise lets a token dropped while cold become heavy later, which no NM policy can undo
    (``adversary.counterexamples.thm4_nm_counterexample``).  Both are one scan keeping each token's last warm step;
    with ``chain`` a warm step only counts when it extends an unbroken chain.
    """
    rho, W, tau = _check_persistence_params(rho, W, tau)
    warm_at: dict[int, int] = {}  # last warm step (of an unbroken chain from the arrival, with chain=True)
    out = []
    for t, idx, w in trace.rows():
        for i, x in zip(idx.tolist(), w.tolist()):
            if i < t and x >= tau and warm_at.get(i, -W - 1) < t - W:
                out.append((t, i))
        for i, x in zip(idx.tolist(), w.tolist()):
            if x >= rho * tau and (not chain or i == t or warm_at.get(i, -W - 1) >= t - W):
                warm_at[i] = t
    return out


def persistence_holds(trace: AttentionTrace, rho: float, W: int, tau: float) -> bool:
    """True iff the trace is ``(rho, W)``-persistent at threshold ``tau`` (module docstring; paper Section 7)."""
    return not persistence_violations(trace, rho, W, tau)


def heavy_union_size(trace: AttentionTrace, rho: float, W: int, tau: float) -> int:
    """``max_t | union_{s in [max(0, t-W), t]} H_s(rho tau) |`` -- the set Theorem 4's budget must hold.

    Exact: a sliding multiset of the window's heavy tokens (add row ``t``'s, remove row ``t-W-1``'s)."""
    rho, W, tau = _check_persistence_params(rho, W, tau)
    x = rho * tau
    heavy = [idx[w >= x].tolist() for _, idx, w in trace.rows()]
    window: Counter[int] = Counter()
    best = 0
    for t, h in enumerate(heavy):
        window.update(h)
        if t - W - 1 >= 0:
            window.subtract(heavy[t - W - 1])
            window += Counter()  # drop tokens whose count fell to zero
        best = max(best, len(window))
    return best


def observed_union_max(trace: AttentionTrace, rho: float, W: int, tau: float) -> int:
    """``max_t |union_{s in [t-W, t-1]} H_s(rho tau)|``: the set R-LRU-H protects at the drop of step ``t`` (the part
    of Theorem 4's union an online policy can know before step ``t``)."""
    if W > 1:  # the windows [t-W, t-1] are the windows [t'-(W-1), t'] of t' = t-1
        return heavy_union_size(trace, rho, W - 1, tau)
    return max((int((w >= rho * tau).sum()) for _, _, w in trace.rows()), default=0)


def attention_sinks(trace: AttentionTrace, min_mass: float = 0.05, min_fraction: float = 0.5,
                    first: int = 16) -> list[int]:
    """Tokens among the first ``first`` that act as attention sinks: they receive at least ``min_mass`` on at least
    ``min_fraction`` of the rows after their arrival (StreamingLLM's sinks: a few initial tokens that absorb a
    share of nearly every row; Xiao et al., ICLR 2024).  Measured from the trace, so a head with one sink yields one
    token and a head without any yields none."""
    min_mass = real(min_mass, "min_mass", 0.0, 1.0, open_low=True)
    min_fraction = real(min_fraction, "min_fraction", 0.0, 1.0, open_low=True)
    rows = np.repeat(np.arange(trace.T), np.diff(trace.indptr))
    out = []
    for i in range(min(integer(first, "first", 1), trace.T - 1)):
        later = (trace.indices == i) & (rows > i) & (trace.weights >= min_mass)
        if np.count_nonzero(later) >= min_fraction * (trace.T - 1 - i):
            out.append(i)
    return out


def tail_mass_per_step(trace: AttentionTrace, tau: float) -> np.ndarray:
    """``M_t(tau) = sum_{i : a[t, i] < tau} a[t, i]`` for every step ``t`` (stored weights only)."""
    tau = real(tau, "tau", 0.0, 1.0, open_low=True)
    rows = np.repeat(np.arange(trace.T), np.diff(trace.indptr))
    light = trace.weights < tau
    return np.bincount(rows[light], weights=trace.weights[light], minlength=trace.T)


def tail_mass(trace: AttentionTrace, tau: float) -> float:
    """``sum_t M_t(tau)``: Theorem 4's regret bound for R-LRU-H (paper Section 7, Eq. 13)."""
    return float(tail_mass_per_step(trace, tau).sum())


# ---------------------------------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------------------------------


_RANK_POWERS: dict[float, np.ndarray] = {}  # exponent -> r^(-s) for r = 1..len, grown on demand


def zipf_weights(n: int, s: float) -> np.ndarray:
    """Zipf weights over ranks ``1..n``: ``r^(-s) / sum_{q=1}^{n} q^(-s)`` (``s = 0`` is uniform).

    The powers are :mod:`kvcore.portable_math`'s and the sum is ``math.fsum``'s, so a trace drawn
    from these weights has the same bits on every machine (numpy's ``**`` differs by CPU in the last bit)."""
    n = integer(n, "n", 1)
    s = real(s, "zipf exponent", 0.0)
    table = _RANK_POWERS.get(s)
    if table is None or table.size < n:  # grown by doubling: a trace asks for n = 1, 2, 3, ... in turn
        size = max(n, 2 * (0 if table is None else table.size))
        table = _RANK_POWERS[s] = portable_math.power(np.arange(1, size + 1, dtype=np.float64), -s)
    w = table[:n]
    return w / math.fsum(w.tolist())


def check_row_masses(sinks, sink_mass, self_mass) -> tuple[int, float, float]:
    """Validate the parameters of :func:`sinks_self_zipf_row` (one-line ParameterError naming the parameter)."""
    sinks = integer(sinks, "sinks", 0)
    sink_mass = real(sink_mass, "sink_mass", 0.0, 1.0)
    self_mass = real(self_mass, "self_mass", 0.0, 1.0)
    if sink_mass + self_mass > 1.0:
        raise ParameterError(f"sink_mass + self_mass = {sink_mass + self_mass}: must be at most 1")
    if sinks == 0 and sink_mass > 0:
        raise ParameterError(f"sink_mass = {sink_mass} with sinks = 0: there is no sink to carry it")
    return sinks, sink_mass, self_mass


def sinks_self_zipf_row(t: int, ranked: list[int], sinks: int, sink_mass: float, self_mass: float,
                        zipf_s: float) -> dict[int, float]:
    """Row ``t``: ``sink_mass`` spread evenly over the first ``min(sinks, t+1)`` tokens, ``self_mass`` on the arriving
    token, and the rest over ``ranked`` (tokens ``<= t``) by Zipf(``zipf_s``) in rank order (on ``t`` if none)."""
    row: dict[int, float] = {}
    present_sinks = min(sinks, t + 1)
    sink_share = sink_mass if present_sinks else 0.0
    for j in range(present_sinks):
        row[j] = row.get(j, 0.0) + sink_share / present_sinks
    rest = 1.0 - sink_share - self_mass
    row[t] = row.get(t, 0.0) + self_mass
    if ranked:
        for i, x in zip(ranked, zipf_weights(len(ranked), zipf_s) * rest):
            row[i] = row.get(i, 0.0) + float(x)
    else:
        row[t] += rest
    return row


def zipf_focus_attention(T: int, *, focus: int = 8, zipf_s: float = 1.1, sinks: int = 1, sink_mass: float = 0.2,
                         self_mass: float = 0.1, churn: float = 0.2, revisit: float = 0.0,
                         seed: int | np.random.Generator | None = 0) -> AttentionTrace:
    """Sparse, slowly changing Zipf-like attention (the benign regime of the paper's Sections 7-8).

    State: a ranked *focus list* of at most ``focus`` earlier tokens (sinks excluded).  At step ``t``, before the
    row is drawn, with probability ``churn`` a token enters the list at a uniformly random rank (the lowest-ranked
    token leaves if the list is full): with probability ``revisit`` a uniformly chosen earlier non-sink token not in
    the list (a long-idle token coming back, which breaks persistence), otherwise the arriving token ``t``.
    Row ``t``: ``sink_mass`` split evenly over the sinks ``0..sinks-1`` that exist; ``self_mass`` on token ``t``;
    the rest spread over the focus list by :func:`zipf_weights` with exponent ``zipf_s`` by rank (onto token ``t``
    while the list is empty).  Entries of the same token add up.  Heavy tokens stay heavy while they stay in the list, which is what makes such traces
    nearly persistent; :func:`persistent_attention` makes them exactly so.  Same seed, same trace.
    """
    T = integer(T, "T", 0)
    focus = integer(focus, "focus", 1)
    sinks, sink_mass, self_mass = check_row_masses(sinks, sink_mass, self_mass)
    churn = real(churn, "churn", 0.0, 1.0)
    revisit = real(revisit, "revisit", 0.0, 1.0)
    rng = make_rng(seed)
    ranked: list[int] = []
    rows: list[dict[int, float]] = []
    for t in range(T):
        if t >= sinks and rng.random() < churn:
            entrant = t
            if rng.random() < revisit:
                idle = np.setdiff1d(np.arange(sinks, t), ranked)
                entrant = int(rng.choice(idle)) if idle.size else t
            ranked.insert(int(rng.integers(0, len(ranked) + 1)), entrant)
            del ranked[focus:]
        rows.append(sinks_self_zipf_row(t, ranked, sinks, sink_mass, self_mass, zipf_s))
    return attention_from_rows(rows, f"zipf_focus_attention(T={T}, focus={focus}, s={zipf_s:g}, sinks={sinks})")


def enforce_persistence(trace: AttentionTrace, rho: float, W: int, tau: float) -> AttentionTrace:
    """The windowed-persistence rule: make a trace ``(rho, W)``-persistent at ``tau`` by capping, not by dropping.

    Rule, row by row in step order: an entry ``a[t, i] >= tau`` with ``i < t`` and no ``s`` in ``[t-W, t-1]`` with
    ``a[s, i] >= rho tau`` (judged on the already-rewritten earlier rows) is cut to ``rho tau``, and the removed
    mass goes to the arriving token ``t`` (exempt from the rule), so the row still sums to 1.  A cut token has mass
    ``rho tau`` at step ``t`` and may be heavy during the next ``W`` steps: it ramps up instead of jumping.  Entries
    that already satisfy the rule are unchanged.  Needs ``rho < 1`` (with ``rho = 1`` nothing lies in
    ``[rho tau, tau)`` and a cut token could never become heavy).
    """
    rho, W, tau = _check_persistence_params(rho, W, tau, strict_rho=True)
    cap = rho * tau
    warm_at: dict[int, int] = {}
    rows: list[dict[int, float]] = []
    for t, idx, w in trace.rows():
        row = dict(zip(idx.tolist(), w.tolist()))
        excess = 0.0
        for i, x in row.items():
            if i < t and x >= tau and warm_at.get(i, -W - 1) < t - W:
                excess += x - cap
                row[i] = cap
        if excess:
            row[t] = row.get(t, 0.0) + excess
        for i, x in row.items():
            if x >= cap:
                warm_at[i] = t
        rows.append(row)
    out = attention_from_rows(rows, f"{trace.source} (persistent rho={rho:g}, W={W}, tau={tau:g})")
    if trace.residual.any():
        out = AttentionTrace(out.indptr, out.indices, out.weights, trace.residual, out.source)
    return out


def cut_unchained(row: dict[int, float], t: int, chained: dict[int, int], cut: float, W: int) -> float:
    """Cut, in place, every earlier token's entry ``>= cut`` in ``row`` (step ``t``) whose chain is broken -- its
    last warm step in ``chained`` is more than ``W`` steps back, or it has none -- to ``cut / 2``; return the mass
    removed.  The shared first step of :func:`enforce_chain_persistence` and
    :func:`adversary.strategies.within_theorem4_premise`."""
    excess = 0.0
    for i, x in row.items():
        if i < t and x >= cut and chained.get(i, -W - 1) < t - W:
            excess += x - cut / 2
            row[i] = cut / 2
    return excess


def enforce_chain_persistence(trace: AttentionTrace, rho: float, W: int, tau: float) -> AttentionTrace:
    """Make a trace satisfy chain persistence (:func:`persistence_violations` with ``chain=True``) by capping.

    Row by row, an earlier token's entry ``>= rho tau`` whose chain is broken is cut to ``rho tau / 2`` (below warm)
    and the removed mass goes to the arriving token, so rows still sum to 1.  Every warm entry of an earlier token
    is then chained, hence every heavy one; entries already chained are unchanged.  Composes with any attention
    strategy (``adversary.strategies``) to draw traces inside Theorem 4's corrected premise.
    """
    rho, W, tau = _check_persistence_params(rho, W, tau)
    cut = rho * tau
    chained: dict[int, int] = {}
    rows = []
    for t, idx, w in trace.rows():
        row = dict(zip(idx.tolist(), w.tolist()))
        excess = cut_unchained(row, t, chained, cut, W)
        if excess:
            row[t] = row.get(t, 0.0) + excess
        for i, x in row.items():
            if x >= cut and (i == t or chained.get(i, -W - 1) >= t - W):
                chained[i] = t
        rows.append(row)
    return attention_from_rows(rows, f"{trace.source} (chain-persistent rho={rho:g}, W={W}, tau={tau:g})")


def stationary_zipf_trace(n: int, s: float, extra: int, stored: int) -> AttentionTrace:
    """Rows of the Fig. 13 model: row ``t`` is Zipf(s) by token id over tokens ``0..min(t, n-1)`` (rank = id, so a
    token is as important at every step: fully persistent); only the top ``stored`` ranks are stored, the rest is
    the row's residual (unattributed mass).  ``n + extra`` rows."""
    n, extra, stored = integer(n, "n", 1), integer(extra, "extra", 0), integer(stored, "stored", 1)
    indptr, idx, wts, res = [0], [], [], []
    for t in range(n + extra):
        m = min(t + 1, n)
        z = zipf_weights(m, s)
        top = min(m, stored)
        idx.extend(range(top))
        wts.extend(z[:top].tolist())
        res.append(float(z[top:].sum()))
        indptr.append(len(idx))
    return AttentionTrace(np.asarray(indptr, dtype=np.int64), np.asarray(idx, dtype=np.int64),
                          np.asarray(wts), np.asarray(res), f"stationary zipf(n={n}, s={s:g})")


def persistent_attention(T: int, rho: float, W: int, tau: float, *, focus: int = 8, zipf_s: float = 1.1,
                         sinks: int = 1, sink_mass: float = 0.2, self_mass: float = 0.1, churn: float = 0.2,
                         revisit: float = 0.3, seed: int | np.random.Generator | None = 0) -> AttentionTrace:
    """A ``(rho, W)``-persistent Zipf-like trace with attention sinks: :func:`zipf_focus_attention` passed through
    :func:`enforce_persistence` (paper Section 7's assumption, realized by construction).  Same seed, same trace."""
    base = zipf_focus_attention(T, focus=focus, zipf_s=zipf_s, sinks=sinks, sink_mass=sink_mass,
                                self_mass=self_mass, churn=churn, revisit=revisit, seed=seed)
    return enforce_persistence(base, rho, W, tau)


def idle_token_spike(trace: AttentionTrace, step: int, mass: float, rho: float, W: int, tau: float,
                     token: int | None = None) -> AttentionTrace:
    """The persistence-violating switch: at ``step`` a long-idle token suddenly takes ``mass >= tau``.

    Row ``step`` is scaled by ``1 - mass`` and ``mass`` is added to ``token``, which must be idle: ``token < step``
    and ``a[s, token] < rho tau`` for every ``s`` in ``[step-W, step-1]``.  Default token: the lowest such id.
    The other rows are unchanged, so ``(step, token)`` is a violation of the result (the retrieval-style failure
    regime the paper's Section 7 excludes).  Shrinking row ``step`` can also remove the warm evidence another
    token relied on, so further violations may appear; :func:`persistence_violations` lists them all.  Traces with
    unattributed residual mass are refused (the scaled row would no longer sum to 1).
    """
    rho, W, tau = _check_persistence_params(rho, W, tau)
    if trace.residual.any():
        raise ParameterError(f"{trace.source}: has unattributed residual mass; a spike needs fully stored rows")
    step = integer(step, "step", 1)
    if step >= trace.T:
        raise ParameterError(f"step = {step}: the trace has only {trace.T} rows")
    mass = float(mass)
    if not (tau <= mass <= 1.0):
        raise ParameterError(f"mass = {mass}: a spike must be heavy, in [tau, 1] = [{tau:g}, 1]")
    recent = set()
    for s in range(max(0, step - W), step):
        idx, w = trace.row(s)
        recent.update(idx[w >= rho * tau].tolist())
    if token is None:
        idle = [i for i in range(step) if i not in recent]
        if not idle:
            raise ParameterError(f"step = {step}: every earlier token was attended >= rho*tau in the last W = {W} "
                                 f"rows; no idle token to spike")
        token = idle[0]
    elif not (0 <= token < step) or token in recent:
        raise ParameterError(f"token = {token}: not an idle token before step {step} (needs a[s, token] < rho*tau "
                             f"for s in [{max(0, step - W)}, {step - 1}])")
    rows = []
    for t, idx, w in trace.rows():
        row = dict(zip(idx.tolist(), w.tolist()))
        if t == step:
            row = {i: x * (1.0 - mass) for i, x in row.items()}
            row[token] = row.get(token, 0.0) + mass
        rows.append(row)
    return attention_from_rows(rows, f"{trace.source} (idle token {token} spiked at step {step})")

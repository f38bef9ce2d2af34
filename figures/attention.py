"""Attention-profile figures: the decoy-and-sleeper construction (Fig. 9) and typical-case regret (Fig. 11)."""

from __future__ import annotations

import numpy as np

from kvcore import formulas as F

from . import _data
from ._style import new_figure, titled
from .registry import figure

# Figure 9's illustrative instance of the Section 5 construction (small enough to read every line).
FIG9_K = 4  # budget: k-1 = 3 decoys + 1 sleeper fill it; the filler forces the first eviction
FIG9_PRIMING = 12  # P
FIG9_EPS = 0.06  # sleeper's total priming mass
FIG9_AFTER = 18  # steps after the filler
FIG9_GAMMA = 0.8


def decoy_sleeper_rows(k: int = FIG9_K, priming: int = FIG9_PRIMING, eps: float = FIG9_EPS,
                       after: int = FIG9_AFTER) -> tuple[np.ndarray, dict[str, list[int]]]:
    """Dense attention rows of the Section 5 construction (columns: decoys 0..k-2, sleeper k-1, filler k).

    Priming steps ``0..P-1``: the sleeper gets ``eps/P`` and each decoy ``(1 - eps/P)/(k-1)``, so the sleeper's
    accumulated mass is ``eps`` and each decoy's ``(P - eps)/(k-1)``.  Step ``P``: the filler arrives and takes
    the whole row (the paper leaves this row open; putting it on the filler keeps it out of every score).  Steps
    ``P+1..P+after``: all mass on the sleeper.  Returns the ``(P + 1 + after) x (k + 1)`` matrix and the token groups.
    """
    rows = np.zeros((priming + 1 + after, k + 1))
    rows[:priming, : k - 1] = (1 - eps / priming) / (k - 1)
    rows[:priming, k - 1] = eps / priming
    rows[priming, k] = 1.0
    rows[priming + 1:, k - 1] = 1.0
    return rows, {"decoy (each)": [0], "sleeper": [k - 1], "filler": [k]}


@figure("9", "fig09_decoy_sleeper", "Decoy and sleeper attention profiles",
        "D_i(t) = sum_{s<=t} gamma^(t-s) a[s,i]",
        "The Theorem 2 construction (paper Section 5).  Left: attention mass per step on a decoy, the sleeper and "
        f"the filler; default instance k = {FIG9_K} ({FIG9_K - 1} decoys), P = {FIG9_PRIMING} priming steps, "
        f"sleeper priming mass eps = {FIG9_EPS}, filler at step P, then all mass on the sleeper.  Right: the scores "
        "an accumulation policy ranks by, D_i(t) = sum_{s<=t} gamma^(t-s) a[s,i], undecayed (gamma = 1, ACC) and "
        f"decayed (gamma = {FIG9_GAMMA}), as the policy observes them: at the first eviction (step P) the sleeper "
        "has the lowest score under both, is evicted, and in the no-refetch model is never observed again, so its "
        "score freezes (dotted: what it would have been if observed).", number=9)
def fig9(data: dict | None = None):
    """Decoy/sleeper profiles and their accumulated scores.

    Data: either ``{"attention": T x n nested list (dense rows), "tokens": {label: index or [indices]}, ...}`` --
    a label's per-step mass is its column (summed over its indices, or averaged for a label ending in "(each)")
    -- or ``{"series": {label: [mass per step, ...]}, ...}``; both accept ``"evict_step": int``, ``"evicted":
    label`` (the group evicted at that step, whose observed score freezes from then on) and ``"gamma": float``.
    Without data the default instance of :func:`decoy_sleeper_rows` is drawn.
    """
    d = _data.mapping("9", data, {"attention", "tokens", "series", "evict_step", "evicted", "gamma"})
    gamma = _data.number("9", "gamma", d.get("gamma", FIG9_GAMMA), positive=True)
    if gamma > 1:
        raise _data.fail("9", f"gamma = {gamma}: must be <= 1")
    if "series" in d:
        if "attention" in d or "tokens" in d:
            raise _data.fail("9", "give either 'series' or 'attention' + 'tokens', not both")
        named = _data.series("9", d, "series")
        lengths = {len(v) for v in named.values()}
        if len(lengths) != 1:
            raise _data.fail("9", f"series have different lengths {sorted(lengths)}")
        labels = list(named)
        per_step = np.array([named[lab] for lab in labels]).T
    else:
        if "attention" in d:
            rows = np.asarray(d["attention"], dtype=np.float64)
            if rows.ndim != 2 or not np.all(np.isfinite(rows)) or (rows < 0).any():
                raise _data.fail("9", "attention must be a 2-D array of finite non-negative numbers")
            groups = d.get("tokens")
            if not isinstance(groups, dict) or not groups:
                raise _data.fail("9", "attention needs 'tokens': {label: index or [indices]}")
            groups = {str(k): ([v] if isinstance(v, int) else list(v)) for k, v in groups.items()}
            for lab, idx in groups.items():
                if not idx or any(not isinstance(i, int) or not 0 <= i < rows.shape[1] for i in idx):
                    raise _data.fail("9", f"tokens[{lab!r}] = {idx}: indices must be in 0..{rows.shape[1] - 1}")
        else:
            rows, groups = decoy_sleeper_rows()
        labels = list(groups)
        per_step = np.stack([rows[:, idx].mean(axis=1) if lab.endswith("(each)") else rows[:, idx].sum(axis=1)
                             for lab, idx in groups.items()], axis=1)
    evict = d.get("evict_step", None if data else FIG9_PRIMING)
    if evict is not None:
        evict = int(_data.number("9", "evict_step", evict, nonneg=True))
    evicted = d.get("evicted", None if data else "sleeper")
    if evicted is not None and (evicted not in labels or evict is None):
        raise _data.fail("9", f"evicted = {evicted!r} needs evict_step and must be one of {labels}")
    steps = np.arange(per_step.shape[0])
    observed = per_step.copy()
    if evicted is not None:
        # No-refetch: an evicted token's attention is never observed again (SPEC section 2, information rule).
        observed[evict + 1:, labels.index(evicted)] = 0.0

    fig = new_figure(12, 4.8, left=0.06, wspace=0.22)
    ax, bx = fig.subplots(1, 2)
    for j, lab in enumerate(labels):
        ax.plot(steps, per_step[:, j], drawstyle="steps-mid", label=lab, color=f"C{j}")
    ax.set_xlabel("decoding step t")
    ax.set_ylabel("attention mass a[t, i] (fraction of the row)")
    ax.set_title("per-step attention mass", fontsize=9)
    undecayed = F.decayed_scores(observed, 1.0)
    decayed = F.decayed_scores(observed, gamma) if gamma < 1 else None
    for j, lab in enumerate(labels):
        bx.plot(steps, undecayed[:, j], color=f"C{j}", label=f"{lab}: gamma = 1 (ACC)")
        if decayed is not None:
            bx.plot(steps, decayed[:, j], color=f"C{j}", ls="--", label=f"{lab}: gamma = {gamma:g}")
    if evicted is not None:
        j = labels.index(evicted)
        bx.plot(steps[evict:], F.decayed_scores(per_step, 1.0)[evict:, j], color=f"C{j}", ls=":", lw=1.2,
                label=f"{evicted} if it were still observed (gamma = 1)")
    bx.set_yscale("symlog", linthresh=0.01)
    bx.set_xlabel("decoding step t")
    bx.set_ylabel("score D_i(t) (attention mass, symlog scale)")
    bx.set_title("observed scores D_i(t) = Σ_{s≤t} γ^(t−s) a[s,i]", fontsize=9)
    for axis in (ax, bx):
        if evict is not None:
            axis.axvline(evict, color="black", ls=":", lw=1)
    if evict is not None:
        ax.annotate("filler arrives:\nfirst eviction", (evict, 0.55), xytext=(6, 0), textcoords="offset points",
                    fontsize=8)
    ax.legend(loc="center right")
    bx.legend(loc="lower right", fontsize=7.5)
    titled(fig, "Figure 9: decoy and sleeper, the attention profiles behind Theorem 2")
    return fig


# Figure 11's stylized persistence model.
FIG11_N = 1024  # context tokens
FIG11_K = 128  # budget
FIG11_WINDOW = 32  # recency floor of the hybrid
FIG11_S = 1.1  # Zipf exponent of every row
FIG11_STEPS = 500


def stylized_regret_rates(n: int = FIG11_N, k: int = FIG11_K, window: int = FIG11_WINDOW,
                          s: float = FIG11_S) -> dict[str, float]:
    """Expected per-step NM regret of three policy families under a stationary, fully persistent Zipf model.

    Model (ours; the paper describes Fig. 11 only as "a stylized persistence model"): every step's row is Zipf(s)
    over the same ``n`` context tokens by a fixed importance rank, and a token's position is independent of its
    rank.  Then (i) a recency window of ``k`` keeps a uniformly placed set, expected regret ``1 - k/n``;
    (ii) a heavy-hitter policy (accumulated or decayed attention, GD-A) holds the top-``k`` ranks once persistence
    has revealed them, regret ``M_tail(s, k)`` = Theorem 4's bound at ``tau*``; (iii) a hybrid with a recency floor
    of ``w`` and ``k - w`` heavy slots, regret ``M_tail(s, k - w) * (1 - w/n)``.
    """
    if not 0 < window < k <= n:
        raise _data.fail("11", f"need 0 < window ({window}) < k ({k}) <= n ({n})")
    return {"recency window (LRU / StreamingLLM)": 1 - k / n,
            "heavy hitters (H2O-style, decayed or not; GD-A)": F.zipf_tail_mass(s, n, k),
            f"recency floor w = {window} + heavy (R-LRU-H)": F.zipf_tail_mass(s, n, k - window) * (1 - window / n)}


@figure("11", "fig11_typical_regret", "Typical-case regret under persistence",
        "R(t) = t * r, r_recency = 1 - k/n, r_heavy = M_tail(s, k), r_hybrid = M_tail(s, k - w) * (1 - w/n)",
        "Cumulative attention-mass regret (Eq. 4) of three policy families under a stylized, stationary "
        f"persistence model: Zipf(s = {FIG11_S}) rows over n = {FIG11_N} context tokens, budget k = {FIG11_K}, "
        f"recency floor w = {FIG11_WINDOW}, positions independent of rank.  R(t) = t * r, r_recency = 1 - k/n, "
        "r_heavy = M_tail(s, k), r_hybrid = M_tail(s, k - w) * (1 - w/n) (lines).  Measured cumulative regret per "
        "policy is drawn over the lines when given.", number=11)
def fig11(data: dict | None = None):
    """Model lines with optional measured regret curves.

    Data: ``{"regret": {policy label: [cumulative regret after step 1, 2, ...]}}`` -- measured NM regret of each
    policy on a persistence workload (cumulative, non-decreasing; the x axis is the step count).
    """
    d = _data.mapping("11", data, {"regret"})
    measured = _data.series("11", d, "regret")
    for label, values in measured.items():
        if any(b < a - 1e-9 for a, b in zip(values, values[1:])):
            raise _data.fail("11", f"regret[{label!r}] is not cumulative (it decreases)")
    fig = new_figure()
    ax = fig.add_subplot()
    t = np.arange(0, FIG11_STEPS + 1)
    for j, (label, rate) in enumerate(stylized_regret_rates().items()):
        ax.plot(t, t * rate, color=f"C{j}", label=f"model: {label}, r = {rate:.3f}/step")
    for j, (label, values) in enumerate(measured.items()):
        steps = np.arange(1, len(values) + 1)
        ax.plot(steps, values, color=f"C{j + 3}", ls="--", lw=1.4, label=f"measured: {label}")
    ax.set_xlabel("decoding step t")
    ax.set_ylabel("cumulative regret R(t) (attention mass)")
    ax.set_title("R(t) = t·r under stationary Zipf persistence", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    titled(fig, "Figure 11: typical-case regret of three policy families under persistence")
    return fig

"""Attention-profile figures: the decoy-and-sleeper construction (Fig. 9) and typical-case regret (Fig. 11)."""

from __future__ import annotations

import numpy as np

from kvcore import formulas as F

from . import _data
from . import _plot as P
from ._style import new_figure, symlog_scale, titled
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


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _fig9_series(data: dict | None) -> dict:
    """Validated Figure 9 input: labels, per-step mass per label, arrival steps, the eviction and gamma."""
    d = _data.mapping("9", data, {"attention", "tokens", "series", "arrivals", "evict_step", "evicted", "evicted_by",
                                  "gamma", "k"})
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
    default = data is None
    arrivals = d.get("arrivals", {"filler": FIG9_PRIMING} if default else {})
    if not isinstance(arrivals, dict) or any(lab not in labels for lab in arrivals):
        raise _data.fail("9", f"arrivals must map labels of {labels} to steps")
    arrivals = {lab: _data.integer("9", f"arrivals[{lab!r}]", t, 0) for lab, t in arrivals.items()}
    evict = d.get("evict_step", FIG9_PRIMING if default else None)
    if evict is not None:
        evict = _data.integer("9", "evict_step", evict, 0)
    evicted = d.get("evicted", "sleeper" if default else None)
    if evicted is not None and (evicted not in labels or evict is None):
        raise _data.fail("9", f"evicted = {evicted!r} needs evict_step and must be one of {labels}")
    k = d.get("k", FIG9_K if default else None)
    if k is not None:
        k = _data.integer("9", "k", k, 2)
    return {"labels": labels, "per_step": per_step, "arrivals": arrivals, "evict": evict, "evicted": evicted,
            "evicted_by": str(d.get("evicted_by", "ACC")), "gamma": gamma, "k": k}


def fig9_notes(data: dict | None) -> list[str]:
    """What the scores say at the first eviction, from the drawn rows: is the evicted group the lowest under both
    scores, and how much attention it draws after it is gone."""
    z = _fig9_series(data)
    evict, evicted = z["evict"], z["evicted"]
    if evict is None or evicted is None or evict == 0:
        return []
    labels, j = z["labels"], z["labels"].index(evicted)
    present = [i for i, lab in enumerate(labels) if z["arrivals"].get(lab, 0) < evict]
    lowest, other = [], []
    for gamma in sorted({1.0, z["gamma"]}, reverse=True):
        scores = F.decayed_scores(z["per_step"], gamma)[evict - 1]
        low = min(present, key=lambda i: scores[i])
        name = f"gamma = {gamma:g}"
        if low == j:
            lowest.append(f"{name} ({scores[j]:.3g})")
        else:
            other.append(f"under {name} the {evicted} has {scores[j]:.3g} but the {labels[low]} only "
                         f"{scores[low]:.3g}")
    out = []
    if lowest:
        out.append(f"Before step {evict} the {evicted} has the lowest score under {_and(lowest)}.")
    if other:
        out.append(f"Before step {evict}, {_and(other)}: the construction's premise fails there.")
    lost = float(z["per_step"][evict:, j].sum())
    out.append(f"{z['evicted_by']} drops the {evicted} at step {evict}; the attention it draws from then on, "
               f"{lost:.3g} in total, is never observed again (no refetch).")
    return out


@figure("9", "fig09_decoy_sleeper", "Decoy and sleeper attention profiles",
        "D_i(t) = sum_{s<=t} gamma^(t-s) a[s,i]",
        "The Theorem 2 construction (paper Section 5).  Left: attention mass per step on a decoy, the sleeper and "
        f"the filler; without data the paper's instance k = {FIG9_K} ({FIG9_K - 1} decoys), P = {FIG9_PRIMING} "
        f"priming steps, sleeper priming mass eps = {FIG9_EPS}, filler at step P, then all mass on the sleeper; with "
        "data, the toolkit's generator (token t arrives at step t).  Vertical lines: the arrivals and the first "
        "eviction.  Right: the scores an accumulation policy ranks by, D_i(t) = sum_{s<=t} gamma^(t-s) a[s,i], "
        f"undecayed (gamma = 1, ACC) and decayed (default gamma = {FIG9_GAMMA}), as the policy observes them: the "
        "evicted token is never observed again in the no-refetch model, so its undecayed score freezes and its "
        "decayed score only fades (dotted: what the undecayed score would have been if observed).  The sentences below the figure read the scores at the eviction.", number=9,
        notes=fig9_notes)
def fig9(data: dict | None = None):
    """Decoy/sleeper profiles and their accumulated scores.

    Data: either ``{"attention": T x n nested list (dense rows), "tokens": {label: index or [indices]}, ...}`` --
    a label's per-step mass is its column (summed over its indices, or averaged for a label ending in "(each)")
    -- or ``{"series": {label: [mass per step, ...]}, ...}``; both accept ``"arrivals": {label: step}`` (drawn as
    vertical lines), ``"evict_step": int``, ``"evicted": label`` (the group evicted at that step, whose observed
    score freezes from then on), ``"evicted_by": str`` (the policy that evicted it), ``"gamma": float`` and
    ``"k": int`` (the budget, for the legend).  Without data the default instance of :func:`decoy_sleeper_rows`
    is drawn.
    """
    z = _fig9_series(data)
    labels, per_step, evict, evicted, gamma = z["labels"], z["per_step"], z["evict"], z["evicted"], z["gamma"]
    steps = np.arange(per_step.shape[0])
    observed = per_step.copy()
    if evicted is not None:
        # No-refetch: an evicted token's attention is never observed again (SPEC section 2, information rule).
        observed[evict:, labels.index(evicted)] = 0.0

    fig = new_figure(13, 5.3, left=0.06, right=0.98, bottom=0.28, top=0.86, wspace=0.2, notes=fig9_notes(data))
    ax, bx = fig.subplots(1, 2)
    for j, lab in enumerate(labels):
        P.step(ax, f"mass/{lab}", steps, per_step[:, j], where="mid", color=f"C{j}", label=lab)
    for lab, t in z["arrivals"].items():
        j = labels.index(lab)
        P.line(ax, f"arrival/{lab}", [t, t], [0, 1.05], color=f"C{j}", ls="--", lw=1, label=f"{lab} arrives (t = {t})")
    ax.set_xlabel("decoding step t")
    ax.set_ylabel("attention mass a[t, i] (fraction of the row)")
    ax.set_ylim(-0.03, 1.08)
    instance = f", k = {z['k']}" if z["k"] else ""
    ax.set_title(f"per-step attention mass{instance}", fontsize=9)
    undecayed = F.decayed_scores(observed, 1.0)
    decayed = F.decayed_scores(observed, gamma) if gamma < 1 else None
    for j, lab in enumerate(labels):
        P.line(bx, f"score/{lab}/gamma=1", steps, undecayed[:, j], color=f"C{j}", label=f"{lab}: gamma = 1 (ACC)")
        if decayed is not None:
            P.line(bx, f"score/{lab}/gamma={gamma:g}", steps, decayed[:, j], color=f"C{j}", ls="--",
                   label=f"{lab}: gamma = {gamma:g}")
    if evicted is not None:
        j = labels.index(evicted)
        P.line(bx, f"unobserved/{evicted}", steps[evict:], F.decayed_scores(per_step, 1.0)[evict:, j], color=f"C{j}",
               ls=":", lw=1.2, label=f"{evicted} if it were still observed (gamma = 1)")
        for axis in (ax, bx):
            axis.axvline(evict, color="black", ls=":", lw=1.2,
                         label=f"{z['evicted_by']} drops the {evicted} (t = {evict})" if axis is ax else None)
    bx.set_yscale(symlog_scale(0.01))
    bx.set_ylim(0, None)
    bx.set_xlabel("decoding step t")
    bx.set_ylabel("score D_i(t) (attention mass, symlog scale)")
    bx.set_title("observed scores D_i(t) = Σ_{s≤t} γ^(t−s) a[s,i]", fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8)
    bx.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=7.5)
    titled(fig, "Figure 9: decoy and sleeper, the attention profiles behind Theorem 2")
    return fig


# Figure 11's stylized persistence model.
FIG11_N = 1024  # context tokens
FIG11_K = 128  # budget
FIG11_WINDOW = 32  # recency floor of the hybrid
FIG11_S = 1.1  # Zipf exponent of every row
FIG11_STEPS = 500
# Measured and stylized regret at the last step within this factor of each other count as agreeing.
FIG11_TOL = 1.25
# The policies each stylized line stands for, as its label names them (compared with the line in the caption).
FIG11_STANDS_FOR = {"recency": ("LRU", "StreamingLLM"), "importance": ("H2O", "ACC", "DecayedACC"),
                    "hybrid": ("R-LRU-H",)}
# The stylized families and the registry signal (policies.registry.SIGNALS) of the policies each one stands for.
FIG11_FAMILIES = {"recency": "recency window (LRU / StreamingLLM)",
                  "importance": "heavy hitters (H2O-style, decayed or not; GD-A)",
                  "hybrid": f"recency floor w = {FIG11_WINDOW} + heavy (R-LRU-H)"}


def stylized_regret_rates(n: int = FIG11_N, k: int = FIG11_K, window: int = FIG11_WINDOW,
                          s: float = FIG11_S) -> dict[str, float]:
    """Expected per-step NM regret of three policy families under a stationary, fully persistent Zipf model.

    Model (ours; the paper describes Fig. 11 only as "a stylized persistence model"): every step's row is Zipf(s)
    over the same ``n`` context tokens by a fixed importance rank, and a token's position is independent of its
    rank.  Then (i) a recency window of ``k`` keeps a uniformly placed set, expected regret ``1 - k/n``;
    (ii) a heavy-hitter policy (accumulated or decayed attention, GD-A) holds the top-``k`` ranks once persistence
    has revealed them, regret ``M_tail(s, k)`` = Theorem 4's bound at ``tau*``; (iii) a hybrid with a recency floor
    of ``w`` and ``k - w`` heavy slots, regret ``M_tail(s, k - w) * (1 - w/n)``.  Keys: the registry signals of
    :data:`FIG11_FAMILIES`.
    """
    if not 0 < window < k <= n:
        raise _data.fail("11", f"need 0 < window ({window}) < k ({k}) <= n ({n})")
    return {"recency": 1 - k / n, "importance": F.zipf_tail_mass(s, n, k),
            "hybrid": F.zipf_tail_mass(s, n, k - window) * (1 - window / n)}


def _fig11_measured(data: dict | None) -> dict:
    d = _data.mapping("11", data, {"regret", "signal", "reference", "k", "trace", "notes"})
    measured = _data.series("11", d, "regret")
    reference = _data.series("11", d, "reference")
    for key, block in (("regret", measured), ("reference", reference)):
        for label, values in block.items():
            if any(b < a - 1e-9 for a, b in zip(values, values[1:])):
                raise _data.fail("11", f"{key}[{label!r}] is not cumulative (it decreases)")
    signal = d.get("signal", {})
    if not isinstance(signal, dict) or any(signal.get(lab) not in FIG11_FAMILIES for lab in measured):
        raise _data.fail("11", f"signal must give every regret label one of {sorted(FIG11_FAMILIES)}")
    k = d.get("k")
    if measured and k is None:
        raise _data.fail("11", "measured regret needs 'k' (the budget it was measured at)")
    return {"regret": measured, "signal": {lab: signal[lab] for lab in measured}, "reference": reference,
            "k": None if k is None else _data.integer("11", "k", k),
            "trace": str(d.get("trace", "measured trace")), "notes": _data.sentences("11", d)}


def _identical(series: dict[str, list[float]]) -> list[list[str]]:
    """Groups of labels whose curves are equal at every step (each group in first-seen order)."""
    groups: dict[tuple, list[str]] = {}
    for label, values in series.items():
        groups.setdefault(tuple(np.round(values, 9)), []).append(label)
    return list(groups.values())


def fig11_notes(data: dict | None) -> list[str]:
    """The measured trace; every policy a stylized line stands for (:data:`FIG11_STANDS_FOR`) whose measured
    regret at the last step is more than FIG11_TOL away from the line at that step, with both numbers; curves that
    coincide; the references' final regret."""
    z = _fig11_measured(data)
    if not z["regret"]:
        return []
    T = len(next(iter(z["regret"].values())))
    out = [f"Panels (b)-(d): {z['trace']}, k = {z['k']}."]
    gaps = False
    for family, rate in stylized_regret_rates().items():
        model = rate * T
        far = []
        for name in FIG11_STANDS_FOR[family]:
            if name in z["regret"]:
                got = z["regret"][name][-1]
                factor = max(model, got) / max(min(model, got), 1e-12)
                if factor > FIG11_TOL:
                    far.append(f"{name} {got:.1f} ({factor:.1f} times {'less' if got < model else 'more'})")
        if far:
            gaps = True
            out.append(f"At t = {T} the stylized {family} line (n = {FIG11_N}, k = {FIG11_K}) reaches {model:.1f}; "
                       f"measured at k = {z['k']}: {_and(far)}.")
    if gaps:
        out.append("The stylized model assumes ranks independent of position over a fixed context of n tokens; the "
                   "measured trace does not, so panel (a) is no prediction for panels (b)-(d).")
    for group in _identical(z["regret"]):
        if len(group) > 1:
            out.append(f"{_and(group)} have the same regret at every step on this trace.")
    for label, values in z["reference"].items():
        out.append(f"At t = {len(values)}, {label}: {values[-1]:.2f}.")
        mine = z["regret"].get("R-LRU-H")
        if "bound" in label.lower() and mine is not None and mine[-1] > values[-1] * (1 + 1e-9):
            out.append(f"R-LRU-H's measured regret, {mine[-1]:.2f}, exceeds this bound.")
    return out + z["notes"]


@figure("11", "fig11_typical_regret", "Typical-case regret under persistence",
        "R(t) = t * r, r_recency = 1 - k/n, r_heavy = M_tail(s, k), r_hybrid = M_tail(s, k - w) * (1 - w/n)",
        "Cumulative attention-mass regret (Eq. 4).  (a) Three policy families under a stylized, stationary "
        f"persistence model: Zipf(s = {FIG11_S}) rows over n = {FIG11_N} context tokens, budget k = {FIG11_K}, "
        f"recency floor w = {FIG11_WINDOW}, positions independent of rank.  R(t) = t * r, r_recency = 1 - k/n, "
        "r_heavy = M_tail(s, k), r_hybrid = M_tail(s, k - w) * (1 - w/n).  (b)-(d) When measured: every "
        "deterministic no-refetch policy of the registry, grouped by its declared signal (recency, importance, "
        "hybrid), on one persistent trace, with the exact optimum and the reference policies LRU and ACC (the "
        "attention-count LFU) in grey.  Curves that coincide share one line; the sentences below the figure give the "
        f"gaps larger than a factor {FIG11_TOL:g} between the stylized lines and the measurement.", number=11,
        notes=fig11_notes)
def fig11(data: dict | None = None):
    """Model lines with optional measured regret curves.

    Data: ``{"regret": {policy: [cumulative regret after step 1, 2, ...]}, "signal": {policy: "recency" |
    "importance" | "hybrid"}, "reference": {label: [cumulative regret, ...]}, "k": int, "trace": str}`` -- measured
    NM regret of each policy on one trace (cumulative, non-decreasing; the x axis is the step count), drawn in the
    panel of its signal; ``reference`` curves (e.g. the exact optimum, a bound) are drawn in every measured panel.
    """
    z = _fig11_measured(data)
    measured = bool(z["regret"])
    fig = new_figure(13, 12 if measured else 5.2, left=0.06, right=0.98, top=0.93 if measured else 0.86,
                     bottom=0.15 if measured else 0.3, wspace=0.2, hspace=0.62, notes=fig11_notes(data))
    panels = fig.subplots(2, 2).ravel() if measured else [fig.add_subplot()]
    ax = panels[0]
    t = np.arange(0, FIG11_STEPS + 1)
    for j, (family, rate) in enumerate(stylized_regret_rates().items()):
        P.line(ax, f"model/{family}", t, t * rate, color=f"C{j}",
               label=f"{FIG11_FAMILIES[family]}: r = {rate:.3f}/step")
    ax.set_xlabel("decoding step t")
    ax.set_ylabel("cumulative regret R(t) (attention mass)")
    ax.set_title(f"(a) stylized model: R(t) = t·r, n = {FIG11_N}, k = {FIG11_K}, s = {FIG11_S}", fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8)
    if measured:
        _fig11_measured_panels(panels[1:], z)
    titled(fig, "Figure 11: typical-case regret of three policy families under persistence")
    return fig


def _fig11_measured_panels(axes, z: dict) -> None:
    """Panels (b)-(d): one per signal, its policies in colour (coinciding curves merged), references in grey."""
    grey = {"LRU": ("#9a9a9a", "--"), "ACC": ("#9a9a9a", "-.")}
    for letter, ax, family in zip("bcd", axes, FIG11_FAMILIES):
        members = {lab: v for lab, v in z["regret"].items() if z["signal"][lab] == family}
        for j, group in enumerate(_identical(members)):
            values = members[group[0]]
            P.line(ax, f"measured/{family}/{' = '.join(group)}", np.arange(1, len(values) + 1), values,
                   color=f"C{j}", lw=2.2 if len(group) > 1 else 1.6, label=" = ".join(group))
        for name, (color, style) in grey.items():
            if name in z["regret"] and name not in members:
                values = z["regret"][name]
                P.line(ax, f"reference/{family}/{name}", np.arange(1, len(values) + 1), values, color=color, ls=style,
                       lw=1.2, label=f"{name} (reference, {z['signal'][name]})")
        for i, (label, values) in enumerate(z["reference"].items()):
            if "bound" in label.lower() and family != "hybrid":
                continue
            P.line(ax, f"reference/{family}/{label}", np.arange(1, len(values) + 1), values, color="black",
                   ls=(":" if i == 0 else (0, (5, 2, 1, 2))), lw=1.4, label=label)
        ax.set_yscale(symlog_scale(1.0))
        ax.set_ylim(0, None)
        ax.set_xlabel("decoding step t")
        ax.set_ylabel("cumulative regret R(t) (symlog scale)")
        ax.set_title(f"({letter}) measured: policies declaring signal '{family}', k = {z['k']}", fontsize=9)
        long = max(len(t.get_label()) for t in ax.get_lines()) > 48
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1 if long else 2, fontsize=7.5)

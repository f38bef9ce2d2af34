"""What each run of a prompt is charged on the full-cache rows: its NM regret (paper Eq. 4) and value-weighted cost
per layer and KV head (:mod:`realtrace.quality.run`, module docstring, ``regret_*`` and ``value_*``)."""

from __future__ import annotations

import numpy as np

from .aggregate import SCOPES


def charged(ref, drops: list[np.ndarray], budgets: list[int]) -> list[dict]:
    """The charges of each schedule ``drops[r]`` ``(L, H, T)`` (run at ``budgets[r]``) on the complete rows of the
    full-cache pass: its NM regret (Eq. 4) and its value-weighted cost on the same entries (each lost ``a[t, i]``
    times ``||v_i - o_t||``, :mod:`realtrace.quality.value_cost`), per run the ``stream`` and ``answer`` means per
    layer and KV head ``(L, H)`` and ``regret_total`` ``(L, H)``, the sum over all steps.  Each head's rows and value
    costs are computed once for every schedule of the prompt (:func:`realtrace.quality.exact.charge_many`; nothing
    unattributed), and reduced at once, so memory does not grow with steps x runs."""
    from .exact import charge_many
    from .value_cost import value_costs

    T, a0 = ref.T, ref.prompt.n_prompt - 1
    stacked = np.stack(drops)
    out = [{f"{name}_{scope}": np.zeros((ref.L, ref.H)) for name in ("regret", "value") for scope in SCOPES}
           | {"regret_total": np.zeros((ref.L, ref.H))} for _ in drops]
    for layer in range(ref.L):
        for g in range(ref.H):
            rows = ref.rows(layer, g).numpy()
            per_head = {"regret": charge_many(rows, stacked[:, layer, g]),
                        "value": charge_many(value_costs(rows, ref.values(layer, g)), stacked[:, layer, g])}
            for r, k in enumerate(budgets):
                for name, per_step in per_head.items():
                    for scope, r0 in (("stream", k), ("answer", a0)):
                        out[r][f"{name}_{scope}"][layer, g] = per_step[r, r0:T - 1].mean()
                out[r]["regret_total"][layer, g] = per_head["regret"][r].sum()
    return out


def add_charges(out: dict, charges: dict, gap: np.ndarray | None) -> None:
    """Fill in a run's charges on the full-cache rows (:func:`charged`): the stream and answer means per layer and KV
    head, ``regret_sum`` and, for an optimum, ``opt_lower``."""
    total = charges.pop("regret_total")
    out.update(charges)
    out["regret_sum"] = float(total.sum())
    out["opt_lower"] = None if gap is None else float(total.sum() - gap.sum())


__all__ = ["add_charges", "charged"]

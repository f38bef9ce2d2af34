"""What each run of a prompt is charged on the full-cache rows: its NM regret (paper Eq. 4) and value-weighted cost
per layer and KV head (:mod:`realtrace.quality.run`, module docstring, ``regret_*`` and ``value_*``)."""

from __future__ import annotations

import numpy as np

from .aggregate import SCOPES


class Charges:
    """The charges of ``R`` schedules of one prompt (run at ``budgets[r]``) on the complete rows of the full-cache
    pass, filled head by head (:meth:`add_head`): per run the NM regret (Eq. 4) and the value-weighted cost on the
    same entries (each lost ``a[t, i]`` times ``||v_i - o_t||``, :mod:`realtrace.quality.value_cost`), their
    ``stream`` and ``answer`` means per layer and KV head ``(L, H)`` and ``regret_total`` ``(L, H)``, the sum over all
    steps (``out``, one dict per run).  Each head's rows and value costs serve every schedule at once
    (:func:`realtrace.quality.exact.charge_many`; nothing unattributed) and are reduced at once, so memory does not
    grow with steps x runs."""

    def __init__(self, ref, budgets: list[int]):
        self.ref, self.budgets = ref, list(budgets)
        self.out = [{f"{name}_{scope}": np.zeros((ref.L, ref.H)) for name in ("regret", "value") for scope in SCOPES}
                    | {"regret_total": np.zeros((ref.L, ref.H))} for _ in self.budgets]
        self.heads = np.zeros((ref.L, ref.H), dtype=bool)

    def add_head(self, layer: int, g: int, rows: np.ndarray, drops: np.ndarray) -> None:
        """Charge the ``R`` drop vectors ``drops`` ``(R, T)`` of layer ``layer``, KV head ``g`` on its complete
        ``rows`` ``(T, T)``."""
        from .exact import charge_many
        from .value_cost import value_costs

        T, a0 = self.ref.T, self.ref.prompt.n_prompt - 1
        per_head = {"regret": charge_many(rows, drops),
                    "value": charge_many(value_costs(rows, self.ref.values(layer, g)), drops)}
        for r, k in enumerate(self.budgets):
            for name, per_step in per_head.items():
                for scope, r0 in (("stream", k), ("answer", a0)):
                    self.out[r][f"{name}_{scope}"][layer, g] = per_step[r, r0:T - 1].mean()
            self.out[r]["regret_total"][layer, g] = per_head["regret"][r].sum()
        self.heads[layer, g] = True

    @property
    def complete(self) -> bool:
        """Every layer and KV head charged."""
        return bool(self.heads.all())


def charged(ref, drops: list[np.ndarray], budgets: list[int]) -> list[dict]:
    """:attr:`Charges.out` of the schedules ``drops[r]`` ``(L, H, T)`` (run at ``budgets[r]``), each head's rows
    made here."""
    charges, stacked = Charges(ref, budgets), np.stack(drops)
    for layer in range(ref.L):
        for g in range(ref.H):
            charges.add_head(layer, g, ref.rows(layer, g).numpy(), stacked[:, layer, g])
    return charges.out


def add_charges(out: dict, charges: dict, gap: np.ndarray | None) -> None:
    """Fill in a run's charges on the full-cache rows (:func:`charged`): the stream and answer means per layer and KV
    head, ``regret_sum`` and, for an optimum, ``opt_lower``."""
    total = charges.pop("regret_total")
    out.update(charges)
    out["regret_sum"] = float(total.sum())
    out["opt_lower"] = None if gap is None else float(total.sum() - gap.sum())


__all__ = ["Charges", "add_charges", "charged"]

"""What a quality run reads back from the on-disk cache instead of computing it again (issue 29): an optimum's
schedules, an open-loop pass's metrics, a compiled closed-loop run (entries and keys:
:mod:`realtrace.quality.cache`).  Each function counts what it read on the reference (``optima_cached``,
``passes_cached``, ``runs_cached``), and computes and stores what is missing with the function it is given, so the
run (:func:`realtrace.quality.run._one_run`) decides what a pass is and this module only where it comes from."""

from __future__ import annotations

import json

import numpy as np

from .cache import closed_loop_key, optimum_key, pass_key
from .optima import opt_schedules

PASS_ARRAYS = ("kl", "dnll", "top1", "argmax", "error", "displaced")  # a pass's metrics, in the run's order


def optima(ref, name: str, opt_top: int | None, each_head=None, notes: dict | None = None) -> dict:
    """The optimum ``name`` at every budget of the prompt (:func:`realtrace.quality.optima.opt_schedules`): each
    budget's read from the cache where it holds it, the others solved together (``each_head`` receiving each head's
    rows and solved drops, as :func:`realtrace.quality.optima.mass_optima` gives them) and stored; ``notes[k]``
    (optional) receives each budget's notes (a certificate, stored beside the schedule as JSON)."""
    keys = {k: optimum_key(ref.key, name, k, opt_top) for k in ref.budgets}
    found = {k: ref.store.read("optimum", key) for k, key in keys.items()}
    out = {k: (arrays["drop"], arrays.get("gap")) for k, arrays in found.items() if arrays is not None}
    if notes is not None:
        notes.update({k: json.loads(str(arrays["notes"])) for k, arrays in found.items()
                      if arrays is not None and "notes" in arrays})
    ref.optima_cached += len(out)
    missing = [k for k in ref.budgets if k not in out]
    if missing:
        made: dict = {}
        for k, (drops, gap) in opt_schedules(ref, name, missing, opt_top, each_head, made).items():
            extra = {} if not made.get(k) else {"notes": np.array(json.dumps(made[k]))}
            ref.store.write("optimum", keys[k], {"drop": drops, **({} if gap is None else {"gap": gap}), **extra})
            out[k] = drops, gap
        if notes is not None:
            notes.update({k: v for k, v in made.items() if v})
    return out


def open_loop_pass(ref, drops: np.ndarray, start: int, replayed) -> tuple:
    """The metrics (:data:`PASS_ARRAYS`, in order) of the pass of the open-loop schedule ``drops`` from row
    ``start``: stored under the schedule, or ``replayed()`` and stored."""
    arrays, status = ref.store.fetch("pass", pass_key(ref.key, drops, start),
                                     lambda: dict(zip(PASS_ARRAYS, replayed())))
    ref.passes_cached += status == "cached"
    return tuple(arrays[name] for name in PASS_ARRAYS)


def closed_loop_run(ref, plan, cfg, k: int, seed: int, top: int | None, replayed) -> tuple:
    """The metrics (:data:`PASS_ARRAYS`) and the schedule ``(L, H, T)`` of the closed-loop ``plan`` of ``cfg`` at
    budget ``k``, from ``replayed()`` (which fills ``plan.drops``): read from the cache, or computed and stored, when
    every layer runs a compiled rule (:meth:`realtrace.quality.replay.ClosedLoop.runs_compiled`); always computed
    otherwise."""
    def run() -> dict:
        made = dict(zip(PASS_ARRAYS, replayed()))
        return {**made, "drop": np.stack([plan.drops[layer] for layer in range(ref.L)])}

    if plan.runs_compiled():
        arrays, status = ref.store.fetch("run", closed_loop_key(ref.key, cfg.spec, cfg.params, k, seed, top), run)
        ref.runs_cached += status == "cached"
    else:
        arrays = run()
    return tuple(arrays[name] for name in (*PASS_ARRAYS, "drop"))


__all__ = ["PASS_ARRAYS", "closed_loop_run", "open_loop_pass", "optima"]

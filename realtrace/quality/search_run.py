"""The output-driven search (:mod:`realtrace.quality.search`) on a prompt in the model (needs the ``[real]`` extra):
the start is an optimum of :mod:`realtrace.quality.optima` (``OPT`` by default, on complete rows), the measurement
the quality replay's answer KL.

:class:`AnswerKL` measures a schedule exactly as ``quality`` does (:func:`realtrace.quality.run._replayed` from the
schedule's first drop, through the on-disk cache, :func:`realtrace.quality.stored.open_loop_pass`): the mean over
the answer rows (``n_prompt - 1 .. T - 2``, the rows that predict the answer) of ``KL(full || evicted)``, so the
number is ``quality``'s ``kl_answer`` for the same schedule (a saved schedule replayed by ``quality file:PATH``
reads the same pass).  A pass read from the cache counts against the budget like a computed one: the result does
not depend on what the cache holds.

:func:`search_prompt` runs the search at every budget of one prompt and reports, per budget, the start's and the best
schedule's answer KL, whether each answers right, their NM regret on complete rows (summed over every layer, KV
head and step; the start's is the optimum's when it is ``OPT``, so the best schedule's can only be higher), the
passes spent and CPU seconds, and the gap ``start KL - best KL`` -- a lower bound on how far the surrogate's
optimum is from the output optimum, whose answer KL is at most the best found (:mod:`realtrace.quality.search`).
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from .metrics import answer_right, scope_mean
from .schedule import first_drop
from .search import answer_weights, output_search


class AnswerKL:
    """``measure(drops)``: the answer KL of the open-loop schedule ``drops`` ``(L, H, T)`` on the prompt of
    ``ref`` (module docstring); :attr:`right` keeps, per schedule measured, whether the answer is right."""

    def __init__(self, lm, ref):
        self.lm, self.ref = lm, ref
        self.first = ref.prompt.n_prompt - 1
        self.right: dict[str, bool] = {}

    def __call__(self, drops: np.ndarray) -> float:
        from . import stored
        from .run import _replayed

        ref, start = self.ref, first_drop(drops)
        kl, _, _, argmax, _, _ = stored.open_loop_pass(ref, drops, start,
                                                       lambda: _replayed(self.lm, ref, drops, None, start))
        self.right[digest(drops)] = answer_right(argmax[self.first:], ref.targets[self.first:])
        return scope_mean(kl, self.first, ref.T - 1)


def digest(drops: np.ndarray) -> str:
    """The SHA-256 of a schedule's values as int64 (how the cache keys a pass)."""
    return hashlib.sha256(np.ascontiguousarray(drops, dtype=np.int64)).hexdigest()


def regret_sum(ref, drops: np.ndarray) -> float:
    """The NM regret (paper Eq. 4) of ``drops`` on the complete full-cache rows, summed over every layer, KV head
    and step (:func:`realtrace.quality.exact.charge`)."""
    from .exact import charge

    return float(sum(charge(ref.rows(layer, g), drops[layer, g]).sum()
                     for layer in range(ref.L) for g in range(ref.H)))


def search_prompt(lm, ref, start_name: str, passes: int, seed: int, batch: int, say=None
                  ) -> list[tuple[dict, np.ndarray]]:
    """The search at every budget of ``ref`` (module docstring), from the optimum ``start_name``: per budget the
    result as a JSON-able dict and the best schedule ``(L, H, T)``; ``say`` (optional) hears each budget's
    progress."""
    from . import stored

    say = say or (lambda msg: None)
    first, stop = ref.prompt.n_prompt - 1, ref.T - 1
    weights = [[answer_weights(ref.rows(layer, g).numpy(), ref.values(layer, g), first, stop) for g in range(ref.H)]
               for layer in range(ref.L)]
    optima = stored.optima(ref, start_name, None)
    measure = AnswerKL(lm, ref)
    out = []
    for k in ref.budgets:
        start = optima[k][0]
        c0 = time.process_time()
        res = output_search(start, measure, weights, first, passes, seed, batch)
        cpu = time.process_time() - c0
        row = {"prompt": ref.prompt.name, "tokens": ref.T, "answer_tokens": ref.T - ref.prompt.n_prompt,
               "budget": k, "start": start_name, "passes": res.passes, "seed": seed, "batch": batch,
               "cpu_seconds": round(cpu, 1), "start_kl": res.start_kl, "best_kl": res.kl, "gap": res.gap,
               "accepted": sum(accepted for _, _, accepted in res.history), "exchanges": len(res.exchanges),
               "start_right": measure.right.get(digest(start)), "best_right": measure.right.get(digest(res.drops)),
               "start_regret_sum": regret_sum(ref, start), "best_regret_sum": regret_sum(ref, res.drops),
               "history": [{"kl": kl, "batch": size, "accepted": acc} for kl, size, acc in res.history]}
        out.append((row, res.drops))
        say(f"  {ref.prompt.name} K = {k}: answer KL {_num(res.start_kl)} -> {_num(res.kl)} after {res.passes} "
            f"passes, {len(res.exchanges)} exchanges kept ({cpu:.0f} s CPU)")
    return out


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


__all__ = ["AnswerKL", "digest", "regret_sum", "search_prompt"]

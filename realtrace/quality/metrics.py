"""Output-quality metrics of an evicted run against the full cache on the same tokens (pure numpy; no torch).

Both runs are teacher-forced on the same ids ``x_0 .. x_{T-1}``; row ``t`` of a run's logits is its next-token
distribution after ``x_0 .. x_t`` (it predicts ``x_{t+1}``).  With ``p`` the full cache's distribution and ``q`` the
evicted run's at the same row (both ``softmax`` of the logits, computed in float64 from float32 logits):

* ``kl[t] = KL(p || q) = sum_v p(v) (log p(v) - log q(v))`` -- nats, ``>= 0``, 0 iff ``q = p`` (``0 log 0 = 0``);
  the direction that charges the evicted run for every token the full model finds likely;
* ``nll[t] = -log q(x_{t+1})`` and ``dnll[t] = nll[t] - nll_full[t]``: the change in negative log-likelihood of the
  reference continuation (positive: eviction made the reference less likely);
* ``top1[t] = [argmax q == argmax p]`` (argmax takes the first maximum, as numpy and torch do);
* a task answer ``x_{a}, ..., x_{T-1}`` is *right* when every teacher-forced argmax over it is the reference token,
  ``argmax q_{t} = x_{t+1}`` for ``t = a-1 .. T-2`` (greedy exact match, equivalent because a greedy decoder that
  emitted the right tokens so far sees exactly the teacher-forced prefix).

Scopes (:func:`scope_mean`): a metric is averaged over a range of rows, e.g. the rows after the budget binds or the
rows that predict the answer.  Before a schedule drops anything the evicted run *is* the full cache, so those rows
contribute exact zeros (the replay makes them bit-identical, :mod:`realtrace.quality.replay`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvcore.errors import ParameterError


@dataclass
class StepMetrics:
    """Per-row metrics of one block of rows (module docstring); arrays of equal length."""

    kl: np.ndarray
    nll_full: np.ndarray
    nll: np.ndarray
    top1: np.ndarray
    argmax: np.ndarray

    @property
    def dnll(self) -> np.ndarray:
        return self.nll - self.nll_full

    @staticmethod
    def concat(blocks: list[StepMetrics]) -> StepMetrics:
        return StepMetrics(*(np.concatenate([getattr(b, f) for b in blocks])
                             for f in ("kl", "nll_full", "nll", "top1", "argmax")))


def step_metrics(logp_full: np.ndarray, logp: np.ndarray, targets: np.ndarray) -> StepMetrics:
    """Metrics of the rows ``logp`` (the evicted run's log-probabilities, ``log_softmax`` of its logits) against
    ``logp_full`` (the full cache's, same rows), with ``targets[r]`` the reference next token of row ``r``.

    Computed in the inputs' precision (the replay passes float32, so a KL below about 1e-6 nats is rounding); the
    sums run over the vocabulary in one reduction per row."""
    logp_full, logp = np.asarray(logp_full), np.asarray(logp)
    targets = np.asarray(targets, dtype=np.int64)
    if logp.shape != logp_full.shape or logp.ndim != 2 or targets.shape != logp.shape[:1]:
        raise ParameterError(f"step_metrics: shapes {logp_full.shape}, {logp.shape} and targets {targets.shape} "
                             "do not match (rows x vocabulary, one target per row)")
    p = np.exp(logp_full)
    diff = logp_full - logp
    if not (p > 0).all():  # 0 log 0 = 0: a token the full model rules out (log p = -inf) contributes nothing
        diff = np.where(p > 0, diff, 0.0)
    kl = np.einsum("ij,ij->i", p, diff)
    rows = np.arange(targets.size)
    arg = logp.argmax(axis=1)
    return StepMetrics(np.maximum(kl, 0.0), -logp_full[rows, targets], -logp[rows, targets],
                       arg == logp_full.argmax(axis=1), arg)


def answer_right(argmax: np.ndarray, answer: np.ndarray) -> bool:
    """True when the teacher-forced argmax of every row predicting the answer is the answer token (greedy exact
    match); ``argmax`` are those rows' argmaxes, in order."""
    argmax, answer = np.asarray(argmax), np.asarray(answer)
    if argmax.shape != answer.shape or answer.size == 0:
        raise ParameterError(f"answer_right: {argmax.size} predictions for {answer.size} answer tokens")
    return bool((argmax == answer).all())


def scope_mean(values: np.ndarray, start: int, stop: int) -> float | None:
    """Mean of ``values[start:stop]`` (None for an empty scope)."""
    part = np.asarray(values[start:stop], dtype=np.float64)
    return float(part.mean()) if part.size else None


__all__ = ["StepMetrics", "answer_right", "scope_mean", "step_metrics"]

"""The rows a press run is charged on (issue 27): by default the complete attention rows of the full cache,
recomputed with the model on the trace set's own tokens, so nothing is unattributed; with ``rows="stored"`` the
top-k entries the trace set stores, each row's residual left unattributed (needs the ``[real]`` extra for
complete rows; importing this module does not).

Complete rows.  One full-cache pass of the model over the trace set's tokens (:func:`realtrace.quality.replay.replay`
with nothing dropped, keeping every layer's queries and keys), then per trace (layer ``l``, KV head ``g``) the
head-mean causal attention ``a[t, i] = mean_h softmax_{j <= t}(q_h[t] . k[j] * scale)_i`` over the query heads
sharing ``g``, renormalised in float64 -- the capture's reduction (:func:`realtrace.quality.exact.head_rows`) --
kept as a trace with every entry and residual 0 (:func:`realtrace.quality.exact.rows_trace`).  The same rows are the
quality study's reference (:mod:`realtrace.quality.exact`).  The pass runs once per process and trace set
(a leaderboard charges every press on the same rows).

The check.  The recomputed rows must be the attention the trace set captured: every stored entry is compared with
the recomputed one, the largest absolute difference is reported (``max_stored_deviation``) and a difference above
:data:`STORED_TOLERANCE` stops the run in one line (a trace set of another model, prompt or reduction).  The capture
and the recomputation differ only by float32 rounding (the capture's blocked eager attention, the replay's fused
kernel, carried through the layers): at most 1.1e-6 on the committed set, exactly 0 at layer 0.

When stored rows.  Only on request (``--rows stored``): to reproduce the numbers of the stored-row charging, or for
a trace set too long for complete rows (``T (T + 1) / 2`` entries per trace: 190,653 at T = 617, 32.7 million at
T = 8,087) or one whose rows the check refuses.  Those runs report ``[regret, regret + unattributed]``.
"""

from __future__ import annotations

import numpy as np

from kvcore.errors import KVToolkitError, ParameterError
from kvcore.traces import AttentionTrace

ROW_KINDS = ("complete", "stored")
STORED_TOLERANCE = 1e-4  # largest |stored - recomputed| weight accepted (measured: 1.1e-6 on the committed set)

COMPLETE_NOTE = ("charged on the complete attention rows of the full cache, recomputed with the model on the trace "
                 "set's tokens (every entry: nothing unattributed); rows of the prefill are charged to no one")
STORED_NOTE = ("only what the trace stores is charged (--rows stored): each row's residual (entries below its top-k "
               "cut) is attributed to no position, so a true regret lies in [regret, regret + unattributed]; rows of "
               "the prefill are charged to no one")


def charged_note(rows: str) -> str:
    """What a run with row kind ``rows`` charges (:data:`ROW_KINDS`)."""
    if rows not in ROW_KINDS:
        raise ParameterError(f"--rows {rows}: must be one of {', '.join(ROW_KINDS)}")
    return COMPLETE_NOTE if rows == "complete" else STORED_NOTE


def stored_deviation(stored: AttentionTrace, rows: np.ndarray) -> float:
    """Largest ``|rows[t, i] - w|`` over the stored entries ``(t, i, w)`` of ``stored`` (0 when none)."""
    if not stored.weights.size:
        return 0.0
    t = np.repeat(np.arange(stored.T), np.diff(stored.indptr))
    return float(np.abs(rows[t, stored.indices] - stored.weights).max())


_COMPLETE: dict[tuple, tuple[dict[str, AttentionTrace], float]] = {}


def complete_traces(lm, ts, ids: list[int]) -> tuple[dict[str, AttentionTrace], float]:
    """``({trace name: complete trace}, max stored deviation)`` of trace set ``ts`` (module docstring), computed once
    per process for the same set and tokens; a deviation above :data:`STORED_TOLERANCE` is a one-line error."""
    key = (str(ts.source), tuple(ids))
    if key not in _COMPLETE:
        from ..quality.exact import head_rows, rows_trace
        from ..quality.replay import replay

        cfg = lm.model.config
        full, _ = replay(lm, list(ids), None, cfg.num_hidden_layers, cfg.num_key_value_heads, keep_qkv=True)
        scaling = lm.model.model.layers[0].self_attn.scaling
        out, worst = {}, 0.0
        for name in ts.names():
            query, keys, _ = full.keep_qkv[ts.layers[name]]
            rows = head_rows(lm.torch, query, keys, int(ts.heads[name][2:]), scaling).cpu()
            dev = stored_deviation(ts.traces[name], rows.numpy())
            if dev > STORED_TOLERANCE:
                raise KVToolkitError(f"{ts.source}: trace {name}: the model's attention on the set's tokens differs "
                                     f"from the stored entries by up to {dev:.3g} (> {STORED_TOLERANCE:g}): not this "
                                     "model's capture; charge the stored rows with --rows stored")
            out[name] = rows_trace(rows, None, f"{ts.source}/{name} (complete rows)")
            worst = max(worst, dev)
        _COMPLETE[key] = (out, worst)
    return _COMPLETE[key]

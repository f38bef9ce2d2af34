"""One press on a whole trace set, against the exact NM optimum at the same budget (needs the ``[real]`` and
``[kvpress]`` extras to run; importing it does not).

Per press run (:func:`press_traceset`):
  1. the press runs on the trace set's own tokens with the same model (:mod:`realtrace.press.recorder`): prefill the
     prompt (``segments["continuation"]`` start), then feed the continuation one token at a time; a decoding press
     prefills ``prefill`` tokens (default: the budget) and streams everything after;
  2. the kept positions per layer and KV head at every compression become an NM eviction schedule
     (:mod:`realtrace.press.schedule`: top-k cache order, re-indexing after each compression);
  3. the rows everything is charged on (:mod:`realtrace.press.rows`): by default the complete attention rows of
     the full cache, from one full-cache pass of the same model over the same tokens (checked against the entries
     the trace set stores), so nothing is unattributed; with ``rows="stored"`` the trace set's top-k rows, their
     residual reported as unattributed;
  4. on every trace of the set (its layers and KV heads) the schedule is charged and compared with the exact
     optimum at the same budget, the best one-shot choice (prefill presses) and the toolkit's policy of the same
     rule where one exists, all on those rows (:mod:`realtrace.press.eval`);
  5. the answer to the prompt is greedy-decoded with and without the press, saying whether it changed (and, for
     the built-in recall prompts, whether it is the right code).

A head-wise press (:attr:`~realtrace.press.registry.PressSpec.headwise`) runs on a second model instance with
``sdpa`` attention, whose ``masked_key_indices`` the recorder reads (:mod:`realtrace.press.registry`); so does a
press that leaves layers' caches of different lengths (PyramidKV, ``PressSpec.sdpa``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from importlib.metadata import version

from kvcore.errors import KVToolkitError, ParameterError

from ..traceset import TraceSet, load_traceset
from ..geometry import GROUPS
from .eval import OptCache, evaluate
from .registry import (DEFAULT_INTERVAL, build_press, check_press_applies, import_kvpress, load_lukv_curve,
                       press_spec, ratio_for_budget)
from .rows import charged_note, complete_traces
from .schedule import replay

_MODELS: dict[str, object] = {}


def get_model(attention: str, threads: int = 1, say=None, model=None):
    """One loaded model per model and attention implementation for the whole process (a leaderboard loads it
    once); ``model``: a ``--model`` value or :class:`realtrace.model.ModelSource` (default SmolLM2)."""
    from ..model import load_model, resolve_model

    source = resolve_model(model)
    if (source, attention) not in _MODELS:
        _MODELS[source, attention] = load_model(install=True, threads=threads, attention=attention, say=say,
                                                model=source)
    return _MODELS[source, attention]


def check_traceset_model(ts: TraceSet, lm) -> None:
    """The trace set must have been captured with the model about to run (its manifest's SHA-256 of the weights):
    a press replays the capture's tokens through the capture's model, else it charges another model's rows."""
    from ..model import weights_digest

    want = ts.meta.get("model", {}).get("sha256")
    path = lm.gguf or lm.source.path
    if want is not None and want != weights_digest(path):
        raise ParameterError(f"{ts.source}: captured with {ts.meta['model'].get('name')} (weights {want[:12]}...), "
                             f"not with --model {lm.source.spec} ({path.name}); give that model's --model")


@dataclass
class AnswerCheck:
    """The greedy answer to the prompt without and with the press, and the right one when the prompt has one."""

    baseline: str
    press: str
    expected: str | None

    @property
    def changed(self) -> bool:
        return self.baseline != self.press

    def as_dict(self) -> dict:
        ok = (lambda s: None if self.expected is None else self.expected in s)
        return {"baseline": self.baseline, "press": self.press, "changed": self.changed, "expected": self.expected,
                "baseline_correct": ok(self.baseline), "press_correct": ok(self.press)}


_BASELINES: dict[tuple, list[int]] = {}
ANSWER_TOKENS = 12


def answer_check(lm, ids: list[int], press_answer: list[int], prompt: str | None) -> AnswerCheck:
    """The press's greedy answer beside the one without a press (computed once per prompt)."""
    from ..prompts import known_answer
    from .recorder import baseline_answer

    key = (id(lm), tuple(ids), len(press_answer))
    if key not in _BASELINES:
        _BASELINES[key] = baseline_answer(lm, ids, len(press_answer))
    dec = lm.tokenizer.decode
    return AnswerCheck(dec(_BASELINES[key]), dec(press_answer), known_answer(prompt) if prompt else None)


def _totals(rows: list[dict]) -> dict:
    """Per value, its sum over ``rows`` (None when a row has none, e.g. a press with no toolkit policy)."""
    keys = ("press", "opt", "one_shot", "toolkit", "gap", "charged_mass", "unattributed")
    out = {}
    for k in keys:
        vals = [r[k] for r in rows if r[k] is not None]
        out[k] = float(sum(vals)) if len(vals) == len(rows) else None
    out["traces"] = len(rows)
    return out


def press_traceset(name: str, traces: str | os.PathLike | TraceSet | None = None, ratio: float | None = None,
                   budget: int | None = None, decoding: bool = False, interval: int = DEFAULT_INTERVAL,
                   prefill: int | None = None, answer: bool = True, opts: OptCache | None = None,
                   threads: int = 1, say=None, rows: str = "complete", model=None) -> dict:
    """Run press ``name`` on trace set ``traces`` (default: the committed one) and evaluate it on every trace
    (module docstring), charged on ``rows`` (``complete`` or ``stored``, :mod:`realtrace.press.rows`).  Exactly one
    of ``ratio`` / ``budget``; ``model``: the model it runs in (``--model``; the trace set's own, checked by
    :func:`check_traceset_model`).  Returns a JSON-ready dict."""
    from .. import COMMITTED

    spec = press_spec(name)
    note = charged_note(rows)
    ts = traces if isinstance(traces, TraceSet) else load_traceset(COMMITTED if traces is None else traces)
    if (ratio is None) == (budget is None):
        raise ParameterError("give exactly one of --ratio R and --budget K")
    if ratio is not None and not 0 <= ratio < 1:
        raise ParameterError(f"--ratio {ratio}: must be in [0, 1)")
    if interval < 1:
        raise ParameterError(f"--interval {interval}: must be >= 1")
    ids = ts.meta.get("tokens")
    if not isinstance(ids, list) or len(ids) != ts.T:
        raise ParameterError(f"{ts.source}: the manifest has no token ids for its {ts.T} rows")
    for tname in ts.names():
        if not ts.heads[tname].startswith("kv"):
            raise ParameterError(f"{ts.source}: trace {tname} is a mean over all heads; a press acts per KV head "
                                 "(capture with --heads kv)")
    n_prompt = ts.segments.get("continuation", (ts.T, ts.T))[0]
    if decoding:
        if budget is None:
            raise ParameterError("--decoding compresses to a fixed size: give --budget K")
        start = budget if prefill is None else prefill
        if not 1 <= start < ts.T:
            raise ParameterError(f"--prefill {start}: must be in 1..{ts.T - 1}")
        press_ratio = 0.0
    else:
        if n_prompt >= ts.T:
            raise ParameterError(f"{ts.source}: no continuation rows after the prompt: nothing to charge")
        start = n_prompt
        press_ratio = ratio_for_budget(n_prompt, budget) if budget is not None else ratio
    from .recorder import run_press

    if spec.curve is not None:  # its shape against the layers and KV heads of the model that made the trace set
        recorded = ts.meta.get("model", {})
        load_lukv_curve(spec.curve, (recorded.get("layers"), recorded.get("kv_heads")))
    import_kvpress()  # before the model: a missing extra is named in one line
    lm = get_model("sdpa" if spec.headwise or spec.sdpa else "eager", threads, say, model)
    check_traceset_model(ts, lm)
    check_press_applies(spec, lm.geometry, lm.source.spec)  # loaded, nothing run yet
    press = build_press(spec, press_ratio, decoding, interval, budget)
    cpu0 = time.process_time()
    record, model_seconds, press_answer = run_press(lm, press, ids, start, n_prompt if answer else None,
                                                    ANSWER_TOKENS)
    model_cpu = time.process_time() - cpu0
    t0 = time.monotonic()
    charged, deviation = (complete_traces(lm, ts, ids) if rows == "complete" else (ts.traces, None))
    rows_seconds = time.monotonic() - t0
    t0 = time.monotonic()
    opts = OptCache() if opts is None else opts
    evals = []
    for tname in ts.names():
        layer, head = ts.layers[tname], ts.heads[tname]
        sched = replay(record, layer, int(head[2:]))
        ev = evaluate(tname, layer, head, charged[tname], sched, start, one_shot=not decoding,
                      toolkit=spec.toolkit, opts=opts, layers=lm.geometry.layers)
        if ev.press < ev.opt - ev.opt_gap_bound - 1e-9:
            raise KVToolkitError(f"{tname}: press regret {ev.press} below the exact optimum {ev.opt}: a bridge bug")
        evals.append(ev.as_dict())
    eval_seconds = time.monotonic() - t0
    check = None
    if press_answer is not None:
        check = answer_check(lm, ids[:n_prompt], press_answer, ts.meta.get("capture", {}).get("prompt")).as_dict()
    import transformers

    groups = {g: _totals([r for r in evals if r["group"] == g]) for g in GROUPS
              if any(r["group"] == g for r in evals)}
    return {
        "press": spec.name, "kvpress_class": spec.cls if not decoding else f"DecodingPress({spec.cls})",
        "mode": "decoding" if decoding else ("head-wise prefill" if spec.headwise else "prefill"),
        "citation": spec.citation, "keeps": spec.keeps, "curve": spec.curve,
        "ratio": None if decoding else press_ratio, "budget_arg": budget, "interval": interval if decoding else None,
        "traceset": ts.source, "T": ts.T, "start": start, "charged_rows": ts.T - start, "rows": rows,
        "charged": note, "max_stored_deviation": deviation,
        "toolkit_policy": spec.toolkit[0] if spec.toolkit else None,
        "traces": evals, "total": _totals(evals), "groups": groups, "answer": check,
        "seconds": {"model": round(model_seconds, 2), "model_cpu": round(model_cpu, 2),
                    "complete_rows": round(rows_seconds, 2), "evaluate": round(eval_seconds, 2)},
        "versions": {"kvpress": version("kvpress"), "transformers": transformers.__version__},
    }

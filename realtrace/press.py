"""The press bridge: a kvpress press (NVIDIA's library of KV-cache compression methods) on a captured trace set,
against the exact NM optimum at the same budget (issue 15).

``python -m realtrace press NAME [--ratio R | --budget K] [--decoding --interval N] --traces DIR [--json]``

What it does, per press run (the modules it uses say how):
  1. runs the press on the trace set's own tokens with the same model (:mod:`realtrace.press_run`): prefill the
     prompt (``segments["continuation"]`` start), then feed the continuation one token at a time; a decoding press
     (``--decoding``) prefills ``--prefill`` tokens (default: the budget) and streams everything after;
  2. records the kept positions per layer and KV head at every compression and turns them into an NM eviction
     schedule (:mod:`realtrace.press_schedule`: top-k cache order, re-indexing after each compression);
  3. on every trace of the set (its layers and KV heads) charges the schedule and compares it with the exact
     optimum at the same budget, the best one-shot choice (prefill presses) and the toolkit's policy of the same
     rule where one exists (:mod:`realtrace.press_eval`; only stored mass is charged, the residual is reported
     as unattributed);
  4. greedy-decodes the answer to the prompt with and without the press and says whether it changed (and, for
     the built-in recall prompts, whether it is the right code).

Head-wise presses.  ``AdaKVPress`` keeps a different number of positions per KV head by *masking* (kvpress patches
transformers' attention functions to give masked keys zero weight; the patch is not active with eager attention
and AdaKV refuses eager).  The bridge runs head-wise presses on a second model instance with ``sdpa`` attention and
reads each layer's ``masked_key_indices``: a masked (KV head, position) is evicted for that KV head, as in NM.
``DuoAttentionPress`` needs per-model head patterns downloaded from a hub and ``KVzipPress`` replaces the model's
forward with its own reconstruction passes; neither is bridged (one line says so).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import numpy as np

from kvcore.command import OneLineParser
from kvcore.errors import KVToolkitError, ParameterError
from kvcore.numbers import comma_list, decimal, whole_number

from .press_eval import LAYER_GROUPS, OptCache, evaluate
from .press_schedule import replay
from .traceset import TraceSet, load_traceset

CHARGED_NOTE = ("only what the trace stores is charged: each row's residual (entries below its top-k cut) is "
                "attributed to no position, so a true regret lies in [regret, regret + unattributed]; rows of the "
                "prefill are charged to no one")


@dataclass(frozen=True)
class PressSpec:
    """One bridged press: its kvpress class, what its paper says it keeps, and the toolkit policy of its rule."""

    name: str
    cls: str
    citation: str
    keeps: str
    toolkit: tuple[str, dict] | None = None
    params: dict = field(default_factory=dict)
    headwise: bool = False
    inner: str | None = None  # head-wise presses wrap a scorer press


PRESSES: dict[str, PressSpec] = {s.name.lower(): s for s in (
    PressSpec("StreamingLLM", "StreamingLLMPress", "Xiao et al., Efficient Streaming Language Models with Attention "
              "Sinks, ICLR 2024", "the first n_sink = 4 positions and the most recent ones",
              ("StreamingLLM", {"n_sinks": 4})),
    PressSpec("TOVA", "TOVAPress", "Oren et al., Transformers are Multi-State RNNs, EMNLP 2024",
              "the positions with the most attention from the last query (mean over all heads), and that query",
              ("TOVA", {})),
    PressSpec("SnapKV", "SnapKVPress", "Li et al., SnapKV: LLM Knows What You are Looking for Before Generation, "
              "NeurIPS 2024", "the observation window (last 64 queries) and the positions it attends most "
              "(pooled over 5)"),
    PressSpec("Knorm", "KnormPress", "Devoto et al., A Simple and Effective L2 Norm-Based Strategy for KV Cache "
              "Compression, EMNLP 2024", "the positions with the smallest key norm"),
    PressSpec("ExpectedAttention", "ExpectedAttentionPress", "Devoto et al., Expected Attention: KV Cache "
              "Compression by Estimating Attention from Future Queries Distribution, 2025",
              "the 4 sinks and the positions with the most expected attention from future queries, times ||v||"),
    PressSpec("ObservedAttention", "ObservedAttentionPress", "related to H2O: Zhang et al., H2O: Heavy-Hitter "
              "Oracle for Efficient Generative Inference of Large Language Models, NeurIPS 2023",
              "the positions with the most mean attention received over the queries that see them", ("H2O", {})),
    PressSpec("Random", "RandomPress", "kvpress's baseline", "a uniformly random subset (seed 0)",
              params={"seed": 0}),
    PressSpec("AdaKV", "AdaKVPress", "Feng et al., Ada-KV: Optimizing KV Cache Eviction by Adaptive Budget "
              "Allocation for Efficient LLM Inference, 2024", "SnapKV's scores, top positions across all KV heads of "
              "a layer (at least 20% of each head's share)", headwise=True, inner="SnapKVPress"),
)}
NOT_BRIDGED = {
    "duoattention": "DuoAttentionPress needs per-model streaming-head patterns downloaded from a hub (none is "
                    "reachable, and none exists for SmolLM2-135M)",
    "kvzip": "KVzipPress replaces the model's forward with its own context-reconstruction passes; its kept set is "
             "not a function of one forward",
}
ALL_PREFILL = ("StreamingLLM", "TOVA", "SnapKV", "Knorm", "ExpectedAttention", "ObservedAttention", "Random",
               "AdaKV")
ALL_DECODING = ("StreamingLLM", "TOVA")
DEFAULT_INTERVAL = 16


def press_spec(name: str) -> PressSpec:
    key = name.lower().removesuffix("press")
    if key in NOT_BRIDGED:
        raise ParameterError(f"press {name}: not bridged: {NOT_BRIDGED[key]}")
    if key not in PRESSES:
        raise ParameterError(f"press {name}: unknown (bridged: {', '.join(s.name for s in PRESSES.values())})")
    return PRESSES[key]


def ratio_for_budget(n: int, budget: int) -> float:
    """A compression ratio ``r`` with ``int(n * (1 - r)) == budget`` (kvpress's ``compute_n_kept`` and
    StreamingLLM's window both round this way)."""
    if not 1 <= budget <= n:
        raise ParameterError(f"--budget {budget}: must be in 1..{n} (the prompt has {n} tokens)")
    r = 1.0 - budget / n
    for _ in range(64):
        kept = int(n * (1 - r))
        if kept == budget:
            return max(0.0, r)
        r = np.nextafter(r, -np.inf if kept < budget else np.inf)
    raise ParameterError(f"--budget {budget}: no float ratio keeps exactly {budget} of {n}")


_MODELS: dict[str, object] = {}


def get_model(attention: str, threads: int = 1, say=None):
    """One loaded model per attention implementation for the whole process (a leaderboard loads it once)."""
    if attention not in _MODELS:
        from .model import load_model

        _MODELS[attention] = load_model(install=True, threads=threads, attention=attention, say=say)
    return _MODELS[attention]


def build_press(spec: PressSpec, ratio: float, decoding: bool, interval: int, budget: int | None):
    """The kvpress object: the spec's class at ``ratio`` (prefill), or wrapped in ``DecodingPress`` (compress to
    ``budget`` every ``interval`` steps)."""
    from .press_run import import_kvpress

    kvpress = import_kvpress()
    if spec.headwise:
        if decoding:
            raise ParameterError(f"press {spec.name}: head-wise presses are bridged in prefill only")
        return kvpress.AdaKVPress(press=getattr(kvpress, spec.inner)(compression_ratio=ratio))
    cls = getattr(kvpress, spec.cls)
    if not decoding:
        return cls(compression_ratio=ratio, **spec.params)
    return kvpress.DecodingPress(base_press=cls(**spec.params), compression_interval=interval, target_size=budget)


@dataclass
class AnswerCheck:
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
    from .prompts import known_answer
    from .press_run import baseline_answer

    key = (id(lm), tuple(ids), len(press_answer))
    if key not in _BASELINES:
        _BASELINES[key] = baseline_answer(lm, ids, len(press_answer))
    dec = lm.tokenizer.decode
    return AnswerCheck(dec(_BASELINES[key]), dec(press_answer), known_answer(prompt) if prompt else None)


def _totals(rows: list[dict]) -> dict:
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
                   threads: int = 1, say=None) -> dict:
    """Run press ``name`` on trace set ``traces`` (default: the committed one) and evaluate it on every trace
    (module docstring).  Exactly one of ``ratio`` / ``budget``.  Returns a JSON-ready dict."""
    from . import COMMITTED

    spec = press_spec(name)
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
    from .press_run import import_kvpress, run_press

    import_kvpress()  # before the model: a missing extra is named in one line
    lm = get_model("sdpa" if spec.headwise else "eager", threads, say)
    press = build_press(spec, press_ratio, decoding, interval, budget)
    cpu0 = time.process_time()
    record, model_seconds, press_answer = run_press(lm, press, ids, start, n_prompt if answer else None,
                                                    ANSWER_TOKENS)
    model_cpu = time.process_time() - cpu0
    t0 = time.monotonic()
    opts = OptCache() if opts is None else opts
    rows = []
    for tname in ts.names():
        layer, head = ts.layers[tname], ts.heads[tname]
        if not head.startswith("kv"):
            raise ParameterError(f"{ts.source}: trace {tname} is a mean over all heads; a press acts per KV head "
                                 "(capture with --heads kv)")
        sched = replay(record, layer, int(head[2:]))
        ev = evaluate(tname, layer, head, ts.traces[tname], sched, start, one_shot=not decoding,
                      toolkit=spec.toolkit, opts=opts)
        if ev.press < ev.opt - ev.opt_gap_bound - 1e-9:
            raise KVToolkitError(f"{tname}: press regret {ev.press} below the exact optimum {ev.opt}: a bridge bug")
        rows.append(ev.as_dict())
    eval_seconds = time.monotonic() - t0
    check = None
    if press_answer is not None:
        check = answer_check(lm, ids[:n_prompt], press_answer, ts.meta.get("capture", {}).get("prompt")).as_dict()
    import transformers

    groups = {g: _totals([r for r in rows if r["group"] == g]) for g, _ in LAYER_GROUPS
              if any(r["group"] == g for r in rows)}
    return {
        "press": spec.name, "kvpress_class": spec.cls if not decoding else f"DecodingPress({spec.cls})",
        "mode": "decoding" if decoding else ("head-wise prefill" if spec.headwise else "prefill"),
        "citation": spec.citation, "keeps": spec.keeps,
        "ratio": None if decoding else press_ratio, "budget_arg": budget, "interval": interval if decoding else None,
        "traceset": ts.source, "T": ts.T, "start": start, "charged_rows": ts.T - start, "charged": CHARGED_NOTE,
        "toolkit_policy": spec.toolkit[0] if spec.toolkit else None,
        "traces": rows, "total": _totals(rows), "groups": groups, "answer": check,
        "seconds": {"model": round(model_seconds, 2), "model_cpu": round(model_cpu, 2),
                    "evaluate": round(eval_seconds, 2)},
        "versions": {"kvpress": version("kvpress"), "transformers": transformers.__version__},
    }


def _f(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def format_result(res: dict) -> str:
    """Plain-text table of one :func:`press_traceset` result."""
    lines = [f"press {res['press']} ({res['kvpress_class']}, {res['mode']}"
             + (f", ratio {res['ratio']:.4f}" if res["ratio"] is not None else "")
             + (f", budget {res['budget_arg']}, interval {res['interval']}" if res["interval"] else "") + ")",
             f"trace set {res['traceset']}: T = {res['T']}, charged rows {res['start']}..{res['T'] - 1}",
             f"note: {res['charged']}", "",
             "trace     budget kept  press     OPT       one-shot  toolkit   gap       unattrib"]
    for r in res["traces"]:
        lines.append(f"{r['trace']:9s} {r['budget']:6d} {'-' if r['n_kept'] is None else r['n_kept']:>4} "
                     f"{_f(r['press']):9s} {_f(r['opt']):9s} {_f(r['one_shot']):9s} {_f(r['toolkit']):9s} "
                     f"{_f(r['gap']):9s} {_f(r['unattributed'])}")
    t = res["total"]
    lines.append(f"{'total':9s} {'':6s} {'':4s} {_f(t['press']):9s} {_f(t['opt']):9s} {_f(t['one_shot']):9s} "
                 f"{_f(t['toolkit']):9s} {_f(t['gap']):9s} {_f(t['unattributed'])}")
    for g, v in res["groups"].items():
        lines.append(f"  {g:7s} {'':6s} {'':4s} {_f(v['press']):9s} {_f(v['opt']):9s} {_f(v['one_shot']):9s} "
                     f"{_f(v['toolkit']):9s} {_f(v['gap']):9s}")
    if res["toolkit_policy"]:
        lines.append(f"toolkit = the registered {res['toolkit_policy']} online in NM at the same budget")
    a = res["answer"]
    if a:
        lines.append(f"answer without press: {a['baseline']!r}; with press: {a['press']!r}; "
                     f"changed: {'yes' if a['changed'] else 'no'}"
                     + ("" if a["expected"] is None else f"; right code {a['expected']!r}: without "
                        f"{'yes' if a['baseline_correct'] else 'no'}, with {'yes' if a['press_correct'] else 'no'}"))
    s = res["seconds"]
    lines.append(f"time: press run {s['model']:.1f} s wall ({s['model_cpu']:.1f} s CPU), evaluation "
                 f"{s['evaluate']:.1f} s")
    return "\n".join(lines)


def add_arguments(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The press command's options (parsing needs neither torch nor kvpress)."""
    ap.description = ("Run a kvpress press on a trace set's own tokens and compare the positions it drops with the "
                      "exact NM optimum at the same budget; needs the [real] and [kvpress] extras. " + CHARGED_NOTE)
    ap.add_argument("name", nargs="?", default=None,
                    help="press: " + ", ".join(s.name for s in PRESSES.values()) + " (or --all)")
    ap.add_argument("--all", action="store_true",
                    help="the leaderboard: every bridged press at several budgets, figure and table into --out")
    ap.add_argument("--ratio", type=decimal(0.0, 1.0, open_high=True), default=None,
                    help="compression ratio (fraction of the prompt dropped)")
    ap.add_argument("--budget", type=whole_number(1), default=None,
                    help="positions kept: of the prompt (prefill presses) or the cache size after each "
                         "compression (--decoding)")
    ap.add_argument("--decoding", action="store_true", help="wrap the press in kvpress's DecodingPress")
    ap.add_argument("--interval", type=whole_number(1), default=DEFAULT_INTERVAL,
                    help=f"decoding steps between compressions (default {DEFAULT_INTERVAL})")
    ap.add_argument("--prefill", type=whole_number(1), default=None,
                    help="with --decoding: tokens prefilled before streaming (default: the budget)")
    ap.add_argument("--traces", default=None, help="trace-set directory (default: realtrace/data/smollm2_recall)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--no-answer", action="store_true", help="skip the greedy answer check")
    ap.add_argument("--out", default="press_report", help="with --all: the report folder (default press_report)")
    ap.add_argument("--presses", default=None,
                    help="with --all: comma-separated press names (default: " + ",".join(ALL_PREFILL) + "; those "
                         "among " + ",".join(ALL_DECODING) + " also run decoding)")
    ap.add_argument("--ratios", type=comma_list(decimal(0.0, 1.0, open_high=True)), default="0.5,0.75,0.9,0.95",
                    help="with --all: prefill compression ratios")
    ap.add_argument("--decoding-budgets", type=comma_list(whole_number(1), none=True), default="64,128",
                    help="with --all: DecodingPress sizes ('none' for no decoding runs)")
    ap.add_argument("--threads", type=whole_number(1), default=1,
                    help="torch threads (default 1: a press run is mostly one-token steps, which a second thread "
                         "slows down on a busy machine)")
    return ap


def run(args: argparse.Namespace, prog: str = "press") -> int:
    """Run a parsed press command: exit 0; 2 with one line for bad input or a missing extra; 130 on Ctrl-C."""
    say = lambda msg: sys.stderr.write(msg + "\n")  # noqa: E731
    try:
        if args.all:
            if args.name is not None:
                raise ParameterError("give a press NAME or --all, not both")
            from .press_board import leaderboard

            names = [press_spec(n).name for n in args.presses.split(",")] if args.presses else list(ALL_PREFILL)
            board = leaderboard(args.traces, Path(args.out), threads=args.threads, say=say,
                                ratios=args.ratios, decoding_budgets=args.decoding_budgets,
                                prefill=tuple(names), decoding=tuple(n for n in names if n in ALL_DECODING))
            sys.stdout.write(json.dumps(board["summary"], indent=1) + "\n" if args.json else board["markdown"] + "\n")
            return 0
        if args.name is None:
            raise ParameterError("give a press NAME (or --all)")
        res = press_traceset(args.name, args.traces, args.ratio, args.budget, args.decoding, args.interval,
                             args.prefill, not args.no_answer, threads=args.threads, say=say)
    except KVToolkitError as exc:
        sys.stderr.write(f"{prog}: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{prog}: interrupted\n")
        return 130
    sys.stdout.write((json.dumps(res, indent=1) if args.json else format_result(res)) + "\n")
    return 0


def main(argv: list[str] | None = None, prog: str = "realtrace press") -> int:
    args = add_arguments(OneLineParser(prog=prog)).parse_args(sys.argv[1:] if argv is None else argv)
    return run(args, prog)


__all__ = ["PRESSES", "PressSpec", "add_arguments", "format_result", "main", "press_spec", "press_traceset",
           "ratio_for_budget", "run"]

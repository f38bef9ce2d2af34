"""``quality-search``: the output-driven search from an optimum's schedule (issue 52 item 5,
:mod:`realtrace.quality.search`), mounted as ``python -m paper_check quality-search``.

    python -m paper_check quality-search --budgets 64,128 --prompts needle-400-d10,kv-24-12 --passes 40 --json
    python -m paper_check quality-search --budget 64 --passes 0 --out DIR      # the start itself, unmeasured

Per prompt and budget: the start (``--start``, default ``OPT`` on complete rows) and the best schedule found within
``--passes`` forward passes, their answer KL (``quality``'s ``kl_answer``), whether each answers right, their
regret on complete rows, and the gap -- a lower bound on the surrogate optimum's distance from the output optimum.
``--out DIR`` writes ``search.json`` and the best schedules, ``search_K<K>.npz`` with one ``drop_<prompt>`` per
prompt, which ``quality file:DIR/search_K<K>.npz --budget K`` replays.  Every input is checked before the model
loads (the budgets against the prompts once the tokenizer has sized them): one line and exit status 2
(:mod:`kvcore.command`).  Progress goes to stderr.  Needs the ``[real]`` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from kvcore.atomic import replacing, write_text
from kvcore.command import Command, output_dir
from kvcore.errors import ParameterError
from kvcore.numbers import comma_list, whole_number

from ..model import add_model_arguments
from .cache import ENV
from .optima import OPT, VARIANTS, variant_name

DEFAULT_PROMPTS = ("needle-400-d10", "needle-400-d50", "kv-24-12")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--budget", type=whole_number(1), default=None, help="cache size K per layer and KV head")
    ap.add_argument("--budgets", type=comma_list(whole_number(1)), default=None, help="several budgets")
    ap.add_argument("--prompts", type=comma_list(str), default=None,
                    help=f"built-in prompts, comma-separated (default: {','.join(DEFAULT_PROMPTS)}; see quality "
                         "--list-prompts)")
    ap.add_argument("--prompts-file", default=None, metavar="FILE",
                    help="your own prompts, JSON Lines, as quality --prompts-file takes them")
    ap.add_argument("--start", default=OPT,
                    help=f"the optimum the search starts from: {', '.join(VARIANTS)} (default {OPT}, on complete "
                         "rows)")
    ap.add_argument("--passes", type=whole_number(0), default=40,
                    help="forward passes per prompt and budget, the start's measurement included (default 40; 0: "
                         "the start, unmeasured)")
    ap.add_argument("--batch", type=whole_number(1), default=16,
                    help="exchanges in the first proposal; doubled after an accepted one, halved after a rejected "
                         "one (default 16)")
    ap.add_argument("--seed", type=whole_number(0), default=0, help="seed of the proposals' draws (default 0)")
    ap.add_argument("--cache-dir", type=output_dir, default=None, metavar="DIR",
                    help=f"the quality cache (default ${ENV}, else $XDG_CACHE_HOME/kv-eviction-theory/quality): the "
                         "reference, the optimum and every pass measured are read from it or written to it")
    ap.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    add_model_arguments(ap)
    ap.add_argument("--threads", type=whole_number(1), default=1, help="torch threads (default 1)")
    ap.add_argument("--out", type=output_dir, default=None,
                    help="write search.json and the best schedules (search_K<K>.npz) into this directory")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")


def _inputs(args: argparse.Namespace) -> tuple[tuple[int, ...], str, list, list]:
    """The budgets, the start's variant and the built-in and own prompts, checked (no model, no tokenizer)."""
    from .inputs import haystack_files, read_prompts_file
    from .prompts import parse_name

    if args.budget is not None and args.budgets is not None:
        raise ParameterError("give --budget K or --budgets K,K,..., not both")
    budgets = (args.budget,) if args.budget is not None else args.budgets
    if not budgets:
        raise ParameterError("give --budget K (or --budgets K,K,...)")
    start = variant_name(args.start)
    if start is None:
        raise ParameterError(f"--start {args.start}: not an optimum ({', '.join(VARIANTS)})")
    own = read_prompts_file(args.prompts_file) if args.prompts_file is not None else []
    builtin = list(args.prompts or ([] if own else DEFAULT_PROMPTS))
    for name in builtin:
        if parse_name(name)[0] == "haystack":
            haystack_files()  # a missing wheel is one line, before anything loads
    names = builtin + [p.name for p in own]
    if len(set(names)) < len(names):
        raise ParameterError(f"a prompt is named twice: {', '.join(names)}")
    return tuple(sorted(set(budgets))), start, builtin, own


def run(args: argparse.Namespace) -> int:
    from ..model import load_tokenizer, model_record, resolve_model
    from ..tokenizer import sequence_start
    from .cache import Store, cache_dir
    from .inputs import check_budgets, tokenize_prompts
    from .run import _Reference, worker_model
    from .search_run import search_prompt

    budgets, start, builtin, own = _inputs(args)
    source = resolve_model(args.model, args.device)
    directory = cache_dir(args.cache_dir, args.no_cache)
    store = Store(directory)
    say = (lambda msg: sys.stderr.write(msg + "\n"))
    # the tokenizer without a progress line: a budget it refuses is then the one line on stderr
    tok = load_tokenizer(install=True, converted=store.model_copy(install=True, say=say, model=source), model=source)
    prompts = tokenize_prompts(builtin + own, tok, sequence_start(source, tok))
    check_budgets(budgets, prompts)  # the last check: before the model loads
    lm = worker_model(args.threads, directory, source, args.device)
    results, schedules = [], {k: {} for k in budgets}
    for prompt in prompts:
        ref = _Reference(lm, prompt, budgets, [], store)
        for row, drops in search_prompt(lm, ref, start, args.passes, args.seed, args.batch, say):
            results.append(row)
            schedules[row["budget"]][f"drop_{prompt.name}"] = drops
    res = {"settings": {"budgets": list(budgets), "prompts": [p.name for p in prompts], "start": start,
                        "passes": args.passes, "batch": args.batch, "seed": args.seed, "threads": args.threads},
           "model": model_record(source, lm.geometry), "results": results}
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for k, arrays in schedules.items():
            with replacing(out / f"search_K{k}.npz") as tmp:
                np.savez_compressed(tmp, **arrays)
        write_text(out / "search.json", json.dumps(res, indent=1) + "\n")
        say(f"wrote search.json and {len(schedules)} schedule files to {out}")
    sys.stdout.write(json.dumps(res, indent=1) + "\n" if args.json else table(results) + "\n")
    return 0


def table(results: list[dict]) -> str:
    """The results as a markdown table."""
    def num(x):
        return "-" if x is None else f"{x:.4f}"

    lines = ["| prompt | K | passes | start answer KL | best answer KL | gap (lower bound) | right (start, best) | "
             "regret sum (start, best) |", "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in results:
        lines.append(f"| {r['prompt']} | {r['budget']} | {r['passes']} | {num(r['start_kl'])} | {num(r['best_kl'])} | "
                     f"{num(r['gap'])} | {r['start_right']}, {r['best_right']} | {r['start_regret_sum']:.1f}, "
                     f"{r['best_regret_sum']:.1f} |")
    return "\n".join(lines)


COMMAND = Command(prog="quality-search", description=(
    "Search beyond the surrogate: from an optimum's schedule (OPT on complete rows by default), exchange a kept and a "
    "dropped token of one layer and KV head at one step (every step's cache size unchanged), keeping a batch of "
    "exchanges only when the measured answer KL against the full cache falls, within --passes forward passes. "
    "Reports the best schedule's answer KL beside the start's: the gap is a lower bound on how far the surrogate's "
    "optimum is from the output optimum. Needs the [real] extra."), add_arguments=add_arguments, run=run)


__all__ = ["COMMAND", "DEFAULT_PROMPTS", "add_arguments", "run", "table"]

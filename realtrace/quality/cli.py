"""``quality``: eviction schedules replayed in the real model, output quality beside regret (issue 20).

    python -m realtrace.quality TOVA --budget 128 [--json] [--out DIR]
    python -m realtrace.quality press:SnapKV --budgets 64,128
    python -m realtrace.quality OPT --budget 128 --prompts needle-400-d10,kv-24-12
    python -m realtrace.quality file:steps/TOVA_K128.npz --budget 128
    python -m realtrace.quality --all [--budgets 32,64,128,256] [--out quality_report] [--workers N | --scheduler ADDR]
    python -m realtrace.quality TOVA --budget 128 --no-opt [--cache-dir DIR | --no-cache]

A single configuration prints its values per layer group and in total beside the exact optimum's and the full
cache's (``--json``: the whole result as one JSON document on stdout, nothing else there); ``--all`` runs every
registered NM policy, every bridged prefill press and the exact optimum and writes the report folder
(:mod:`realtrace.quality.report`); ``--no-opt`` leaves the optimum out; ``--answered-only`` runs nothing on the
prompts that fail the positive control.  Each prompt's full-cache reference, and
every optimum, open-loop pass and compiled closed-loop run computed on it, is read from, or written to, the on-disk
cache (:mod:`realtrace.quality.cache`; ``--cache-dir``, ``--no-cache``).
Progress goes to stderr.  Needs the ``[real]`` extra (and ``[kvpress]`` for
presses); without them, and for any bad input, one line and exit status 2 (:mod:`kvcore.command`).
"""

from __future__ import annotations

import argparse
import json
import sys

from kvcore.command import Command, check_output, output_dir
from kvcore.errors import ParameterError
from kvcore.numbers import comma_list, parse_param, whole_number

from ..model import MODEL_EXACT, add_model_arguments
from .optima import OPT, VARIANTS
from .cache import ENV
from .prompts import DEFAULT, FAMILIES

DEFAULT_BUDGETS = (32, 64, 128, 256)
DEFAULT_OUT = "quality_report"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("name", nargs="?", default=None,
                    help="a registered NM policy or module:Class (closed loop by default), press:NAME (a bridged "
                         "kvpress prefill press; press:LUKV=FILE with a budget curve .npy), OPT (the exact NM "
                         "optimum) or one of its variants (" + ", ".join(v for v in VARIANTS if v != OPT)
                         + "; OPT:value minimizes the value-weighted cost a[t,i] ||v_i - o_t||), or file:PATH (a "
                         "saved schedule)")
    ap.add_argument("--all", action="store_true",
                    help="every registered NM policy, every bridged prefill press and OPT; writes --out")
    ap.add_argument("--budget", type=whole_number(1), default=None, help="cache size K per layer and KV head (OPT:static and OPT:coupled share the "
                                                        "same total, K x layers x KV heads, unevenly)")
    ap.add_argument("--budgets", type=comma_list(whole_number(1)), default=None,
                    help=f"several budgets (default with --all: {','.join(map(str, DEFAULT_BUDGETS))})")
    ap.add_argument("--prompts", type=comma_list(str), default=None,
                    help=f"built-in prompts, comma-separated -- {FAMILIES.replace('%', '%%')} (default: {','.join(DEFAULT)}; "
                         "without --prompts-file)")
    ap.add_argument("--prompts-file", default=None, metavar="FILE",
                    help='your own prompts, JSON Lines: {"name", "text", "answer"} or {"name", "haystack", '
                         '"needle", "depth", "question", "answer"[, "context_length"]} per line (answer: the '
                         'continuation expected right after the prompt); counted only where the full cache answers '
                         "right")
    ap.add_argument("--list-prompts", action="store_true",
                    help="list the built-in prompt families and the default set, and exit")
    ap.add_argument("--mode", choices=("closed", "open", "both"), default="closed",
                    help="policies: inside the pass observing the model under their own evictions (closed), on "
                         "the full-cache trace (open), or both")
    ap.add_argument("--policies", type=comma_list(str, none=True), default=None,
                    help="with --all: these policies instead of every registered NM policy ('none' for no policies)")
    ap.add_argument("--presses", type=comma_list(str, none=True), default=None,
                    help="with --all: these presses instead of every bridged prefill press ('none' for no presses)")
    ap.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE",
                    help="a parameter of the named policy (repeatable; e.g. Default -p recent=32 -p n_sinks=4)")
    ap.add_argument("--seed", type=whole_number(0), default=0, help="seed of randomized policies (default 0)")
    ap.add_argument("--top", type=whole_number(1), default=None,
                    help="a policy observes only the TOP largest entries of each attention row (default: the complete "
                         "row the model computed, over the resident set in closed loop, over the full cache in open "
                         "loop)")
    ap.add_argument("--opt-top", type=whole_number(1), default=None,
                    help="solve the exact optimum on the OPT_TOP largest entries per row (faster on long prompts) and "
                         "report how far from optimal it can be (default: complete rows, exact)")
    ap.add_argument("--no-opt", action="store_true",
                    help="do not replay the exact optimum beside the named configuration (or in --all), nor "
                         "OPT:static beside OPT:coupled; the tables then have no OPT row")
    ap.add_argument("--answered-only", action="store_true",
                    help="run nothing on a prompt the full cache answers wrong (the positive control, decided "
                         "first): it is still listed under 'excluded', and every mean is over the answered prompts")
    ap.add_argument("--cache-dir", type=output_dir, default=None, metavar="DIR",
                    help="where the full-cache reference of each prompt (queries, keys, values, final hidden states; "
                         "~118 kB per token), the presses' choices, the optima, every open-loop pass and every "
                         "compiled closed-loop run are kept and reused across runs (default: "
                         f"${ENV}, else $XDG_CACHE_HOME/kv-eviction-theory/quality; clear it by deleting the "
                         "directory)")
    ap.add_argument("--no-cache", action="store_true",
                    help="neither read nor write the cache (recompute the reference and everything else)")
    add_model_arguments(ap)
    ap.add_argument("--threads", type=whole_number(1), default=1, help="torch threads per task (default 1)")
    ap.add_argument("--workers", type=whole_number(0), default=None,
                    help="local worker processes (0 or 1: serial; default: one per core with the [dist] extra)")
    ap.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler (tcp://host:8786)")
    ap.add_argument("--steps", action="store_true",
                    help="also write per-row metrics and every schedule to OUT/steps/*.npz (reusable as file:PATH)")
    ap.add_argument("--out", type=output_dir, default=None, help=f"report folder (default with --all: {DEFAULT_OUT})")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")


def configs(args: argparse.Namespace) -> list:
    """The configurations the arguments ask for (unknown names fail here, before anything loads)."""
    from .configs import all_configs, parse_config

    if args.all:
        if args.name is not None:
            raise ParameterError("give a NAME or --all, not both")
        if args.param:
            raise ParameterError("--param goes with one named policy, not with --all")
        return all_configs(args.mode, args.policies, args.presses, opt=not args.no_opt)
    if args.name is None:
        raise ParameterError("give a policy, press:NAME, OPT or file:PATH (or --all)")
    if args.policies is not None or args.presses is not None:
        raise ParameterError("--policies and --presses go with --all")
    return parse_config(args.name, args.mode, dict(parse_param(p) for p in args.param))


def list_prompts() -> str:
    """What ``--list-prompts`` prints."""
    from .prompts import FAMILIES

    return "\n".join(["built-in prompt families:", *(f"  {f.strip()}" for f in FAMILIES.split(";")),
                      f"default set: {', '.join(DEFAULT)}",
                      "your own: --prompts-file FILE (JSON Lines; see --help)"])


def run(args: argparse.Namespace) -> int:
    from .report import markdown, summary, without_steps, write
    from .run import evaluate

    if args.list_prompts:
        sys.stdout.write(list_prompts() + "\n")
        return 0
    if args.budget is not None and args.budgets is not None:
        raise ParameterError("give --budget K or --budgets K,K,..., not both")
    budgets = ((args.budget,) if args.budget is not None else args.budgets
               or (DEFAULT_BUDGETS if args.all else None))
    if budgets is None:
        raise ParameterError("give --budget K (or --budgets K,K,...)")
    if args.scheduler is not None and args.workers is not None:
        raise ParameterError("give --workers N or --scheduler ADDR, not both")
    out = args.out if args.out is not None else (check_output(DEFAULT_OUT, "directory", "--out") if args.all else None)
    if args.steps and out is None:
        raise ParameterError("--steps writes the schedules and per-row metrics to files: give --out DIR")
    cfgs = configs(args)
    say = (lambda msg: sys.stderr.write(msg + "\n"))
    res = evaluate(cfgs, budgets, args.prompts, args.mode, args.seed, args.top, args.workers, args.scheduler,
                   args.threads, args.steps, progress=True, say=say, opt_top=args.opt_top,
                   prompts_file=args.prompts_file, no_opt=args.no_opt, cache_dir=args.cache_dir,
                   no_cache=args.no_cache, answered_only=args.answered_only, model=args.model, device=args.device)
    if out is not None:
        paths = write(res, out)
        say(f"wrote {len(paths)} files to {out}")
    clean = without_steps(res)
    if args.json:
        sys.stdout.write(json.dumps(clean, indent=1) + "\n")
    elif args.all:
        sys.stdout.write(markdown(clean) + "\n")
    else:
        sys.stdout.write("\n\n".join(summary(clean, c.name) for c in cfgs if c.kind != "opt" or len(cfgs) == 1)
                         + "\n")
    return 0


COMMAND = Command(prog="quality", description=(
    f"Replay eviction schedules inside a model (--model; default {MODEL_EXACT}) (open loop: the exact NM optimum, a policy on the full-cache "
    "trace, a saved schedule; closed loop: an online policy driving its own evictions, a kvpress press) and report "
    "output quality -- KL divergence, change in NLL, top-1 agreement, task accuracy on built-in retrieval prompts, "
    "attention-output error -- beside the regret each schedule is charged on the full-cache trace. Needs the [real] "
    "extra ([real,kvpress] for presses)."), add_arguments=add_arguments, run=run)


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv, prog="python -m realtrace.quality")


__all__ = ["COMMAND", "DEFAULT_BUDGETS", "add_arguments", "main", "run"]

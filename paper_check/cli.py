"""Command line of the toolkit: ``python -m paper_check [COMMAND] ...``.

Every user error (bad trace file, bad parameter, unknown policy/figure/claim, unwritable directory) is printed as one
line on stderr with exit status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from kvcore.command import Command, OneLineParser, dispatch, output_dir
from kvcore.errors import ParameterError
from kvcore.numbers import parse_param, whole_number

def _json_number(x: float) -> float | str:
    return "inf" if isinstance(x, float) and math.isinf(x) else x


# --------------------------------------------------------------------------------------------------------------------
# simulate
# --------------------------------------------------------------------------------------------------------------------

OPT_NAMES = {"opt", "belady"}


def cmd_simulate(args) -> int:
    from kvcore.measure import measure, ratio
    from kvcore.optima import optimum
    from kvcore.trace_files import load_trace
    from kvcore.traces import AttentionTrace

    import policies

    k, h = args.capacity, args.capacity if args.opt_capacity is None else args.opt_capacity
    if h > k:
        raise ParameterError(f"--opt-capacity {h} exceeds --capacity {k} (resource augmentation needs h <= k)")
    is_opt = args.policy.lower() in OPT_NAMES
    if is_opt and args.no_opt:
        raise ParameterError("--no-opt with --policy OPT leaves nothing to run")
    params = dict(parse_param(p) for p in args.param)
    if is_opt and params:
        raise ParameterError("--param does not apply to the optimum")
    factory = None
    if not is_opt:
        if ":" not in args.policy:
            info = policies.get(args.policy)
            if args.model not in info.models:
                raise ParameterError(f"policy {info.name} does not support model {args.model} "
                                     f"(supports: {', '.join(info.models)})")
        factory = policies.resolve(args.policy, params)   # before loading a large trace: fail fast
    trace = load_trace(args.trace)
    if args.model == "nm" and not isinstance(trace, AttentionTrace):
        raise ParameterError(f"{args.trace}: model nm needs an attention trace (.npz with kind='attention')")
    if is_opt:
        opt = optimum(trace, h, args.model, theta=args.theta)
        name, cost, misses = "OPT", opt.cost, opt.misses
    else:
        m = measure(factory, trace, k, h, model=args.model, seeds=(args.seed,), theta=args.theta,
                    with_opt=not args.no_opt)
        opt, name, cost, misses = m.opt, m.policy, m.cost, m.misses[0]
    out = {"policy": name, "capacity": k, "model": args.model, "trace": str(args.trace), "steps": trace.T,
           "requests": _requests(trace, args), "cost": cost, "misses": misses, "seed": args.seed, "params": params}
    if opt is not None:
        out.update(opt_capacity=h, opt_cost=opt.cost, opt_misses=opt.misses,
                   ratio=_json_number(ratio(cost, opt.cost)),
                   opt_certificate={"solver": opt.solver, "gap_bound": opt.gap_bound, "certified": opt.certified})
        if args.model == "nm":
            out["tracking_gap"] = cost - opt.cost
    if args.model == "nm":
        out["unattributed_mass"] = float(trace.residual.sum())
    if args.model == "rm" and isinstance(trace, AttentionTrace):
        out["theta"] = args.theta
        out["note"] = ("RM from attention: each token's arrival is free and only re-requests of evicted tokens "
                       "(attention >= theta) are paid, so the optimum can pay 0 (ratio inf) when every request "
                       "fits a k-slot schedule")
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        width = max(len(key) for key in out)
        for key, value in out.items():
            print(f"{key:<{width}}  {value}")
    return 0


def _requests(trace, args) -> int:
    from kvcore.traces import AttentionTrace, rm_requests_from_attention

    if isinstance(trace, AttentionTrace):
        return trace.nnz if args.model == "nm" else rm_requests_from_attention(trace, args.theta).n_requests
    return trace.n_requests


# --------------------------------------------------------------------------------------------------------------------
# policies
# --------------------------------------------------------------------------------------------------------------------


def cmd_policies(args) -> int:
    import policies

    infos = policies.all_policies()
    if args.json:
        print(json.dumps([i.as_dict() for i in infos], indent=2, sort_keys=True))
        return 0
    for i in infos:
        kind = "deterministic" if i.deterministic else "randomized"
        params = ", ".join(f"{k}={v!r}" for k, v in i.as_dict()["params"].items()) or "-"
        print(f"{i.name:<16} {kind:<13} models={'/'.join(i.models):<6} params: {params}")
        print(f"{'':<16} {i.summary}")
        print(f"{'':<16} [{i.citation}]")
    return 0


# --------------------------------------------------------------------------------------------------------------------
# the main job: figures + claims + report; list; figure; claim
# --------------------------------------------------------------------------------------------------------------------


def _profile(args):
    from theorems.profile import PROFILES

    return PROFILES["full" if getattr(args, "full", False) else "quick"]


def _out_root(args, default: Path) -> Path:
    return Path(args.out) if getattr(args, "out", None) else default


def cmd_run(args) -> int:
    import figures
    from theorems.claims import CLAIMS, Context

    from .inputs import annotate, quality_inputs, selected
    from .report import REPO_ROOT, Staging, ledger_changes, progress, write_ledger, write_report
    from .runner import run_items, usable_cores

    profile = _profile(args)
    selected(args.recompute, args.full)   # a bad --recompute fails before anything runs
    jobs = args.jobs or usable_cores()
    root = _out_root(args, REPO_ROOT)
    with Staging(root, replace_dirs=["paper_check/counterexamples"]) as staging:
        progress(f"paper_check: profile {profile.name}; writing figures/ and paper_check/ under {root}")
        fig_ids, claim_ids = list(figures.FIGURES), list(CLAIMS)
        fig_dir = staging.path("figures/.keep").parent
        with quality_inputs(claim_ids, args.full, args.recompute, staging.root) as inputs:
            # beside a recompute: first what reads no quality input set, while the sets are remade; then the rest
            waiting_figs, waiting_claims = inputs.waiting_figures(fig_ids), inputs.waiting_claims(claim_ids)
            late_figs = [f for f in fig_ids if f in waiting_figs]
            late_claims = [c for c in claim_ids if c in waiting_claims]
            totals = (len(fig_ids), len(claim_ids))
            ctx = Context(profile, staging.dir, waiting=frozenset(late_figs))
            if not inputs.remakes:  # nothing to wait for: one pass, each item held to the input sets it declares
                readers = {("figure", f) for f in late_figs} | {("claim", c) for c in late_claims}
                built, results, real = run_items(fig_ids, claim_ids, ctx, fig_dir, jobs=jobs, totals=totals,
                                                 real_traces=staging, held=inputs.waiting, readers=readers)
                used, late = inputs.wait(), ({}, {})
            else:
                with inputs.on_one_core():
                    # beside a recompute (threads that hold the other cores) the run stays one process: no fork
                    built, results, real = run_items([f for f in fig_ids if f not in waiting_figs],
                                                     [c for c in claim_ids if c not in waiting_claims], ctx,
                                                     fig_dir, jobs=1 if inputs.recomputing() else jobs,
                                                     totals=totals, real_traces=staging)
                used = inputs.wait()
                ctx.waiting = frozenset()
                late = run_items(late_figs, late_claims, ctx, fig_dir, jobs=jobs, totals=totals,
                                 first=(len(built) + 1, len(results) + 1))[:2]
        built = {f: {**built, **late[0]}[f] for f in fig_ids}
        results = {c: {**results, **late[1]}[c] for c in claim_ids}
        annotate(results, used)
        changes = [] if args.write_ledger else ledger_changes(results, profile)
        write_report(staging, profile, results, built, changes, real)
    progress(f"paper_check: wrote {root / 'paper_check' / 'report.md'} and report.json, {len(built)} figures")
    if args.write_ledger:
        progress(f"paper_check: ledger written to {write_ledger(results, profile)}")
        return 0
    for c in changes:
        print(f"paper_check: ledger: {c}", file=sys.stderr)
    return 1 if changes else 0


def cmd_list(args) -> int:
    import figures
    from theorems.claims import CLAIMS

    print("claims:")
    for c in CLAIMS.values():
        print(f"  {c.id:<28} {c.source:<12} {c.claim}")
    print("figures:")
    for fid, fig in figures.FIGURES.items():
        print(f"  {fid:<28} {fig.title}")
    return 0


DEFAULT_OUT = "paper_check_out"   # figure and claim write here (in the current directory) unless --out says


def cmd_figure(args) -> int:
    import figures
    from theorems.claims import Context

    from .report import Staging
    from .runner import run_items

    fid = figures.spec(args.id).fig_id
    root = _out_root(args, Path(DEFAULT_OUT))
    with Staging(root) as staging:
        built = run_items([fid], [], Context(_profile(args), staging.dir), staging.path("figures/.keep").parent)[0]
    for p in built[fid]:
        print(root / p)
    return 0


def cmd_claim(args) -> int:
    from theorems.claims import CLAIMS, Context, dumps

    from .inputs import annotate, quality_inputs, selected
    from .report import Staging, claim_record, ledger_changes
    from .runner import run_items

    if args.id not in CLAIMS:
        raise ParameterError(f"unknown claim id {args.id!r} (see 'python -m paper_check list')")
    profile = _profile(args)
    selected(args.recompute, args.full)
    root = _out_root(args, Path(DEFAULT_OUT))
    with Staging(root) as staging:
        with quality_inputs([args.id], args.full, args.recompute, staging.root) as inputs:
            used = inputs.wait()
            results = run_items([], [args.id], Context(profile, staging.dir), staging.dir / "figures")[1]
        annotate(results, used)
        res = results[args.id]
    rec = claim_record(args.id, res, profile)
    changes = ledger_changes({args.id: res}, profile, complete=False)
    if args.json:
        print(dumps(dict(rec, ledger_changes=changes)))
        return 1 if changes else 0
    print(f"{rec['id']} ({rec['source']}): {rec['claim']}")
    print(f"verdict: {rec['verdict']} - {rec['summary']}")
    if rec["correction"]:
        print(f"correction: {rec['correction']}")
    for m, r in rec.get("models", {}).items():
        print(f"model {m}: {r['verdict']} - {r['summary']}")
    for name, r in (rec["readings"] or {}).items():
        print(f"reading {name}: {r['verdict']} - {r['finding']}")
    print("sizes: " + dumps(rec["sizes"]))
    print("expected: " + dumps(rec["expected"]))
    print("computed: " + dumps(rec["values"]))
    if rec["evidence"]:
        print("evidence (relative to " + str(root) + "): " + dumps(rec["evidence"]))
    for c in changes:
        print(f"ledger: {c}")
    return 1 if changes else 0


# --------------------------------------------------------------------------------------------------------------------
# commands that live with their packages (each a kvcore.command.Command, mounted as it is)
# --------------------------------------------------------------------------------------------------------------------

def _mounted_commands():
    """(name, Command, help) of the subcommands whose options and runner live with their packages, so ``python -m
    paper_check NAME`` and the package's own command line are one code path."""
    from realtrace.allocate_cli import COMMAND as allocate
    from realtrace.capture_cli import COMMAND as capture
    from realtrace.press.cli import COMMAND as press
    from realtrace.quality.cli import COMMAND as quality
    from verify.cli import COMMAND as fuzz

    return [("fuzz", fuzz, "search for traces on which a policy breaks its promised bound (user policies run "
                           "isolated in a child process)"),
            ("capture", capture, "capture real attention traces (the model run needs the [real] extra)"),
            ("press", press, "a kvpress press against the exact NM optimum (needs the [real] and [kvpress] extras)"),
            ("quality", quality, "replay eviction schedules in the real model and measure output quality (needs "
                                 "the [real] extra; presses also [kvpress])"),
            ("allocate", allocate, "one total budget over the KV heads of a trace set: uniform, the exact static "
                                   "optimum and the dynamic coupled optimum")]


# --------------------------------------------------------------------------------------------------------------------
# parser and entry point
# --------------------------------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    _add_profile(p)
    _add_recompute(p)
    p.add_argument("--out", type=output_dir, default=None, metavar="DIR",
                   help="output root, laid out like the repository: DIR/figures/ and DIR/paper_check/report.{md,json}"
                        " (default: the repository itself)")
    p.add_argument("--write-ledger", action="store_true",
                   help="record this run's verdicts (and, quick profile, values) as the expected ones in "
                        "paper_check/ledger.json")
    p.add_argument("--jobs", "-j", type=whole_number(1), default=None, metavar="N",
                   help="processes for the figures and claims (default: the cores this process may use; 1: one "
                        "process). The output is the same for every N")
    sub = p.add_subparsers(dest="command", parser_class=OneLineParser)

    ls = sub.add_parser("list", help="list the claims and figures")
    ls.set_defaults(func=cmd_list)

    f = sub.add_parser("figure", help="build one figure")
    f.add_argument("id", help="figure id (see 'list')")
    f.add_argument("--out", type=output_dir, default=None, metavar="DIR",
                   help=f"output root; the files go to DIR/figures/ (default ./{DEFAULT_OUT})")
    _add_profile(f)
    f.set_defaults(func=cmd_figure)

    c = sub.add_parser("claim", help="check one claim and print its details")
    c.add_argument("id", help="claim id (see 'list')")
    c.add_argument("--out", type=output_dir, default=None, metavar="DIR",
                   help=f"output root for counterexample files, DIR/paper_check/counterexamples/ (default "
                        f"./{DEFAULT_OUT})")
    c.add_argument("--json", action="store_true", help="print the claim's JSON record")
    _add_profile(c)
    _add_recompute(c)
    c.set_defaults(func=cmd_claim)

    s = sub.add_parser("simulate", help="simulate one policy and the exact optimum on a trace file")
    s.add_argument("trace", help="trace file (.npy, .txt, or .npz; see docs/concepts.md, 'Trace files')")
    s.add_argument("--policy", required=True, help="registered policy name (case-insensitive), module:Class "
                   "importable from the current directory, or OPT / Belady")
    s.add_argument("--capacity", "-k", type=whole_number(1), required=True, help="cache size k")
    s.add_argument("--opt-capacity", type=whole_number(1), default=None, help="optimum's cache size h <= k "
                   "(default k)")
    s.add_argument("--no-opt", action="store_true", help="do not solve the optimum (no opt_cost, no ratio)")
    s.add_argument("--model", choices=("rm", "nm"), default="rm", help="cost model (default rm)")
    s.add_argument("--seed", type=whole_number(0), default=0, help="seed of a randomized policy (default 0)")
    s.add_argument("--theta", type=float, default=0.1,
                   help="RM request threshold for attention traces (default 0.1)")
    s.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE",
                   help="policy parameter (repeatable)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=cmd_simulate)

    for name, command, text in _mounted_commands():
        command.mount(sub, name, text)

    pol = sub.add_parser("policies", help="list the policy registry")
    pol.add_argument("--json", action="store_true", help="print JSON")
    pol.set_defaults(func=cmd_policies)


def _add_profile(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="quick profile (default; under a minute on 2 cores)")
    g.add_argument("--full", action="store_true", help="full profile: larger k and longer sequences")


def _add_recompute(p: argparse.ArgumentParser) -> None:
    from theorems.quality_inputs import QUALITY_INPUTS

    p.add_argument("--recompute", default=None, metavar="SETS",
                   help="with --full: which quality input sets to recompute from the model before the claims read "
                        "them (comma list of " + ", ".join(s.name for s in QUALITY_INPUTS) + "; or all, the "
                        "default, or none); the others are read from their committed files, as the quick profile "
                        "always does")


def run(args: argparse.Namespace) -> int:
    if args.command is None:
        return cmd_run(args)
    if hasattr(args, "command_object"):
        return dispatch(args)
    return args.func(args)


COMMAND = Command(prog="paper_check", description="Rebuild every figure and check every claim of the paper; simulate "
                  "policies against the exact optimum.  With no command: the whole check.", add_arguments=add_arguments,
                  run=run)


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv)

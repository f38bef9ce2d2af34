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
from typing import Any

from kvcore.errors import KVToolkitError, ParameterError

EXIT_USAGE = 2
PACKAGE_DIR = Path(__file__).resolve().parent
FIGURES_DIR = PACKAGE_DIR.parent / "figures"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (exit 2) instead of usage + error."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def parse_param(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with VALUE read as JSON when it parses (numbers, true/false, lists), else as a string."""
    if "=" not in text:
        raise ParameterError(f"--param {text!r}: expected NAME=VALUE")
    name, raw = text.split("=", 1)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name.strip(), value


def _json_number(x: float) -> float | str:
    return "inf" if isinstance(x, float) and math.isinf(x) else x


# --------------------------------------------------------------------------------------------------------------------
# simulate
# --------------------------------------------------------------------------------------------------------------------

OPT_NAMES = {"opt", "belady"}


def cmd_simulate(args) -> int:
    from kvcore.engine import check_capacity
    from kvcore.measure import measure, ratio
    from kvcore.optima import optimum
    from kvcore.traces import AttentionTrace, load_trace

    import policies

    k = check_capacity(args.capacity, "--capacity")
    h = k if args.opt_capacity is None else check_capacity(args.opt_capacity, "--opt-capacity")
    if h > k:
        raise ParameterError(f"--opt-capacity {h} exceeds --capacity {k} (resource augmentation needs h <= k)")
    trace = load_trace(args.trace)
    if args.model == "nm" and not isinstance(trace, AttentionTrace):
        raise ParameterError(f"{args.trace}: model nm needs an attention trace (.npz with kind='attention')")
    params = dict(parse_param(p) for p in args.param)
    if args.policy.lower() in OPT_NAMES:
        if params:
            raise ParameterError("--param does not apply to the optimum")
        opt = optimum(trace, h, args.model, theta=args.theta)
        name, cost, misses = "OPT", opt.cost, opt.misses
    else:
        if ":" not in args.policy:
            info = policies.get(args.policy)
            if args.model not in info.models:
                raise ParameterError(f"policy {info.name} does not support model {args.model} "
                                     f"(supports: {', '.join(info.models)})")
        m = measure(policies.resolve(args.policy, params), trace, k, h, model=args.model, seeds=(args.seed,),
                    theta=args.theta)
        opt, name, cost, misses = m.opt, m.policy, m.cost, m.misses[0]
    out = {"policy": name, "capacity": k, "opt_capacity": h, "model": args.model, "trace": str(args.trace),
           "steps": trace.T, "requests": _requests(trace, args), "cost": cost, "misses": misses,
           "opt_cost": opt.cost, "opt_misses": opt.misses, "ratio": _json_number(ratio(cost, opt.cost)),
           "seed": args.seed, "params": params}
    if args.model == "nm":
        out["tracking_gap"] = cost - opt.cost
        out["unattributed_mass"] = float(trace.residual.sum())
    if args.model == "rm" and isinstance(trace, AttentionTrace):
        out["theta"] = args.theta
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


def _figure_ids() -> list[str]:
    import figures

    return list(figures.FIGURES)


def _build_figures(ids, profile, fig_dir: Path) -> dict[str, list[str]]:
    import time

    import figures
    from theorems.results.overlays import figure_data

    from .report import progress

    built = {}
    for n, fid in enumerate(ids, 1):
        t0 = time.perf_counter()
        paths = figures.build(fid, fig_dir, data=figure_data(fid, profile))
        built[fid] = [str(p) for p in paths]
        progress(f"[figure {n}/{len(ids)}] {fid}: {', '.join(p.name for p in paths)} "
                 f"({time.perf_counter() - t0:.1f} s)")
    return built


def cmd_run(args) -> int:
    from theorems.claims import CLAIMS, Context

    from .report import check_out_dir, progress, real_trace_section, run_claims, write_report

    profile = _profile(args)
    out_dir = check_out_dir(Path(args.out) if args.out else PACKAGE_DIR)
    fig_dir = check_out_dir(Path(args.out) / "figures" if args.out else FIGURES_DIR)
    progress(f"paper_check: profile {profile.name}; figures -> {fig_dir}; report -> {out_dir}")
    from .report import display_path

    built = {fid: [display_path(p, out_dir) for p in paths]
             for fid, paths in _build_figures(_figure_ids(), profile, fig_dir).items()}
    results = run_claims(list(CLAIMS), Context(profile, out_dir, built))
    real = real_trace_section(profile, out_dir)
    md, js, changes = write_report(out_dir, profile, results, built, real)
    progress(f"paper_check: wrote {md} and {js}")
    if args.write_ledger:
        from .report import write_ledger

        progress(f"paper_check: ledger written to {write_ledger(results)}")
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


def cmd_figure(args) -> int:
    import figures

    from .report import check_out_dir

    if args.id not in figures.FIGURES:
        raise ParameterError(f"unknown figure {args.id!r} (known: {', '.join(figures.FIGURES)})")
    fig_dir = check_out_dir(Path(args.out) if args.out else FIGURES_DIR)
    for paths in _build_figures([args.id], _profile(args), fig_dir).values():
        for p in paths:
            print(p)
    return 0


def cmd_claim(args) -> int:
    from theorems.claims import CLAIMS, Context, dumps

    from .report import check_out_dir, claim_record, run_claims

    if args.id not in CLAIMS:
        raise ParameterError(f"unknown claim id {args.id!r} (see 'python -m paper_check list')")
    out_dir = check_out_dir(Path(args.out) if args.out else PACKAGE_DIR / "out")
    res = run_claims([args.id], Context(_profile(args), out_dir))[args.id]
    rec = claim_record(args.id, res, _profile(args))
    if args.json:
        print(dumps(rec))
        return 0
    print(f"{rec['id']} ({rec['source']}): {rec['claim']}")
    print(f"verdict: {rec['verdict']} - {rec['summary']}")
    if rec["correction"]:
        print(f"correction: {rec['correction']}")
    print("expected: " + dumps(rec["expected"]))
    print("computed: " + dumps(rec["values"]))
    if rec["evidence"]:
        print("evidence: " + dumps(rec["evidence"]))
    return 0


# --------------------------------------------------------------------------------------------------------------------
# fuzz
# --------------------------------------------------------------------------------------------------------------------


def cmd_fuzz(args) -> int:
    from kvcore.engine import check_capacity
    from theorems.fuzz import format_report, fuzz_policy

    k = check_capacity(args.capacity, "--capacity")
    if args.examples < 1:
        raise ParameterError(f"--examples {args.examples}: must be at least 1")
    if args.seconds <= 0:
        raise ParameterError(f"--seconds {args.seconds}: must be positive")
    rep = fuzz_policy(args.target, k, args.model, args.examples, args.seconds, args.seed, args.out)
    print(json.dumps(rep.as_dict(), sort_keys=True) if args.json else format_report(rep))
    return 1 if rep.violation or rep.contract_violation else 0


def cmd_capture(args) -> int:
    from realtrace.capture import main as capture_main

    return capture_main(args.args, prog="paper_check capture")


# --------------------------------------------------------------------------------------------------------------------
# parser and entry point
# --------------------------------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="paper_check", description="Rebuild every figure and check every claim of the paper; "
                "simulate policies against the exact optimum.  With no command: the whole check.")
    _add_profile(p)
    p.add_argument("--out", default=None, help="write report and figures here instead of paper_check/ and figures/")
    p.add_argument("--write-ledger", action="store_true",
                   help="record this run's verdicts as the expected ones in paper_check/ledger.json")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    ls = sub.add_parser("list", help="list the claims and figures")
    ls.set_defaults(func=cmd_list)

    f = sub.add_parser("figure", help="build one figure")
    f.add_argument("id", help="figure id (see 'list')")
    f.add_argument("--out", default=argparse.SUPPRESS, help="directory for the image files (default figures/)")
    _add_profile(f)
    f.set_defaults(func=cmd_figure)

    c = sub.add_parser("claim", help="check one claim and print its details")
    c.add_argument("id", help="claim id (see 'list')")
    c.add_argument("--out", default=argparse.SUPPRESS, help="directory for counterexample files")
    c.add_argument("--json", action="store_true", help="print the claim's JSON record")
    _add_profile(c)
    c.set_defaults(func=cmd_claim)

    s = sub.add_parser("simulate", help="simulate one policy and the exact optimum on a trace file")
    s.add_argument("trace", help="trace file (.npy, .txt, or .npz; see README 'Trace files')")
    s.add_argument("--policy", required=True, help="registered policy name (case-insensitive), or OPT / Belady")
    s.add_argument("--capacity", "-k", type=int, required=True, help="cache size k")
    s.add_argument("--opt-capacity", type=int, default=None, help="optimum's cache size h <= k (default k)")
    s.add_argument("--model", choices=("rm", "nm"), default="rm", help="cost model (default rm)")
    s.add_argument("--seed", type=int, default=0, help="seed of a randomized policy (default 0)")
    s.add_argument("--theta", type=float, default=0.1,
                   help="RM request threshold for attention traces (default 0.1)")
    s.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE",
                   help="policy parameter (repeatable)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=cmd_simulate)

    fz = sub.add_parser("fuzz", help="search for traces on which a policy exceeds its competitive bound")
    fz.add_argument("target", help="registered policy name, or module:Class importable from the current directory")
    fz.add_argument("--capacity", "-k", type=int, required=True, help="cache size k")
    fz.add_argument("--model", choices=("rm", "nm"), default="rm", help="cost model (default rm)")
    fz.add_argument("--examples", type=int, default=300, help="targeted-search examples (default 300)")
    fz.add_argument("--seconds", type=float, default=60.0, help="time budget for the search (default 60)")
    fz.add_argument("--seed", type=int, default=0, help="search seed (default 0)")
    fz.add_argument("--out", default=".", help="directory for the counterexample trace file (default .)")
    fz.add_argument("--json", action="store_true", help="print one JSON object")
    fz.set_defaults(func=cmd_fuzz)

    cap = sub.add_parser("capture", add_help=False, help="capture real attention traces (needs the [real] extra; "
                         "'capture --help' lists its options)")
    cap.add_argument("args", nargs=argparse.REMAINDER)
    cap.set_defaults(func=cmd_capture)

    pol = sub.add_parser("policies", help="list the policy registry")
    pol.add_argument("--json", action="store_true", help="print JSON")
    pol.set_defaults(func=cmd_policies)
    return p


def _add_profile(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="quick profile (default; under a minute on 2 cores)")
    g.add_argument("--full", action="store_true", help="full profile: larger k and longer sequences")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args.func = cmd_run
    try:
        return int(args.func(args) or 0)
    except KVToolkitError as exc:
        print(f"paper_check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0

"""``python -m bench.quality_cache [--config NAME] [--budget K] [--prompts P,...] [--threads N] [--json]``: what the
quality command's reference cache and ``--no-opt`` save (issue 30), measured in one run.

Three runs of ``python -m paper_check quality NAME --budget K --prompts P --workers 1 --threads N --json
--cache-dir DIR`` as a user types them, each in a fresh process, into a cache directory that starts empty:

``cold``    the full-cache reference (and any press's choice) computed and written, the exact optimum replayed
            beside the configuration (the default), and the model's de-quantized copy made;
``warm``    the same command again: the reference and the model's copy read back;
``no-opt``  the same command with ``--no-opt``, warm: neither the optimum's solve nor its replay;
``rerun``   the same command as ``cold`` once more, everything read back: the optimum, every open-loop pass and a
            compiled closed-loop run too (issue 29; what a sweep pays for a run another command already made).

Before ``warm`` and ``no-opt`` the entries of the optima, passes and closed-loop runs the previous run stored are
deleted, so those two measure the reference's share alone.  With ``--no-opt`` every run goes without the optimum
and ``no-opt`` does not run (the reference's share of a run, on long prompts and with presses, without the optimum's
solve beside it).

Each is timed from outside (interpreter start, imports, the model load included: what a user waits for), in wall
seconds and in CPU seconds (the child's user + system time, ``RUSAGE_CHILDREN``: on a shared, loaded machine the wall
time mostly measures the other jobs, the CPU time much less).  Printed: both, ``warm / cold`` and ``no-opt / warm``
of each, the reference status each run reports, whether the warm run's
result equals the cold one's and the ``--no-opt`` run's configuration the same configuration with the optimum, and the
size of the cache entries per prompt token.  The ratios, not the seconds, carry across machines and load; the load
average is printed with them.  This module imports nothing of the toolkit beyond its command runner: the runs are
subprocesses.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvcore.command import Command
from kvcore.errors import KVToolkitError
from kvcore.numbers import comma_list, whole_number

ROOT = Path(__file__).resolve().parent.parent
RUN_ENTRIES = ("optimum", "pass", "run")  # what a run stores besides the reference (realtrace.quality.cache)


def cpu_of_children() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def quality_run(args: list[str]) -> tuple[float, float, dict]:
    """``python -m paper_check quality ARGS --json``: wall and CPU seconds and the JSON result (a failure is one
    line)."""
    t0, c0 = time.perf_counter(), cpu_of_children()
    p = subprocess.run([sys.executable, "-m", "paper_check", "quality", *args, "--json"], capture_output=True,
                       text=True, cwd=ROOT)
    wall, cpu = time.perf_counter() - t0, cpu_of_children() - c0
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise KVToolkitError(f"quality {' '.join(args)}: exit {p.returncode}: {last}")
    return wall, cpu, json.loads(p.stdout)


def comparable(res: dict, config: str | None = None) -> dict:
    """A result without the per-prompt cache status (and, with ``config``, only that configuration's runs)."""
    runs = [r for r in res["runs"] if config is None or r["config"] == config]
    return {"prompts": [{k: v for k, v in p.items() if k != "cache"} for p in res["prompts"]], "runs": runs}


def measure(config: str, budget: int, prompts: list[str], threads: int, no_opt: bool = False, say=None) -> dict:
    """The runs of the module docstring, their ratios and checks, as a dict."""
    say = say or (lambda msg: None)
    with tempfile.TemporaryDirectory(prefix="quality_cache_") as tmp:
        common = [config, "--budget", str(budget), "--prompts", ",".join(prompts), "--workers", "1", "--threads",
                  str(threads), "--cache-dir", tmp] + (["--no-opt"] if no_opt else [])
        out: dict = {"command": "python -m paper_check quality " + " ".join(common).replace(tmp, "DIR") + " --json",
                     "config": config, "budget": budget, "prompts": prompts, "threads": threads}
        results = {}
        phases = (("cold", []), ("warm", [])) + (() if no_opt else (("no-opt", ["--no-opt"]),)) + (("rerun", []),)
        for phase, extra in phases:
            if phase in ("warm", "no-opt"):
                for kind in RUN_ENTRIES:
                    for entry in Path(tmp).glob(f"{kind}-*.npz"):
                        entry.unlink()
            say(f"{phase} ...")
            out[f"{phase}_s"], out[f"{phase}_cpu_s"], results[phase] = quality_run(common + extra)
            out[f"{phase}_reference"] = [p["cache"]["reference"] for p in results[phase]["prompts"]]
        entries = [e for kind in ("reference", "press") for e in sorted(Path(tmp).glob(f"{kind}-*.npz"))]
        tokens = sum(p["tokens"] for p in results["cold"]["prompts"])
        out["entries"] = len(entries)
        out["entry_bytes"] = sum(e.stat().st_size for e in entries)
    out["tokens"] = tokens
    out["bytes_per_token"] = out["entry_bytes"] / tokens
    for unit in ("s", "cpu_s"):
        out[f"warm_over_cold_{unit}"] = out[f"warm_{unit}"] / out[f"cold_{unit}"]
        out[f"rerun_over_cold_{unit}"] = out[f"rerun_{unit}"] / out[f"cold_{unit}"]
        if not no_opt:
            out[f"no_opt_over_warm_{unit}"] = out[f"no-opt_{unit}"] / out[f"warm_{unit}"]
    out["warm_equals_cold"] = comparable(results["warm"]) == comparable(results["cold"])
    out["rerun_equals_cold"] = comparable(results["rerun"]) == comparable(results["cold"])
    if not no_opt:
        name = results["no-opt"]["runs"][0]["config"]
        out["no_opt_equals_with_opt"] = comparable(results["no-opt"], name) == comparable(results["warm"], name)
    out["load_average"] = list(os.getloadavg())
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--config", default="TOVA", help="what the quality runs replay (default TOVA, closed loop)")
    ap.add_argument("--budget", type=whole_number(1), default=128, help="cache size K (default 128)")
    ap.add_argument("--prompts", type=comma_list(str), default=["needle-400-d10"],
                    help="built-in prompts (default needle-400-d10)")
    ap.add_argument("--threads", type=whole_number(1), default=1, help="torch threads (default 1)")
    ap.add_argument("--no-opt", action="store_true", help="every run without the optimum; only cold and warm")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")


def run(args: argparse.Namespace) -> int:
    res = measure(args.config, args.budget, args.prompts, args.threads, args.no_opt,
                  say=lambda msg: sys.stderr.write(msg + "\n"))
    if args.json:
        sys.stdout.write(json.dumps(res, indent=1) + "\n")
        return 0
    sys.stdout.write(
        f"{res['command']}\n{res['tokens']} tokens, seconds per run (model load included), wall and CPU:\n"
        f"  cold    {res['cold_s']:8.1f} s {res['cold_cpu_s']:8.1f} s CPU   reference "
        f"{', '.join(res['cold_reference'])}\n"
        f"  warm    {res['warm_s']:8.1f} s {res['warm_cpu_s']:8.1f} s CPU   reference "
        f"{', '.join(res['warm_reference'])}"
        f"   warm / cold {res['warm_over_cold_s']:.2f} wall, {res['warm_over_cold_cpu_s']:.2f} CPU   result equal: "
        f"{res['warm_equals_cold']}\n"
        + ("" if args.no_opt else
           f"  no-opt  {res['no-opt_s']:8.1f} s {res['no-opt_cpu_s']:8.1f} s CPU   reference "
           f"{', '.join(res['no-opt_reference'])}   no-opt / warm {res['no_opt_over_warm_s']:.2f} wall, "
           f"{res['no_opt_over_warm_cpu_s']:.2f} CPU   {res['config']} equal: {res['no_opt_equals_with_opt']}\n")
        + f"  rerun   {res['rerun_s']:8.1f} s {res['rerun_cpu_s']:8.1f} s CPU   reference "
        f"{', '.join(res['rerun_reference'])}   rerun / cold {res['rerun_over_cold_s']:.2f} wall, "
        f"{res['rerun_over_cold_cpu_s']:.2f} CPU   result equal: {res['rerun_equals_cold']}\n"
        + f"  cache: {res['entries']} reference and press entries, {res['entry_bytes'] / 1e6:.1f} MB, "
        f"{res['bytes_per_token']:,.0f} bytes per token\n"
        f"  load average {' '.join(f'{x:.2f}' for x in res['load_average'])}\n")
    return 0


COMMAND = Command(prog="python -m bench.quality_cache", description=(
    "Time a quality run cold (reference computed), warm (reference read from the on-disk cache), warm with "
    "--no-opt, and rerun (the optimum, passes and runs read back too), each a fresh process, in one run; prints the "
    "ratios and checks the results agree. Needs the [real] extra."), add_arguments=add_arguments, run=run)


if __name__ == "__main__":
    from kvcore.command import entry

    entry(COMMAND.prog, lambda: COMMAND.main)

"""``python -m realtrace.quality.bench --models A,B [--prompt NAME] [--budget K] [--cache-dir DIR] [--json]``: one
``quality TOVA`` command on each model, in one benchmark run, and the ratios of their costs (issue 49 item 6:
``quality TOVA --budget 128 --prompts needle-400-d10`` on SmolLM2 and on Gemma 3).

Each model's command runs in a fresh process, as a user runs it, with its de-quantized copy already made
(:meth:`realtrace.quality.cache.Store.model_copy`, in ``--cache-dir``; made first when missing, not timed) and
nothing else cached: a new cache directory holding hard links to the copy alone, so the full-cache reference, the
runs and the optimum are computed.  Measured per model from the child's resource usage (``os.wait4``): wall time,
CPU time (user + system) and maximum resident set size; the ratios are each model's over the first's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kvcore.errors import ParameterError

from ..model import resolve_model
from .cache import Store, default_dir

DEFAULT_MODELS = ("smollm2-135m", "gemma3-270m")


def timed_child(argv: list[str]) -> dict:
    """Run ``argv``; its wall seconds, CPU seconds (user + system), maximum RSS (GB) and stdout."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.stdout.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise ParameterError(f"{' '.join(argv[2:])}: exit {code}")
    return {"wall_s": time.monotonic() - t0, "cpu_s": usage.ru_utime + usage.ru_stime,
            "max_rss_gb": usage.ru_maxrss / 1e6, "stdout": out}


def measure(models=DEFAULT_MODELS, prompt: str = "needle-400-d10", budget: int = 128, config: str = "TOVA",
            cache_dir: str | Path | None = None, say=None) -> dict:
    """The module docstring's measurements, as a dict."""
    say = say or (lambda msg: None)
    sources = [resolve_model(m) for m in models]  # a bad --models value is one line, before any work
    store_dir = Path(cache_dir) if cache_dir is not None else default_dir()
    store_dir.mkdir(parents=True, exist_ok=True)
    store = Store(store_dir)
    rows = []
    for source in sources:
        copy = store.model_copy(install=True, say=say, model=source)
        with tempfile.TemporaryDirectory(prefix="kv-bench-models-") as tmp:
            fresh = Path(tmp) / "cache"
            fresh.mkdir()
            if copy is not None:
                shutil.copytree(copy, fresh / copy.name, copy_function=os.link)
            argv = [sys.executable, "-m", "paper_check", "quality", config, "--model", source.spec, "--budget",
                    str(budget), "--prompts", prompt, "--workers", "0", "--cache-dir", str(fresh), "--json"]
            say(f"{source.spec}: {' '.join(argv[2:])} ...")
            child = timed_child(argv)
        res = json.loads(child.pop("stdout"))
        run = next(r for r in res["runs"] if r["config"] == config)
        rows.append({"model": source.spec, "exact": res["model"]["exact"], "tokens": res["prompts"][0]["tokens"],
                     "full_cache_right": res["prompts"][0]["full_cache_right"],
                     "kl_stream": run["total"]["kl_stream"], **child})
    first = rows[0]
    for row in rows:
        row.update({f"{k}_ratio": row[k] / first[k] for k in ("wall_s", "cpu_s", "max_rss_gb")})
    return {"prompt": prompt, "budget": budget, "config": config, "command": " ".join(sys.argv),
            "load_average": list(os.getloadavg()), "models": rows}


def run(args: argparse.Namespace) -> int:
    """``python -m realtrace.quality.bench --models A,B ...`` (:mod:`realtrace.quality.bench`)."""
    res = measure(tuple(m for m in args.models.split(",") if m), args.prompt, args.budget, "TOVA",
                  args.cache_dir, say=lambda msg: sys.stderr.write(msg + "\n"))
    if args.json:
        sys.stdout.write(json.dumps(res, indent=1) + "\n")
        return 0
    lines = [f"quality {res['config']} --budget {res['budget']} --prompts {res['prompt']} (load average "
             f"{' '.join(f'{x:.2f}' for x in res['load_average'])}):"]
    for r in res["models"]:
        lines.append(f"  {r['model']:<14} {r['tokens']:5d} tokens  wall {r['wall_s']:6.1f} s "
                     f"({r['wall_s_ratio']:.2f}x)  CPU {r['cpu_s']:6.1f} s ({r['cpu_s_ratio']:.2f}x)  "
                     f"max RSS {r['max_rss_gb']:.2f} GB "
                     f"({r['max_rss_gb_ratio']:.2f}x)  full cache right: {r['full_cache_right']}, "
                     f"kl_stream {r['kl_stream']:.4f}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0

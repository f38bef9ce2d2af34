"""End to end, each in a fresh process: ``simulate --policy LRU`` (loading, the policy, the exact optimum) against
libCacheSim's LRU + next-access pre-pass + Belady on the same requests, and the peak memory of a long trace.

Three child commands (``python -m bench.e2e MODE ...``), each printing one JSON object with its wall seconds per phase
and its own peak RSS (``VmHWM``, see bench/optimum_child.py for why not ``ru_maxrss``):

``cli TRACE.npy K``     runs ``python -m paper_check simulate --policy LRU --capacity K TRACE --json`` as a
                        subprocess, exactly as a user types it, and reports its wall time and peak RSS (this small
                        process forks it, so ``RUSAGE_CHILDREN``'s high-water mark is the command's own)
``kvcore TRACE.npy K``  the same work through the library: ``load_trace``, ``engine.run`` (LRU's kernel),
                        ``optima.optimum`` (Belady's kernel), timed phase by phase
``kvcore-idle``         the imports and both kernels run on a six-request trace: the fixed memory of a process
``lcs BLIND.og K``      libCacheSim alone: its LRU on an oracleGeneral file without next-access times, its own C
                        converter writing the next-access times (``Util.convert_to_oracleGeneral``: the pre-pass),
                        and its Belady on the converted file

The parent measures each child's wall time from outside (interpreter start, imports, compilation or cache loading
included), so "ours / theirs" is what a user waits for; for ``cli`` it is the command's own wall time.  numpy is
imported only where needed, so libCacheSim's child pays for no import it does not need.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def peak_rss_mb() -> float:
    from bench.optimum_child import peak_rss_mb as hwm

    return hwm()


def write_blind_oracle(items, path: Path) -> Path:
    """``items`` as an oracleGeneral file whose next-access field says "unknown" (-1) everywhere: libCacheSim's
    converter computes the real ones (its pre-pass), so no work of ours enters its pipeline."""
    from .libcachesim_adapter import write_oracle_general

    return write_oracle_general(items, path, next_access=False)


def run_json(module: str, *args: str, timeout: float | None = None, env: dict | None = None) -> tuple[dict, float]:
    """``python -m module args`` in a fresh interpreter at the project root -> (the JSON object on its last stdout
    line, or ``{"error": ...}``: the time limit or its last stderr line; its wall seconds seen from outside)."""
    cmd = [sys.executable, "-m", module, *args]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"over the {timeout:.0f} s limit"}, time.perf_counter() - start
    wall = time.perf_counter() - start
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}, wall
    return json.loads(done.stdout.strip().splitlines()[-1]), wall


def child(mode: str, *args: str, timeout: float = 900.0, env: dict | None = None) -> dict:
    """Run one child mode in a fresh interpreter; its JSON plus the wall seconds seen from outside."""
    out, wall = run_json("bench.e2e", mode, *args, timeout=timeout, env=env)
    if "error" in out:
        return {"mode": mode, **out}
    out.setdefault("wall_seconds", wall)
    return out


# -- child modes ---------------------------------------------------------------------------------------------------


def _cli(trace: str, k: str) -> dict:
    res, wall = run_json("paper_check", "simulate", "--policy", "LRU", "--capacity", k, trace, "--json")
    if "error" in res:
        raise RuntimeError(res["error"])
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: kilobytes
    return {"mode": "cli", "misses": res["misses"], "opt_misses": res["opt_misses"], "wall_seconds": wall,
            "peak_rss_mb": peak_kb / 1024}


def _kvcore(trace: str, k: str) -> dict:
    phases = {}
    start = time.perf_counter()
    import policies
    from kvcore.engine import run
    from kvcore.optima import optimum
    from kvcore.trace_files import load_trace

    phases["imports"] = time.perf_counter() - start
    start = time.perf_counter()
    tr = load_trace(trace)
    phases["load"] = time.perf_counter() - start
    start = time.perf_counter()
    res = run(policies.make("LRU"), tr, int(k))
    phases["policy"] = time.perf_counter() - start
    start = time.perf_counter()
    opt = optimum(tr, int(k))
    phases["optimum"] = time.perf_counter() - start
    return {"mode": "kvcore", "misses": res.misses, "opt_misses": opt.misses, "phases": phases,
            "file_mb": os.path.getsize(trace) / 2**20, "peak_rss_mb": peak_rss_mb()}


def _kvcore_idle() -> dict:
    import numpy as np

    import policies  # noqa: F401  (the same imports as a real run)
    from kvcore import kernels
    from kvcore.optima import optimum  # noqa: F401

    tiny = np.array([0, 1, 0, 2, 1, 3], dtype=np.int64)
    for name in ("lru", "belady"):
        kernels.simulate(name, tiny, 2)
    return {"mode": "kvcore-idle", "peak_rss_mb": peak_rss_mb()}


def _lcs(blind: str, k: str) -> dict:
    phases = {}
    start = time.perf_counter()
    import libcachesim as lcs

    phases["imports"] = time.perf_counter() - start

    def run(cls, path: str) -> int:
        reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
        n = reader.get_num_of_req()
        miss_ratio, _ = cls(int(k)).process_trace(reader)
        return int(round(miss_ratio * n))

    start = time.perf_counter()
    misses = run(lcs.LRU, blind)
    phases["policy"] = time.perf_counter() - start
    oracle = f"{blind}.next"
    start = time.perf_counter()
    reader = lcs.TraceReader(blind, lcs.TraceType.ORACLE_GENERAL_TRACE)
    with open(os.devnull, "w") as devnull, _redirect_fd(2, devnull):  # the converter logs each step on stderr
        lcs.Util.convert_to_oracleGeneral(reader._reader, oracle)
    phases["next-access pre-pass"] = time.perf_counter() - start
    start = time.perf_counter()
    opt = run(lcs.Belady, oracle)
    phases["optimum"] = time.perf_counter() - start
    os.unlink(oracle)
    return {"mode": "lcs", "misses": misses, "opt_misses": opt, "phases": phases, "peak_rss_mb": peak_rss_mb()}


class _redirect_fd:
    """Point OS-level file descriptor ``fd`` at ``target`` for the block (C code writes past sys.stderr)."""

    def __init__(self, fd: int, target):
        self.fd, self.target = fd, target

    def __enter__(self):
        self.saved = os.dup(self.fd)
        os.dup2(self.target.fileno(), self.fd)

    def __exit__(self, *exc):
        os.dup2(self.saved, self.fd)
        os.close(self.saved)


MODES = {"cli": _cli, "kvcore": _kvcore, "kvcore-idle": _kvcore_idle, "lcs": _lcs}

if __name__ == "__main__":
    print(json.dumps(MODES[sys.argv[1]](*sys.argv[2:])))

"""One exact optimum in a fresh process, so its time and peak memory are its own: ``python -m bench.optimum_child
rm|nm T capacity seed`` prints one JSON object (seconds, cost, misses, peak RSS before and after the solve).

Peak RSS is the kernel's high-water mark of this process's own memory (``VmHWM`` in /proc/self/status).
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is not used: Linux carries the high-water mark of the address space
that existed before ``exec`` into it, so a child started from a large benchmark process reports the parent's size.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0  # the field is in kB
    raise RuntimeError("/proc/self/status has no VmHWM line (peak RSS needs Linux)")


def main(argv: list[str]) -> dict:
    model, steps, capacity, seed = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    from bench.workloads import attention_trace, weighted_zipf_trace
    from kvcore import optima

    if model == "rm":
        trace = weighted_zipf_trace(steps, max(1, steps // 10), seed)
        solve = optima.rm_opt
    else:
        trace = attention_trace(steps, 32, seed)
        solve = optima.nm_opt
    before = peak_rss_mb()
    start = time.perf_counter()
    result = solve(trace, capacity)
    seconds = time.perf_counter() - start
    return {"model": model, "T": steps, "capacity": capacity, "seconds": seconds, "cost": float(result.cost),
            "misses": int(result.misses), "rss_before_mb": before, "peak_rss_mb": peak_rss_mb()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

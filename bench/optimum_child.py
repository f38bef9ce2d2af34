"""One exact optimum in a fresh process, so its time and peak memory are its own: ``python -m bench.optimum_child
rm|nm T capacity seed`` prints one JSON object (seconds, cost, misses, peak RSS before and after the solve)."""

from __future__ import annotations

import json
import resource
import sys
import time


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


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

"""One exact optimum in a fresh process, so its time and peak memory are its own: ``python -m bench.optimum_child
rm|nm T capacity seed [SOLVER]`` prints one JSON object (wall and CPU seconds, cost, misses, solver, certificate,
peak RSS before and after the solve).  CPU seconds are quoted next to wall seconds because the machine is shared:
under load the wall time of one process stretches, its CPU time much less.

``SOLVER`` is a backend of :mod:`kvcore.optima.mincost` (default: the library's default), ``netsimplex-whole``
(RM only: the network simplex on the whole network in one run, the default before :mod:`kvcore.optima.time_split`;
``bench.rm_optimum`` compares the two), or ``baseline``: the
HiGHS path the library used before the exact network simplex (kept here so that the speed-up is measured against it
in the same run): HiGHS dual simplex with devex pricing through ``scipy.optimize.linprog`` on the unscaled float
costs, with no exact certificate, on the RM network of :mod:`kvcore.optima.rm_flow` and on SPEC section 3's NM chain
network (``T + 1 + nnz`` nodes, ``T + 2 nnz`` arcs).  Its cost comes from the rounded LP vertex.

Peak RSS is the kernel's high-water mark of this process's own memory (``VmHWM`` in /proc/self/status).
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is not used: Linux carries the high-water mark of the address space
that existed before ``exec`` into it, so a child started from a large benchmark process reports the parent's size.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0  # the field is in kB
    raise RuntimeError("/proc/self/status has no VmHWM line (peak RSS needs Linux)")


def _highs_flow(n_nodes, tail, head, lower, cap, cost, supply) -> np.ndarray:
    """The pre-exact path: linprog's HiGHS dual simplex (devex) on the incidence matrix, the vertex rounded."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    m = tail.size
    a = sp.csc_matrix((np.concatenate([np.ones(m), -np.ones(m)]),
                       (np.concatenate([tail, head]), np.concatenate([np.arange(m), np.arange(m)]))),
                      shape=(n_nodes, m))
    res = linprog(cost, A_eq=a, b_eq=supply.astype(np.float64),
                  bounds=np.column_stack([lower, cap]).astype(np.float64), method="highs-ds",
                  options={"simplex_dual_edge_weight_strategy": "devex"})
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed: {res.message}")
    return np.rint(res.x).astype(np.int64)


def baseline_rm(trace, h: int) -> tuple[float, int]:
    from kvcore.optima.rm_flow import check_fits, next_request

    per_step = check_fits(trace, h)
    T = trace.T
    step_of, nxt = next_request(trace)
    has_next = nxt >= 0
    later = nxt[has_next]
    start, end = step_of[has_next] + 1, step_of[later]
    adjacent = end == start
    g_tail, g_head, g_req = start[~adjacent], end[~adjacent], later[~adjacent]
    line = np.arange(T)
    supply = np.zeros(T + 1, np.int64)
    supply[0], supply[T] = h, -h
    flow = _highs_flow(T + 1, np.concatenate([line, g_tail]), np.concatenate([line + 1, g_head]),
                       np.concatenate([per_step, np.zeros(g_tail.size, np.int64)]),
                       np.concatenate([np.full(T, h), np.ones(g_tail.size, np.int64)]),
                       np.concatenate([np.zeros(T), -trace.costs[g_req]]), supply)
    hit = np.zeros(trace.n_requests, bool)
    hit[later[adjacent]] = True
    hit[g_req[flow[T:] == 1]] = True
    return math.fsum(trace.costs[~hit].tolist()), int(np.count_nonzero(~hit))


def baseline_nm(trace, h: int) -> tuple[float, int]:
    from kvcore.optima.nm_flow import entries_by_token

    T = trace.T
    tok, step, w = entries_by_token(trace)
    nnz = tok.size
    node = T + 1 + np.arange(nnz)
    first = np.ones(nnz, bool)
    first[1:] = tok[1:] != tok[:-1]
    into_tail = np.where(first, tok, np.concatenate([[0], node[:-1]]))
    line = np.arange(T)
    supply = np.zeros(T + 1 + nnz, np.int64)
    supply[0], supply[T] = h, -h
    flow = _highs_flow(T + 1 + nnz, np.concatenate([line, into_tail, node]), np.concatenate([line + 1, node, step + 1]),
                       np.zeros(T + 2 * nnz, np.int64), np.concatenate([np.full(T, h), np.ones(2 * nnz, np.int64)]),
                       np.concatenate([np.zeros(T), -w, np.zeros(nnz)]), supply)
    lost = flow[T:T + nnz] != 1
    return math.fsum(w[lost].tolist()), int(np.count_nonzero(lost))


def main(argv: list[str]) -> dict:
    model, steps, capacity, seed = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    from bench.workloads import attention_trace, weighted_zipf_trace
    from kvcore import optima
    from kvcore.optima.mincost import DEFAULT_SOLVER

    solver = argv[4] if len(argv) > 4 else DEFAULT_SOLVER
    trace = weighted_zipf_trace(steps, max(1, steps // 10), seed) if model == "rm" else attention_trace(steps, 32, seed)
    before = peak_rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    row = {"model": model, "T": steps, "capacity": capacity, "solver": solver}
    if solver == "baseline":
        cost, misses = (baseline_rm if model == "rm" else baseline_nm)(trace, capacity)
        row.update(cost=cost, misses=misses, certified=False)
    else:
        if solver == "netsimplex-whole":
            result = optima.rm_opt(trace, capacity, solver="netsimplex", split_steps=None)
        else:
            result = (optima.rm_opt if model == "rm" else optima.nm_opt)(trace, capacity, solver=solver)
        row.update(cost=float(result.cost), misses=int(result.misses), certified=bool(result.certified),
                   gap_bound=float(result.gap_bound), solved_by=result.solver)
    row.update(seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu, rss_before_mb=before,
               peak_rss_mb=peak_rss_mb())
    return row


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))

"""``python -m bench [--json] [--quick] [--seed S] [--opt-timeout SEC] [--skip SECTION ...]``: see bench/__init__.py.

Sections (all measured in this one run, in this order):
  baseline   a bare Python loop (set membership + insert per request) over the engine trace: the unit of the
             "x base" columns, so that ratios, not absolute numbers, carry across machines and load;
  vs-lcs     LRU, FIFO, LFU, Belady: our kernels and libCacheSim on a Zipf(1.0) trace (1e7 requests, 1e6 objects,
             k = 10,000; unit sizes), miss counts and requests/s side by side, ours/theirs;
  e2e        end to end on that trace, each in a fresh process, wall time as a user waits for it:
             ``python -m paper_check simulate --policy LRU --capacity 10000 TRACE.npy --json`` (loading, the policy,
             the exact optimum), the same through the library (bench/e2e.py), and libCacheSim's LRU + its own
             next-access pre-pass + its Belady; counts compared, ours/theirs;
  memory     peak RSS of the library's end-to-end run on a 5e7-request trace (a 400 MB .npy), against the file size;
  startup    import times, and the kernels' first call with an empty numba cache (compilation) and with a warm one;
  mrc        the all-sizes LRU curve against libCacheSim's LRU run at 20 sizes (and the counts compared);
  engine     every registered RM policy through the plain engine (kernel=False), the Belady reference loop, and the
             kernels compiled and as plain Python (what runs without numba; shown only when the two differ), on a
             Zipf(1.0) trace of 1e6 requests, 1e5 objects, k = 1000;
  nm         every registered NM policy through the plain engine on a 20,000-step attention trace, 32 nonzeros per
             row, k = 1024;
  allocation the exact optima behind budgets across heads on the committed trace set (bench/allocation.py):
             per-head regret curves three ways, the dynamic coupled optimum over all heads;
  optima     rm_opt at T = 1e5 and 1e6 (k = 1000, costs 1..8) and nm_opt at T = 5,000/k = 256 and T = 20,000/k = 1024,
             each in a fresh process (its time and its peak RSS, VmHWM; see bench/optimum_child.py), with the exact
             network simplex and with the pre-exact HiGHS path (``baseline``), and their ratios.
``--quick`` shrinks every size for a smoke run.  A policy whose full run would take over ``--policy-budget`` seconds
(projected from a 2% prefix) is measured on the longest prefix that fits, and the row says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kvcore import kernels
from kvcore.command import OneLineParser
from kvcore.engine import run_nm, run_rm
from kvcore.numbers import decimal, whole_number
from kvcore.traces import PagingTrace
from policies import all_policies, make
from policies.fast import hits_per_step, lru_miss_curve, simulate_fast

from . import allocation, e2e
from . import libcachesim_adapter as lcs
from .workloads import attention_trace, zipf_items

FULL = {"big": (10**7, 10**6, 10_000), "engine": (10**6, 10**5, 1000), "nm": (20_000, 1024),
        "rm_opt": [(10**5, 1000), (10**6, 1000)], "nm_opt": [(5000, 256), (20_000, 1024)], "mrc_sizes": 20,
        "memory": (5 * 10**7, 10**6, 10_000)}
QUICK = {"big": (200_000, 20_000, 200), "engine": (100_000, 10_000, 100), "nm": (2000, 128),
         "rm_opt": [(10_000, 100)], "nm_opt": [(1000, 64)], "mrc_sizes": 20, "memory": (10**6, 10**5, 200)}
SECTIONS = ("vs-lcs", "e2e", "memory", "startup", "mrc", "engine", "nm", "allocation", "optima")
KERNEL_ORDER = ("lru", "fifo", "lfu", "belady")


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def baseline(items: np.ndarray) -> dict:
    seq = items.tolist()

    def loop():
        seen = set()
        for x in seq:
            if x not in seen:
                seen.add(x)

    _, seconds = timed(loop)
    return {"what": "bare Python set loop", "requests": len(seq), "seconds": seconds, "rps": len(seq) / seconds}


def have_libcachesim() -> str | None:
    try:
        import libcachesim  # noqa: F401
    except ImportError as exc:
        return f"libcachesim not installed ({exc}); pip install -e '.[bench]'"
    return None


def warm_kernels() -> float:
    """Compile (or load from numba's cache) every kernel on a tiny trace, so the timed runs exclude it."""
    tiny = np.array([0, 1, 0, 2, 1, 3], dtype=np.int64)
    start = time.perf_counter()
    for name in KERNEL_ORDER:
        simulate_fast(name, tiny, 2)
    lru_miss_curve(tiny)
    return time.perf_counter() - start


def section_vs_lcs(items: np.ndarray, k: int, workdir: Path) -> dict:
    trace = PagingTrace.unit(items, source="zipf-big")
    out = {"T": int(items.size), "objects": int(np.unique(items).size), "k": k, "rows": []}
    reason = have_libcachesim()
    if reason:
        out["libcachesim"] = reason
    else:
        path, out["oracle_write_seconds"] = timed(lcs.write_oracle_general, items, workdir / "big.oracleGeneral")
    for name in KERNEL_ORDER:
        ours, ours_s = timed(simulate_fast, name, trace, k)
        row = {"policy": name, "ours_misses": ours, "ours_rps": items.size / ours_s}
        if not reason:
            theirs, theirs_s = lcs.misses(name, path, items.size, k)
            row.update(theirs_misses=theirs, theirs_rps=items.size / theirs_s, equal=ours == theirs,
                       ratio=row["ours_rps"] / (items.size / theirs_s))
        out["rows"].append(row)
    return out


def section_e2e(items: np.ndarray, k: int, workdir: Path) -> dict:
    """``simulate`` end to end vs libCacheSim's LRU + pre-pass + Belady, each a fresh process (bench/e2e.py)."""
    npy = workdir / "big.npy"
    np.save(npy, items)
    rows = [dict(e2e.child("cli", str(npy), str(k)), what="python -m paper_check simulate --policy LRU (CLI)"),
            dict(e2e.child("kvcore", str(npy), str(k)), what="load_trace + engine.run + optima.optimum")]
    reason = have_libcachesim()
    out = {"T": int(items.size), "k": k, "file_mb": npy.stat().st_size / 2**20, "rows": rows}
    if reason:
        out["libcachesim"] = reason
        return out
    blind = e2e.write_blind_oracle(items, workdir / "big-blind.oracleGeneral")
    theirs = dict(e2e.child("lcs", str(blind), str(k)), what="libCacheSim LRU + next-access pre-pass + Belady")
    blind.unlink()
    rows.append(theirs)
    for r in rows[:2]:
        if "error" not in r and "error" not in theirs:
            r["equal"] = (r["misses"], r["opt_misses"]) == (theirs["misses"], theirs["opt_misses"])
            r["ours_over_theirs"] = r["wall_seconds"] / theirs["wall_seconds"]
    return out


def section_memory(cfg: tuple[int, int, int], seed: int, workdir: Path) -> dict:
    """Peak RSS of the library's end-to-end run (load + LRU + Belady) on a long trace, against the file's size."""
    T, objects, k = cfg
    npy = workdir / "long.npy"
    np.save(npy, zipf_items(T, objects, 1.0, seed + 1))
    row = e2e.child("kvcore", str(npy), str(k))
    npy.unlink()
    if "error" not in row:
        row["rss_over_file"] = row["peak_rss_mb"] / row["file_mb"]
    idle = e2e.child("kvcore-idle")
    return {"T": T, "k": k, "run": row, "idle": idle}


def section_startup(workdir: Path) -> dict:
    """What a short command pays before any simulation: imports, and the kernels' first call with an empty numba
    cache (compilation) and with the cache that run left behind."""
    tiny = workdir / "tiny.npy"
    np.save(tiny, np.array([0, 1, 0, 2, 1, 3], dtype=np.int64))
    cache = workdir / "numba-cache"
    cache.mkdir()
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    rows = {"cold cache (compiles)": e2e.child("kvcore", str(tiny), "2", env=env),
            "warm cache": e2e.child("kvcore", str(tiny), "2", env=env)}
    return {"rows": rows}


def section_mrc(items: np.ndarray, n_sizes: int, workdir: Path) -> dict:
    trace = PagingTrace.unit(items, source="zipf-big")
    curve, ours_s = timed(lru_miss_curve, trace)
    sizes = np.unique(np.geomspace(10, curve.size, n_sizes).astype(np.int64))
    out = {"ours_seconds": ours_s, "sizes": sizes.tolist(), "distinct": int(curve.size)}
    reason = have_libcachesim()
    if reason:
        out["libcachesim"] = reason
        return out
    path = workdir / "big.oracleGeneral"
    if not path.exists():
        lcs.write_oracle_general(items, path)
    total, mismatches = 0.0, []
    for c in sizes.tolist():
        theirs, seconds = lcs.misses("lru", path, items.size, c)
        total += seconds
        if theirs != int(curve[c - 1]):
            mismatches.append({"capacity": c, "ours": int(curve[c - 1]), "theirs": theirs})
    out.update(theirs_seconds=total, ratio=total / ours_s, mismatches=mismatches)
    return out


def measure_policy(run, length: int, budget: float) -> tuple[object, int, float]:
    """Run ``run(prefix_length)``; if a 2% prefix projects past ``budget`` seconds, use the prefix that fits."""
    probe = max(1, length // 50)
    _, probe_s = timed(run, probe)
    used = length if probe_s * length / probe <= budget else max(probe, int(budget * probe / max(probe_s, 1e-9)))
    result, seconds = timed(run, min(used, length))
    return result, min(used, length), seconds


def section_engine(items: np.ndarray, k: int, budget: float) -> dict:
    trace = PagingTrace.unit(items, source="zipf-engine")
    rows = []
    for info in all_policies(model="rm"):
        def run(m, info=info):
            return run_rm(make(info.name), PagingTrace.unit(items[:m]), k, seed=0, kernel=False)

        try:
            res, used, seconds = measure_policy(run, items.size, budget)
            rows.append({"policy": info.name, "path": "engine", "requests": used, "misses": res.misses,
                         "rps": used / seconds})
        except Exception as exc:  # a benchmark reports a broken policy and goes on
            rows.append({"policy": info.name, "path": "engine", "error": f"{type(exc).__name__}: {exc}"})
    try:
        from kvcore.optima import belady

        res, seconds = timed(belady, trace, k, record=True)  # record=True: the heap loop, not the kernel
        rows.append({"policy": "Belady", "path": "reference loop", "requests": int(items.size),
                     "misses": int(res.misses), "rps": items.size / seconds})
    except Exception as exc:
        rows.append({"policy": "Belady", "path": "reference loop", "error": f"{type(exc).__name__}: {exc}"})
    for name in KERNEL_ORDER:
        label = name.upper() if name != "belady" else "Belady"
        misses, seconds = timed(simulate_fast, name, trace, k)
        rows.append({"policy": label, "path": "kernel", "requests": int(items.size), "misses": misses,
                     "rps": items.size / seconds})
        if not kernels.compiled():
            continue  # the "kernel" row above already ran as plain Python: a second row would repeat it
        # the same kernel as plain Python: what runs without numba
        hits, seconds = timed(hits_per_step, name, trace, k, compiled=False)
        rows.append({"policy": label, "path": "kernel, no numba", "requests": int(items.size),
                     "misses": int(items.size - np.count_nonzero(hits)), "rps": items.size / seconds})
    return {"T": int(items.size), "k": k, "rows": rows}


def section_nm(steps: int, k: int, budget: float, seed: int) -> dict:
    trace = attention_trace(steps, 32, seed)
    rows = []
    for info in all_policies(model="nm"):
        def run(m, info=info):
            return run_nm(make(info.name), trace.prefix(m), k, seed=0)

        try:
            res, used, seconds = measure_policy(run, steps, budget)
            rows.append({"policy": info.name, "steps": used, "regret": res.cost, "sps": used / seconds})
        except Exception as exc:
            rows.append({"policy": info.name, "error": f"{type(exc).__name__}: {exc}"})
    return {"T": steps, "k": k, "nnz": int(trace.nnz), "rows": rows}


def run_optimum(model: str, steps: int, k: int, seed: int, timeout: float, solver: str) -> dict:
    row, _ = e2e.run_json("bench.optimum_child", model, str(steps), str(k), str(seed), solver, timeout=timeout)
    if "error" in row:
        return {"model": model, "T": steps, "capacity": k, "solver": solver, **row}
    return row


def section_optima(cfg: dict, seed: int, timeout: float) -> dict:
    """Each size with the default exact solver and with the pre-exact HiGHS path (``baseline``, see
    bench/optimum_child.py), one after the other in this run; ``speedup`` = baseline seconds / ours."""
    sizes = [("rm", T, k) for T, k in cfg["rm_opt"]] + [("nm", T, k) for T, k in cfg["nm_opt"]]
    rows = []
    for model, T, k in sizes:
        ours = run_optimum(model, T, k, seed, timeout, "netsimplex")
        base = run_optimum(model, T, k, seed, timeout, "baseline")
        if "seconds" in ours and "seconds" in base:
            ours.update(speedup=base["seconds"] / ours["seconds"], cpu_speedup=base["cpu_seconds"] / ours["cpu_seconds"],
                        same_cost=ours["cost"] == base["cost"], memory_ratio=ours["peak_rss_mb"] / base["peak_rss_mb"])
        rows += [ours, base]
    idle = subprocess.run([sys.executable, "-c", "import bench.workloads, kvcore.optima; "
                           "from bench.optimum_child import peak_rss_mb; print(peak_rss_mb())"],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    idle_mb = float(idle.stdout.strip() or "nan")
    return {"idle_process_rss_mb": idle_mb, "rows": rows}


def fmt_mult(x: float) -> str:
    """A multiple of the baseline with three significant digits (an engine policy is ~0.005x, not "0.00")."""
    return f"{x:7.3g}"


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:8.2f} M/s" if x >= 1e5 else f"{x / 1e3:8.1f} k/s"


def print_report(rep: dict) -> None:
    base = rep["baseline"]
    print(f"# bench ({rep['mode']}, seed {rep['seed']}, numba: {rep['compiled']}, kernel warm-up "
          f"{rep['warmup_seconds']:.2f} s)")
    print(f"baseline: {base['what']}, {base['requests']} requests: {fmt_rate(base['rps'])} "
          f"({base['seconds']:.3f} s) -- 'x base' columns are multiples of this")
    if "vs-lcs" in rep:
        v = rep["vs-lcs"]
        print(f"\n## kernels vs libCacheSim: Zipf(1.0), T={v['T']}, {v['objects']} objects, k={v['k']}, unit sizes")
        if "libcachesim" in v:
            print(f"   libCacheSim skipped: {v['libcachesim']}")
        else:
            print(f"   (oracleGeneral trace written once in {v['oracle_write_seconds']:.2f} s, not in the timings)")
        print(f"{'policy':8} {'ours misses':>12} {'theirs misses':>14} {'equal':>6} {'ours':>12} {'theirs':>12} "
              f"{'ours/theirs':>11} {'x base':>7}")
        for r in v["rows"]:
            theirs = (f"{r['theirs_misses']:14d} {str(r['equal']):>6}" if "theirs_misses" in r else f"{'-':>14} {'-':>6}")
            trate = fmt_rate(r["theirs_rps"]) if "theirs_rps" in r else "-"
            ratio = f"{r['ratio']:11.2f}" if "ratio" in r else f"{'-':>11}"
            print(f"{r['policy']:8} {r['ours_misses']:12d} {theirs} {fmt_rate(r['ours_rps']):>12} {trate:>12} "
                  f"{ratio} {fmt_mult(r['ours_rps'] / base['rps'])}")
    if "e2e" in rep:
        v = rep["e2e"]
        print(f"\n## end to end, fresh processes: T={v['T']} ({v['file_mb']:.0f} MB .npy), k={v['k']}, LRU + exact "
              f"optimum")
        if "libcachesim" in v:
            print(f"   libCacheSim skipped: {v['libcachesim']}")
        print(f"{'what':52} {'wall s':>7} {'misses':>9} {'opt misses':>10} {'equal':>6} {'ours/theirs':>11} "
              f"{'peak RSS':>9}")
        for r in v["rows"]:
            if "error" in r:
                print(f"{r['what']:52} error: {r['error']}")
                continue
            ratio = f"{r['ours_over_theirs']:11.2f}" if "ours_over_theirs" in r else f"{'-':>11}"
            print(f"{r['what']:52} {r['wall_seconds']:7.2f} {r['misses']:9d} {r['opt_misses']:10d} "
                  f"{str(r.get('equal', '-')):>6} {ratio} {r['peak_rss_mb']:6.0f} MB")
            if "phases" in r:
                print(f"{'':4}phases: " + ", ".join(f"{name} {sec:.2f} s" for name, sec in r["phases"].items()))
    if "memory" in rep:
        m = rep["memory"]
        r = m["run"]
        if "error" in r:
            print(f"\n## memory, T={m['T']}: error: {r['error']}")
        else:
            idle = m["idle"].get("peak_rss_mb", float("nan"))
            print(f"\n## memory: load + LRU + Belady on T={m['T']}, k={m['k']}: peak RSS {r['peak_rss_mb']:.0f} MB for "
                  f"a {r['file_mb']:.0f} MB file = {r['rss_over_file']:.2f}x (an idle process with the imports and "
                  f"numba loaded: {idle:.0f} MB); {r['wall_seconds']:.1f} s")
    if "startup" in rep:
        print("\n## startup (tiny trace, fresh process each)")
        for label, r in rep["startup"]["rows"].items():
            if "error" in r:
                print(f"{label:24} error: {r['error']}")
                continue
            ph = r["phases"]
            print(f"{label:24} wall {r['wall_seconds']:5.2f} s: imports {ph['imports']:.2f} s, first LRU call "
                  f"{ph['policy']:.2f} s, first Belady call {ph['optimum']:.2f} s")
    if "mrc" in rep:
        m = rep["mrc"]
        print(f"\n## all-sizes LRU curve ({m['distinct']} capacities) vs libCacheSim LRU at {len(m['sizes'])} sizes")
        if "libcachesim" in m:
            print(f"   ours {m['ours_seconds']:.2f} s; libCacheSim skipped: {m['libcachesim']}")
        else:
            print(f"   ours {m['ours_seconds']:.2f} s, libCacheSim {m['theirs_seconds']:.2f} s: ours is "
                  f"{m['ratio']:.1f}x faster; counts equal at all {len(m['sizes'])} sizes: {not m['mismatches']}")
    if "engine" in rep:
        e = rep["engine"]
        print(f"\n## RM policies, Zipf(1.0) T={e['T']}, k={e['k']}")
        print(f"{'policy':22} {'path':22} {'requests':>9} {'misses':>9} {'rate':>12} {'x base':>7}")
        for r in e["rows"]:
            if "error" in r:
                print(f"{r['policy']:22} {r['path']:22} error: {r['error']}")
                continue
            note = "" if r["requests"] == e["T"] else "  (prefix: full run over the budget)"
            print(f"{r['policy']:22} {r['path']:22} {r['requests']:9d} {r['misses']:9d} {fmt_rate(r['rps']):>12} "
                  f"{fmt_mult(r['rps'] / base['rps'])}{note}")
    if "nm" in rep:
        n = rep["nm"]
        print(f"\n## NM policies, attention trace T={n['T']}, nnz={n['nnz']} (32 per row), k={n['k']}")
        for r in n["rows"]:
            if "error" in r:
                print(f"{r['policy']:22} error: {r['error']}")
                continue
            note = "" if r["steps"] == n["T"] else "  (prefix: full run over the budget)"
            print(f"{r['policy']:22} {r['steps']:7d} steps {fmt_rate(r['sps']).replace('/s', ' steps/s'):>18} "
                  f"regret {r['regret']:12.3f}{note}")
    if "allocation" in rep:
        allocation.print_allocation(rep["allocation"])
    if "optima" in rep:
        o = rep["optima"]
        print(f"\n## exact optima (fresh process each; an idle process with the imports peaks at "
              f"{o['idle_process_rss_mb']:.0f} MB)")
        for r in o["rows"]:
            head = f"{r['model']}_opt T={r['T']:>8} k={r['capacity']:>5}"
            if "error" in r:
                print(f"{head}  error: {r['error']}")
                continue
            print(f"{head} {r['solver']:10} {r['seconds']:8.2f} s (CPU {r['cpu_seconds']:7.2f} s, "
                  f"{r['seconds'] / base['seconds']:7.1f} x base)  "
                  f"peak RSS {r['peak_rss_mb']:7.0f} MB (after building the trace: {r['rss_before_mb']:.0f} MB)  "
                  f"cost {r['cost']:.10g}" + (" certified" if r.get("certified") else ""))
            if "speedup" in r:
                print(f"{'':30}baseline/ours: wall time {r['speedup']:.1f}x, CPU time {r['cpu_speedup']:.1f}x, "
                      f"peak RSS {1 / r['memory_ratio']:.1f}x, same cost: {r['same_cost']}")


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run in well under a minute")
    ap.add_argument("--seed", type=whole_number(0), default=0)
    ap.add_argument("--opt-timeout", type=decimal(0.0, 1e7, open_low=True), default=600.0,
                    help="seconds allowed per exact optimum")
    ap.add_argument("--policy-budget", type=decimal(0.0, 1e7, open_low=True), default=60.0,
                    help="seconds allowed per engine policy run")
    ap.add_argument("--skip", nargs="*", default=[], choices=SECTIONS, help="sections to leave out")
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    rep: dict = {"mode": "quick" if args.quick else "full", "seed": args.seed, "compiled": kernels.compiled()}
    engine_T, engine_m, engine_k = cfg["engine"]
    engine_items = zipf_items(engine_T, engine_m, 1.0, args.seed)
    rep["baseline"] = baseline(engine_items)
    rep["warmup_seconds"] = warm_kernels()
    with tempfile.TemporaryDirectory(prefix="kv-bench-") as tmp:
        if {"vs-lcs", "e2e", "mrc"} - set(args.skip):
            big_T, big_m, big_k = cfg["big"]
            big_items = zipf_items(big_T, big_m, 1.0, args.seed)
            if "vs-lcs" not in args.skip:
                rep["vs-lcs"] = section_vs_lcs(big_items, big_k, Path(tmp))
            if "e2e" not in args.skip:
                rep["e2e"] = section_e2e(big_items, big_k, Path(tmp))
            if "mrc" not in args.skip:
                rep["mrc"] = section_mrc(big_items, cfg["mrc_sizes"], Path(tmp))
            del big_items
        if "memory" not in args.skip:
            rep["memory"] = section_memory(cfg["memory"], args.seed, Path(tmp))
        if "startup" not in args.skip:
            rep["startup"] = section_startup(Path(tmp))
    if "engine" not in args.skip:
        rep["engine"] = section_engine(engine_items, engine_k, args.policy_budget)
    if "nm" not in args.skip:
        rep["nm"] = section_nm(cfg["nm"][0], cfg["nm"][1], args.policy_budget, args.seed)
    if "allocation" not in args.skip:
        rep["allocation"] = allocation.section_allocation(allocation.QUICK if args.quick else allocation.FULL)
    if "optima" not in args.skip:
        rep["optima"] = section_optima(cfg, args.seed, args.opt_timeout)
    if args.json:
        print(json.dumps(rep, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    else:
        print_report(rep)
    return 0


if __name__ == "__main__":
    sys.exit(main())

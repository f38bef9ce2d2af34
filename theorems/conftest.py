"""Shared helpers for the proof-checking suite."""

from theorems.verify import Table


def explain(table: Table) -> str:
    """Failure message listing the rows that broke the bound."""
    rows = table.failures()
    lines = [f"{table.result}: {len(rows)} of {len(table.rows)} rows break '{table.statement}'"]
    for r in rows[:10]:
        lines.append(f"  {r.policy} on {r.workload}: k={r.k} h={r.h} ALG={r.alg_cost:.6g} OPT={r.opt_cost:.6g} "
                     f"ratio={r.ratio:.6g} bound={r.bound} {r.params}")
    return "\n".join(lines)

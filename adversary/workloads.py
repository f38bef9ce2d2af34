"""Seeded benign and mixed workloads of the practice claims (paper Sections 4, 8, 10, 11) and exhaustive families.

Each function states its parameters; none looks at a policy.
"""

from __future__ import annotations

import itertools
from typing import Iterator

import numpy as np

from kvcore.engine import make_rng
from kvcore.numbers import integer
from kvcore.traces import AttentionTrace

from .decoy_sleeper import decoy_and_sleeper
from .persistence import persistent_attention, zipf_focus_attention
from .topics import topic_shift


def dirichlet_attention(T: int, support: int = 3, seed=0) -> AttentionTrace:
    """Row ``t`` puts Dirichlet(1, ..., 1) mass on ``min(t + 1, support)`` distinct tokens of ``0..t`` drawn
    uniformly (a sparse, structureless attention pattern)."""
    rng = make_rng(seed)
    rows = []
    for t in range(integer(T, "T", 1)):
        m = min(t + 1, support)
        toks = rng.choice(t + 1, size=m, replace=False)
        rows.append(dict(zip(toks.tolist(), rng.dirichlet(np.ones(m)).tolist())))
    return AttentionTrace.from_rows(rows, f"dirichlet_attention(T={T}, support={support})")


def two_entry_traces(T: int, levels: tuple[float, ...]) -> Iterator[AttentionTrace]:
    """Every attention trace of ``T`` rows in which row ``t >= 1`` splits between token ``t`` and one earlier token
    ``i`` with mass ``x`` on ``i``, for every ``i < t`` and every ``x`` in ``levels`` (exhaustive over the family:
    ``prod_t (t * len(levels))`` traces)."""
    choices = [[(None, 1.0)]] + [[(i, x) for i in range(t) for x in levels] for t in range(1, T)]
    for combo in itertools.product(*choices):
        yield AttentionTrace.from_rows([{t: 1.0} if i is None else {i: x, t: 1.0 - x}
                                        for t, (i, x) in enumerate(combo)])


def sink_workloads(T: int, seeds: int = 1) -> dict[str, AttentionTrace]:
    """Synthetic traces with 4 attention sinks carrying 30% of every row: persistent attention (W = 32) and topic
    shifts (topics of ``T/4`` steps, 8 heavy tokens), seeds ``10+s`` and ``20+s``."""
    out = {}
    for s in range(seeds):
        out[f"persistent sinks=4 seed {s}"] = persistent_attention(T, 0.5, 32, 0.05, sinks=4, sink_mass=0.3,
                                                                   seed=10 + s)
        out[f"topic shift sinks=4 seed {s}"] = topic_shift(T, max(T // 4, 16), 8, sinks=4, sink_mass=0.3,
                                                           seed=20 + s).trace
    return out


def broad_and_sharp(n_broad: int, n_sharp: int, T: int, seed: int = 0) -> list[tuple[str, AttentionTrace]]:
    """Sequences with broad attention (uniform, Zipf exponent 0, over a focus list of 32 tokens) and sharp
    attention (exponent 1.5 over 4): ``zipf_focus_attention`` with one sink, churn 0.2 and no self-attention (so the
    arriving token does not count as heavy at every step); seeds ``seed, seed+1, ...``."""
    out = []
    for j in range(n_broad + n_sharp):
        s, focus = (0.0, 32) if j < n_broad else (1.5, 4)
        out.append((f"{'broad' if j < n_broad else 'sharp'} s={s} focus={focus} seed {seed + j}",
                    zipf_focus_attention(T, focus=focus, zipf_s=s, churn=0.2, self_mass=0.0, seed=seed + j)))
    return out


def adversarial_and_benign(T: int, k: int) -> dict[str, tuple[str, AttentionTrace]]:
    """name -> (kind, trace) for the Section 10 comparison: adversarial (decoy-and-sleeper with sleeper mass
    ``1/(4k)``, below every decoy's) and benign (persistent attention with 4 sinks; topic shifts whose two heavy
    sets of ``k/2`` tokens do not fit together)."""
    return {"decoy-and-sleeper": ("adversarial", decoy_and_sleeper(k, 1 / (4 * k), T - k - 1)),
            "persistent sinks=4": ("benign", persistent_attention(T, 0.5, 32, 0.05, sinks=4, sink_mass=0.3, seed=5)),
            "topic shift": ("benign", topic_shift(T, max(T // 4, 16), max(2, k // 2), sinks=4, sink_mass=0.3,
                                                  seed=6).trace)}


def paused_sinks(trace: AttentionTrace, n_sinks: int, every: int, length: int) -> AttentionTrace:
    """``trace`` with the attention on tokens ``0..n_sinks-1`` moved to the arriving token during pauses: rows
    ``t`` with ``t % every >= every - length`` (after the sinks arrived).  A sink that is idle for ``length`` rows
    looks unimportant to a rule that scores recent attention only (TOVA's last row, a short window) and is dropped,
    though it is attended again right after -- the case where pinning the sinks outside the rule helps (paper
    Section 8).  Rows still sum to 1."""
    n_sinks, every, length = integer(n_sinks, "n_sinks", 1), integer(every, "every", 2), integer(length, "length",
                                                                                                           1)
    rows = []
    for t, idx, w in trace.rows():
        row = dict(zip(idx.tolist(), w.tolist()))
        if t >= n_sinks and t % every >= every - length:
            moved = sum(row.pop(i, 0.0) for i in range(n_sinks))
            row[t] = row.get(t, 0.0) + moved
        rows.append(row)
    return AttentionTrace.from_rows(rows, f"{trace.source} (sinks paused {length} of every {every} rows)")

"""An NM trace aimed at a policy's tie-break (paper Sections 4 and 10: "randomize the tie-break")."""

from __future__ import annotations

import numpy as np

from kvcore.engine import NMSimulator
from kvcore.traces import AttentionTrace


def tie_targeted_trace(policy, k: int, T: int, sink_steps: int, seed: int = 0) -> AttentionTrace:
    """Rows ``0..sink_steps-1`` put all mass on token 0, so every other token keeps score exactly 0 and all of them
    tie; later rows put all mass on the lowest token that ``policy`` (driven once through
    :class:`kvcore.engine.NMSimulator` with ``seed``) has dropped, or on token 0 while none is.  Built against a
    fixed-tie-break policy it is the adversary a deterministic tie-break invites; replayed against a randomized one
    it is an oblivious input (fixed before the coins)."""
    sim = NMSimulator(policy, k, seed)
    rows, dropped = [], None
    one = np.ones(1)
    for t in range(T):
        target = 0 if (t < sink_steps or dropped is None) else dropped
        rows.append({target: 1.0})
        before = sim.resident | {t}
        sim.step(np.array([target]), one)
        gone = before - sim.resident - {0}
        if t >= sink_steps - 1 and gone and dropped is None:
            dropped = min(gone)
    return AttentionTrace.from_rows(rows, f"tie_targeted(k={k}, T={T}, sink_steps={sink_steps}, policy={sim.name})")

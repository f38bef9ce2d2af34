"""Which registered policies the array kernels of :mod:`kvcore.kernels` and :mod:`kvcore.block_kernel` stand for.

kvcore may import nothing from this package, so the policy side declares the pairing.  Not a policy module: it
registers no policy and is imported by ``policies/__init__.py`` after every policy module.

* :mod:`kvcore.kernels`: LRU, FIFO and LFU (exact classes, see :func:`kvcore.kernels.kernel_for`) are the kernels
  ``lru``, ``fifo``, ``lfu`` in RM on unit-cost single-request traces.  LRU's ``threshold`` only decides which NM
  attention counts as a use; an RM run on a paging trace observes no attention, so every threshold is the same rule
  there.
* :mod:`kvcore.block_kernel`: :func:`block_rule` gives the kernel's rule for exactly LRU, LFU and EMA-Block, plain or
  wrapped once in Persistent; the block study runs every other policy through the engine.
* :mod:`kvcore.closed_loop` (the quality study's closed loop): FIFO (a sliding window in NM), StreamingLLM with its
  sinks, TOVA, H2O with its recent part, each as at the capacity it runs with, ACC (H2O's rule with a recent part
  of one token, or none without ``protect_arrival``), LRU with its ``threshold`` and Scissorhands dropping one
  position per step (``drop_amount = 1``; its default importance share ``1 / |R_s|`` is the threshold ``-1``),
  GD-A with the attention tie-break and unit (``auto`` in NM) or zero weights, Random (its draws taken from
  the head's generator as the policy takes them) and the Section 10 ``Default`` (its ties drawn inside the
  kernel, in the order of the policy's own lists).
"""

from __future__ import annotations

from kvcore.block_kernel import BlockRule
from kvcore.closed_loop import ClosedLoopRule, register_rule
from kvcore.kernels import register_policy

from .acc import ACC
from .default_policy import DefaultPolicy
from .ema_block import EMABlock
from .fifo import FIFO
from .gda import GDA
from .h2o import H2O
from .lfu import LFU
from .lru import LRU
from .persistent_state import Persistent
from .random_evict import Random
from .scissorhands import Scissorhands
from .streaming_llm import StreamingLLM
from .tova import TOVA

register_policy(LRU, "lru")
register_policy(FIFO, "fifo")
register_policy(LFU, "lfu")


def default_rule(policy: DefaultPolicy, k: int) -> ClosedLoopRule:
    """The Section 10 default at capacity ``k``.  With ``n_sinks < k <= recent + n_sinks`` its recency floor and
    sinks hold all but at most one resident position whenever it evicts, so the victim is always the oldest position
    that is not a sink, with no score compared and no tie drawn: StreamingLLM's window with ``n_sinks`` sinks (the
    policy's docstring), a rule that reads no rows, so a replay need not compute them and can share the pass of the
    same schedule (:mod:`realtrace.quality.run`).  The property test of the compiled closed loop compares it with the
    policy object, which does read its rows."""
    if policy.n_sinks < k <= policy.recent + policy.n_sinks:
        return ClosedLoopRule("streaming", policy.n_sinks)
    return ClosedLoopRule("default", policy.recent, gamma=policy.gamma, sinks=policy.n_sinks)


register_rule(FIFO, lambda policy, k: ClosedLoopRule("fifo"))
register_rule(StreamingLLM, lambda policy, k: ClosedLoopRule("streaming", min(policy.n_sinks, k)))
register_rule(TOVA, lambda policy, k: ClosedLoopRule("tova"))
register_rule(H2O, lambda policy, k: ClosedLoopRule("h2o", policy.recent_at(k)))
register_rule(ACC, lambda policy, k: ClosedLoopRule("h2o", 1 if policy.protect_arrival else 0))
register_rule(LRU, lambda policy, k: ClosedLoopRule("lru", threshold=policy.threshold))
register_rule(GDA, lambda policy, k: None if policy.tiebreak != "attention" or policy.weight not in (
    "auto", "unit", "zero") else ClosedLoopRule("gda", min(policy.n_pinned, k), policy.threshold, gamma=policy.gamma,
                                                weight=0.0 if policy.weight == "zero" else 1.0))
register_rule(Random, lambda policy, k: ClosedLoopRule("random"))
register_rule(DefaultPolicy, default_rule)
register_rule(Scissorhands, lambda policy, k: None if policy.drop_amount != 1 else ClosedLoopRule(
    "scissorhands", min(policy.recent, k), -1.0 if policy.threshold is None else policy.threshold, policy.history))


def block_rule(policy) -> BlockRule | None:
    """The :class:`kvcore.block_kernel.BlockRule` that reproduces ``policy`` when its type is exactly LRU, LFU or
    EMA-Block (whose ``unattended`` reading, ``alpha`` and ``beta`` it carries), or exactly Persistent around one of
    those; None for anything else, subclasses and nested wrappers included (they may change any hook)."""
    persistent = type(policy) is Persistent
    inner = policy.inner if persistent else policy
    kind = type(inner)
    if kind is LRU:
        return BlockRule("lru", persistent)
    if kind is LFU:
        return BlockRule("lfu", persistent)
    if kind is EMABlock:
        return BlockRule(inner.unattended, persistent, inner.alpha, inner.beta)
    return None

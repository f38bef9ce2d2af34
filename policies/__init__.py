"""Eviction policies: one small file per policy, each registered with its metadata.

Adding a policy = one module holding one ``@register``-decorated dataclass + one line in ``_MODULES`` below.
The shared test matrix (``tests/test_policy_matrix.py``) and every applicable theorem module pick it up.
"""

from importlib import import_module

from .base import Policy
from .registry import REGISTRY, PolicyInfo, all_policies, get, make, register, resolve

# -- classic paging policies (issue 2) --
_MODULES = [
    "lru",
    "fifo",
    "fwf", "lifo", "lfu", "random_evict", "marking", "landlord", "balance",
]
# -- attention-aware policies of the paper (issue 3) --
_MODULES += [
    "acc", "decayed_acc", "h2o", "streaming_llm", "tova", "scissorhands", "gda", "rlruh", "lrfu", "default_policy",
]
# -- figure-page (seed 002) block policies and wrappers (issue 3, block study) --
_MODULES += [
    "ema_block",
    "persistent_state",
]
# -- controls and wrappers the theorem modules measure (Sections 8 and 10) --
_MODULES += ["default_fixed_ties", "sink_pinned"]
_MODULES += ["online_min"]  # the H_k-competitive randomized paging algorithm (issue 13)
_MODULES += ["clock"]  # second-chance Clock, both admission bits (issue 50 item 6)

for _m in _MODULES:
    import_module(f"{__name__}.{_m}")
import_module(f"{__name__}.kernels")  # pairs LRU, FIFO, LFU with kvcore's array kernels (fast path of the engine)

__all__ = ["Policy", "PolicyInfo", "REGISTRY", "all_policies", "get", "make", "register", "resolve"]

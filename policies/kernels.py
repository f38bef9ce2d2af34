"""Which registered policies the array kernels of :mod:`kvcore.kernels` stand for.

kvcore may import nothing from this package, so the policy side declares the pairing: LRU, FIFO and LFU (exact
classes, see :func:`kvcore.kernels.kernel_for`) are the kernels ``lru``, ``fifo``, ``lfu`` in RM on unit-cost
single-request traces.  LRU's ``threshold`` only decides which NM attention counts as a use; an RM run on a paging
trace observes no attention, so every threshold is the same rule there.  Imported by ``policies/__init__.py``.
"""

from __future__ import annotations

from kvcore.kernels import register_policy

from .fifo import FIFO
from .lfu import LFU
from .lru import LRU

register_policy(LRU, "lru")
register_policy(FIFO, "fifo")
register_policy(LFU, "lfu")

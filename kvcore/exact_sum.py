"""The correctly rounded sum of a float64 array in one compiled pass: :func:`fsum_array` returns what
``math.fsum(x.tolist())`` returns (Shewchuk's algorithm, which Python's ``fsum`` implements), without a Python float
object per element.

How.  Every finite float is an integer mantissa ``m`` (``|m| < 2^53``) times ``2^e``; the sum is kept exactly as
integers ``bins[e]`` of weight ``2^e`` (int64, one per exponent a float can have).  Adding a mantissa to its bin can
overflow only after ``2^10`` additions, so every 512 additions the bins are carried: each bin keeps its low 32 bits
and passes the rest to the bin 32 exponents up (an arithmetic shift, so negative bins carry correctly).  The exact
total ``sum_e bins[e] 2^e`` is then formed as one Python integer over a power of two, whose true division Python
rounds correctly -- the same float ``fsum`` returns.  A non-finite element (``inf``, ``nan``) is left to ``fsum``.

The optima's reported costs sum up to millions of lost entries (``T^2 / 2`` exit entries at T = 2,000); the plain
``fsum`` of the list took ~0.2 s per solve, a sixth of an exact optimum of one head and budget.
"""

from __future__ import annotations

import math

import numpy as np

from .kernels import Kernel

_LOWEST = 1074 + 52  # mantissa exponent of the smallest subnormal: 2^-1074 = 1 * 2^(-1074) -> frexp (0.5, -1073)
_BINS = _LOWEST + 1024 + 64 + 1  # up to the largest finite float's exponent, with room for the carries above it
_CARRY_EVERY = 512  # 512 mantissas below 2^53 plus a carried-in bin below 2^32 stay below 2^63


def _binned(x, bins):
    """Add every element of ``x`` exactly into ``bins`` (module docstring); False when one is not finite."""
    n, count = x.size, 0
    low, top = bins.size, -1  # the lowest and highest bin that may be nonzero
    for j in range(n + 1):
        if j < n:
            v = x[j]
            if v == 0.0:
                continue
            if not math.isfinite(v):
                return False
            f, e = math.frexp(v)
            b = e - 53 + _LOWEST
            bins[b] += np.int64(math.ldexp(f, 53))
            low, top = min(low, b), max(top, b)
            count += 1
            if count < _CARRY_EVERY:
                continue
        i = low  # carry, every 512 additions and once at the end: ascending, so a carried part is carried again
        while i <= top and i < bins.size - 32:
            hi = bins[i] >> 32
            if hi != 0:
                bins[i] -= hi << 32
                bins[i + 32] += hi
                top = max(top, i + 32)
            i += 1
        count = 0
    return True


binned = Kernel(_binned)


def fsum_array(x) -> float:
    """``math.fsum(x)`` of a float64 array (module docstring)."""
    a = np.ascontiguousarray(x, dtype=np.float64).ravel()
    bins = np.zeros(_BINS, dtype=np.int64)
    if not binned(a, bins):
        return math.fsum(a.tolist())
    total = 0
    for i in np.flatnonzero(bins)[::-1]:
        total += int(bins[i]) << int(i)
    return total / (1 << _LOWEST)


__all__ = ["binned", "fsum_array"]

"""``log``, ``exp`` and ``pow`` that give the same bits on every machine, for every value that reaches an artifact.

Why.  numpy picks its float64 loops for ``power``, ``log``, ``log10``, ``exp`` and ``logspace`` at run time from the
CPU: with AVX-512 it calls Intel's SVML kernels, elsewhere the C library, and glibc (>= 2.28) in turn picks an FMA or
a plain build of ``pow``/``exp``/``log`` by CPU.  They disagree in the last bit on a few percent of arguments
(measured on this project's machine: 10,771 of 200,000 values of ``r ** -1.1`` between SVML and glibc; glibc with and
without its FMA build differ too), so a figure, a generated trace or a report computed with them changed its bytes
from one machine to the next (issue 53: four figures with log axes and two persistent traces).

How.  Only IEEE-754 basic operations -- ``+ - * /`` on float64, each correctly rounded by every x86-64 and ARM
processor at every vector width -- plus the exact ``frexp``/``ldexp``/``rint``, each a separate numpy call (so no
compiler can fuse a multiply and an add), in a fixed order:

- ``ln x``: ``x = m 2^e`` with ``m`` in ``[sqrt(1/2), sqrt(2))``; ``f = (m-1)/(m+1)``, ``ln m = 2 atanh f =
  2 (f + f^3/3 + ... + f^21/21)`` (``|f| <= 0.1716``: the next term is below ``7e-19`` of the sum); ``ln x = e ln2_hi +
  (e ln2_lo + ln m)`` with ``ln 2`` split so that ``e ln2_hi`` is exact (Cody & Waite, "Software Manual for the
  Elementary Functions", 1980).
- ``exp y``: ``k = rint(y / ln 2)``, ``r = (y - k ln2_hi) - k ln2_lo`` (``|r| <= 0.35``), ``e^r`` by its Taylor
  polynomial of degree 13 in Horner form (the next term is below ``5e-18``), then ``2^k`` exactly.
- ``x^y = exp(y ln x)``; ``log_b x = ln x / ln b``.

Accuracy (against 60-digit decimal arithmetic, ``tests/test_portable_math.py``): ``ln`` within 3 units in the last
place (2.42 measured, next to 1), ``exp`` within 1.5 (0.97 measured); ``x^y`` within ``2 + 2 |y ln x|`` units, since
the rounding of ``y ln x`` is scaled by ``e^(y ln x)``.  Not correctly rounded -- deterministic, which is what an artifact compared byte for byte needs.

Scope: values that are written (trace weights, plotted coordinates, formula values a figure draws).  A sampler that
turns a float into an integer (the block workload's geometric and Zipf draws) keeps the C library: a last-bit
difference changes its draw only when the float lands within one unit in the last place of a boundary.
"""

from __future__ import annotations

import math

import numpy as np

_LN2_HI = float.fromhex("0x1.62e42p-1")  # ln 2 to 21 bits: e * _LN2_HI is exact for |e| < 2^32
_LN2_LO = float.fromhex("0x1.fdf473de6af28p-22")  # ln 2 - _LN2_HI, rounded
_SQRT_HALF = float.fromhex("0x1.6a09e667f3bcdp-1")
_ATANH_TERMS = tuple(1.0 / (2 * j + 1) for j in range(11))  # 1, 1/3, ..., 1/21
_EXP_TERMS = tuple(1.0 / math.factorial(j) for j in range(14))  # 1/0!, ..., 1/13!
_EXP_MAX = 709.782712893384  # above: overflow to inf (the largest float is e^709.78...)
_EXP_MIN = -745.1332191019412  # below: underflow to 0


def _array(x) -> np.ndarray:
    return np.array(x, dtype=np.float64, ndmin=1)


def _shaped(out: np.ndarray, *like):
    """Scalars in, a float out; arrays in, an array of their broadcast shape out."""
    if all(np.ndim(a) == 0 for a in like):
        return float(out.reshape(-1)[0])
    return out.reshape(np.broadcast_shapes(*(np.shape(a) for a in like)))


def _ln(x: np.ndarray) -> np.ndarray:
    good = np.isfinite(x) & (x > 0)
    m, e = np.frexp(np.where(good, x, 1.0))
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)  # exact
    e = (e - low).astype(np.float64)
    f = np.divide(m - 1.0, m + 1.0)
    z = np.multiply(f, f)
    series = np.full_like(z, _ATANH_TERMS[-1])
    for c in _ATANH_TERMS[-2::-1]:
        series = np.add(np.multiply(series, z), c)
    ln_m = np.multiply(np.multiply(f, series), 2.0)
    out = np.add(np.multiply(e, _LN2_HI), np.add(np.multiply(e, _LN2_LO), ln_m))
    out = np.where(x == 0, -np.inf, out)
    out = np.where((x < 0) | np.isnan(x), np.nan, out)
    return np.where(np.isposinf(x), np.inf, out)


def _exp(y: np.ndarray) -> np.ndarray:
    y0 = np.clip(np.where(np.isfinite(y), y, 0.0), _EXP_MIN, _EXP_MAX)  # beyond: replaced below, never scaled
    k = np.rint(np.divide(y0, _LN2_HI + _LN2_LO))
    r = np.subtract(np.subtract(y0, np.multiply(k, _LN2_HI)), np.multiply(k, _LN2_LO))
    p = np.full_like(r, _EXP_TERMS[-1])
    for c in _EXP_TERMS[-2::-1]:
        p = np.add(np.multiply(p, r), c)
    # 2^k in two exact halves, so that a result near the subnormal range is scaled without overflowing first
    half = np.floor_divide(k, 2).astype(np.int64)
    out = np.ldexp(np.ldexp(p, half), k.astype(np.int64) - half)
    out = np.where(y > _EXP_MAX, np.inf, np.where(y < _EXP_MIN, 0.0, out))  # infinities included
    return np.where(np.isnan(y), np.nan, out)


def log(x, base: float = math.e):
    """``log_base(x)`` (module docstring); ``-inf`` at 0, ``nan`` below, as numpy gives."""
    base = float(base)
    if not (base > 0.0 and base != 1.0 and math.isfinite(base)):
        raise ValueError(f"log base {base}: must be positive, finite and not 1")
    out = _ln(_array(x))
    if base != math.e:
        out = np.divide(out, _ln(_array(base))[0])
    return _shaped(out, x)


def exp(y):
    """``e^y`` (module docstring)."""
    return _shaped(_exp(_array(y)), y)


def power(x, y):
    """``x^y`` for ``x >= 0``: ``exp(y ln x)``, with ``x^0 = 1^y = 1`` and ``0^y = 0`` (``y > 0``) or ``inf`` exactly;
    ``nan`` for ``x < 0`` (no caller raises a negative number to a power)."""
    xa, ya = np.broadcast_arrays(_array(x), _array(y))
    out = _exp(np.multiply(ya, _ln(xa)))
    out = np.where(xa == 0, np.where(ya > 0, 0.0, np.where(ya < 0, np.inf, 1.0)), out)
    out = np.where((ya == 0) | (xa == 1), 1.0, out)
    return _shaped(out, x, y)


def logspace(start: float, stop: float, num: int, base: float = 10.0) -> np.ndarray:
    """``numpy.logspace``: ``base^linspace(start, stop, num)`` with :func:`power`."""
    return power(float(base), np.linspace(start, stop, num))

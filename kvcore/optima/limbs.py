"""Exact wide integers as rows of int64 limbs: the flow optima's exact arithmetic without Python integers.

Why.  Attention weights carry 53 significant bits at many binary exponents, so their exact integers
(:func:`kvcore.optima.mincost.exact_integers`) and the NM network's prefix masses run to 90-200 bits.  Held as
Python integers in object arrays, the exact parts of an NM solve on complete rows (forming the prefix masses,
rounding them for the int64 simplex, the potentials along the final tree and every arc's reduced cost for the
certificate) took about three quarters of the solve at T = 2,000 (2.6 of 3.5 s per head and budget; issue 30).
Here the same integers are rows of fixed-width limbs and every operation is one compiled loop over them.

Representation.  A :class:`Limbs` holds ``d``, an ``(m, L)`` int64 array; row ``i`` is the integer
``sum_j d[i, j] * 2**(31 j)``.  *Normalized* rows have limbs ``0 .. L-2`` in ``[0, 2**31)`` and a signed last
limb, so a row is negative exactly when its last limb is, and every integer in ``(-2**(31 L - 1), 2**(31 L - 1))``
has exactly one normalized row.  Sums of a few normalized rows are taken limb by limb (no limb can overflow int64:
each is below ``2**33`` in magnitude) and normalized once by carrying ``x >> 31`` (an arithmetic shift, i.e. floor
division) upward.  The width is chosen by the caller with room for every value it will form (:func:`width_for`).
The plain functions run as Python when numba is absent (:class:`kvcore.kernels.Kernel`); the tests compare every
operation with Python integers on random values, compiled and plain.
"""

from __future__ import annotations

import numpy as np

from ..kernels import Kernel, _inlined

LIMB = 31
MASK = (1 << LIMB) - 1


def width_for(bits: int) -> int:
    """Limbs for integers of magnitude below ``2**bits`` (one limb of headroom for the sign)."""
    return max(1, bits // LIMB + 1)


@_inlined
def carry_row(d, i):
    """Normalize row ``i`` of ``d`` in place: each limb below the top keeps its low 31 bits and carries the rest
    (``x >> 31``, floor) into the next."""
    for j in range(d.shape[1] - 1):
        c = d[i, j] >> LIMB
        d[i, j] -= c << LIMB
        d[i, j + 1] += c


@_inlined
def row_sign(d, i):
    """Sign of normalized row ``i`` of ``d`` (-1, 0, 1): negative exactly when its top limb is."""
    L = d.shape[1]
    if d[i, L - 1] < 0:
        return -1
    for j in range(L):
        if d[i, j] != 0:
            return 1
    return 0


def _normalize(d):
    """Every row of ``d`` normalized in place (module docstring)."""
    for i in range(d.shape[0]):
        carry_row(d, i)


def _from_scaled(sign, odd, shift, d):
    """Row ``i`` of the zeroed ``d`` set to ``sign[i] * odd[i] * 2**shift[i]`` (``0 <= odd < 2**62``, normalized)."""
    m, L = d.shape
    for i in range(m):
        q = shift[i] // LIMB
        r = shift[i] - q * LIMB
        lo = odd[i] & MASK
        hi = odd[i] >> LIMB
        # lo << r < 2**61 and hi << r < 2**61: each part fits its int64 limb before the carries move it up
        d[i, q] = sign[i] * (lo << r)
        if q + 1 < L:
            d[i, q + 1] = sign[i] * (hi << r)
        carry_row(d, i)


def _segment_prefix(x, counts, out):
    """``out`` = running sums of the rows of ``x``, restarted at each segment (``counts`` rows each), normalized."""
    i = 0
    for c in counts:
        for r in range(c):
            for j in range(x.shape[1]):
                out[i, j] = x[i, j] + (out[i - 1, j] if r > 0 else 0)
            carry_row(out, i)
            i += 1


def _reduced(cost, pot, tail, head, out, signs):
    """``signs[a]`` = sign of ``cost[a] + pot[tail[a]] - pot[head[a]]`` for every arc, and the value itself in
    ``out[a]`` when ``out`` has a row per arc (an empty ``out`` stores nothing: a certificate needs only the signs,
    and not writing ``m`` rows saves their memory)."""
    m, L = cost.shape
    store = out.shape[0] == m
    row = np.zeros((1, L), np.int64)
    for a in range(m):
        for j in range(L):
            row[0, j] = cost[a, j] + pot[tail[a], j] - pot[head[a], j]
        carry_row(row, 0)
        signs[a] = row_sign(row, 0)
        if store:
            out[a, :] = row[0, :]


def _tree_potentials(cost, tail, head, pred, order, pot):
    """Potentials along the simplex tree (``pred``, preorder ``order``, root last): ``pot[v]`` such that every tree
    arc's reduced cost ``cost[a] + pot[tail[a]] - pot[head[a]]`` is 0; artificial arcs (``>= m``) cost 0."""
    m = cost.shape[0]
    N, L = pot.shape
    root = N - 1
    pot[root, :] = 0
    for idx in range(1, N):
        v = order[idx]
        a = pred[v]
        if a >= m:
            pot[v, :] = pot[root, :]
            continue
        if tail[a] == v:  # tree arc v -> head: pot[v] = pot[head] - cost
            u, s = head[a], -1
        else:  # tree arc tail -> v: pot[v] = pot[tail] + cost
            u, s = tail[a], 1
        for j in range(L):
            pot[v, j] = pot[u, j] + s * cost[a, j]
        carry_row(pot, v)


def _signs(d, out):
    """``out[i]`` = sign of normalized row ``i`` (-1, 0, 1)."""
    for i in range(d.shape[0]):
        out[i] = row_sign(d, i)


def _bit_lengths(d, out):
    """``out[i]`` = bit length of ``|row i|``."""
    m, L = d.shape
    mag = np.zeros((1, L), np.int64)
    for i in range(m):
        sign = -1 if d[i, L - 1] < 0 else 1
        for j in range(L):
            mag[0, j] = sign * d[i, j]
        carry_row(mag, 0)
        out[i] = 0
        for j in range(L - 1, -1, -1):
            if mag[0, j] != 0:
                x, b = mag[0, j], 0
                while x > 0:
                    x >>= 1
                    b += 1
                out[i] = LIMB * j + b
                break


def _shift_round(d, k, bound, out):
    """``out[i] = clip(floor((row_i + 2**(k-1)) / 2**k), -bound, bound)`` (``k > 0``; ``k = 0``: the row clipped),
    exactly; ``0 <= bound < 2**62``."""
    m, L = d.shape
    q = k // LIMB
    r = k - q * LIMB
    if q >= L:  # |row| < 2**(31 L - 1) <= 2**(k-1): every row rounds to 0
        out[:] = 0
        return
    n = L - q
    t = np.zeros((1, L), np.int64)
    v = np.zeros((1, n), np.int64)
    for i in range(m):
        t[0, :] = d[i, :]
        if k > 0:
            b = (k - 1) // LIMB
            t[0, b] += 1 << (k - 1 - b * LIMB)
            carry_row(t, 0)
        # floor division by 2**k: limbs move down q places and r bits; the top limb keeps its sign
        for j in range(n - 1):
            v[0, j] = (t[0, j + q] >> r) + (((t[0, j + q + 1] << (LIMB - r)) & MASK) if r > 0 else 0)
        v[0, n - 1] = t[0, L - 1] >> r
        neg = v[0, n - 1] < 0
        if neg:
            for j in range(n):
                v[0, j] = -v[0, j]
            carry_row(v, 0)
        big = False
        for j in range(2, n):
            if v[0, j] != 0:
                big = True
        x = v[0, 0] + ((v[0, 1] << LIMB) if n > 1 else 0)
        if big or x > bound:
            x = bound
        out[i] = -x if neg else x


def _to_int64(d, out):
    """``out[i]`` = row ``i`` as int64 (the caller has checked it fits in 62 bits: arithmetic modulo ``2**64``)."""
    m, L = d.shape
    for i in range(m):
        v = d[i, 0]
        if L > 1:
            v += d[i, 1] << LIMB
        if L > 2:
            v += d[i, 2] << (2 * LIMB)
        out[i] = v


normalize = Kernel(_normalize)
from_scaled = Kernel(_from_scaled)
segment_prefix_kernel = Kernel(_segment_prefix)
reduced_kernel = Kernel(_reduced)
tree_potentials_kernel = Kernel(_tree_potentials)
signs_kernel = Kernel(_signs)
bit_lengths_kernel = Kernel(_bit_lengths)
shift_round_kernel = Kernel(_shift_round)
to_int64_kernel = Kernel(_to_int64)


class Limbs:
    """Exact integers as normalized limb rows (module docstring); ``d`` is ``(m, L)`` int64."""

    __slots__ = ("d",)

    def __init__(self, d: np.ndarray):
        self.d = np.ascontiguousarray(d, dtype=np.int64)

    @classmethod
    def of(cls, ints, width: int) -> "Limbs":
        """``ints`` (int64, Python integers in an object array, or :class:`Limbs`) with at least ``width`` limbs each
        (exactly ``width`` unless ``ints`` is a wider :class:`Limbs`)."""
        if isinstance(ints, Limbs):
            return ints.widened(width)
        ints = np.asarray(ints)
        d = np.zeros((ints.size, width), np.int64)
        if ints.dtype == object:
            rest = ints.copy()
            for j in range(width - 1):
                d[:, j] = (rest & MASK).astype(np.int64)
                rest = rest >> LIMB
            d[:, -1] = rest.astype(np.int64)  # floor shifts leave the signed remainder for the top limb
            return cls(d)
        ints = ints.astype(np.int64)
        from_scaled(np.sign(ints), np.abs(ints), np.zeros(ints.size, np.int64), d)
        return cls(d)

    @classmethod
    def scaled(cls, sign: np.ndarray, odd: np.ndarray, shift: np.ndarray, width: int) -> "Limbs":
        """``sign * odd * 2**shift`` per entry (``0 <= odd < 2**62``, ``shift >= 0``)."""
        d = np.zeros((odd.size, width), np.int64)
        from_scaled(np.asarray(sign, np.int64), np.asarray(odd, np.int64), np.asarray(shift, np.int64), d)
        return cls(d)

    @property
    def size(self) -> int:
        return int(self.d.shape[0])

    @property
    def width(self) -> int:
        return int(self.d.shape[1])

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index) -> "Limbs":
        return Limbs(self.d[index])

    def __neg__(self) -> "Limbs":
        d = -self.d
        normalize(d)
        return Limbs(d)

    def widened(self, width: int) -> "Limbs":
        """The same integers with at least ``width`` limbs (``self`` when it has as many)."""
        if width <= self.width:
            return self
        d = np.zeros((self.size, width), np.int64)
        d[:, :self.width] = self.d
        normalize(d)  # the old top limb's sign and high bits carry into the new limbs
        return Limbs(d)

    def signs(self) -> np.ndarray:
        out = np.empty(self.size, np.int8)
        signs_kernel(self.d, out)
        return out

    def bit_length(self) -> int:
        """Bits of the largest magnitude (0 for no rows or all zero)."""
        if self.size == 0:
            return 0
        out = np.empty(self.size, np.int64)
        bit_lengths_kernel(self.d, out)
        return int(out.max())

    def shift_round(self, k: int, bound: int) -> np.ndarray:
        """int64: ``round(x / 2**k)`` (halves up) clipped to ``[-bound, bound]``, exactly."""
        out = np.empty(self.size, np.int64)
        shift_round_kernel(self.d, np.int64(k), np.int64(bound), out)
        return out

    def to_int64(self) -> np.ndarray:
        """int64 copy; the integers must fit in 62 bits."""
        if self.bit_length() > 62:
            raise OverflowError(f"limbs of {self.bit_length()} bits do not fit in int64")
        out = np.empty(self.size, np.int64)
        to_int64_kernel(self.d, out)
        return out

    def to_objects(self) -> np.ndarray:
        """The integers as Python integers in an object array."""
        out = self.d[:, -1].astype(object)
        for j in range(self.width - 2, -1, -1):
            out = (out << LIMB) + self.d[:, j].astype(object)
        return out


def segment_prefix(x: Limbs, counts: np.ndarray) -> Limbs:
    """Running sums of ``x``'s rows restarted every ``counts[s]`` rows (``sum(counts) == x.size``); ``x`` needs the
    width of the largest sum."""
    out = np.empty_like(x.d)
    segment_prefix_kernel(x.d, np.asarray(counts, np.int64), out)
    return Limbs(out)


def join(parts) -> "Limbs | np.ndarray":
    """Concatenation of int64 arrays and :class:`Limbs` (int64 when none is :class:`Limbs`), at the widest width."""
    if not any(isinstance(p, Limbs) for p in parts):
        return np.concatenate(parts)
    ints = [np.asarray(p, np.int64) for p in parts if not isinstance(p, Limbs)]
    bits = max((int(np.abs(p).max()).bit_length() for p in ints if p.size), default=0)
    width = max([width_for(bits)] + [p.width for p in parts if isinstance(p, Limbs)])
    return Limbs(np.concatenate([Limbs.of(p, width).d for p in parts]))


def tree_potentials(cost: Limbs, tail: np.ndarray, head: np.ndarray, pred: np.ndarray, order: np.ndarray,
                    width: int) -> Limbs:
    """Exact potentials zeroing every tree arc's reduced cost (``pred`` / ``order`` of the simplex, root last);
    ``width`` must hold any sum of ``len(order)`` costs."""
    cost = cost.widened(width)
    pot = np.zeros((order.size, cost.width), np.int64)
    tree_potentials_kernel(cost.d, tail, head, pred, order, pot)
    return Limbs(pot)


def reduced_costs(cost: Limbs, pot: Limbs, tail: np.ndarray, head: np.ndarray, store: bool = True
                  ) -> tuple[Limbs | None, np.ndarray]:
    """``(rc, signs)``: ``rc[a] = cost[a] + pot[tail[a]] - pot[head[a]]`` for every arc, exactly (at the wider of the
    two widths, which must hold every result; ``None`` unless ``store``), and its signs (int8)."""
    c, pot = cost.widened(pot.width), pot.widened(cost.width)
    out = np.empty((c.size if store else 0, c.width), np.int64)
    signs = np.empty(c.size, np.int8)
    reduced_kernel(c.d, pot.d, tail, head, out, signs)
    return (Limbs(out) if store else None), signs


__all__ = ["LIMB", "Limbs", "join", "reduced_costs", "segment_prefix", "tree_potentials", "width_for"]

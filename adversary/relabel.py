"""Item ids as part of the search space (issue 50 item 1): the same requests under other names.

A paging policy may depend on the *values* of item ids -- a hash bucket, ``id % m``, a threshold on large ids --
and the traces the fuzzer builds name their items ``0, 1, 2, ...``, where such a rule is never exercised.
:func:`relabel` renames the distinct items of a paging trace, one-to-one (so the exact optimum, which sees only the
pattern of repeats, is unchanged, and so is any policy that ignores id values), drawing the new names from one of
:data:`ID_FAMILIES`:

``wide``
    uniform in ``[0, 2^31)``: every residue of a small modulus appears, in proportions near ``1/m``;
``large``
    each id of its own magnitude, ``2^e`` with ``e`` uniform in ``[4, 62]``: small and large ids side by side, so a
    threshold anywhere up to ``2^62`` separates some of them;
``residue``
    a modulus ``m`` in ``[2, 16]`` and a residue ``r``: each id, with probability 1/2, is ``r (mod m)``, the others
    any value -- ids that share a residue next to ids that do not (a rule keyed on ``id % m`` splits them);
``sparse``
    increasing in order of first request, with gaps drawn geometrically around 1000: far apart, none small.

Every draw takes a seed.  Renaming keeps every step's requests distinct (the map is one-to-one).
"""

from __future__ import annotations

import numpy as np

from kvcore.traces import PagingTrace

ID_FAMILIES = ("wide", "large", "residue", "sparse")
MAX_ID = 2 ** 62            # within int64, with room for the engine's arithmetic


def new_ids(n: int, family: str, rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct ids of ``family`` (module docstring)."""
    out: dict[int, None] = {}
    if family == "residue":
        m = int(rng.integers(2, 17))
        r = int(rng.integers(m))
    gaps_total = 0
    while len(out) < n:
        if family == "wide":
            x = int(rng.integers(0, 2 ** 31))
        elif family == "large":
            x = int(rng.integers(0, 2 ** int(rng.integers(4, 63))))
        elif family == "residue":
            x = int(rng.integers(0, 2 ** 20))
            if rng.random() < 0.5:
                x = x - x % m + r
        elif family == "sparse":
            gaps_total += int(rng.geometric(1e-3))
            x = gaps_total
        else:
            raise ValueError(f"unknown id family {family!r} (known: {', '.join(ID_FAMILIES)})")
        out.setdefault(min(x, MAX_ID))
    return np.fromiter(out, dtype=np.int64, count=n)


def relabel(trace: PagingTrace, family: str | None, seed: int) -> PagingTrace:
    """``trace`` with its distinct items renamed one-to-one by ids of ``family`` (``None``: unchanged), in order of
    first request; costs and step boundaries are kept."""
    if family is None:
        return trace
    rng = np.random.default_rng(seed)
    distinct, first, inverse = np.unique(trace.items, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")            # the i-th item to be requested gets the i-th new id
    names = np.empty(distinct.size, dtype=np.int64)
    names[order] = new_ids(distinct.size, family, rng)
    return PagingTrace(names[inverse], trace.costs, trace.offsets, f"{trace.source} with {family} ids")

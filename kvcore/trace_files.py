"""Trace files: ``load_trace`` and ``save_trace`` (SPEC section 1; the trace types are in :mod:`kvcore.traces`).

Formats, chosen by the file's extension:

* ``*.npy`` holding a 1-D integer array (memory-mapped), or ``*.txt`` with one non-negative integer id per line in
  plain ASCII decimal digits, at most 2^63 - 1 (blank lines and lines starting with ``#`` are skipped): a unit-cost
  paging trace.  A file with no step is rejected.
* ``*.npz`` with ``kind = "paging"``: arrays ``items`` (int), ``costs`` (float, optional: default all 1) and
  ``offsets`` (int, optional: default one request per step).
* ``*.npz`` with ``kind = "attention"``: arrays ``indptr``, ``indices`` (int), ``weights`` (float) and optionally
  ``residual`` (float, one per row).

Every problem is reported as one line naming the file (and the step) through :class:`~kvcore.errors.TraceError`.

:func:`load_arrays` is the one reader of every other array file a user hands in (schedules, budget curves): ``.npy``
or ``.npz``, recognised by their first bytes, plain arrays only -- an array of Python objects would need a pickle,
which runs code from the file, so it is refused in the toolkit's own words, never with numpy's advice to load it
"unsafely".
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .atomic import replacing
from .errors import KVToolkitError, TraceError
from .traces import INT64_MAX, AttentionTrace, PagingTrace, trace_error


def load_trace(path: str | os.PathLike) -> PagingTrace | AttentionTrace:
    """Load a trace file (format chosen by its extension, see module docstring); raise TraceError on any problem.

    A ``.npy`` file is memory-mapped, not read: an int64 trace is simulated straight from the page cache, so a long
    trace costs no copy (other integer dtypes are converted once to int64).  A trace with no step is an error.
    """
    p = Path(path)
    src = str(p)
    if not p.exists():
        raise TraceError(f"{src}: no such file")
    if p.is_dir():
        raise TraceError(f"{src}: is a directory, not a trace file")
    suffix = _trace_format(p)
    try:
        if suffix == ".npy":
            trace = PagingTrace.unit(_read_npy_ids(p), src)
        elif suffix == ".txt":
            trace = PagingTrace.unit(_read_text_ids(p), src)
        else:
            trace = _load_npz(p)
    except TraceError:
        raise
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:  # corrupt/truncated
        raise TraceError(f"{src}: cannot read: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    if trace.T == 0:
        raise TraceError(f"{src}: empty trace (no steps): nothing to simulate")
    return trace


def _trace_format(p: Path) -> str:
    """The file format named by ``p``'s extension (lower case); TraceError for an extension that names none."""
    suffix = p.suffix.lower()
    if suffix not in (".npy", ".txt", ".npz"):
        raise TraceError(f"{p}: unknown trace format {suffix!r} (use .npy, .txt or .npz)")
    return suffix


NPY_MAGIC = b"\x93NUMPY"
NPZ_MAGIC = b"PK\x03\x04"  # an .npz is a zip archive (of .npy members)


def _npy_header(fh) -> tuple[tuple[int, ...], np.dtype]:
    """``(shape, dtype)`` from an open ``.npy`` stream, which is left after the header."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    header = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
    if header is None:
        raise ValueError(f".npy format version {version[0]}.{version[1]} is not read")
    shape, _, dtype = header(fh)
    return shape, dtype


def load_arrays(path: str | os.PathLike, what: str,
                error: type[KVToolkitError] = TraceError) -> np.ndarray | dict[str, np.ndarray]:
    """The array of an ``.npy`` file, or ``{name: array}`` of an ``.npz`` archive, that a user handed in as ``what``
    (e.g. ``"LU-KV curve"``); every problem is one ``error`` line ``WHAT PATH: why`` (module docstring): no such
    file, a directory, neither format (by the first bytes, whatever the extension), damaged, or arrays of Python
    objects."""
    src = f"{what} {os.fspath(path)}"
    try:
        with open(path, "rb") as fh:
            magic = fh.read(len(NPY_MAGIC))
    except IsADirectoryError:
        raise error(f"{src}: is a directory, not a file") from None
    except OSError as exc:
        raise error(f"{src}: cannot read it ({exc.strerror or exc})") from None
    try:
        if magic.startswith(NPZ_MAGIC):
            with np.load(path, allow_pickle=False) as z:
                for name in z.files:
                    with z.zip.open(f"{name}.npy") as member:
                        if _npy_header(member)[1].hasobject:
                            raise error(f"{src}: array {name} holds Python objects, which are never loaded (plain "
                                        "numeric arrays only)")
                return {name: z[name] for name in z.files}
        if magic == NPY_MAGIC:
            with open(path, "rb") as fh:
                if _npy_header(fh)[1].hasobject:
                    raise error(f"{src}: holds Python objects, which are never loaded (plain numeric arrays only)")
            return np.load(path, allow_pickle=False)
    except KVToolkitError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise error(f"{src}: cannot read it: damaged ({detail})") from None
    raise error(f"{src}: not an .npy or .npz array file")


def _read_npy_ids(p: Path) -> np.ndarray:
    src = str(p)
    with open(p, "rb") as fh:  # read the header first: an object or empty array cannot (and need not) be mapped
        shape, dtype = _npy_header(fh)
    if len(shape) != 1:
        raise trace_error(src, f"a .npy paging trace must be 1-D, got shape {shape}")
    if dtype.kind not in "iu":
        raise trace_error(src, f"a .npy paging trace must hold integers, got dtype {dtype}")
    if shape[0] == 0:
        return np.zeros(0, np.int64)
    return np.load(p, mmap_mode="r", allow_pickle=False)


def _read_text_ids(p: Path) -> np.ndarray:
    """One id per line, written as plain ASCII decimal digits: ``+1``, ``1_000``, ``1e3``, ``٣`` (non-ASCII digits)
    and ids that do not fit in int64 are rejected, not interpreted (Python's ``int()`` would accept the first two)."""
    ids = []
    with open(p, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            s = line.strip(" \t\r\n")
            if not s or s.startswith("#"):
                continue
            where = f"{p}: step {len(ids)}: line {lineno}"
            digits = s[1:] if s.startswith("-") else s
            if not (digits.isascii() and digits.isdigit()):
                raise TraceError(f"{where}: {s[:40]!r} is not an integer id (plain decimal digits only)")
            if s.startswith("-"):
                raise TraceError(f"{where}: negative item id {s[:40]}")
            v = int(s)
            if v > INT64_MAX:
                raise TraceError(f"{where}: item id {s[:40]} does not fit in int64 (at most 2^63 - 1)")
            ids.append(v)
    return np.asarray(ids, dtype=np.int64)


def _load_npz(p: Path) -> PagingTrace | AttentionTrace:
    src = str(p)
    z = load_arrays(p, "trace file")
    if not isinstance(z, dict):
        raise trace_error(src, "an .npz trace must be an .npz archive, not a single .npy array")
    kind = str(z["kind"]) if "kind" in z else ("attention" if "indptr" in z else "paging")
    if kind == "paging":
        if "items" not in z:
            raise trace_error(src, "paging .npz needs an 'items' array")
        return PagingTrace(z["items"], z.get("costs"), z.get("offsets"), src)
    if kind == "attention":
        missing = {"indptr", "indices", "weights"} - set(z)
        if missing:
            raise trace_error(src, f"attention .npz lacks array(s) {sorted(missing)}")
        return AttentionTrace(z["indptr"], z["indices"], z["weights"], z.get("residual"), src)
    raise trace_error(src, f"unknown kind {kind!r} (expected 'paging' or 'attention')")


def save_trace(trace: PagingTrace | AttentionTrace, path: str | os.PathLike) -> Path:
    """Write a trace atomically (a temporary file renamed into place: no partial file is ever left behind).

    Unit-cost single-request paging traces may go to ``.npy`` or ``.txt``; everything goes to ``.npz``.
    """
    p = Path(path)
    suffix = _trace_format(p)
    if suffix in (".npy", ".txt") and not (isinstance(trace, PagingTrace) and trace.is_unit_single):
        raise TraceError(f"{p}: only unit-cost one-request-per-step paging traces fit {suffix}; use .npz")
    if not p.parent.exists():
        raise TraceError(f"{p}: directory {p.parent} does not exist")
    with replacing(p) as tmp, open(tmp, "wb") as fh:
        if suffix == ".npy":
            np.save(fh, np.asarray(trace.items))
        elif suffix == ".txt":
            fh.write(("\n".join(map(str, trace.items.tolist())) + "\n").encode())
        elif isinstance(trace, PagingTrace):
            np.savez_compressed(fh, kind="paging", items=trace.items, costs=trace.costs, offsets=trace.offsets)
        else:
            np.savez_compressed(fh, kind="attention", indptr=trace.indptr, indices=trace.indices,
                                weights=trace.weights, residual=trace.residual)
    return p

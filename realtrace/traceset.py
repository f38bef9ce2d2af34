"""Trace sets: several attention traces captured from one forward pass, stored as a directory.

Format (``kvtrace-set/1``)
--------------------------
A directory holding

* ``manifest.json`` — ``{"format": "kvtrace-set/1", "T": <rows>, "traces": {name: {"file", "layer", "head"}},
  "segments": {segment: [start, end)}, "tokens": [...], "model": {...}, "capture": {...}}``.  ``head`` is
  ``"kv<g>"`` (the mean of the query heads that share KV head ``g``, i.e. a GQA group) or ``"mean"`` (the mean of
  all query heads).  ``segments`` are half-open token ranges naming the prompt parts and the continuation.
* one ``<name>.npz`` per trace, in the toolkit's sparse attention format: each file is read by
  :func:`kvcore.trace_files.load_trace` on its own (``kind = "attention"``; ``indptr``/``indices``/``weights`` hold the
  top entries of each row, ``residual`` the exact remaining mass, so every row sums to 1).

Trace names are ``L<layer, 2 digits>_<head>``, e.g. ``L07_kv1``.  Every problem is one line naming the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from kvcore.atomic import write_text
from kvcore.errors import TraceError
from kvcore.trace_files import load_trace, save_trace
from kvcore.traces import AttentionTrace

FORMAT = "kvtrace-set/1"
MANIFEST = "manifest.json"


def trace_name(layer: int, head: str) -> str:
    return f"L{layer:02d}_{head}"


@dataclass
class TraceSet:
    """Traces of one capture, keyed by name (``L07_kv1``), with the manifest's metadata."""

    traces: dict[str, AttentionTrace]
    layers: dict[str, int]
    heads: dict[str, str]
    segments: dict[str, tuple[int, int]]
    meta: dict = field(default_factory=dict)
    source: str = "<trace set>"

    @property
    def T(self) -> int:
        return next(iter(self.traces.values())).T

    def names(self) -> list[str]:
        return sorted(self.traces, key=lambda n: (self.layers[n], self.heads[n]))

    def __repr__(self) -> str:
        return f"TraceSet({self.source!r}, traces={len(self.traces)}, T={self.T})"


class TraceSetWriter:
    """Writes a trace set one trace at a time (each ``.npz`` atomically, as soon as it is added) and the manifest
    last, so a capture never holds more than the traces in flight, and a directory without ``manifest.json`` is
    never mistaken for a trace set.  :meth:`abort` removes what was written."""

    def __init__(self, out_dir: str | os.PathLike):
        d = Path(out_dir)
        if d.exists() and (not d.is_dir() or any(d.iterdir())):
            raise TraceError(f"{d}: output must be a new or empty directory (a trace set is a directory)")
        self.created = not d.exists()
        d.mkdir(parents=True, exist_ok=True)
        self.dir = d
        self.entries: dict[str, dict] = {}
        self.T: int | None = None

    def add(self, layer: int, head: str, trace: AttentionTrace) -> None:
        name = trace_name(layer, head)
        if name in self.entries:
            raise TraceError(f"{self.dir}: trace {name} added twice")
        if self.T is not None and trace.T != self.T:
            raise TraceError(f"{self.dir}: trace {name} has {trace.T} rows, the others {self.T}")
        save_trace(trace, self.dir / f"{name}.npz")
        self.entries[name] = {"file": f"{name}.npz", "layer": int(layer), "head": head}
        self.T = trace.T

    def finish(self, segments: dict[str, tuple[int, int]], meta: dict) -> Path:
        if not self.entries:
            raise TraceError(f"{self.dir}: no traces to write")
        entries = {n: self.entries[n] for n in sorted(self.entries)}
        manifest = {"format": FORMAT, "T": self.T, "traces": entries,
                    "segments": {k: [int(a), int(b)] for k, (a, b) in segments.items()}, **meta}
        write_text(self.dir / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        return self.dir

    def abort(self) -> None:
        for e in self.entries.values():
            (self.dir / e["file"]).unlink(missing_ok=True)
        self.entries.clear()
        if self.created and self.dir.is_dir() and not any(self.dir.iterdir()):
            self.dir.rmdir()


def save_traceset(out_dir: str | os.PathLike, traces: dict[tuple[int, str], AttentionTrace],
                  segments: dict[str, tuple[int, int]], meta: dict) -> Path:
    """Write ``traces[(layer, head)]`` and the manifest into ``out_dir`` (created; must be empty if it exists)."""
    if not traces:
        raise TraceError(f"{out_dir}: no traces to write")
    writer = TraceSetWriter(out_dir)
    for (layer, head), tr in sorted(traces.items()):
        writer.add(layer, head, tr)
    return writer.finish(segments, meta)


def load_traceset(path: str | os.PathLike) -> TraceSet:
    """Read a trace-set directory (or its ``manifest.json``); every trace is validated by the toolkit's loader."""
    p = Path(path)
    d = p.parent if p.name == MANIFEST else p
    man_path = d / MANIFEST
    if not man_path.is_file():
        raise TraceError(f"{d}: not a trace set (no {MANIFEST})")
    try:
        man = json.loads(man_path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise TraceError(f"{man_path}: cannot read: {str(exc).splitlines()[0]}") from None
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        got = man.get("format") if isinstance(man, dict) else man
        raise TraceError(f"{man_path}: format must be {FORMAT!r}, got {got!r}")
    entries = man.get("traces")
    if not isinstance(entries, dict) or not entries:
        raise TraceError(f"{man_path}: 'traces' must be a non-empty mapping")
    T = man.get("T")
    traces, layers, heads = {}, {}, {}
    for name, e in entries.items():
        if not isinstance(e, dict) or not {"file", "layer", "head"} <= set(e):
            raise TraceError(f"{man_path}: trace {name!r} needs 'file', 'layer' and 'head'")
        tr = load_trace(d / e["file"])
        if not isinstance(tr, AttentionTrace):
            raise TraceError(f"{d / e['file']}: a trace set holds attention traces, this is a paging trace")
        if tr.T != T:
            raise TraceError(f"{d / e['file']}: has {tr.T} rows but the manifest says T = {T}")
        traces[name], layers[name], heads[name] = tr, int(e["layer"]), str(e["head"])
    segments = {}
    for seg, span in (man.get("segments") or {}).items():
        if not (isinstance(span, list) and len(span) == 2 and 0 <= span[0] <= span[1] <= T):
            raise TraceError(f"{man_path}: segment {seg!r} = {span!r} is not a range [start, end) within 0..{T}")
        segments[seg] = (int(span[0]), int(span[1]))
    meta = {k: v for k, v in man.items() if k not in ("format", "T", "traces", "segments")}
    return TraceSet(traces, layers, heads, segments, meta, str(d))

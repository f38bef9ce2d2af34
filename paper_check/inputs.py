"""Which data the quality claims decide from: the committed input sets, or this run's recomputation of them.

The sets and the commands that remake them are declared in :data:`theorems.quality_inputs.QUALITY_INPUTS`;
this module only orchestrates.  The quick profile always reads the committed sets.  ``--full`` with the extras a set
needs reruns its commands (each a process of its own, from the repository root, forked from a host that has the
model's libraries imported: :mod:`paper_check.step_host`) into a staging directory inside the output
root -- never over the committed files -- and, for the rest of the run, the claims and figures read that directory
in the set's place (:func:`realtrace.inputs_from`); the staging directory is removed when the run ends.
Each set is remade for every model it declares (:attr:`QualityInput.models`, issue 49: the default model's steps, and
each other model's, :meth:`QualityInput.steps_for`, staged in a directory of that model's, read while that model is
read, :func:`realtrace.inputs_from`).  ``--recompute NAMES`` limits which sets are remade (each for all its models).
Two sets are remade at once (:data:`RECOMPUTE_WORKERS`; each
step is one single-threaded model process), the costliest first (:attr:`QualityInput.minutes`), on a local
:class:`kvcore.tasks.TaskPool` of threads (the ``[dist]`` extra; one after the other without it). Every set a run
reads from its committed files -- each model's by its directory -- is named in exactly one stderr line starting
``FALLBACK:``, with the reason (quick
profile, not selected, a missing extra, or a recompute that failed, each failure reported in one line of its own).

The recompute runs in the background (:class:`QualityInputs`): while it does, the run builds the figures and decides
the claims that read none of the sets (the declaration says which do), so on two cores the model's steps and the
rest of the report share the machine instead of following each other.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kvcore.errors import ParameterError
from kvcore.tasks import dask_available, map_tasks
from realtrace import DATA_MODEL, inputs_from, inputs_pending
from theorems.quality_inputs import QUALITY_INPUTS, QualityInput, Step, claim_models

from .report import REPO_ROOT, progress
from .step_host import HostFailed, HostPool

QUICK = "quick profile; --full recomputes them from the model"
NOT_SELECTED = "not selected by --recompute"
FAILED = "recompute failed: the line above says why"
EXTRA_MODULES = {"real": ("torch", "transformers", "gguf"), "kvpress": ("kvpress",)}
SHOWN = 100  # characters of a JSON argument of a step that its progress and error lines show
RECOMPUTE_WORKERS = 2  # sets remade at once: one per core of the 2-core machine the --full goal is set for
_STOP = threading.Event()  # set when the run that started a recompute ends before it: its steps are terminated
# one permit per core: a step holds one while it runs, and so does the run's own work beside the recompute
# (QualityInputs.on_one_core), so that work takes a step's place rather than running as a third process on two cores
_CORES = threading.Semaphore(RECOMPUTE_WORKERS)
# the processes the steps are forked from, one per step running at once (the pool is not in the tasks: dask pickles
# them even for threads); started on demand, ended when a recompute ends
_HOSTS = HostPool(REPO_ROOT)


class RecomputeFailed(Exception):
    """One step of a recompute did not produce its output; the message is one line."""


def sets_read_by(claim_ids) -> list[QualityInput]:
    """The declared input sets that any of ``claim_ids`` reads, in declaration order."""
    ids = set(claim_ids)
    return [s for s in QUALITY_INPUTS if ids & set(s.claims)]


def selected(option: str | None, full: bool) -> set[str]:
    """The set names ``--recompute`` selects: ``all`` (the default under ``--full``), ``none``, or a comma list of
    declared names; an unknown name, or the option without ``--full``, is a one-line ParameterError."""
    known = [s.name for s in QUALITY_INPUTS]
    if option is None:
        return set(known) if full else set()
    if not full:
        raise ParameterError("--recompute needs --full (the quick profile always reads the committed results)")
    names = [n.strip() for n in option.split(",") if n.strip()]
    if names == ["all"]:
        return set(known)
    if names == ["none"]:
        return set()
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ParameterError(f"--recompute {option!r}: unknown input set {', '.join(unknown) or '(empty)'} "
                             f"(known: {', '.join(known)}, or all, none)")
    return set(names)


def missing_extra(s: QualityInput) -> str | None:
    """The first extra that ``s``'s commands need and that does not import, with its modules; None when all do."""
    for extra in s.extras:
        absent = [m for m in EXTRA_MODULES[extra] if importlib.util.find_spec(m) is None]
        if absent:
            return f"the [{extra}] extra does not import ({', '.join(absent)})"
    return None


def _argv(step: Step, target: Path, scratch: Path) -> list[str]:
    subst = {"{python}": sys.executable, "{dir}": str(target), "{scratch}": str(scratch)}
    return [subst.get(a, a) for a in step.argv]


def _shown(argv: list[str]) -> str:
    """A step's command as a person reads it: ``python ...``, a ``-c`` script by its first line, a JSON argument (a
    studies spec) by its first :data:`SHOWN` characters."""
    words = ["python"] + [a.splitlines()[0] + " ..." if "\n" in a else
                          a[:SHOWN] + " ..." if a.startswith("{") and len(a) > SHOWN else a for a in argv[1:]]
    return " ".join(words)


@contextmanager
def _a_core(where: str):
    """Hold one of :data:`_CORES` for the block; :class:`RecomputeFailed` if the run ends while waiting for it."""
    while True:  # a step that gets its core as the run ends is terminated within 0.5 s (HostPool.run)
        if _STOP.is_set():
            raise RecomputeFailed(f"{where} did not run: the run ended before it")
        if _CORES.acquire(timeout=0.5):
            break
    try:
        yield
    finally:
        _CORES.release()


def recompute(s: QualityInput, target: Path, model: str = DATA_MODEL) -> None:
    """Run ``s``'s steps for ``model`` (:meth:`QualityInput.steps_for`) into ``target`` (created), each in a process
    forked by one of :data:`_HOSTS` (:mod:`paper_check.step_host`), then copy its ``keep`` files
    (:meth:`QualityInput.keep_for`) from the model's committed set.  A step that exits non-zero
    or does not write what it declares raises :class:`RecomputeFailed`.  Each step waits for a core
    (:data:`_CORES`); its progress lines time it from when it has one; it is terminated when :data:`_STOP` is set
    (the run that wanted it has ended)."""
    target.mkdir(parents=True)
    steps, label = s.steps_for(model), _label(s, model)
    for n, step in enumerate(steps, 1):
        scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{s.name}-step{n}-"))
        argv = _argv(step, target, scratch)
        where = f"step {n}/{len(steps)} ({_shown(argv)})"
        with _a_core(where):
            progress(f"[inputs] {label} {where}")
            t0 = time.perf_counter()
            try:
                code, err = _HOSTS.run(argv, str(target / step.stdout) if step.stdout else os.devnull, _STOP)
            except HostFailed as exc:
                raise RecomputeFailed(f"{where}: {exc}") from None
            seconds = time.perf_counter() - t0
        if code != 0:
            last = next((ln for ln in reversed(err.splitlines()) if ln.strip()), "no message")
            raise RecomputeFailed(f"{where} exited {code}: {last.strip()}")
        for src, name in step.collect:
            if not (scratch / src).is_file():
                raise RecomputeFailed(f"{where} wrote no {src}")
            shutil.move(scratch / src, target / name)
        shutil.rmtree(scratch)
        progress(f"[inputs] {label} step {n}/{len(steps)} done ({seconds:.1f} s)")
    for name in s.keep_for(model):
        shutil.copyfile(REPO_ROOT / s.directory_for(model) / name, target / name)


def _label(s: QualityInput, model: str) -> str:
    """How progress lines name ``model``'s set ``s``: its name, or ``<model>/<name>`` for another model's."""
    return s.directory_for(model).removeprefix("realtrace/data/")


def _recompute_job(job: tuple[QualityInput, Path, str]) -> str | None:
    """Remake the set ``job[0]`` into ``job[1]`` for the model ``job[2]``: ``None``, or the failure in one line (one
    set's failure does not stop the others)."""
    try:
        recompute(*job)
    except RecomputeFailed as exc:
        return str(exc)
    return None


def recompute_all(sets: list[QualityInput], staging: Path) -> dict[tuple[str, str], str | None]:
    """Remake ``sets``, each for every model it declares, into ``staging/<name>`` (the default model's) and
    ``staging/<model>/<name>`` (another's), :data:`RECOMPUTE_WORKERS` at once when dask is installed, the costliest
    first (a set's models in its place, the default first): ``{(model, name): None or the failure}``.  The step
    hosts end with it."""
    jobs = [(s, staging / _label(s, m), m) for s in sorted(sets, key=lambda s: -s.minutes) for m in s.models]
    workers = min(RECOMPUTE_WORKERS, len(jobs)) if dask_available() else 1
    try:
        done = map_tasks(_recompute_job, jobs, workers=workers, processes=False, retries=0, progress=False,
                         key="recompute")
    finally:
        _HOSTS.close()
    return {(m, s.name): failure for (s, _, m), failure in zip(jobs, done)}


def fallback_line(reasons: dict[str, str]) -> str:
    """The one ``FALLBACK:`` line: every set read from its committed files (by its directory,
    ``realtrace/data/[<model>/]<name>``), grouped by reason."""
    groups: dict[str, list[str]] = {}
    for directory, why in reasons.items():
        groups.setdefault(why, []).append(directory)
    return "FALLBACK: committed quality results used: " + "; ".join(
        f"{', '.join(dirs)} ({why})" for why, dirs in groups.items())


class QualityInputs:
    """The input sets of one run while they are remade (:func:`quality_inputs`).  Until :meth:`wait`, every declared
    set the run's claims read is ``waiting`` -- being recomputed, or, when it is read from its committed files, held
    back all the same from what does not declare it, so that a reader missing from the declaration fails in the quick
    profile too: :func:`realtrace.input_dir` raises :class:`realtrace.InputPending` for it.  What reads none of them
    (:meth:`waiting_claims`, :meth:`waiting_figures` say what does) runs meanwhile; when nothing is remade
    (:attr:`remakes` false) the declared readers run beside it, each with its own sets released
    (``paper_check.runner``)."""

    def __init__(self, sets: list[QualityInput], todo: list[QualityInput], reasons: dict[tuple[str, str], str],
                 staging: Path | None, claim_ids):
        self.sets, self.reasons, self.claim_ids = sets, reasons, list(claim_ids)
        self.remakes = bool(todo)  # False: every set is read from its committed files (no phase has to wait)
        self.waiting = frozenset(s.name for s in sets)
        self.used: dict[str, dict[str, str]] | None = None
        self._staging, self._done = staging, {}
        self._held = ExitStack()
        self._held.enter_context(inputs_pending(self.waiting))
        self._thread = threading.Thread(target=self._remake, args=(todo,), name="recompute", daemon=True)
        self._thread.start()

    def _remake(self, todo: list[QualityInput]) -> None:
        try:
            self._done = recompute_all(todo, self._staging) if todo else {}
        except Exception as exc:  # noqa: BLE001 -- in this thread nobody else would see it: every set fails, named
            why = f"the recompute stopped: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            self._done = {(m, s.name): why for s in todo for m in s.models}

    def _readers(self, kind: str, ids) -> set[str]:
        return {r for s in self.sets if s.name in self.waiting for r in getattr(s, kind)} & set(ids)

    def waiting_claims(self, claim_ids) -> set[str]:
        """Those of ``claim_ids`` that read a set still waiting."""
        return self._readers("claims", claim_ids)

    def waiting_figures(self, fig_ids) -> set[str]:
        """Those of ``fig_ids`` drawn from a set still waiting."""
        return self._readers("figures", fig_ids)

    def recomputing(self) -> bool:
        """True while the recompute runs (its threads hold cores; the run's own work then stays one process)."""
        return self._thread.is_alive()

    @contextmanager
    def on_one_core(self):
        """For the block, one core of the recompute's: the run's own work beside it takes a step's place."""
        if not self.recomputing():
            yield
            return
        with _CORES:
            yield

    def wait(self) -> dict[str, dict[str, str]]:
        """Wait for the recompute; say in one line each what failed, in one ``FALLBACK:`` line what is read from its
        committed files, and per claim what it decides from; from here on the readers read the remade sets (each
        model's while that model is read).  Returns ``{claim id: {set directory: "recomputed" | "committed"}}`` for
        the claims that read a set, the directory of it of every model the claim is read on
        (``realtrace/data/[<model>/]<name>``; :func:`theorems.quality_inputs.claim_models`)."""
        if self.used is not None:
            return self.used
        self._thread.join()
        staged: dict[str, dict[str, Path]] = {}
        declared = [(s, m) for s in self.sets for m in s.models]  # declaration order, the default model first
        for s, m in declared:
            failure = self._done.get((m, s.name), "")
            if failure is None:
                staged.setdefault(m, {})[s.name] = self._staging / _label(s, m)
            elif failure:
                progress(f"paper_check: recompute of {s.directory_for(m)} failed: {failure}")
                self.reasons[(m, s.name)] = FAILED
        reasons = {s.directory_for(m): self.reasons[(m, s.name)] for s, m in declared if (m, s.name) in self.reasons}
        if reasons:
            progress(fallback_line(reasons))
        used = {cid: {s.directory_for(m): "recomputed" if s.name in staged.get(m, {}) else "committed"
                      for s, m in declared if cid in s.claims and m in claim_models(cid, tuple(self.sets))}
                for cid in self.claim_ids}
        self.used = {cid: u for cid, u in used.items() if u}
        for cid, u in self.used.items():
            progress(f"[inputs] {cid} decides from " + ", ".join(f"{d} ({w})" for d, w in u.items()))
        self._held.close()
        for m, dirs in staged.items():
            self._held.enter_context(inputs_from(dirs, m))
        self.waiting = frozenset()
        return self.used

    def close(self) -> None:
        """Stop a recompute still running (its step processes are terminated) and wait for it to end."""
        if self._thread.is_alive():
            _STOP.set()
            self._thread.join()
        self._held.close()


@contextmanager
def quality_inputs(claim_ids, full: bool, option: str | None, root: Path):
    """For the block, the input sets ``claim_ids`` read (:class:`QualityInputs`): recomputed in the background under
    ``--full`` (those :func:`selected` and whose extras import), committed otherwise; :meth:`QualityInputs.wait`
    ends the recompute and says which, with the ``FALLBACK:`` line.  The staging directory is removed at the end, and
    a block left early (an error, Ctrl-C) stops the recompute first."""
    sets = sets_read_by(claim_ids)
    chosen = selected(option, full)
    reasons: dict[tuple[str, str], str] = {}
    staging = Path(tempfile.mkdtemp(dir=root, prefix=".paper_check-staging-inputs-")) if full and sets else None
    todo = []
    for s in sets:
        why = QUICK if not full else NOT_SELECTED if s.name not in chosen else missing_extra(s)
        if why is None:
            todo.append(s)
        else:
            reasons.update({(m, s.name): why for m in s.models})
    _STOP.clear()
    inputs = QualityInputs(sets, todo, reasons, staging, claim_ids)
    try:
        yield inputs
    finally:
        inputs.close()
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def annotate(results: dict, used: dict[str, dict[str, str]]) -> None:
    """Name in each claim's evidence the input sets it decided from (every model's) and whether they were committed
    or recomputed."""
    for cid, u in used.items():
        if cid in results:
            results[cid].evidence["inputs"] = ", ".join(f"{d} ({w})" for d, w in u.items())


__all__ = ["RecomputeFailed", "annotate", "fallback_line", "missing_extra", "quality_inputs", "recompute", "selected",
           "sets_read_by"]

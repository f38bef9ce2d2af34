"""Fuzz a policy: the known constructions, then a targeted hypothesis search and shrinking, within a hard wall-clock
budget and with a user's policy isolated from the engine (issues 6 and 14).  :func:`fuzz_policy` is the entry point
(``python -m verify`` and ``paper_check fuzz`` call it); the parts:

- :mod:`verify.config` -- what is asked (:class:`~verify.config.FuzzConfig`, Theorem 4's
  :class:`~verify.config.Premise`), validated before any process starts;
- :mod:`verify.questions` -- the three questions (``bound``, ``premise``, ``against``): the value searched, its
  bound, the traces drawn;
- :mod:`verify.search` -- the three stages (constructions, targeted search, shrinking) inside the worker;
- :mod:`verify.supervisor` -- the worker process and the budget; :mod:`verify.isolated` -- a ``module:Class``
  policy in its own process, receiving only the engine's five calls;
- :mod:`verify.report` -- the verdict and its exit status; :mod:`verify.outputs` -- the files and the printed
  report.

An unknown target or one that cannot be imported is a :class:`~kvcore.errors.ParameterError`.
"""

from __future__ import annotations

from pathlib import Path

from .config import FuzzConfig, Premise
from .outputs import prepare_out_dir, write_outputs
from .report import FuzzReport
from .supervisor import supervise

__all__ = ["FuzzReport", "Premise", "fuzz_policy"]


def fuzz_policy(target_spec: str, k: int, model: str = "rm", examples: int = 300, seconds: float = 60.0,
                seed: int = 0, out_dir: str | Path | None = None, *, against: str | None = None,
                premise: Premise | None = None, call_timeout: float = 2.0,
                started: float | None = None) -> FuzzReport:
    """Fuzz ``target_spec`` (a registered name, ``module:Class`` or ``path/to/file.py:Class``) with cache ``k`` (see
    the module docstring).

    ``out_dir``: checked (created if missing) before the search; the counterexample files and a JSON report are
    written there only when the verdict is a finding about the policy (:func:`~verify.outputs.write_outputs`).
    ``None``: nothing is written.  ``started``: the monotonic-clock time the budget counts from (default: now; the
    command line passes its process's start).  Raises :class:`~kvcore.errors.ParameterError` for bad arguments or a
    target that cannot be imported or built."""
    cfg = FuzzConfig(target_spec, k, model, examples, seconds, seed, against, premise or Premise(),
                     call_timeout).checked()
    out = prepare_out_dir(out_dir) if out_dir is not None else None
    rep = supervise(cfg, started)
    if out is not None and rep.has_counterexample:
        write_outputs(rep, out)
    return rep

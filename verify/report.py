"""What a fuzz run found: :class:`FuzzReport`, built by folding the worker's events into it (:meth:`FuzzReport.apply`),
its verdict and exit status, and its JSON form.

Verdicts (``FuzzReport.verdict``, exit status of the command line)
    ``no violation found`` (0), ``inconclusive`` (0: nothing finished within the budget), ``violates`` /
    ``worse than REF`` (1), ``contract violation`` (1: including a result below the exact optimum from a
    policy that runs inside the engine's process), ``policy error`` (1: it raised, or its process died),
    ``policy timeout`` (1), ``violates and contract violation`` (1: both kinds found; every kind is listed in
    ``violations`` with its counterexample), ``internal error`` (3: the fuzzer's own failure -- e.g. a MemoryError
    building a construction at a huge ``k``, or a result below the optimum from an isolated policy, which cannot have
    caused it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvcore.measure import within
from kvcore.traces import AttentionTrace, PagingTrace

from .check import describe_trace

POLICY_FINDINGS = ("contract violation", "policy error", "policy timeout")


@dataclass
class FuzzReport:
    """What a fuzz run found (see the module docstring); ``as_dict`` is its JSON form."""

    target: str
    model: str
    capacity: int
    mode: str = "bound"
    seed: int = 0
    reference: str | None = None
    policy: str = ""
    policy_params: dict = field(default_factory=dict)
    bound: float = 0.0
    bound_name: str = ""
    value_name: str = ""
    examples: int = 0
    seconds: float = 0.0
    measured: int = 0
    search_worst: float | None = None
    worst: float = -math.inf
    worst_trace: PagingTrace | AttentionTrace | None = None
    worst_source: str = ""
    worst_details: dict = field(default_factory=dict)
    shrunk: float | None = None
    shrunk_trace: PagingTrace | AttentionTrace | None = None
    shrunk_details: dict = field(default_factory=dict)
    shrunk_minimal: bool | None = None     # removing any one step loses the violation (None: not shrunk that far)
    shrunk_from: int | None = None         # length of the trace the local minimization started from
    shrunk_how: list[str] = field(default_factory=list)    # what the shrinking did, in order, and why it stopped
    shrink_seconds: float | None = None    # the time the shrinking had: what was left of the budget
    longest_trace: int = 0                 # the longest trace measured, in steps
    deepest_scale: int | None = None       # the last scale the deepening stage reached
    first_violation_seconds: float | None = None   # seconds from the start to the first value above the bound
    constructions: dict[str, Any] = field(default_factory=dict)
    finding: str | None = None
    message: str | None = None
    finding_trace: PagingTrace | AttentionTrace | None = None
    findings: dict[str, tuple] = field(default_factory=dict)   # kind -> (message, trace): every finding, last wins
    notes: list[str] = field(default_factory=list)
    stage: str = "start-up"
    cut_short: list[str] = field(default_factory=list)   # what the budget cut short, in order
    files: list[str] = field(default_factory=list)
    usage_error: str | None = None

    # -- derived -----------------------------------------------------------------------------------------------------
    def exceeds(self, value: float | None) -> bool:
        """``value`` breaks the question's bound (``bound``: the promised ratio; otherwise 0)."""
        return value is not None and value > -math.inf and not within(value, self.bound)

    @property
    def violation(self) -> bool:
        return self.exceeds(self.worst)

    @property
    def contract_violation(self) -> str | None:
        return self.message if self.finding == "contract violation" else None

    @property
    def budget_ran_out(self) -> bool:
        """The budget cut something short: a construction skipped, a search stage or the shrinking stopped by the
        clock, deepening ended by the clock (it would have gone deeper), or the worker killed."""
        return bool(self.cut_short)

    @property
    def violations(self) -> list[dict]:
        """Every kind of violation found, each with its counterexample: the bound (or the reference) exceeded, and
        every finding about the policy (contract violation, policy error, policy timeout)."""
        out = []
        if self.violation:
            out.append({"kind": self._value_verdict, "value": self.worst, "found_by": self.worst_source,
                        "trace": self.worst_trace, "shrunk_trace": self.shrunk_trace})
        for kind, (message, trace) in self.findings.items():
            if kind in POLICY_FINDINGS:
                out.append({"kind": kind, "message": message, "trace": trace})
        return out

    @property
    def _value_verdict(self) -> str:
        return f"worse than {self.reference}" if self.mode == "against" else "violates"

    @property
    def verdict(self) -> str:
        if self.finding in POLICY_FINDINGS:     # both kinds are named: neither hides the other
            return f"{self._value_verdict} and {self.finding}" if self.violation else self.finding
        if self.violation:
            return self._value_verdict
        if self.finding == "internal error":
            return "internal error"
        if self.measured == 0:
            return "inconclusive"
        if self.mode == "against":
            return f"not worse than {self.reference} on the traces searched"
        return "no violation found"

    @property
    def has_counterexample(self) -> bool:
        """A finding about the policy worth writing to disk."""
        return self.finding in POLICY_FINDINGS or self.violation

    @property
    def exit_code(self) -> int:
        if self.has_counterexample:
            return 1
        return 3 if self.finding == "internal error" else 0

    @property
    def trace_file(self) -> str | None:
        """The file of the trace behind the verdict: the worst found (it replays to ``worst``), else the failing one
        (the shrunk example, when there is one, is written next to it)."""
        for label in ("-worst", "-failing"):
            for f in self.files:
                if label in Path(f).name:
                    return f
        return None

    def apply(self, event: tuple) -> None:
        """Fold one event of the worker into the report."""
        kind, *rest = event
        if kind == "info":
            for key, value in rest[0].items():
                setattr(self, key, value)
        elif kind == "stage":
            self.stage = rest[0]
        elif kind == "construction":
            self.constructions[rest[0]] = rest[1]
        elif kind == "measured":
            self.measured += 1
        elif kind == "examples":
            self.examples, self.search_worst = rest
        elif kind == "worst":
            self.worst, self.worst_trace, self.worst_source, self.worst_details = rest
        elif kind == "shrunk":
            self.shrunk, self.shrunk_trace, self.shrunk_details = rest
        elif kind == "minimal":
            self.shrunk_minimal, self.shrunk_from = rest
        elif kind == "shrunk_how":
            self.shrunk_how, self.shrink_seconds = rest
        elif kind == "longest":
            self.longest_trace = rest[0]
        elif kind == "deepest":
            self.deepest_scale = rest[0]
        elif kind == "finding":
            # the policy's findings win over an internal error; a later one of the same rank is a smaller trace
            self.findings[rest[0]] = (rest[1], rest[2])
            if self.finding in POLICY_FINDINGS and rest[0] not in POLICY_FINDINGS:
                self.notes.append(f"also: {rest[0]}: {rest[1]}")
                return
            self.finding, self.message, self.finding_trace = rest
        elif kind == "cut":
            self.cut_short.append(rest[0])
        elif kind == "note":
            self.notes.append(rest[0])
        elif kind == "usage":
            self.usage_error = rest[0]

    def as_dict(self) -> dict:
        def num(x):
            if x is None or (isinstance(x, float) and x == -math.inf):
                return None
            return "inf" if isinstance(x, float) and math.isinf(x) else x

        def trace(tr):
            return None if tr is None else describe_trace(tr, 60)

        return {"target": self.target, "policy": self.policy, "policy_params": self.policy_params,
                "model": self.model, "capacity": self.capacity, "mode": self.mode, "reference": self.reference,
                "seed": self.seed, "bound": self.bound, "bound_name": self.bound_name, "value": self.value_name,
                "examples": self.examples, "measured": self.measured, "seconds": round(self.seconds, 2),
                "search_worst": num(self.search_worst), "worst": num(self.worst), "worst_source": self.worst_source,
                "worst_details": self.worst_details, "worst_trace": trace(self.worst_trace),
                "shrunk": num(self.shrunk), "shrunk_details": self.shrunk_details,
                "shrunk_trace": trace(self.shrunk_trace), "shrunk_minimal": self.shrunk_minimal,
                "shrunk_from": self.shrunk_from, "shrunk_how": self.shrunk_how,
                "shrink_seconds": self.shrink_seconds, "shrunk_length": None if self.shrunk_trace is None else
                self.shrunk_trace.T, "longest_trace": self.longest_trace, "deepest_scale": self.deepest_scale,
                "first_violation_seconds": None if self.first_violation_seconds is None else
                round(self.first_violation_seconds, 3),
                "constructions": {k: num(v) for k, v in self.constructions.items()},
                "verdict": self.verdict, "exit_code": self.exit_code, "finding": self.finding,
                "message": self.message, "contract_violation": self.contract_violation,
                "finding_trace": trace(self.finding_trace), "budget_ran_out": self.budget_ran_out,
                "cut_short": self.cut_short,
                "violations": [{key: trace(v) if key.endswith("trace") else num(v) for key, v in viol.items()}
                               for viol in self.violations],
                "notes": self.notes, "files": self.files, "trace_file": self.trace_file}

"""What a fuzz run is asked to do, validated before any process starts: :class:`FuzzConfig` (target, cache size,
question, budget, seed) and :class:`Premise` (the parameters of Theorem 4's corrected premise, paper Section 7).

Every number goes through :mod:`kvcore.numbers`, so a bad value is one :class:`~kvcore.errors.ParameterError`
naming the parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import policies
from kvcore.errors import ParameterError
from kvcore.numbers import integer, real

PREMISE_PARAMS = ("rho", "tau", "W")


@dataclass(frozen=True)
class Premise:
    """Theorem 4's corrected premise (paper Section 7): warm means ``>= rho*tau``, heavy ``>= tau``, chains of
    warm steps with gaps ``<= W``, and the warm sets of any ``W`` consecutive rows within ``k - 1`` tokens."""

    rho: float = 0.5
    W: int = 4
    tau: float = 0.25

    def checked(self) -> "Premise":
        real(self.rho, "rho", 0.0, 1.0, open_low=True)
        real(self.tau, "tau", 0.0, 1.0, open_low=True)
        integer(self.W, "W", 1)
        return self

    def describe(self) -> str:
        return f"rho = {self.rho:g}, W = {self.W}, tau = {self.tau:g}"


@dataclass(frozen=True)
class FuzzConfig:
    """One fuzz run.  ``mode`` is the question asked: ``against`` when a reference policy is named, else
    ``premise`` (``model="nm"``) or ``bound`` (``model="rm"``); see :mod:`verify.questions`."""

    target: str
    k: int
    model: str = "rm"
    examples: int = 300
    seconds: float = 60.0
    seed: int = 0
    against: str | None = None
    premise: Premise = Premise()
    call_timeout: float = 2.0

    @property
    def mode(self) -> str:
        return "against" if self.against else ("premise" if self.model == "nm" else "bound")

    def checked(self) -> "FuzzConfig":
        for name, spec in (("target", self.target), ("against", self.against)):
            if spec is not None and (not isinstance(spec, str) or not spec.strip()):
                raise ParameterError(f"{name} = {spec!r}: expected {policies.registry.TARGET_FORMS}")
        integer(self.k, "capacity k", 1)
        integer(self.examples, "examples", 1)
        integer(self.seed, "seed", 0)
        real(self.seconds, "seconds", 0.0, open_low=True)
        real(self.call_timeout, "call timeout", 0.0, open_low=True)
        if self.model not in ("rm", "nm"):
            raise ParameterError(f"model = {self.model!r}: must be 'rm' or 'nm'")
        if self.mode == "premise":
            self.premise.checked()
            if self.k < 2:
                raise ParameterError(f"capacity k = {self.k}: the NM premise search needs k >= 2 (the union of warm "
                                     f"sets must fit in k - 1 >= 1 tokens)")
        return self


def policy_params(spec: str | None, cfg: FuzzConfig) -> dict:
    """A registered policy with parameters named like the premise's runs with the premise's values (R-LRU-H's
    rho, tau, W: Theorem 4 is about the policy built for the premise).  Shown in the report."""
    if spec is None or ":" in spec or cfg.mode != "premise":
        return {}
    info = policies.get(spec)
    return {p: getattr(cfg.premise, p) for p in PREMISE_PARAMS if p in info.params}

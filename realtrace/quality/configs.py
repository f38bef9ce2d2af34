"""What a quality study runs: the configurations -- a policy (with its parameters, closed or open loop), a press,
an offline optimum, a saved schedule -- parsed from the names ``quality`` takes (:func:`parse_config`) or all of them
(:func:`all_configs`, ``quality --all``).  Read by :mod:`realtrace.quality.run`, which re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvcore.errors import ParameterError

from .optima import OPT, VARIANTS, variant_name

KINDS = ("policy", "press", "opt", "file", "full")
MODES = ("closed", "open", "both")


@dataclass(frozen=True)
class Config:
    """What produces a schedule: ``kind`` (:data:`KINDS`), ``spec`` (policy name, press name, file path), ``mode``
    (``closed`` or ``open``), the name it is reported under and, for a policy, the constructor ``params`` as
    ``(name, value)`` pairs."""

    kind: str
    spec: str
    mode: str
    name: str
    params: tuple = ()


def parse_config(text: str, mode: str = "closed", params: dict | None = None) -> list[Config]:
    """``OPT`` (or a variant ``OPT:NAME``, :mod:`realtrace.quality.optima`), ``press:NAME``, ``file:PATH`` or a policy
    (registered NM name or ``module:Class``, configured by ``params``, reported as ``NAME(key=value, ...)``) -> the
    configs to run (two for a policy in ``mode="both"``).
    Unknown names, parameters a policy does not take, and parameters for anything but a policy are one-line
    :class:`ParameterError`."""
    if mode not in MODES:
        raise ParameterError(f"--mode {mode}: must be one of {', '.join(MODES)}")
    opt = variant_name(text)
    if params and (opt or text.lower().startswith(("press:", "file:"))):
        raise ParameterError(f"--param applies to a policy, not to {text}")
    if opt:
        return [Config("opt", opt, "open", opt)]
    if text.upper().startswith(OPT + ":"):
        raise ParameterError(f"{text}: unknown optimum (known: {', '.join(VARIANTS)})")
    if text.lower().startswith("press:"):
        from ..press.registry import press_spec

        spec = press_spec(text.split(":", 1)[1])
        if spec.name not in _prefill_presses() and not spec.needs_curve:
            raise ParameterError(f"press {spec.name}: not a bridged prefill press")
        if spec.curve is None:
            return [Config("press", spec.name, "closed", f"press:{spec.name}")]
        return [Config("press", f"{spec.name}={spec.curve}", "closed", f"press:{spec.name}={Path(spec.curve).name}")]
    if text.lower().startswith("file:"):
        path = text.split(":", 1)[1]
        if not Path(path).is_file():
            raise ParameterError(f"{text}: no such file (a saved schedule is an .npz with arrays drop_<prompt>)")
        return [Config("file", path, "open", f"file:{Path(path).name}")]
    import policies

    policies.resolve(text, params)  # unknown names, parameters and broken module:Class specs fail here, in one line
    if ":" not in text:
        info = policies.get(text)
        if "nm" not in info.models:
            raise ParameterError(f"policy {info.name}: not an NM policy (it runs in {', '.join(info.models)} only)")
        text = info.name
    pairs = tuple(sorted((params or {}).items()))
    label = config_label(text, dict(pairs))
    modes = ("closed", "open") if mode == "both" else (mode,)
    return [Config("policy", text, m, label if m == "closed" else f"{label} (open loop)", pairs) for m in modes]


def config_label(policy: str, params: dict) -> str:
    """The name a configured policy is reported under: ``NAME(key=value, ...)``, keys sorted; ``NAME`` alone
    without parameters."""
    return policy + (f"({', '.join(f'{k}={v}' for k, v in sorted(params.items()))})" if params else "")


def _prefill_presses() -> tuple[str, ...]:
    from ..press.registry import ALL_PREFILL

    return ALL_PREFILL


def all_configs(mode: str = "closed", policies: list[str] | None = None, presses: list[str] | None = None,
                opt: bool = True) -> list[Config]:
    """``quality --all``: every registered NM policy (or ``policies``), every bridged prefill press (or ``presses``)
    and the exact optimum (unless ``opt=False``)."""
    import policies as registry

    names = [info.name for info in registry.all_policies(model="nm")] if policies is None else list(policies)
    press_names = _prefill_presses() if presses is None else presses
    return ([c for n in names for c in parse_config(n, mode)]
            + [c for p in press_names for c in parse_config(f"press:{p}")] + (parse_config(OPT) if opt else []))


__all__ = ["KINDS", "MODES", "Config", "all_configs", "config_label", "parse_config"]

"""The policy registry: name -> class plus metadata.  A policy module decorates its class with :func:`register`.

Names are case-insensitive.  ``make(name, **params)`` builds an instance with parameter defaults from the dataclass.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kvcore.errors import ParameterError

from .base import Policy


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    cls: type
    deterministic: bool
    models: tuple[str, ...]
    params: dict[str, Any]
    citation: str
    summary: str

    def as_dict(self) -> dict:
        return {"name": self.name, "deterministic": self.deterministic, "models": list(self.models),
                "params": {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
                           for k, v in self.params.items()},
                "citation": self.citation, "summary": self.summary}


REGISTRY: dict[str, PolicyInfo] = {}


def _defaults(cls: type) -> dict[str, Any]:
    if not dataclasses.is_dataclass(cls):
        return {}
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = f.default_factory()  # type: ignore[misc]
    return out


def register(cls: type) -> type:
    """Class decorator: add a :class:`~policies.base.Policy` subclass to the registry under ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"{cls!r} is not a Policy subclass")
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no name")
    key = cls.name.lower()
    if key in REGISTRY and REGISTRY[key].cls is not cls:
        raise TypeError(f"policy name {cls.name!r} registered twice")
    doc = (cls.__doc__ or "").strip().splitlines()
    REGISTRY[key] = PolicyInfo(cls.name, cls, cls.deterministic, tuple(sorted(cls.models)), _defaults(cls),
                               cls.citation, doc[0] if doc else "")
    return cls


def get(name: str) -> PolicyInfo:
    try:
        return REGISTRY[name.lower()]
    except KeyError:
        known = ", ".join(sorted(i.name for i in REGISTRY.values()))
        raise ParameterError(f"unknown policy {name!r} (known: {known})") from None


def make(name: str, **params: Any) -> Policy:
    info = get(name)
    unknown = set(params) - set(info.params)
    if unknown:
        raise ParameterError(f"policy {info.name}: unknown parameter(s) {sorted(unknown)} "
                             f"(parameters: {sorted(info.params) or 'none'})")
    return info.cls(**params)


def all_policies(model: str | None = None, deterministic: bool | None = None) -> list[PolicyInfo]:
    """Registered policies, sorted by name, optionally filtered by model and determinism."""
    out = [i for i in REGISTRY.values()
           if (model is None or model in i.models) and (deterministic is None or i.deterministic == deterministic)]
    return sorted(out, key=lambda i: i.name.lower())

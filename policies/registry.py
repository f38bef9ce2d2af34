"""The policy registry: name -> class plus metadata.  A policy module decorates its class with :func:`register`.

Names are case-insensitive.  ``make(name, **params)`` builds an instance with parameter defaults from the dataclass.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable

from kvcore.engine import INTERFACE_METHODS
from kvcore.errors import ParameterError
from kvcore.formulas import GUARANTEES
from kvcore.numbers import is_integer, is_real

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
    guarantee: str | None = None
    weighted: bool = False
    lazy: bool = True
    signal: str | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "deterministic": self.deterministic, "models": list(self.models),
                "params": {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
                           for k, v in self.params.items()},
                "citation": self.citation, "summary": self.summary, "guarantee": self.guarantee,
                "weighted": self.weighted, "lazy": self.lazy, "signal": self.signal}


REGISTRY: dict[str, PolicyInfo] = {}
METADATA = ("guarantee", "weighted", "lazy", "signal")
# The paper's taxonomy of eviction signals (Section 2.4), plus the weighted-caching and signal-free rules.
SIGNALS = ("recency", "frequency", "importance", "hybrid", "cost", "none")


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
    if cls.guarantee is not None and cls.guarantee not in GUARANTEES:
        raise TypeError(f"{cls.__name__}: guarantee {cls.guarantee!r} is not one of {sorted(GUARANTEES)}")
    if GUARANTEES.get(cls.guarantee) is not None and GUARANTEES[cls.guarantee].expectation == cls.deterministic:
        raise TypeError(f"{cls.__name__}: guarantee {cls.guarantee!r} does not fit deterministic = {cls.deterministic}")
    if cls.signal is not None and cls.signal not in SIGNALS:
        raise TypeError(f"{cls.__name__}: signal {cls.signal!r} is not one of {SIGNALS}")
    doc = (cls.__doc__ or "").strip().splitlines()
    REGISTRY[key] = PolicyInfo(cls.name, cls, cls.deterministic, tuple(sorted(cls.models)), _defaults(cls),
                               cls.citation, doc[0] if doc else "", cls.guarantee, cls.weighted, cls.lazy,
                               cls.signal)
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
    for key, value in params.items():
        check_param_type(info, key, value)
    return info.cls(**params)


def check_param_type(info: PolicyInfo, key: str, value: Any) -> None:
    """A parameter value must have its field's declared type (an int is accepted where a float is declared; a bool
    never counts as a number); one-line ParameterError otherwise, nothing coerced.  Ranges are each policy's own
    check (``__post_init__``)."""
    import types
    import typing

    hint = typing.get_type_hints(info.cls).get(key)
    if hint is None:
        return
    allowed = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    allowed = tuple(typing.get_origin(a) or a for a in allowed)
    ok = any(value is None if a is type(None) else
             is_real(value) if a is float else
             is_integer(value) if a is int else
             isinstance(value, a) for a in allowed)
    if not ok:
        names = " or ".join("null" if a is type(None) else a.__name__ for a in allowed)
        raise ParameterError(f"policy {info.name}: {key} = {value!r} must be {names}")


def all_policies(model: str | None = None, deterministic: bool | None = None, **declared: Any) -> list[PolicyInfo]:
    """Registered policies, sorted by name, filtered by model, determinism and declared metadata, e.g.
    ``all_policies("rm", guarantee="k/(k-h+1)", weighted=True)`` or ``all_policies("rm", lazy=True)``."""
    unknown = set(declared) - set(METADATA)
    if unknown:
        raise ParameterError(f"all_policies: unknown metadata {sorted(unknown)} (known: {', '.join(METADATA)})")
    out = [i for i in REGISTRY.values()
           if (model is None or model in i.models) and (deterministic is None or i.deterministic == deterministic)
           and all(getattr(i, key) == want for key, want in declared.items())]
    return sorted(out, key=lambda i: i.name.lower())


def resolve(spec: Any, params: dict[str, Any] | None = None) -> Callable[[], Any]:
    """The one way a policy is named: a registered name, a ``module:Class`` string (importable from the current
    directory) or a ``path/to/file.py:Class`` string, a policy class, a policy instance or a zero-argument factory -> a factory of policy instances.

    ``params`` are passed to the constructor (registered names and classes only).  Every failure is one
    :class:`~kvcore.errors.ParameterError` line naming the spec: unknown name, module that cannot be imported (or
    that exits while importing), missing attribute, a constructor that raises, an object without the five interface
    methods of :mod:`kvcore.engine`.
    """
    # imported here: kvcore.measure loads the optima (scipy), which ``import policies`` otherwise never needs
    from kvcore.measure import is_policy, policy_factory

    params = dict(params or {})
    if isinstance(spec, str):
        if ":" not in spec:
            info = get(spec)
            make(info.name, **params)                     # unknown or out-of-range parameters fail here, once
            return lambda: make(info.name, **params)
        obj = _import_target(spec)
        label = spec
    else:
        obj, label = spec, repr(spec)
    if params and not isinstance(obj, type):
        raise ParameterError(f"policy {label}: parameters can only be passed to a policy class")
    if isinstance(obj, type) and params:
        cls = obj
        obj = lambda: cls(**params)  # noqa: E731
    try:
        factory = policy_factory(obj)
    except TypeError as exc:
        raise ParameterError(f"policy {label}: {exc}") from None
    try:
        probe = factory()
    except Exception as exc:  # a user's constructor failing is a one-line finding, not a traceback
        raise ParameterError(f"policy {label}: cannot construct it: {type(exc).__name__}: {exc}") from None
    if not is_policy(probe):
        missing = [m for m in INTERFACE_METHODS if not callable(getattr(probe, m, None))]
        raise ParameterError(f"policy {label}: does not follow the policy interface (missing {', '.join(missing)})")
    return factory


TARGET_FORMS = "a registered name, module:Class or path/to/file.py:Class"


def _import_target(spec: str) -> Any:
    """``module:Class`` (importable from the current directory) or ``path/to/file.py:Class`` (the file loaded as a
    module named after its stem, its folder first on ``sys.path`` so it can import its neighbours) -> the object.
    Every failure is one ParameterError line that ends by naming the accepted forms."""
    mod_name, _, attr = spec.rpartition(":")   # the last colon: a path may hold one (a Windows drive letter)
    forms = f"(a target is {TARGET_FORMS})"
    if not mod_name or not attr:
        raise ParameterError(f"policy {spec!r}: expected {TARGET_FORMS}")
    try:
        module = _load_file(mod_name) if _is_file_form(mod_name) else _load_module(mod_name)
    except SystemExit as exc:
        raise ParameterError(f"policy {spec!r}: importing {mod_name!r} called sys.exit({exc.code!r}) {forms}") \
            from None
    except Exception as exc:  # any failure while importing user code is reported in one line
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ParameterError(f"policy {spec!r}: cannot import {mod_name!r}: {type(exc).__name__}: {first} {forms}") \
            from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise ParameterError(f"policy {spec!r}: {mod_name!r} has no attribute {attr!r}")
    if not callable(obj):
        raise ParameterError(f"policy {spec!r}: {attr!r} is not a class or factory")
    return obj


def _is_file_form(mod_name: str) -> bool:
    return mod_name.endswith(".py") or "/" in mod_name or "\\" in mod_name


def _load_module(mod_name: str):
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    return importlib.import_module(mod_name)


def _load_file(path_text: str):
    """The Python file ``path_text`` as a module named after its stem (registered in ``sys.modules`` before it runs,
    as an import would: a dataclass or a pickled object looks its module up there)."""
    import importlib.util
    from pathlib import Path

    path = Path(path_text).resolve()
    if path.suffix != ".py" or not path.is_file():
        raise FileNotFoundError(f"no Python file {str(path)!r}")
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) and Path(loaded.__file__).resolve() == path:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module

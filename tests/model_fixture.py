"""The models the quality and press tests share: the process's one instance per model
(``realtrace.quality.run.worker_model``), or a skip that names the missing extra or model wheels
(:func:`needs_model` alone for a test that runs the model in a subprocess).  ``PACKAGED``: the registered models
the short-prompt model tests run on (CI installs the wheels of both, .ci/run)."""

import importlib.util

import pytest

from realtrace.model import REGISTERED

REAL = ("torch", "transformers", "gguf")
PACKAGED = ("smollm2-135m", "gemma3-270m")


def needs_model(extras: tuple[str, ...] = REAL, reason: str = "the quality replay needs the [real] extra",
                model: str = "smollm2-135m") -> None:
    """Skip the calling test unless ``extras`` import and the wheels of the registered ``model`` are installed
    (for tests that run the model in a subprocess)."""
    for mod in extras:
        pytest.importorskip(mod, reason=reason)
    reg = REGISTERED[model]
    modules = (reg.package, *(p.split("==")[0].replace("-", "_") for p in reg.parts))
    if any(importlib.util.find_spec(m) is None for m in modules):
        pytest.skip(f"model wheels of {model} not installed: {reg.install}")


def shared_model(extras: tuple[str, ...] = REAL, reason: str = "the quality replay needs the [real] extra",
                 model: str = "smollm2-135m"):
    needs_model(extras, reason, model)
    from realtrace.quality.run import worker_model

    return worker_model(1, model=model)

"""The model the quality and press tests share: the process's one instance (``realtrace.quality.run.worker_model``),
or a skip that names the missing extra or model wheel (:func:`needs_model` alone for a test that runs the model in
a subprocess)."""

import importlib.util

import pytest

from realtrace.model import MODEL_INSTALL, MODEL_PACKAGE

REAL = ("torch", "transformers", "gguf")


def needs_model(extras: tuple[str, ...] = REAL, reason: str = "the quality replay needs the [real] extra") -> None:
    """Skip the calling test unless ``extras`` import and the model wheel is installed (for tests that run the model
    in a subprocess)."""
    for mod in extras:
        pytest.importorskip(mod, reason=reason)
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        pytest.skip(f"model wheel not installed: {MODEL_INSTALL}")


def shared_model(extras: tuple[str, ...] = REAL, reason: str = "the quality replay needs the [real] extra"):
    needs_model(extras, reason)
    from realtrace.quality.run import worker_model

    return worker_model(1)

"""Every bridged press is well formed, so adding one (a ``PressSpec`` line in ``realtrace/press/registry.py``, see
CONTRIBUTING.md) is checked without running the model: its name resolves, its toolkit counterpart is a registered
policy with valid parameters, the leaderboard's lists name only bridged presses, and -- with kvpress installed -- its
class exists and builds at a ratio and, unless head-wise, under ``DecodingPress``."""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import numpy as np
import pytest

import policies
from kvcore.errors import ParameterError
from realtrace.press.registry import (ALL_DECODING, ALL_PREFILL, NOT_BRIDGED, PRESSES, build_press, press_spec)

SPECS = sorted(PRESSES.values(), key=lambda s: s.name)


@pytest.fixture(scope="module")
def curve(tmp_path_factory):
    """A valid LU-KV budget curve for the model (uniform: every head prunes the global ratio)."""
    path = tmp_path_factory.mktemp("curve") / "uniform.npy"
    np.save(path, np.broadcast_to((np.arange(1, 100) / 100)[:, None, None], (99, 30, 3)).astype(np.float32))
    return str(path)


def resolved(spec, curve):
    """The spec as the command lines resolve it: with its curve file when it takes one."""
    return replace(spec, curve=curve) if spec.needs_curve else spec


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_bridged_press_resolves_and_names_a_real_toolkit_counterpart(spec, curve):
    suffix = f"={curve}" if spec.needs_curve else ""
    for name in (spec.name, spec.cls):  # with kvpress's "Press" suffix too
        assert press_spec(name + suffix) == resolved(spec, curve)
    assert spec.citation and spec.keeps
    if spec.toolkit is not None:
        name, params = spec.toolkit
        policies.make(name, **params)  # a registered policy, parameters type- and range-checked
        assert "nm" in policies.get(name).models  # the bridge compares in the no-refetch model
    assert spec.inner is not None or not spec.headwise  # a head-wise press wraps a scorer


def test_the_leaderboard_lists_only_bridged_presses_and_refuses_the_others():
    bridged = {s.name for s in SPECS}
    assert set(ALL_PREFILL) <= bridged and set(ALL_DECODING) <= bridged
    for name in NOT_BRIDGED:
        with pytest.raises(ParameterError, match="not bridged"):
            press_spec(name)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_bridged_press_builds_with_kvpress(spec, curve):
    if importlib.util.find_spec("kvpress") is None:
        pytest.skip("kvpress is not installed (the [kvpress] extra)")
    press = build_press(resolved(spec, curve), 0.5, decoding=False, interval=16, budget=None)
    assert type(press).__name__ == spec.cls and press.compression_ratio == 0.5
    if spec.inner is not None:
        assert type(press.press).__name__ == spec.inner
        with pytest.raises(ParameterError, match="prefill only"):
            build_press(resolved(spec, curve), 0.0, decoding=True, interval=16, budget=8)
    if spec.needs_curve:
        assert press._budget_curves.shape == (99, 30, 3)
    if spec.name in ALL_DECODING:
        assert type(build_press(spec, 0.0, decoding=True, interval=16, budget=8)).__name__ == "DecodingPress"

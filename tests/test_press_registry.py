"""Every bridged press is well formed, so adding one (a ``PressSpec`` line in ``realtrace/press/registry.py``, see
CONTRIBUTING.md) is checked without running the model: its name resolves, its toolkit counterpart is a registered
policy with valid parameters, the leaderboard's lists name only bridged presses, and -- with kvpress installed -- its
class exists and builds at a ratio and, unless head-wise, under ``DecodingPress``."""

from __future__ import annotations

import importlib.util

import pytest

import policies
from kvcore.errors import ParameterError
from realtrace.press.registry import (ALL_DECODING, ALL_PREFILL, NOT_BRIDGED, PRESSES, build_press, press_spec)

SPECS = sorted(PRESSES.values(), key=lambda s: s.name)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_bridged_press_resolves_and_names_a_real_toolkit_counterpart(spec):
    assert press_spec(spec.name) is spec and press_spec(spec.cls) is spec  # with kvpress's "Press" suffix too
    assert spec.citation and spec.keeps
    if spec.toolkit is not None:
        name, params = spec.toolkit
        policies.make(name, **params)  # a registered policy, parameters type- and range-checked
        assert "nm" in policies.get(name).models  # the bridge compares in the no-refetch model
    assert (spec.inner is not None) == spec.headwise


def test_the_leaderboard_lists_only_bridged_presses_and_refuses_the_others():
    bridged = {s.name for s in SPECS}
    assert set(ALL_PREFILL) <= bridged and set(ALL_DECODING) <= bridged
    for name in NOT_BRIDGED:
        with pytest.raises(ParameterError, match="not bridged"):
            press_spec(name)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_bridged_press_builds_with_kvpress(spec):
    if importlib.util.find_spec("kvpress") is None:
        pytest.skip("kvpress is not installed (the [kvpress] extra)")
    press = build_press(spec, 0.5, decoding=False, interval=16, budget=None)
    assert type(press).__name__ == spec.cls
    if spec.name in ALL_DECODING:
        assert type(build_press(spec, 0.0, decoding=True, interval=16, budget=8)).__name__ == "DecodingPress"

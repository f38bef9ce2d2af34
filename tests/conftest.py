"""Fixtures shared by the tests in this folder (the hypothesis profiles and the slow switch are in ../conftest.py)."""

import pytest

from policies.registry import REGISTRY, register


@pytest.fixture
def registered():
    """``registered(cls)`` registers a throwaway policy class for one test; it is removed from the registry after."""
    added = []

    def add(cls):
        register(cls)
        added.append(cls.name.lower())
        return cls

    yield add
    for key in added:
        REGISTRY.pop(key, None)

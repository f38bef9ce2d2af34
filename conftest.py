"""Root pytest configuration: hypothesis profiles and the slow switch.

Profiles: ``ci`` (derandomized, bounded; selected when the ``CI`` environment variable is set), ``dev`` (the
default: random, moderate), ``deep`` (many examples; select with ``HYPOTHESIS_PROFILE=deep``).
Slow tests (larger k, longer sequences) run with ``--runslow`` or ``KV_SLOW=1``.  ``--regen-golden`` rewrites the
policies' golden snapshot (tests/test_golden.py) instead of comparing with it, and with ``--runslow`` the committed
measurement of the surrogate's failure directions (theorems/test_surrogate_directions.py,
realtrace/data/value_directions).  The quality runs' reference cache (``KV_QUALITY_CACHE``,
:mod:`realtrace.quality.cache`) points into the session's temporary directory, for the tests and every command they
start, so a test run neither reads nor fills the user's cache.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, max_examples=40, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=100, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=2000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session", autouse=True)
def quality_cache_of_the_session(tmp_path_factory):
    os.environ["KV_QUALITY_CACHE"] = str(tmp_path_factory.mktemp("quality_cache"))
    yield
    os.environ.pop("KV_QUALITY_CACHE", None)


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="run slow tests (larger k and longer sequences)")
    parser.addoption("--regen-golden", action="store_true", default=False,
                     help="rewrite tests/golden/policies.json from the current policies, and with --runslow "
                          "realtrace/data/value_directions from the model (review the diff!)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or os.environ.get("KV_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or KV_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)

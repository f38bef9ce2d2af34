"""Benchmarks (not part of the test run): ``python -m bench [--json] [--quick]``.

One process, one run: the fast kernels side by side with libCacheSim (miss counts and requests/s), the all-sizes LRU
curve against libCacheSim at 20 sizes, every registered policy through the plain engine, and the exact optima's
time and peak memory.  Rates are quoted against a baseline loop measured in the same run, so numbers from a loaded
machine stay comparable within the run.
"""

"""The result tables and claim checks, and the proof-checking suite (test_*.py): one test module per result of the
paper and of SPEC section 5.  The checking API and the fuzzer they use live in :mod:`verify`."""

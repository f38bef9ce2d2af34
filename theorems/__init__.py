"""The verifier (verify.py), the result tables and claim checks, and the proof-checking suite (test_*.py):
one test module per result of the paper and of SPEC section 5."""

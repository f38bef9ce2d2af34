"""Checking a policy against the bounds that apply to it: the assertion API for a user's own tests
(:mod:`verify.check`) and the fuzzer (:mod:`verify.fuzz`, command line ``python -m verify``), which runs a user's
policy in its own process (:mod:`verify.isolated`).

Imports kvcore, policies and adversary only; the theorem suite and ``paper_check`` build on it.  Importing the
package itself loads nothing (the child process of :mod:`verify.isolated` starts from here).
"""

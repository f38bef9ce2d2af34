"""Error types shared by the whole toolkit.

Every error meant for a user is one line that names where the problem is (a file, a step, a parameter, a policy)
and what is wrong.  The command line turns these into one line on stderr and exit status 2.
"""

from __future__ import annotations


class KVToolkitError(Exception):
    """Base class: an error whose message is a complete one-line explanation for the user."""


class TraceError(KVToolkitError, ValueError):
    """A trace (in memory or in a file) violates the format of SPEC section 1."""


class ParameterError(KVToolkitError, ValueError):
    """A parameter (capacity, threshold, policy option, ...) is out of its allowed range."""


class ContractViolation(KVToolkitError, RuntimeError):
    """A policy broke the engine contract (SPEC section 2): it names the policy, the step and the item."""

    def __init__(self, policy: str, step: int, message: str, item: object = None):
        self.policy = policy
        self.step = step
        self.item = item
        where = f"policy {policy!r}, step {step}"
        if item is not None:
            where += f", item {item!r}"
        super().__init__(f"contract violation: {where}: {message}")

"""The practical-significance margin of every comparative claim (``VERDICTS.md``, "Practical significance").

Where the source compares policies in words that tolerate a small difference ("matches", "loses nothing", "gives up
nothing measurable", "helps", "separates"), a difference of NM regret (attention mass lost, paper Eq. 4) counts only
when it exceeds

    margin(reference, steps) = max(RELATIVE * reference, PER_STEP * steps)

where ``reference`` is the regret of the policy compared against over the same ``steps`` rows.  The two constants
were fixed by rule, not fitted to any measurement: a tenth of the reference's own loss (a difference smaller than
that does not change which policy is better by an order a reader would act on), and one hundredth of a row's
attention mass per step (below that the surrogate cannot rank real traces: the unattributed residual of a captured
row is itself 1-14% of its mass in layers 9-29 of the committed trace set, ``realtrace/data/PROVENANCE.md``).  Per-step quantities (a window's regret per step) use ``steps = 1``.
The claims put these constants in their values (:func:`declared`), so the report shows the margin each verdict used
and a decision reads it from there.
"""

from __future__ import annotations

RELATIVE = 0.10
PER_STEP = 0.01


def declared() -> dict:
    """The margin's two constants, as a claim's values carry them."""
    return {"relative": RELATIVE, "per_step": PER_STEP}


def margin(reference: float, steps: int, declared_margin: dict | None = None) -> float:
    """The smallest regret difference that counts against ``reference`` over ``steps`` rows (module docstring)."""
    m = declared() if declared_margin is None else declared_margin
    return max(m["relative"] * max(reference, 0.0), m["per_step"] * steps)


def measurably_worse(value: float, reference: float, steps: int, declared_margin: dict | None = None) -> bool:
    """``value`` loses more than ``reference`` by more than the margin."""
    return value - reference > margin(reference, steps, declared_margin)


def measurably_better(value: float, reference: float, steps: int, declared_margin: dict | None = None) -> bool:
    """``value`` loses less than ``reference`` by more than the margin."""
    return reference - value > margin(reference, steps, declared_margin)

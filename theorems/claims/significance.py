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

Output quality (a schedule replayed in the model, ``python -m paper_check quality``) is compared per prompt, on the
prompts the full cache answers right (the positive control) only, by three measurements against the full cache on the
same tokens.  The compared policy is measurably worse than the reference on a prompt when any of these holds:

* *answer*: the reference answers it right and the compared policy does not (an exact-match answer is itself the
  measurement: a flipped answer counts with no margin);
* *answer NLL*: its mean change in the answer tokens' NLL exceeds the reference's by more than
  ``quality_margin(reference) = max(QUALITY_RELATIVE * reference, QUALITY_FLOOR_NATS)``;
* *stream KL*: its mean KL divergence from the full cache's next-token distribution over the rows after the budget
  binds exceeds the reference's by more than the same ``quality_margin(reference)``.

Fixed by rule before any comparison of the Section 10 default in the model was measured: the relative part is the
regret margin's (a tenth of the reference's own loss); the floor is ``ln(1.01)`` nats, the log-ratio of a one-per-cent
change in a token's probability -- a difference of mean NLL or KL below it moves the probabilities the model assigns
by less than one per cent on average (on the geometric scale), too little to change a greedy answer except where two
tokens already tie within one per cent.  A reference below zero (a policy whose answer NLL is lower than the full
cache's) gives the floor alone.
"""

from __future__ import annotations

import math

RELATIVE = 0.10
PER_STEP = 0.01
QUALITY_RELATIVE = 0.10
QUALITY_FLOOR_NATS = math.log(1.01)
QUALITY_MEASURES = ("dnll_answer", "kl_stream")


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


def declared_quality() -> dict:
    """The output-quality margin's two constants, as a claim's values carry them."""
    return {"relative": QUALITY_RELATIVE, "floor_nats": QUALITY_FLOOR_NATS}


def quality_margin(reference: float, declared_margin: dict | None = None) -> float:
    """The smallest difference of answer NLL change or stream KL (nats) that counts against ``reference``."""
    m = declared_quality() if declared_margin is None else declared_margin
    return max(m["relative"] * max(reference, 0.0), m["floor_nats"])


def quality_losses(value: dict, reference: dict, declared_margin: dict | None = None) -> list[str]:
    """On one positive-control prompt, the measurements by which ``value`` is measurably worse than ``reference``
    (module docstring): ``"answer"`` when only the reference answers right, and each of :data:`QUALITY_MEASURES`
    whose excess over the reference's exceeds :func:`quality_margin`.  Each argument is a prompt's entry of a quality
    replay (``right``, ``dnll_answer``, ``kl_stream``)."""
    lost = ["answer"] if reference["right"] and not value["right"] else []
    return lost + [q for q in QUALITY_MEASURES
                   if value[q] - reference[q] > quality_margin(reference[q], declared_margin)]

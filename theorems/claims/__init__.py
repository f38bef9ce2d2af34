"""The claims catalogue of SPEC section 6: one registered check per claim id, each returning a verdict with evidence.

The registry lives in :mod:`theorems.claims.registry`; the modules below register their checks on import, one per
family of results, named like the result tables they read (:mod:`theorems.results`): ``classic``, ``attention``,
``gda``, ``persistence``, ``practice``, ``recommendations``, ``randomized``, ``blocks``, ``allocation``,
``surrogate``, and ``formulas`` for the closed-form numbers.
"""

from .registry import (CLAIMS, SPEC_IDS, VERDICTS, Claim, ClaimResult, Computed, Context, Decision, claim, decides,
                       dumps, edit, in_report_order, to_jsonable)

# Import order is registration order; the report sorts by SPEC_IDS.
from . import attention, blocks, classic, formulas, gda, persistence, practice, randomized, recommendations  # noqa: E402,F401  (they register)
from . import allocation, directions, surrogate, workingset  # noqa: E402,F401  (after the catalogue: their claims are beyond SPEC section 6)
from . import benchmark, blind_spot, figure14, heads  # noqa: E402,F401  (issue 29: claims 6-8, the quality sweep; claim 2 per head)
from . import paradox  # noqa: E402,F401  (issue 52: the surrogate's exactness against the output)

CLAIMS = in_report_order(CLAIMS)

__all__ = ["CLAIMS", "SPEC_IDS", "VERDICTS", "Claim", "ClaimResult", "Computed", "Context", "Decision", "claim",
           "decides", "dumps", "edit", "in_report_order", "to_jsonable"]

"""Run profiles: how large the checks are.  ``quick`` is the default of ``python -m paper_check`` (under a minute on
2 cores); ``full`` uses larger k and longer sequences; ``ci`` is what the test suite uses.  Every size a claim uses is
taken from here and written into the report."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    ks: tuple[int, ...]          # cache sizes for ratio-vs-k results
    T: int                       # length of paging sequences
    seeds: int                   # seeds for randomized policies
    nm_T: int                    # length of attention traces
    nm_k: int                    # budget for attention traces

    def as_dict(self) -> dict:
        return asdict(self)


CI = Profile("ci", ks=(2, 3, 4), T=600, seeds=8, nm_T=200, nm_k=16)
QUICK = Profile("quick", ks=(2, 4, 8, 16), T=4000, seeds=16, nm_T=600, nm_k=32)
FULL = Profile("full", ks=(2, 4, 8, 16, 32, 64), T=40000, seeds=64, nm_T=4000, nm_k=128)
PROFILES = {p.name: p for p in (CI, QUICK, FULL)}

"""Decoy-and-sleeper: the construction behind the paper's Theorem 2 (Section 5), in NM and in RM.

Reading notes (the paper's Section 5 taken literally in the token-per-step model of SPEC section 2):

* Token ``t`` arrives at step ``t``, so "priming steps 1..P with the ``k-1`` decoys and the sleeper resident and no
  eviction" forces ``P = k``: any longer priming brings more tokens and therefore evictions.  The NM generator
  has no free priming length; the RM one does (its extra priming arrivals carry no mass and cost nothing).
* "At step P+1 the filler is produced ... ACC evicts the smallest accumulated score, the sleeper at epsilon":
  in NM eviction happens before the step's row is observed, so the arriving filler's accumulated score is 0,
  below the sleeper's epsilon.  A pure accumulated-attention rule that scores arrivals at 0 drops the *filler*,
  keeps the sleeper, and pays nothing on the suffix.  The paper's order works only against a rule that protects
  the arriving token (or when epsilon = 0 and ties go to the older token).  ``order="filler_first"`` repairs it:
  the filler arrives first and is attended, then the sleeper arrives into a full cache; both conventions drop the
  sleeper (one at its arrival, the other at the next arrival).
* Rows sum to 1, so during the suffix the rest of each row goes somewhere: here ``1 - background`` on the sleeper
  and ``background`` on the arriving token (self-attention); with ``background = 0`` the row is ``{s: 1}``.
* Lemma 1 (decay) cannot rescue the NM construction: the crunch comes right after the decoys' last attention, so
  the decayed decoy scores still exceed epsilon and a decayed rule drops the sleeper too; in NM that is final.
  The lemma's "the sleeper is retained from then on" needs the sleeper to come back, i.e. the RM version.
* RM version: an RM arrival is itself a request and occupies a slot, so with ``k-1`` decoys pinned there is no
  room for the arrival and a sleeper at once; the generator uses ``k-2`` decoys (two slots for the arrival and
  the active sleeper, which is what "OPT keeps the active sleeper" needs).
"""

from __future__ import annotations

from typing import NamedTuple

from kvcore.errors import ParameterError
from kvcore.numbers import integer, real
from kvcore.traces import AttentionTrace

from ._build import attention_from_rows

ORDERS = ("paper", "filler_first")


class DecoyRoles(NamedTuple):
    """Token ids of the NM construction: ``decoys``, ``sleeper``, ``filler``, and the first suffix step."""

    decoys: tuple[int, ...]
    sleeper: int
    filler: int
    suffix_start: int


def decoy_and_sleeper_roles(k: int, order: str = "filler_first") -> DecoyRoles:
    """Roles of :func:`decoy_and_sleeper`: decoys ``0..k-2``; ``order="paper"``: sleeper ``k-1``, filler ``k``;
    ``order="filler_first"``: filler ``k-1``, sleeper ``k``.  The suffix starts at step ``k+1`` in both."""
    k = integer(k, "k", 2)
    if order not in ORDERS:
        raise ParameterError(f"order = {order!r}: must be one of {ORDERS}")
    first, second = (k - 1, k)
    sleeper, filler = (first, second) if order == "paper" else (second, first)
    return DecoyRoles(tuple(range(k - 1)), sleeper, filler, k + 1)


def decoy_and_sleeper(k: int, epsilon: float, suffix: int, *, filler_mass: float = 1.0, background: float = 0.0,
                      order: str = "filler_first") -> AttentionTrace:
    """NM decoy-and-sleeper trace (paper Section 5, Theorem 2; Figure 9).  Deterministic.

    Rows (0-based; roles from :func:`decoy_and_sleeper_roles`; ``D = k-1`` decoys, tokens ``0..k-2``):

    * decoy rows ``t = 0..k-2``: mass ``1/(t+1)`` on each decoy ``0..t`` (all priming mass on decoys);
    * ``order="paper"``: row ``k-1`` (sleeper arrives): ``epsilon`` on the sleeper and ``(1-epsilon)/D`` on each
      decoy; row ``k`` (filler arrives, cache full, an eviction is forced): ``filler_mass`` on the filler and
      ``1 - filler_mass`` on decoy 0;
    * ``order="filler_first"``: row ``k-1`` (filler arrives, cache now full): ``filler_mass`` on the filler and
      ``(1-filler_mass)/D`` on each decoy; row ``k`` (sleeper arrives, eviction forced): ``epsilon`` on the sleeper
      and ``1 - epsilon`` on the filler;
    * suffix rows ``t = k+1..k+suffix``: ``1 - background`` on the sleeper, ``background`` on token ``t``.

    So before the suffix the sleeper has mass exactly ``epsilon`` and every decoy more than ``epsilon``
    (decoy ``j`` gets ``sum_{t=j}^{k-2} 1/(t+1)`` plus its row-``k-1`` share); the generator refuses parameters
    that break this.  The offline optimum drops decoy ``k-2`` (never attended again) at the crunch, keeps the
    sleeper and each arriving token, and loses nothing (paper order with ``k = 2`` needs ``filler_mass = 1``, since
    its only decoy is attended in row ``k``).  A rule that drops the sleeper loses ``1 - background`` per suffix
    row.  See the module docstring for why ``filler_first`` is the default.
    """
    roles = decoy_and_sleeper_roles(k, order)
    k = int(k)
    suffix = integer(suffix, "suffix", 0)
    eps = real(epsilon, "epsilon", 0.0, 1.0, open_high=True)
    f = real(filler_mass, "filler_mass", 0.0, 1.0, open_low=order != "paper", open_high=False)
    beta = real(background, "background", 0.0, 1.0, open_high=True)
    D = k - 1
    rows: list[dict[int, float]] = [{j: 1.0 / (t + 1) for j in range(t + 1)} for t in range(D)]
    if order == "paper":
        rows.append({**{j: (1.0 - eps) / D for j in range(D)}, roles.sleeper: eps})
        rows.append({roles.filler: f, 0: 1.0 - f})
        last_decoy = 1.0 / D + (1.0 - eps) / D
    else:
        rows.append({**{j: (1.0 - f) / D for j in range(D)}, roles.filler: f})
        rows.append({roles.sleeper: eps, roles.filler: 1.0 - eps})
        last_decoy = 1.0 / D + (1.0 - f) / D
    if not eps < last_decoy:
        raise ParameterError(f"epsilon = {epsilon}: the sleeper's priming mass must stay below every decoy's "
                             f"(the lightest decoy gets {last_decoy:.6g} with k = {k})")
    for t in range(roles.suffix_start, roles.suffix_start + suffix):
        rows.append({roles.sleeper: 1.0 - beta, t: beta})
    return attention_from_rows(rows, f"decoy_and_sleeper(k={k}, epsilon={eps:g}, suffix={suffix}, "
                                     f"filler_mass={f:g}, background={beta:g}, order={order})")


class SleeperBlock(NamedTuple):
    """One block of :func:`decoy_and_sleeper_rm`: sleepers ``x``, ``y`` and the steps the block spans."""

    x: int
    y: int
    start: int
    stop: int


def decoy_and_sleeper_rm_blocks(k: int, priming: int, suffix: int, rounds: int) -> list[SleeperBlock]:
    """The sleeper blocks of :func:`decoy_and_sleeper_rm` (the last one may be cut short by ``suffix``)."""
    blocks = []
    length = 2 + 2 * rounds
    for start in range(priming, priming + suffix, length):
        blocks.append(SleeperBlock(start, start + 1, start, min(start + length, priming + suffix)))
    return blocks


def decoy_and_sleeper_rm(k: int, priming: int, suffix: int, rounds: int = 4,
                         background: float = 0.0) -> AttentionTrace:
    """Recompute-model decoy-and-sleeper with a stream of sleepers (paper Section 5, "the recompute-model
    version", whose bookkeeping the paper omits).  Deterministic.

    Returns an attention trace; its RM request sequence is ``kvcore.traces.rm_requests_from_attention(trace,
    theta)`` for any ``theta`` in ``(background, 1 - background]`` (the decoy rows may add requests for decoys,
    which are hits for any policy that keeps them).  Rows (0-based):

    * ``k-2`` decoys, tokens ``0..k-3``; priming rows ``t = 0..priming-1`` spread mass 1 uniformly over the
      decoys present (``0..min(t, k-3)``); tokens arriving at steps ``k-2..priming-1`` get no mass;
    * the suffix (steps ``priming..priming+suffix-1``) is a stream of blocks of ``2 + 2 rounds`` steps
      (:func:`decoy_and_sleeper_rm_blocks`): block start ``b`` brings sleeper ``x = b`` (row ``{x: 1}``) and
      sleeper ``y = b+1`` (row ``{y: 1}``); then ``rounds`` times a row ``{x: 1-background, t: background}``
      followed by ``{y: 1-background, t: background}``.

    Every sleeper collects at most ``1 + rounds`` in total, and the generator requires the lightest decoy's
    priming mass ``(priming - k + 3)/(k - 2)`` to exceed that, so an undecayed accumulated-attention rule (even one
    that remembers scores across evictions) ranks every sleeper below every decoy.  With ``k-2`` decoys pinned it
    has two free slots, one taken by each step's arrival, so ``x`` and ``y`` evict each other: it pays a
    recompute on every alternating row.  The optimum drops the spent decoys and keeps ``x``, ``y`` and the
    arrival (``k >= 3``): it pays nothing at all (arrivals are free).

    A geometrically decayed rule (Lemma 1) stops favouring the decoys after about ``ln(1/eps)/ln(1/gamma)`` steps,
    but whether it then stops paying depends on room: a fresh sleeper's score (1, from its arrival row) is below the
    decayed score of the pair just spent, so with ``k = 3`` or ``4`` a decayed rule whose half-life exceeds a block
    pays a few recomputes in every block (measured: ``gamma = 0.8``, ``k = 3``, ``rounds = 4``: about 0.5 per
    step), while with ``k >= 5`` both pairs fit and it stops paying.
    """
    k = integer(k, "k", 3)
    priming = integer(priming, "priming", k - 2)
    suffix = integer(suffix, "suffix", 0)
    rounds = integer(rounds, "rounds", 1)
    beta = real(background, "background", 0.0, 1.0, open_high=True)
    if not beta < 0.5:
        raise ParameterError(f"background = {background}: must be below 1/2 so the sleeper stays the row's "
                             f"largest entry")
    D = k - 2
    lightest = (priming - k + 3) / D
    if not 1 + rounds < lightest:
        raise ParameterError(f"priming = {priming}: the lightest decoy gets {lightest:.6g}, not above a sleeper's "
                             f"1 + rounds = {1 + rounds}; use priming > {(1 + rounds) * D + k - 3}")
    rows: list[dict[int, float]] = []
    for t in range(priming):
        n = min(t + 1, D)
        rows.append({j: 1.0 / n for j in range(n)})
    for blk in decoy_and_sleeper_rm_blocks(k, priming, suffix, rounds):
        for t in range(blk.start, blk.stop):
            r = t - blk.start
            if r < 2:
                rows.append({t: 1.0})
            else:
                rows.append({(blk.x if r % 2 == 0 else blk.y): 1.0 - beta, t: beta})
    return attention_from_rows(rows, f"decoy_and_sleeper_rm(k={k}, priming={priming}, suffix={suffix}, "
                                     f"rounds={rounds}, background={beta:g})")


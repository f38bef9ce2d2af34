"""A seeded multi-sequence serving workload at block granularity, for the figure page's block study (seed 002).

Items are ``(sequence, block)`` cache blocks of ``TOKENS_PER_BLOCK = 16`` tokens, every head of every layer (a head
is never an eviction unit).  Each is encoded as one non-negative int ``key = sequence * 2**20 + block``
(:func:`encode_block` / :func:`decode_block`): sequence 0 is the system prompt shared by every conversation,
sequences ``1, 2, ...`` are conversations in order of arrival, and a block index is below ``2**20`` (16 Mi tokens per
sequence).  One step is one decode step of one conversation; the step requests the blocks that this decode step
reads (the blocks whose attention is above a sparse-attention selection threshold, as in SPEC section 2's
``Q_t = {i : a[t, i] >= theta}``) and records each block's attention score (its share of the query's attention;
the rest of the row falls on blocks not read).  This is *not* a trace of a real model: it is a stated generative
model of a serving workload, built from the features the figure page names, with every parameter below.

Generative model (:class:`BlockWorkloadParams`, all parameters with defaults):

* ``n_sequences`` conversation slots run concurrently (continuous batching); each step picks one *active* slot
  uniformly at random to decode one token.  A conversation starts with a prompt of ``prompt_blocks_min ..
  prompt_blocks_max`` blocks (uniform) and gains one block every 16 decoded tokens.
* ``system_blocks`` shared system-prompt blocks (sequence 0).  Every decode step reads block 0 (the attention
  sink) and ``system_reads`` other system blocks drawn with Zipf(``system_zipf``) preference over their index.
* Local window: every decode step reads the conversation's last ``local_blocks`` blocks.
* Per-sequence working set: ``heavy_blocks`` blocks of the conversation's prompt, drawn uniformly when it starts
  and fixed for its life (instructions, entities: the heavy hitters that attention keeps returning to); each decode
  step reads ``heavy_reads`` distinct ones of them, uniformly.
* Topic working set: a contiguous span of ``topic_blocks`` blocks of the conversation's context at a uniformly
  random offset; each decode step reads ``topic_reads`` distinct blocks of it, uniformly.  Topic shift: after each
  decode step, with probability ``topic_shift_prob`` the span moves to a new random offset.
* Background: each decode step also reads ``background_reads`` uniformly random blocks of its conversation's
  context (retrieval-like long-range attention; repeats within a step merge).
* Turns and idleness: a conversation decodes a turn of Geometric(mean ``turn_tokens_mean``) tokens, then goes idle
  for Exponential(mean ``idle_gap_mean``) *global* steps (the user reads and types), then returns with a new user
  message of Geometric(mean ``reply_blocks_mean``) blocks appended to its context; on return its topic shifts with
  probability ``return_shift_prob`` (otherwise it resumes the old topic, re-reading blocks last read long ago).
  After a turn the conversation ends with probability ``end_prob``; its slot is taken by a new conversation
  (new sequence id, new prompt) that starts after the idle gap, its first user message appended like a return.
  If every slot is idle, the earliest to return returns at once.
* Attention scores: a decode step's row is Dirichlet over (the blocks read, plus one "rest" entry for all blocks not
  read) with concentrations ``conc_sink``, ``conc_system``, ``conc_local``, ``conc_heavy``, ``conc_topic``,
  ``conc_background``, ``conc_rest``; a block's score is its component (a block read for two reasons gets the
  sum).  So the scores of a step are noisy, sum to less than 1, and sinks and local blocks get more mass on average
  than topic blocks.

Sizing: 32 GiB holds 6553 blocks of 5 MiB (Llama-2-70B, :data:`BLOCK_MODEL`).  With the defaults and 20,000 steps
(seed 0) the workload reads 159,138 blocks, 24,321 distinct (119 GiB), so the budget holds 27% of the footprint;
the live working set, estimated as 256 conversations x (16 heavy + 12 topic + 1 local) blocks + 32 system blocks
(about 7,400), is just above the budget, so the choice of victim matters: LRU hits 71.2% of reads where Belady on
the flattened reads (an upper bound on any policy) hits 83.6% (``python -m paper_check claim
blk-alpha-interior-optimum --json``, workload ``serving``).
:meth:`BlockWorkload.summary` reports the sizes of a run.

A second, score-sensitive model (:func:`generate_anchored_workload`, :class:`AnchoredWorkloadParams`).  In the model
above a decode step spreads its attention over about eight blocks and each conversation decodes once every couple of
hundred steps, so a block's share of a row is small and its EMA score barely moves its eviction priority.  The
anchored model concentrates attention on a few long-lived blocks that go idle between turns, so that a score can
matter:

* ``conversations`` slots; each holds a conversation with ``anchor_blocks`` *anchor* blocks (instructions, entities,
  few-shot exemplars: block indices ``0 .. anchor_blocks - 1`` of its sequence).  A conversation decodes turns of
  Geometric(mean ``turn_steps_mean``) decode steps, then goes idle for Exponential(mean ``idle_steps_mean``) global
  steps; each step one active conversation decodes one token, chosen with probability proportional to
  ``(slot + 1) ** -popularity_zipf`` (uniformly at the default 0; a slot is a user, so a new conversation in a slot
  inherits its activity); if none is active, the earliest to return returns at once.  After a turn it ends with
  probability ``end_prob`` and a new conversation (new sequence id, new anchors) takes the slot after the idle gap.
* A decode step reads ``anchor_reads`` distinct anchors of its conversation (uniformly) and ``transient_reads``
  *transient* blocks: blocks of its context that attention touches once and never again (block indices
  ``anchor_blocks, anchor_blocks + 1, ...`` in order of reading).
* Attention: the row is Dirichlet over (the blocks read, plus one entry for the rest of the row, which stands for the
  sink, the local window and every block not read) with concentrations ``conc_anchor``, ``conc_transient``,
  ``conc_rest``.  A small ``conc_anchor`` makes an anchor's share noisy from read to read (the page's 0.45, 0.12,
  0.30, 0.08, 0.35); a smaller ``conc_transient`` makes transient shares mostly tiny with rare spikes.

The sink and the local window are not read explicitly: they are resident under every policy, so they would add the
same hits to every policy and take a handful of blocks of the budget.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
from dataclasses import asdict, dataclass

import numpy as np

from kvcore.errors import ParameterError
from kvcore.formulas import CONFIG_70B_GQA, GiB, MiB, ModelShape, blocks_in_budget, kv_block_bytes
from kvcore.numbers import integer, real
from kvcore.traces import PagingTrace

TOKENS_PER_BLOCK = 16
BLOCK_BITS = 20
MAX_BLOCKS_PER_SEQUENCE = 1 << BLOCK_BITS


# The figure page's block unit: Llama-2-70B with grouped-query attention, fp16 (kvcore.formulas.CONFIG_70B_GQA).
# 2 * 80 * 8 * 128 * 2 bytes = 320 KiB per token, so 16 tokens = 5 MiB exactly: the page's "5.00 MiB".
BLOCK_MODEL = CONFIG_70B_GQA


def block_bytes(model: ModelShape = BLOCK_MODEL) -> float:
    """Bytes of one ``TOKENS_PER_BLOCK``-token block, every head of every layer (Eq. 2)."""
    return kv_block_bytes(TOKENS_PER_BLOCK, model.layers, model.kv_heads, model.head_dim, model.bytes_per_elem)


def block_capacity(budget_gib: float, model: ModelShape = BLOCK_MODEL) -> int:
    """Whole blocks that fit in ``budget_gib`` GiB: ``floor(budget / block bytes)`` (32 GiB -> 6553 blocks)."""
    if not budget_gib > 0:
        raise ParameterError(f"budget = {budget_gib} GiB: must be positive")
    return blocks_in_budget(budget_gib * GiB, block_bytes(model))


def encode_block(sequence: int, block: int) -> int:
    """``sequence * 2**20 + block`` (sequence 0 = shared system prompt)."""
    if sequence < 0 or not 0 <= block < MAX_BLOCKS_PER_SEQUENCE:
        raise ParameterError(f"block key ({sequence}, {block}): need sequence >= 0 and 0 <= block < 2**20")
    return (sequence << BLOCK_BITS) | block


def decode_block(key: int) -> tuple[int, int]:
    """Inverse of :func:`encode_block`."""
    return key >> BLOCK_BITS, key & (MAX_BLOCKS_PER_SEQUENCE - 1)


def _check_fields(label: str, params, names: tuple[str, ...], check, *bounds, **ends) -> None:
    """Each field ``names`` of ``params`` through ``check`` (:func:`kvcore.numbers.integer` or
    :func:`~kvcore.numbers.real` with the given bounds), named ``LABEL: FIELD`` in the one-line error."""
    for name in names:
        check(getattr(params, name), f"{label}: {name}", *bounds, **ends)


@dataclass(frozen=True)
class BlockWorkloadParams:
    """Every parameter of the generative model (module docstring).  Defaults are the study's workload."""

    steps: int = 40_000
    n_sequences: int = 256
    system_blocks: int = 32
    system_reads: int = 1
    system_zipf: float = 1.2
    prompt_blocks_min: int = 64
    prompt_blocks_max: int = 512
    local_blocks: int = 1
    heavy_blocks: int = 16
    heavy_reads: int = 2
    topic_blocks: int = 12
    topic_reads: int = 2
    topic_shift_prob: float = 1 / 200
    background_reads: int = 1
    turn_tokens_mean: float = 200.0
    idle_gap_mean: float = 6000.0
    reply_blocks_mean: float = 3.0
    return_shift_prob: float = 0.5
    end_prob: float = 0.25
    conc_sink: float = 2.0
    conc_system: float = 0.5
    conc_local: float = 1.5
    conc_heavy: float = 1.0
    conc_topic: float = 0.8
    conc_background: float = 0.2
    conc_rest: float = 3.0

    def __post_init__(self) -> None:
        label = "block workload"
        _check_fields(label, self, ("steps", "n_sequences", "system_blocks", "prompt_blocks_min", "topic_blocks"),
                      integer, 1)
        _check_fields(label, self, ("system_reads", "local_blocks", "heavy_blocks", "heavy_reads", "topic_reads",
                                    "background_reads"), integer, 0)
        if self.system_reads >= self.system_blocks:
            raise ParameterError(f"block workload: system_reads = {self.system_reads}: must be below "
                                 f"system_blocks = {self.system_blocks} (block 0 is always read)")
        if self.prompt_blocks_min < max(self.topic_blocks, self.local_blocks, self.heavy_blocks):
            raise ParameterError(f"block workload: prompt_blocks_min = {self.prompt_blocks_min}: must be at least "
                                 f"topic_blocks, local_blocks and heavy_blocks")
        if self.prompt_blocks_max < self.prompt_blocks_min:
            raise ParameterError(f"block workload: prompt_blocks_max = {self.prompt_blocks_max}: must be at least "
                                 f"prompt_blocks_min = {self.prompt_blocks_min}")
        if self.topic_reads > self.topic_blocks or self.heavy_reads > self.heavy_blocks:
            raise ParameterError(f"block workload: topic_reads = {self.topic_reads} or heavy_reads = "
                                 f"{self.heavy_reads} exceeds its set (topic_blocks, heavy_blocks)")
        _check_fields(label, self, ("topic_shift_prob", "return_shift_prob", "end_prob"), real, 0.0, 1.0)
        _check_fields(label, self, ("system_zipf", "turn_tokens_mean", "idle_gap_mean", "reply_blocks_mean",
                                    "conc_sink", "conc_system", "conc_local", "conc_heavy", "conc_topic",
                                    "conc_background", "conc_rest"), real, 0.0, open_low=True)
        if self.turn_tokens_mean < 1 or self.reply_blocks_mean < 1:
            raise ParameterError("block workload: turn_tokens_mean and reply_blocks_mean must be at least 1 "
                                 "(means of geometric distributions on 1, 2, ...)")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, eq=False)
class BlockWorkload:
    """A generated workload: step ``t`` reads ``items[offsets[t]:offsets[t+1]]`` with attention ``scores[...]``."""

    params: BlockWorkloadParams | AnchoredWorkloadParams
    seed: int
    items: np.ndarray
    scores: np.ndarray
    offsets: np.ndarray

    @property
    def T(self) -> int:
        return self.offsets.size - 1

    @property
    def accesses(self) -> int:
        return int(self.items.size)

    @property
    def footprint(self) -> int:
        """Distinct blocks read at least once."""
        return int(np.unique(self.items).size)

    def paging_trace(self) -> PagingTrace:
        """The RM request sequence (unit fault cost per block read)."""
        return PagingTrace(self.items, np.ones(self.items.size), self.offsets,
                           f"block workload (seed {self.seed})")

    def steps(self):
        """Yield ``(items, scores)`` per step."""
        off, items, scores = self.offsets, self.items, self.scores
        for t in range(self.T):
            yield items[off[t]:off[t + 1]], scores[off[t]:off[t + 1]]

    def summary(self, budget_gib: float = 32.0) -> dict:
        cap = block_capacity(budget_gib)
        return {"seed": self.seed, "steps": self.T, "accesses": self.accesses, "footprint_blocks": self.footprint,
                "footprint_gib": self.footprint * block_bytes() / GiB,
                "block_mib": block_bytes() / MiB, "budget_gib": budget_gib, "capacity_blocks": cap,
                "budget_fraction_of_footprint": cap / self.footprint}


class _Conversation:
    __slots__ = ("seq", "length", "heavy", "topic_start", "tokens_left", "return_at")

    def __init__(self, seq: int, length: int, heavy: list[int]):
        self.seq = seq
        self.length = length  # blocks in context
        self.heavy = heavy  # the per-sequence working set (block indices)
        self.topic_start = 0
        self.tokens_left = 0
        self.return_at = 0


def _geometric(rng: random.Random, mean: float) -> int:
    """Geometric on ``1, 2, ...`` with the given mean (success probability ``1 / mean``)."""
    if mean == 1.0:
        return 1
    return 1 + int(math.log(1.0 - rng.random()) / math.log1p(-1.0 / mean))


def generate_block_workload(params: BlockWorkloadParams | None = None, seed: int = 0) -> BlockWorkload:
    """Generate the workload of the module docstring; the same ``(params, seed)`` gives the same arrays.

    The generator is Python's Mersenne Twister (``random.Random(seed)``): scalar draws dominate, and it is several
    times faster than per-call numpy draws for them.
    """
    p = BlockWorkloadParams() if params is None else params
    rng = random.Random(integer(seed, "block workload: seed"))
    sys_ids = list(range(1, p.system_blocks))
    sys_cum = list(itertools.accumulate(b ** -p.system_zipf for b in sys_ids))
    next_seq = 1

    def shift_topic(c: _Conversation) -> None:
        c.topic_start = rng.randrange(max(c.length - p.topic_blocks, 0) + 1)

    def new_conversation() -> _Conversation:
        nonlocal next_seq
        length = rng.randint(p.prompt_blocks_min, p.prompt_blocks_max)
        c = _Conversation(next_seq, length, rng.sample(range(length), p.heavy_blocks))
        next_seq += 1
        shift_topic(c)
        c.tokens_left = _geometric(rng, p.turn_tokens_mean)
        return c

    slots = [new_conversation() for _ in range(p.n_sequences)]
    active = list(range(p.n_sequences))
    idle: list[int] = []
    items_out: list[int] = []
    scores_out: list[float] = []
    offsets = [0]
    tokens_in_block = [0] * p.n_sequences  # decoded tokens in the conversation's last (partial) block
    gamma = rng.gammavariate

    for t in range(p.steps):
        # conversations whose idle gap is over come back with a new user message
        if idle:
            back = [s for s in idle if slots[s].return_at <= t]
            if not active and not back:
                back = [min(idle, key=lambda s: slots[s].return_at)]
            for s in back:
                idle.remove(s)
                active.append(s)
                c = slots[s]
                c.length += _geometric(rng, p.reply_blocks_mean)
                tokens_in_block[s] = 0
                if rng.random() < p.return_shift_prob:
                    shift_topic(c)
                c.tokens_left = _geometric(rng, p.turn_tokens_mean)
        s = active[rng.randrange(len(active))]
        c = slots[s]
        if c.length > MAX_BLOCKS_PER_SEQUENCE:
            raise ParameterError(f"block workload: sequence {c.seq} exceeds 2**20 blocks at step {t}")
        base = c.seq << BLOCK_BITS
        # Dirichlet components as normalized Gamma draws, one per block read plus one for the rest of the row
        keys = [encode_block(0, 0)]
        mass = [gamma(p.conc_sink, 1.0)]
        system = set()
        while len(system) < p.system_reads:
            system.add(sys_ids[bisect.bisect_right(sys_cum, rng.random() * sys_cum[-1])])
        for b in sorted(system):
            keys.append(b)
            mass.append(gamma(p.conc_system, 1.0))
        for b in range(max(c.length - p.local_blocks, 0), c.length):
            keys.append(base | b)
            mass.append(gamma(p.conc_local, 1.0))
        for b in rng.sample(c.heavy, p.heavy_reads):
            keys.append(base | b)
            mass.append(gamma(p.conc_heavy, 1.0))
        span = min(p.topic_blocks, c.length)
        for off in rng.sample(range(span), min(p.topic_reads, span)):
            keys.append(base | (c.topic_start + off))
            mass.append(gamma(p.conc_topic, 1.0))
        for _ in range(p.background_reads):
            keys.append(base | rng.randrange(c.length))
            mass.append(gamma(p.conc_background, 1.0))
        total = math.fsum(mass) + gamma(p.conc_rest, 1.0)
        reads: dict[int, float] = {}
        for key, m in zip(keys, mass):
            reads[key] = reads.get(key, 0.0) + m / total
        items_out.extend(reads)
        scores_out.extend(reads.values())
        offsets.append(len(items_out))

        # decode one token: the context grows by a block every 16 tokens
        tokens_in_block[s] += 1
        if tokens_in_block[s] == TOKENS_PER_BLOCK:
            tokens_in_block[s] = 0
            c.length += 1
        if rng.random() < p.topic_shift_prob:
            shift_topic(c)
        c.tokens_left -= 1
        if c.tokens_left <= 0:
            active.remove(s)
            idle.append(s)
            if rng.random() < p.end_prob:
                slots[s] = new_conversation()
            slots[s].return_at = t + 1 + int(rng.expovariate(1.0 / p.idle_gap_mean))

    return BlockWorkload(p, int(seed), np.asarray(items_out, dtype=np.int64),
                         np.asarray(scores_out, dtype=np.float64), np.asarray(offsets, dtype=np.int64))


@dataclass(frozen=True)
class AnchoredWorkloadParams:
    """Every parameter of the anchored, score-sensitive model (module docstring).  Defaults are the study's."""

    steps: int = 100_000
    conversations: int = 128
    anchor_blocks: int = 32
    anchor_reads: int = 2
    transient_reads: int = 1
    turn_steps_mean: float = 50.0
    idle_steps_mean: float = 2000.0
    end_prob: float = 0.05
    popularity_zipf: float = 0.0
    conc_anchor: float = 0.2
    conc_transient: float = 0.05
    conc_rest: float = 0.3

    def __post_init__(self) -> None:
        label = "anchored workload"
        _check_fields(label, self, ("steps", "conversations", "anchor_blocks", "anchor_reads"), integer, 1)
        _check_fields(label, self, ("transient_reads",), integer, 0)
        if self.anchor_reads > self.anchor_blocks:
            raise ParameterError(f"anchored workload: anchor_reads = {self.anchor_reads}: must be at most "
                                 f"anchor_blocks = {self.anchor_blocks}")
        if self.anchor_blocks + self.steps * self.transient_reads > MAX_BLOCKS_PER_SEQUENCE:
            raise ParameterError("anchored workload: anchor_blocks + steps * transient_reads must stay below 2**20 "
                                 "blocks per sequence")
        _check_fields(label, self, ("end_prob",), real, 0.0, 1.0)
        real(self.popularity_zipf, f"{label}: popularity_zipf", 0.0)
        _check_fields(label, self, ("turn_steps_mean", "idle_steps_mean", "conc_anchor", "conc_transient",
                                    "conc_rest"), real, 0.0, open_low=True)
        if self.turn_steps_mean < 1:
            raise ParameterError("anchored workload: turn_steps_mean must be at least 1 (mean of a geometric "
                                 "distribution on 1, 2, ...)")

    def as_dict(self) -> dict:
        return asdict(self)


def _decoding_schedule(p: AnchoredWorkloadParams, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Which conversation decodes at each step and the index of its first transient block there (module doc)."""
    sequence = list(range(1, p.conversations + 1))
    next_sequence = p.conversations + 1
    turn_left = [int(x) for x in rng.geometric(1.0 / p.turn_steps_mean, p.conversations)]
    transient_next = [p.anchor_blocks] * p.conversations
    active = list(range(p.conversations))
    idle: list[tuple[int, int]] = []  # (step of return, slot)
    who = np.empty(p.steps, np.int64)
    first_transient = np.empty(p.steps, np.int64)
    choice = rng.random(p.steps)
    weight = [(s + 1.0) ** -p.popularity_zipf for s in range(p.conversations)]
    for t in range(p.steps):
        while idle and (idle[0][0] <= t or not active):
            active.append(heapq.heappop(idle)[1])
        if p.popularity_zipf == 0.0:
            i = int(choice[t] * len(active))
        else:
            cumulative = list(itertools.accumulate(weight[a] for a in active))
            i = min(bisect.bisect_right(cumulative, choice[t] * cumulative[-1]), len(active) - 1)
        s = active[i]
        who[t] = sequence[s]
        first_transient[t] = transient_next[s]
        transient_next[s] += p.transient_reads
        turn_left[s] -= 1
        if turn_left[s] == 0:
            active[i] = active[-1]
            active.pop()
            heapq.heappush(idle, (t + 1 + int(rng.exponential(p.idle_steps_mean)), s))
            turn_left[s] = int(rng.geometric(1.0 / p.turn_steps_mean))
            if rng.random() < p.end_prob:
                sequence[s] = next_sequence
                next_sequence += 1
                transient_next[s] = p.anchor_blocks
    return who, first_transient


def generate_anchored_workload(params: AnchoredWorkloadParams | None = None, seed: int = 0) -> BlockWorkload:
    """Generate the anchored workload of the module docstring; the same ``(params, seed)`` gives the same arrays.

    Every step reads ``anchor_reads + transient_reads`` distinct blocks (anchors first, in increasing block order).
    The generator is ``numpy.random.default_rng(seed)``: the schedule is drawn step by step, the reads and the
    attention rows as arrays.
    """
    p = AnchoredWorkloadParams() if params is None else params
    rng = np.random.default_rng(integer(seed, "anchored workload: seed", 0))
    who, first_transient = _decoding_schedule(p, rng)
    T, per_step = p.steps, p.anchor_reads + p.transient_reads
    anchors = np.sort(np.argsort(rng.random((T, p.anchor_blocks)), axis=1)[:, :p.anchor_reads], axis=1)
    blocks = np.concatenate([anchors, first_transient[:, None] + np.arange(p.transient_reads)], axis=1)
    items = (who[:, None] << BLOCK_BITS) | blocks
    mass = np.concatenate([rng.gamma(p.conc_anchor, size=(T, p.anchor_reads)),
                           rng.gamma(p.conc_transient, size=(T, p.transient_reads))], axis=1)
    row = mass.sum(axis=1) + rng.gamma(p.conc_rest, size=T)
    return BlockWorkload(p, int(seed), items.reshape(-1).astype(np.int64), (mass / row[:, None]).reshape(-1),
                         np.arange(T + 1, dtype=np.int64) * per_step)

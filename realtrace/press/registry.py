"""The bridged kvpress presses (NVIDIA's library of KV-cache compression methods): what each one is, what its paper
says it keeps, the toolkit policy of the same rule, and how its kvpress object is built at a budget.

Head-wise presses.  ``AdaKVPress`` keeps a different number of positions per KV head by *masking* (kvpress patches
transformers' attention functions to give masked keys zero weight; the patch is not active with eager attention
and AdaKV refuses eager), so the bridge runs it on a model with ``sdpa`` attention (:mod:`realtrace.press.run`).
``DuoAttentionPress`` needs per-model head patterns downloaded from a hub and ``KVzipPress`` replaces the model's
forward with its own reconstruction passes; neither is bridged (:data:`NOT_BRIDGED` says why in one line).

Only numpy and the toolkit are imported here; kvpress is imported when a press object is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvcore.errors import ParameterError

from ..model import MissingExtra


@dataclass(frozen=True)
class PressSpec:
    """One bridged press: its kvpress class, what its paper says it keeps, and the toolkit policy of its rule."""

    name: str
    cls: str
    citation: str
    keeps: str
    toolkit: tuple[str, dict] | None = None
    params: dict = field(default_factory=dict)
    headwise: bool = False
    inner: str | None = None  # head-wise presses wrap a scorer press


PRESSES: dict[str, PressSpec] = {s.name.lower(): s for s in (
    PressSpec("StreamingLLM", "StreamingLLMPress", "Xiao et al., Efficient Streaming Language Models with Attention "
              "Sinks, ICLR 2024", "the first n_sink = 4 positions and the most recent ones",
              ("StreamingLLM", {"n_sinks": 4})),
    PressSpec("TOVA", "TOVAPress", "Oren et al., Transformers are Multi-State RNNs, EMNLP 2024",
              "the positions with the most attention from the last query (mean over all heads), and that query",
              ("TOVA", {})),
    PressSpec("SnapKV", "SnapKVPress", "Li et al., SnapKV: LLM Knows What You are Looking for Before Generation, "
              "NeurIPS 2024", "the observation window (last 64 queries) and the positions it attends most "
              "(pooled over 5)"),
    PressSpec("Knorm", "KnormPress", "Devoto et al., A Simple and Effective L2 Norm-Based Strategy for KV Cache "
              "Compression, EMNLP 2024", "the positions with the smallest key norm"),
    PressSpec("ExpectedAttention", "ExpectedAttentionPress", "Devoto et al., Expected Attention: KV Cache "
              "Compression by Estimating Attention from Future Queries Distribution, 2025",
              "the 4 sinks and the positions with the most expected attention from future queries, times ||v||"),
    PressSpec("ObservedAttention", "ObservedAttentionPress", "related to H2O: Zhang et al., H2O: Heavy-Hitter "
              "Oracle for Efficient Generative Inference of Large Language Models, NeurIPS 2023",
              "the positions with the most mean attention received over the queries that see them", ("H2O", {})),
    PressSpec("Random", "RandomPress", "kvpress's baseline", "a uniformly random subset (seed 0)",
              params={"seed": 0}),
    PressSpec("AdaKV", "AdaKVPress", "Feng et al., Ada-KV: Optimizing KV Cache Eviction by Adaptive Budget "
              "Allocation for Efficient LLM Inference, 2024", "SnapKV's scores, top positions across all KV heads of "
              "a layer (at least 20% of each head's share)", headwise=True, inner="SnapKVPress"),
)}
NOT_BRIDGED = {
    "duoattention": "DuoAttentionPress needs per-model streaming-head patterns downloaded from a hub (none is "
                    "reachable, and none exists for SmolLM2-135M)",
    "kvzip": "KVzipPress replaces the model's forward with its own context-reconstruction passes; its kept set is "
             "not a function of one forward",
}
ALL_PREFILL = ("StreamingLLM", "TOVA", "SnapKV", "Knorm", "ExpectedAttention", "ObservedAttention", "Random",
               "AdaKV")
ALL_DECODING = ("StreamingLLM", "TOVA")  # the presses the leaderboard also runs under DecodingPress
DEFAULT_INTERVAL = 16  # DecodingPress: decoding steps between compressions


def press_spec(name: str) -> PressSpec:
    """The bridged press called ``name`` (case-insensitive, with or without kvpress's ``Press`` suffix); a press that
    is not bridged or unknown is a one-line :class:`~kvcore.errors.ParameterError`."""
    key = name.lower().removesuffix("press")
    if key in NOT_BRIDGED:
        raise ParameterError(f"press {name}: not bridged: {NOT_BRIDGED[key]}")
    if key not in PRESSES:
        raise ParameterError(f"press {name}: unknown (bridged: {', '.join(s.name for s in PRESSES.values())})")
    return PRESSES[key]


def ratio_for_budget(n: int, budget: int) -> float:
    """A compression ratio ``r`` with ``int(n * (1 - r)) == budget`` (kvpress's ``compute_n_kept`` and
    StreamingLLM's window both round this way)."""
    if not 1 <= budget <= n:
        raise ParameterError(f"--budget {budget}: must be in 1..{n} (the prompt has {n} tokens)")
    r = 1.0 - budget / n
    for _ in range(64):
        kept = int(n * (1 - r))
        if kept == budget:
            return max(0.0, r)
        r = np.nextafter(r, -np.inf if kept < budget else np.inf)
    raise ParameterError(f"--budget {budget}: no float ratio keeps exactly {budget} of {n}")


KVPRESS_HINT = "pip install -e '.[real,kvpress]'   (kvpress 0.5.5; it pins transformers<5.3)"


def import_kvpress():
    """The kvpress module, or :class:`~realtrace.model.MissingExtra` naming the extra in one line."""
    try:
        import kvpress
    except ImportError as exc:
        raise MissingExtra(f"the press bridge needs the [real,kvpress] extras ({exc.name} is missing): "
                           f"{KVPRESS_HINT}") from None
    except Exception as exc:  # kvpress imports transformers internals that newer versions moved
        raise MissingExtra(f"kvpress does not import with this transformers ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0]}): {KVPRESS_HINT}") from None
    return kvpress


def build_press(spec: PressSpec, ratio: float, decoding: bool, interval: int, budget: int | None):
    """The kvpress object: the spec's class at ``ratio`` (prefill), or wrapped in ``DecodingPress`` (compress to
    ``budget`` every ``interval`` steps)."""
    kvpress = import_kvpress()
    if spec.headwise:
        if decoding:
            raise ParameterError(f"press {spec.name}: head-wise presses are bridged in prefill only")
        return kvpress.AdaKVPress(press=getattr(kvpress, spec.inner)(compression_ratio=ratio))
    cls = getattr(kvpress, spec.cls)
    if not decoding:
        return cls(compression_ratio=ratio, **spec.params)
    return kvpress.DecodingPress(base_press=cls(**spec.params), compression_interval=interval, target_size=budget)


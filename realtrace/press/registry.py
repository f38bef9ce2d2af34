"""The bridged kvpress presses (NVIDIA's library of KV-cache compression methods): what each one is, what its paper
says it keeps, the toolkit policy of the same rule, and how its kvpress object is built at a budget.

Head-wise presses.  ``AdaKVPress`` keeps a different number of positions per KV head by *masking* (kvpress patches
transformers' attention functions to give masked keys zero weight; the patch is not active with eager attention
and AdaKV refuses eager), so the bridge runs it on a model with ``sdpa`` attention (:mod:`realtrace.press.run`).
``CriticalAdaKVPress`` and ``LUKVPress`` mask the same way.  ``LUKVPress`` takes a per-layer/per-KV-head budget
curve, a file (``LUKV=FILE``, :func:`press_spec`; e.g. the one ``paper_check allocate --lukv-curve FILE`` writes from
the exact static allocation), checked against the model's shape before anything runs (:func:`load_lukv_curve`).
``DuoAttentionPress`` needs per-model head patterns downloaded from a hub and ``KVzipPress`` replaces the model's
forward with its own reconstruction passes; neither is bridged (:data:`NOT_BRIDGED` says why in one line).

Only numpy and the toolkit are imported here; kvpress is imported when a press object is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from kvcore.errors import ParameterError
from kvcore.trace_files import load_arrays

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
    inner: str | None = None  # a press that wraps a scorer press (head-wise ones, CriticalKV, LU-KV)
    needs_curve: bool = False  # LU-KV: runs only with a budget curve file, ``NAME=FILE``
    # runs on the ``sdpa`` model (head-wise presses; PyramidKV, whose layers' caches differ in length after the
    # prefill: eager attention builds one decoding mask from layer 0's length and fails on the others)
    sdpa: bool = False
    curve: str | None = None  # that file (set by :func:`press_spec`)
    one_rope: bool = False  # reads the model's one rotary embedding (rotary_emb.inv_freq): check_press_applies


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
              "the 4 sinks and the positions with the most expected attention from future queries, times ||v||",
              one_rope=True),
    PressSpec("ObservedAttention", "ObservedAttentionPress", "related to H2O: Zhang et al., H2O: Heavy-Hitter "
              "Oracle for Efficient Generative Inference of Large Language Models, NeurIPS 2023",
              "the positions with the most mean attention received over the queries that see them", ("H2O", {})),
    PressSpec("Random", "RandomPress", "kvpress's baseline", "a uniformly random subset (seed 0)",
              params={"seed": 0}),
    PressSpec("AdaKV", "AdaKVPress", "Feng et al., Ada-KV: Optimizing KV Cache Eviction by Adaptive Budget "
              "Allocation for Efficient LLM Inference, 2024", "SnapKV's scores, top positions across all KV heads of "
              "a layer (at least 20% of each head's share)", headwise=True, inner="SnapKVPress"),
    # kvpress's default beta = 20 gives a smallest layer budget of K / 20, and kvpress falls back to a uniform K
    # (SnapKV) whenever that is below its 64-query window, i.e. for every K < 1,280; beta = 2 is the steepest pyramid
    # that is still a pyramid at K = 128 (layer budgets 192 down to 64).  At K < 128 no beta helps (uniform).
    PressSpec("PyramidKV", "PyramidKVPress", "Cai et al., PyramidKV: Dynamic KV Cache Compression based on Pyramidal "
              "Information Funneling, 2024 (arXiv 2406.02069)", "SnapKV's choice with a per-layer budget falling "
              "linearly from layer 0 to the last, mean K: round(K + K(1 - 1/beta) (1 - 2l / (L - 1))) at beta = 2, "
              "uniform K when the smallest budget K / beta would be below the 64-query window", params={"beta": 2},
              sdpa=True),
    PressSpec("CriticalKV", "CriticalKVPress", "Feng et al., Identify Critical KV Cache in LLM Inference from an "
              "Output Perturbation Perspective, 2025 (arXiv 2502.03805)", "half of each head's K by SnapKV's "
              "score, the other half by that score times ||W_o v||_1 (the value's reach into the output)",
              inner="SnapKVPress"),
    PressSpec("CriticalAdaKV", "CriticalAdaKVPress", "Feng et al., Identify Critical KV Cache in LLM Inference from an "
              "Output Perturbation Perspective, 2025 (arXiv 2502.03805), on Ada-KV's head-wise budgets",
              "AdaKV's per-head budgets from SnapKV's scores, then CriticalKV's two stages inside each head",
              headwise=True, inner="SnapKVPress"),
    PressSpec("LUKV", "LUKVPress", "Baidu, Predicting Future Utility: Global Combinatorial Optimization for "
              "Task-Agnostic KV Cache Eviction, 2026 (arXiv 2602.08585)", "per layer and KV head the share of a "
              "budget curve's row round(100 r) (kept = (1 - prune) x P, a layer's total rounded), by SnapKV's score, "
              "the first 4 positions and the last always kept", headwise=True, inner="SnapKVPress",
              needs_curve=True),
)}
NOT_BRIDGED = {
    "duoattention": "DuoAttentionPress needs per-model streaming-head patterns downloaded from a hub (none is "
                    "reachable, and none exists for SmolLM2-135M)",
    "kvzip": "KVzipPress replaces the model's forward with its own context-reconstruction passes; its kept set is "
             "not a function of one forward",
}
ALL_PREFILL = ("StreamingLLM", "TOVA", "SnapKV", "Knorm", "ExpectedAttention", "ObservedAttention", "Random",
               "AdaKV", "PyramidKV", "CriticalKV", "CriticalAdaKV")  # LUKV runs when named with its curve file
ALL_DECODING = ("StreamingLLM", "TOVA")  # the presses the leaderboard also runs under DecodingPress
DEFAULT_INTERVAL = 16  # DecodingPress: decoding steps between compressions


def press_spec(name: str) -> PressSpec:
    """The bridged press called ``name`` (case-insensitive, with or without kvpress's ``Press`` suffix); a press that
    takes a budget curve is named ``NAME=FILE`` and comes back with ``curve`` set, the file checked
    (:func:`load_lukv_curve`).  A press that is not bridged or unknown, a curve missing or given to a press that takes
    none, a file that is not a curve for the model: one-line :class:`~kvcore.errors.ParameterError`."""
    base, eq, path = name.partition("=")
    key = base.lower().removesuffix("press")
    if key in NOT_BRIDGED:
        raise ParameterError(f"press {name}: not bridged: {NOT_BRIDGED[key]}")
    if key not in PRESSES:
        raise ParameterError(f"press {name}: unknown (bridged: {', '.join(s.name for s in PRESSES.values())})")
    spec = PRESSES[key]
    if not spec.needs_curve:
        if eq:
            raise ParameterError(f"press {name}: {spec.name} takes no file")
        return spec
    if not path:
        raise ParameterError(f"press {base}: needs its budget curve: name it {spec.name}=FILE (write one with "
                             "paper_check allocate --traces DIR --total B --lukv-curve FILE)")
    load_lukv_curve(path)
    return replace(spec, curve=path)


def load_lukv_curve(path: str, layers_heads: tuple[int, int] | None = None) -> np.ndarray:
    """LU-KV's budget curve from ``path`` (an ``.npy``; :mod:`realtrace.allocate` describes the format), checked:
    shape ``[99, layers, kv_heads]`` -- the model's ``layers_heads`` when given, any layers and KV heads before the
    model is known --, prune fractions in ``[0, 1]``."""
    shape = None if layers_heads is None else (99, *layers_heads)
    curve = load_arrays(path, "LU-KV curve", ParameterError)
    if not isinstance(curve, np.ndarray):
        raise ParameterError(f"LU-KV curve {path}: an .npz archive; the curve is one .npy array")
    if curve.shape != shape if shape else curve.ndim != 3 or len(curve) != 99:
        need = list(shape) if shape else "[99, layers, kv_heads]"
        raise ParameterError(f"LU-KV curve {path}: shape {list(curve.shape)}, the model needs {need} (99 ratios x "
                             "its layers x its KV heads)")
    if curve.dtype.kind != "f" or not np.all((curve >= 0) & (curve <= 1)):
        raise ParameterError(f"LU-KV curve {path}: entries must be prune fractions in [0, 1] (dtype {curve.dtype})")
    return curve


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


def check_press_applies(spec: PressSpec, geo, model: str) -> None:
    """One line (:class:`~kvcore.errors.ParameterError`) if kvpress cannot apply press ``spec`` to a model of
    geometry ``geo`` (:class:`realtrace.geometry.ModelGeometry`; ``model`` its ``--model`` value), before any
    forward pass.  Found by running every bridged press on the tiny models of ``tests/tiny_models.py``: all run on
    Llama, Qwen3 and Mistral; on Gemma 3 ExpectedAttention fails inside kvpress 0.5.5 (it rotates its expected
    queries with ``rotary_emb.inv_freq``, and Gemma 3 keeps one rotary embedding per attention type)."""
    if spec.one_rope and geo.rope_per_type:
        raise ParameterError(f"press {spec.name}: kvpress cannot apply it to --model {model}: it reads the model's "
                             "one rotary embedding, and this model has one per attention type (sliding and full)")


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
    """The kvpress object: the spec's class at ``ratio`` (prefill; a wrapping press around its ``inner`` scorer, LU-KV
    with the spec's curve loaded), or wrapped in ``DecodingPress`` (compress to ``budget`` every ``interval``
    steps)."""
    kvpress = import_kvpress()
    cls = getattr(kvpress, spec.cls)
    if spec.inner is not None:
        if decoding:
            raise ParameterError(f"press {spec.name}: presses that wrap a scorer are bridged in prefill only")
        press = cls(press=getattr(kvpress, spec.inner)(), **spec.params)
        press.compression_ratio = ratio  # the wrapper's own field (LU-KV) or a property setting the scorer's
        if spec.needs_curve:
            # kvpress 0.5.5 loads curves only from its URL table; its loader fills this attribute, which
            # post_init_from_model then keeps
            press._budget_curves = load_lukv_curve(spec.curve)
        return press
    if not decoding:
        return cls(compression_ratio=ratio, **spec.params)
    return kvpress.DecodingPress(base_press=cls(**spec.params), compression_interval=interval, target_size=budget)

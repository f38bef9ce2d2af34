"""A model as the toolkit sees it (SPEC section 8): its geometry, read from its transformers configuration.

``L`` layers; per layer ``H_q`` query heads sharing ``H_kv`` KV heads (grouped- or multi-query attention,
``H_q / H_kv`` query heads per group), head dimension ``d``, and an attention pattern per layer: full causal, or a
causal sliding window of ``W`` tokens, query ``t`` seeing key ``i`` iff ``t - W < i <= t`` (transformers'
``sliding_window_overlay``: ``kv_idx > q_idx - sliding_window``).  Nothing else in the toolkit fixes these numbers.

Budgets on a sliding-window layer.  A budget ``K`` caps the resident set ``R_t`` a policy (or the optimum) keeps
for a KV head; the model attends to ``R_t`` intersected with its own window ``(t - W, t]``.  A position that left
the window is invisible to the full cache as well (its future attention mass is 0): the optimum drops it for free,
and no policy is charged for it (the rows it is charged on give it weight 0).  It can never become visible again,
so an implementation stores only ``R_t`` within the window: a layer needs ``min(K, W)`` entries per KV head
(:meth:`ModelGeometry.stored_entries`), and a total-memory figure sums that over layers, not ``L K``.  (A policy is
not told that a position left the window -- the NM protocol has no such call -- it observes it with weight 0
from then on, so an attention-ranked rule evicts it before anything it can still see.)

Refused before any weight is read (:func:`geometry`, one line): a configuration without a KV cache or without
causal self-attention (encoder-only: BERT and its kin; encoder-decoder), attention the replay cannot mask (logit
soft-capping, layer types other than full and sliding-window attention, chunked or linear attention), or heads that
do not divide into KV groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import ParameterError

FULL = "full_attention"
SLIDING = "sliding_attention"


class UnsupportedModel(ParameterError):
    """A model whose attention the toolkit cannot replay (module docstring); the message is one line."""


@dataclass(frozen=True)
class ModelGeometry:
    """The numbers of SPEC section 8 for one model (module docstring): ``windows[l]`` is ``None`` for a full causal
    layer, ``W`` for a sliding-window one; ``context`` the largest position the model was trained for; ``vocab``
    its vocabulary size; ``rope_per_type`` whether each attention type has its own rotary embedding (Gemma 3: one
    for sliding, one for full layers; a press reading the model's one embedding cannot run,
    :func:`realtrace.press.registry.check_press_applies`)."""

    layers: int
    query_heads: int
    kv_heads: int
    head_dim: int
    windows: tuple[int | None, ...]
    context: int
    vocab: int
    rope_per_type: bool = False

    @property
    def group(self) -> int:
        """Query heads per KV head (``H_q / H_kv``)."""
        return self.query_heads // self.kv_heads

    @property
    def traces(self) -> int:
        """Traces of one prompt: one per layer and KV head."""
        return self.layers * self.kv_heads

    def stored_entries(self, budget: int) -> int:
        """Entries the whole cache stores at budget ``K`` per (layer, KV head): ``H_kv sum_l min(K, W_l)`` (``K`` on
        a full layer), the equal-memory unit of SPEC section 8."""
        return self.kv_heads * sum(budget if w is None else min(budget, w) for w in self.windows)

    def layer_groups(self) -> tuple[tuple[str, range], ...]:
        return layer_groups(self.layers)

    def describe(self) -> dict:
        """JSON-able: what a result records of the model's shape."""
        sliding = sorted({w for w in self.windows if w is not None})
        return {"layers": self.layers, "query_heads": self.query_heads, "kv_heads": self.kv_heads,
                "head_dim": self.head_dim, "sliding_window": sliding[0] if len(sliding) == 1 else sliding or None,
                "sliding_layers": [i for i, w in enumerate(self.windows) if w is not None],
                "context": self.context, "vocabulary": self.vocab}


GROUPS = ("early", "middle", "late")


def layer_groups(layers: int) -> tuple[tuple[str, range], ...]:
    """The report's layer groups: early, middle and late thirds of ``layers`` (30: 0-9, 10-19, 20-29; 18: 0-5, 6-11,
    12-17), the first ``layers mod 3`` thirds one layer longer."""
    size, extra = divmod(layers, 3)
    out, start = [], 0
    for i, name in enumerate(GROUPS):
        stop = start + size + (i < extra)
        out.append((name, range(start, stop)))
        start = stop
    return tuple(out)


def _text_config(cfg):
    """The language model's part of a multimodal configuration (Gemma 3's ``text_config``), else ``cfg``."""
    sub = getattr(cfg, "text_config", None)
    return sub if sub is not None and getattr(sub, "num_hidden_layers", None) else cfg


def geometry(cfg, where: str) -> ModelGeometry:
    """The geometry of the transformers configuration ``cfg`` (module docstring), or :class:`UnsupportedModel`
    naming ``where`` (the ``--model`` value) and the reason."""
    cfg = _text_config(cfg)
    kind = getattr(cfg, "model_type", "?")
    if getattr(cfg, "is_encoder_decoder", False):
        raise UnsupportedModel(f"--model {where}: {kind} is an encoder-decoder model; the toolkit replays "
                               "decoder-only causal language models")
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                         MODEL_FOR_MASKED_LM_MAPPING_NAMES)

    # a bidirectional encoder (BERT and its kin) is a masked language model; a few also have a causal-LM head that
    # is a different model (is_decoder), not the checkpoint the configuration describes
    if kind in MODEL_FOR_MASKED_LM_MAPPING_NAMES or kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise UnsupportedModel(f"--model {where}: {kind} is not a decoder-only causal language model (an encoder "
                               "or another kind of model: no KV cache to evict from)")
    if getattr(cfg, "use_bidirectional_attention", False):
        raise UnsupportedModel(f"--model {where}: {kind} is configured with bidirectional attention (an encoder): "
                               "no causal KV cache to evict from")
    if getattr(cfg, "attn_logit_softcapping", None) is not None:
        raise UnsupportedModel(f"--model {where}: {kind} soft-caps its attention logits, which the replay's fused "
                               "kernel cannot compute")
    layers, heads = cfg.num_hidden_layers, cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    if heads % kv:
        raise UnsupportedModel(f"--model {where}: {heads} query heads do not divide into {kv} KV heads")
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    window = getattr(cfg, "sliding_window", None)
    types = getattr(cfg, "layer_types", None) or [SLIDING if window else FULL] * layers
    other = sorted(set(types) - {FULL, SLIDING})
    if other:
        raise UnsupportedModel(f"--model {where}: layer types {other} (the replay masks full and sliding-window "
                               "attention only)")
    if SLIDING in types and not window:
        raise UnsupportedModel(f"--model {where}: sliding-window layers without a window size")
    rope = getattr(cfg, "rope_parameters", None)
    return ModelGeometry(layers, heads, kv, head_dim, tuple(int(window) if t == SLIDING else None for t in types),
                         int(getattr(cfg, "max_position_embeddings", 0) or 0), int(cfg.vocab_size),
                         isinstance(rope, dict) and bool(set(rope) & {FULL, SLIDING}))


__all__ = ["FULL", "GROUPS", "ModelGeometry", "SLIDING", "UnsupportedModel", "geometry", "layer_groups"]

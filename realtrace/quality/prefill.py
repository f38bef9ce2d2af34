"""The full-cache prefill with attention weights and the kvpress fan-out on it (needs the ``[real]`` extra; presses
need ``[kvpress]``): :class:`TracePass` (the attention implementation ``kvquality_trace`` of
:mod:`realtrace.quality.replay`), :class:`PressFanOut` and :func:`trace_pass`.  The passes and their masks are
described in :mod:`realtrace.quality.replay`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .replay import TRACE, _Active, causal_bias, window_drop
from .schedule import resident_bias


class TracePass:
    """The full-cache pass with eager attention, optionally keeping its sparsified rows (``top=None``: no rows; the
    press fan-out alone) (module docstring)."""

    def __init__(self, torch, transformers, heads: int, top: int | None, fan_out: PressFanOut | None = None,
                 windows: tuple | None = None):
        from transformers.models.llama.modeling_llama import eager_attention_forward

        self.torch, self.heads, self.top, self.fan_out = torch, heads, top, fan_out
        self.windows = windows
        self.eager = eager_attention_forward
        self.blocks: dict[tuple[int, int], list] = {}

    def attend(self, module, query, key, value, scaling):
        from ..capture import sparsify_block

        torch = self.torch
        n_keys, n_q = key.shape[2], query.shape[2]
        offset = n_keys - n_q
        bias = causal_bias(torch, offset, n_keys)  # on the host, then on the model's device
        own = window_drop(n_keys, self.windows[module.layer_idx] if self.windows else None)
        if own is not None:  # a sliding-window layer: the model's own window too
            resident_bias(own, offset, bias.numpy())
        bias.clamp_(min=torch.finfo(query.dtype).min)  # transformers' eager mask
        out, w = self.eager(module, query, key, value, bias.to(query.device)[None, None], scaling=scaling,
                            dropout=0.0)
        rep = w.shape[1] // self.heads
        for g in range(self.heads if self.top is not None else 0):
            rows = w[0, g * rep:(g + 1) * rep].mean(dim=0)
            self.blocks.setdefault((module.layer_idx, g), []).append(sparsify_block(rows, offset, self.top))
        return out, w

    def traces(self, source: str) -> dict[tuple[int, int], Any]:
        """``(layer, KV head) -> AttentionTrace`` of everything this pass saw."""
        from ..capture import trace_from_blocks

        return {key: trace_from_blocks(b, f"{source} L{key[0]:02d} kv{key[1]}") for key, b in self.blocks.items()}


class PressFanOut:
    """Every bridged prefill press compresses the same prefill, recorded by :class:`realtrace.press.recorder.Recorder`.

    A prefill press (kvpress, NVIDIA) compresses a layer's cache in a forward hook *after* the layer's attention
    output was computed, so the prefill itself is the full cache's and each layer's compression depends only on that
    layer's prefill inputs.  One prefill therefore serves every (press, budget): at each layer the hook here restores
    the cache the forward produced, runs one press's own ``forward_hook`` between the recorder's before/after
    snapshots, and repeats for the next press; the cache is left uncompressed.  A head-wise press (AdaKV) gets no
    attention weights, as under the ``sdpa`` attention the bridge runs it with; its mask is cleared after each
    layer, so no later pass inherits it.  The result per press is exactly what :func:`realtrace.press.recorder.run_press`
    records for that press alone (tests/test_quality_replay.py compares TOVA, Knorm and SnapKV at two budgets)."""

    def __init__(self, lm, cache, presses: list[tuple[str, Any, bool]]):
        from ..press.recorder import Recorder

        self.cache = cache
        self.entries = [(name, press, headwise, Recorder(lm, cache)) for name, press, headwise in presses]
        for _, press, _, _ in self.entries:
            press.post_init_from_model(lm.model)
        self.handles = []

    def attach(self, lm, positions: list[int]):
        for _, _, _, rec in self.entries:
            rec.record.forwards.append(list(positions))
        for layer in lm.model.model.layers:
            layer.self_attn.rotary_emb = lm.model.model.rotary_emb  # what a press's context manager sets up
            self.handles.append(layer.self_attn.register_forward_hook(self._hook, with_kwargs=True))
        return self

    def detach(self, later_positions: list[int]):
        for h in self.handles:
            h.remove()
        self.handles = []
        for _, _, _, rec in self.entries:
            rec.record.forwards.extend([p] for p in later_positions)

    def _hook(self, module, args, kwargs, output):
        layer = self.cache.layers[module.layer_idx]
        keys, values = layer.keys, layer.values
        for _, press, headwise, rec in self.entries:
            seen = (output[0], None) if headwise else output
            module.masked_key_indices = None
            rec._pre(module, args, kwargs, seen)
            press.forward_hook(module, args, kwargs, seen)
            rec._post(module, args, kwargs, seen)
            layer.keys, layer.values = keys, values
        module.masked_key_indices = None

    def schedules(self, layers: int, heads: int) -> dict[str, np.ndarray]:
        """``press name -> drops (layers, KV heads, T)`` from the recorded compressions."""
        from ..press.schedule import replay as replay_record

        return {name: np.stack([np.stack([replay_record(rec.record, layer, g).drop for g in range(heads)])
                                for layer in range(layers)])
                for name, _, _, rec in self.entries}


def trace_pass(lm, ids: list[int], n_prompt: int, heads: int, top: int | None, presses=(), source: str = "quality"):
    """The eager full-cache pass over ``ids`` (prompt ``ids[:n_prompt]`` prefilled with a cache, then the rest), with
    ``presses`` ``[(name, kvpress object, headwise)]`` fanned out on the prefill.  Returns ``(traces, press drops)``
    (no traces for ``top=None``)."""
    torch = lm.torch
    cache = lm.new_cache()
    fan = PressFanOut(lm, cache, list(presses)) if presses else None
    pass_ = TracePass(torch, lm.transformers, heads, top, fan, lm.geometry.windows)
    layers = lm.geometry.layers
    with _Active(lm, TRACE, pass_):
        if fan is not None:
            fan.attach(lm, list(range(n_prompt)))
        try:
            lm.forward(ids[:n_prompt], cache, body_only=True)
        finally:
            if fan is not None:
                fan.detach(list(range(n_prompt, len(ids))))
        if n_prompt < len(ids):
            lm.forward(ids[n_prompt:], cache, list(range(n_prompt, len(ids))), body_only=True)
    return pass_.traces(source), ({} if fan is None else fan.schedules(layers, heads))


__all__ = ["PressFanOut", "TracePass", "trace_pass"]

"""Running a kvpress press on a trace set's own tokens and recording what it keeps (needs the ``[real]`` and
``[kvpress]`` extras; imported only when a press runs).

kvpress (NVIDIA, https://github.com/NVIDIA/kvpress, Apache-2.0) applies a press through forward hooks on every
attention module: after a layer's forward the press rewrites that layer's cache (``cache.layers[i].keys/values``)
with the rows it keeps, gathered in ``scores.topk`` order.  The recorder here hooks the same modules twice, once
before the press's hook (``prepend=True``: it sees the cache the forward just extended) and once after; when the
cache object changed, each row after is matched to the row before with bit-identical key *and* value vectors
(a press gathers rows, it does not compute new ones), which gives the kept slots in cache order without reading
any press's internals.  A row that matches nothing (a merging or quantizing press) or a cache with two identical
rows stops the run with one line.  Head-wise presses (``AdaKVPress``) leave the cache whole and set
``module.masked_key_indices``; those ``(KV head, slot)`` pairs are recorded as masked.

The run (:func:`run_press`, called by :mod:`realtrace.press.run`): prefill the first ``P`` tokens with the press
active, then feed the rest one token at a time with explicit logical ``position_ids`` (as kvpress's own pipeline
does: the compressed cache is shorter than the positions), every forward through the same hooks.
"""

from __future__ import annotations

import copy
import time

import numpy as np

from ..model import LoadedModel
from .schedule import Compression, PressRecord, PressRecordError


def _row_keys(keys, values) -> list[dict[bytes, int]]:
    """Per KV head, a map from the bytes of (key row, value row) to its slot."""
    k = keys[0].detach().cpu().contiguous().numpy()
    v = values[0].detach().cpu().contiguous().numpy()
    rows = np.concatenate([k, v], axis=2)  # (heads, n, 2d)
    out = []
    for h in range(rows.shape[0]):
        r = np.ascontiguousarray(rows[h])
        m = {r[j].tobytes(): j for j in range(r.shape[0])}
        if len(m) != r.shape[0]:
            raise PressRecordError("two cache rows of one KV head are bit-identical: kept slots are ambiguous")
        out.append(m)
    return out


class Recorder:
    """Hooks that record every compression of a press run into a :class:`PressRecord`."""

    def __init__(self, lm: LoadedModel, cache):
        self.lm, self.cache = lm, cache
        self.record = PressRecord(forwards=[], layers=tuple(range(lm.model.config.num_hidden_layers)),
                                  kv_heads=lm.model.config.num_key_value_heads)
        self.before: dict[int, tuple] = {}
        self.handles = []

    def attach(self):
        for layer in self.lm.model.model.layers:
            attn = layer.self_attn
            self.handles.append(attn.register_forward_hook(self._pre, with_kwargs=True, prepend=True))
            self.handles.append(attn.register_forward_hook(self._post, with_kwargs=True))
        return self

    def detach(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    def _pre(self, module, args, kwargs, output):
        layer = self.cache.layers[module.layer_idx]
        self.before[module.layer_idx] = (layer.keys, layer.values, getattr(module, "masked_key_indices", None))

    def _post(self, module, args, kwargs, output):
        i = module.layer_idx
        keys0, values0, mask0 = self.before.pop(i)
        layer = self.cache.layers[i]
        f = len(self.record.forwards) - 1
        mask = getattr(module, "masked_key_indices", None)
        if mask is not None and mask is not mask0:
            _, heads, slots = (t.cpu().numpy() for t in mask)
            for h in range(self.record.kv_heads):
                self.record.compressions.append(Compression(f, i, h, masked_slots=np.sort(slots[heads == h])))
        if layer.keys is keys0:
            return
        before = _row_keys(keys0, values0)
        k = layer.keys[0].detach().cpu().contiguous().numpy()
        v = layer.values[0].detach().cpu().contiguous().numpy()
        for h, m in enumerate(before):
            rows = np.ascontiguousarray(np.concatenate([k[h], v[h]], axis=1))
            try:
                kept = np.array([m[rows[j].tobytes()] for j in range(rows.shape[0])], dtype=np.int64)
            except KeyError:
                raise PressRecordError(f"layer {i} KV head {h}: the press wrote a cache row that was not in the "
                                       "cache before (it merges or rewrites rows; only dropping presses are "
                                       "bridged)") from None
            self.record.compressions.append(Compression(f, i, h, kept_slots=kept))

    def forward(self, ids: list[int], positions: list[int]):
        """One forward without the LM head (the recorded run needs no logits)."""
        self.record.forwards.append(list(positions))
        return self.lm.forward(ids, self.cache, positions, body_only=True)


def run_press(lm: LoadedModel, press, ids: list[int], prefill: int, answer_from: int | None = None,
              max_new: int = 12) -> tuple[PressRecord, float, list[int] | None]:
    """Prefill ``ids[:prefill]`` with ``press`` active, then feed the rest one token at a time (module
    docstring).  With ``answer_from``, the run forks after position ``answer_from - 1`` (the end of the prompt):
    the cache and the press's state are copied there, and after the recorded run the press greedily decodes
    ``max_new`` tokens from the copy, so the answer is the one the press gives to the prompt.  Returns the record,
    the seconds of the recorded run and the answer's token ids (None without ``answer_from``)."""
    cache = lm.new_cache()
    rec = Recorder(lm, cache)
    fork = None
    t0 = time.monotonic()
    with press(lm.model):
        rec.attach()
        try:
            o = rec.forward(ids[:prefill], list(range(prefill)))
            if answer_from == prefill:
                fork = _snapshot(lm, press, cache, o)
            for t in range(prefill, len(ids)):
                o = rec.forward([ids[t]], [t])
                if answer_from == t + 1:
                    fork = _snapshot(lm, press, cache, o)
        finally:
            rec.detach()
        seconds = time.monotonic() - t0
        answer = None if fork is None else _greedy_from(lm, press, fork, answer_from, max_new)
    return rec.record, seconds, answer


def _snapshot(lm: LoadedModel, press, cache, out):
    """What the answer needs at the fork: a copy of the cache and of the press's state, and the next-token logits
    (the recorded run skips the LM head)."""
    with lm.torch.no_grad():
        logits = lm.model.lm_head(out.last_hidden_state[:, -1:])
    return copy.deepcopy(cache), copy.deepcopy(press.__dict__), logits


def _greedy(lm: LoadedModel, cache, logits, position: int, max_new: int) -> list[int]:
    """``max_new`` greedy tokens: the argmax of ``logits`` (the forward that filled ``cache``), then each next one
    after feeding the last into ``cache`` at logical positions ``position``, ``position + 1``, ..."""
    out = [int(logits[0, -1].argmax())]
    for pos in range(position, position + max_new - 1):
        o = lm.forward([out[-1]], cache, [pos])
        out.append(int(o.logits[0, -1].argmax()))
    return out


def _greedy_from(lm: LoadedModel, press, fork, position: int, max_new: int) -> list[int]:
    cache, state, logits = fork
    press.__dict__.update(state)
    return _greedy(lm, cache, logits, position, max_new)


def baseline_answer(lm: LoadedModel, ids: list[int], max_new: int) -> list[int]:
    """Greedy continuation of the prompt ``ids`` with no press (one prefill, then ``max_new`` steps)."""
    cache = lm.new_cache()
    return _greedy(lm, cache, lm.forward(ids, cache).logits, len(ids), max_new)

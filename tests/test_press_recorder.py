"""The press recorder on a cache a fake press reorders (torch, no model, no kvpress): kept slots must be recorded in
the order of the cache after the press, which is a press's top-k order, not position order.

A press gathers the rows it keeps in score order (kvpress's ``scores.topk``), so after its first compression the cache
is no longer sorted by position; a later compression's slots index that reordered cache.  A recorder that stored the
kept slots sorted (issue 23's surviving mutant) keeps the same *set* at the first compression -- which is why
conversions with one compression could not see it -- and the wrong positions at the second.  Seen failing with
``kept = np.sort(kept)`` in ``Recorder._post``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="the recorder hooks torch tensors (the [real] extra)")

from realtrace.press.recorder import Recorder  # noqa: E402  (after the torch skip)
from realtrace.press.schedule import replay  # noqa: E402

HEADS, D = 2, 3


def rows_for(positions) -> torch.Tensor:
    """One distinct key (or value) vector per position and KV head: (1, heads, n, d)."""
    p = torch.tensor(positions, dtype=torch.float32)
    return torch.stack([torch.stack([p * 10 + h, p + 0.5, -p - h], dim=-1) for h in range(HEADS)])[None]


class FakeCache:
    def __init__(self):
        self.layers = [SimpleNamespace(keys=rows_for([]).reshape(1, HEADS, 0, D), values=None)]
        self.layers[0].values = self.layers[0].keys * 2
        self.positions: list[int] = []

    def extend(self, positions):
        layer = self.layers[0]
        layer.keys = torch.cat([layer.keys, rows_for(positions)], dim=2)
        layer.values = torch.cat([layer.values, rows_for(positions) * 2], dim=2)
        self.positions += list(positions)

    def press(self, kept_per_head: list[list[int]]):
        """Keep, per KV head, these slots in this order (a new tensor, as a press's gather makes)."""
        layer = self.layers[0]
        idx = torch.tensor(kept_per_head)[None, :, :, None].expand(1, HEADS, len(kept_per_head[0]), D)
        layer.keys, layer.values = torch.gather(layer.keys, 2, idx), torch.gather(layer.values, 2, idx)


def recorded_run(steps):
    """``steps``: (positions fed, slots kept per head or None); the recorder's hooks around each forward."""
    lm = SimpleNamespace(model=SimpleNamespace(config=SimpleNamespace(num_hidden_layers=1, num_key_value_heads=HEADS)))
    cache, module = FakeCache(), SimpleNamespace(layer_idx=0)
    rec = Recorder(lm, cache)
    for positions, kept in steps:
        rec.record.forwards.append(list(positions))
        cache.extend(positions)  # the forward appends its keys and values
        rec._pre(module, (), {}, None)
        if kept is not None:
            cache.press(kept)
        rec._post(module, (), {}, None)
    return rec.record


def test_kept_slots_follow_the_reordered_cache_across_two_compressions():
    # prefill 0..5; head 0 keeps slots 4, 1, 5 (score order), head 1 keeps 0, 5, 2
    # decode 6: caches are [4, 1, 5, 6] and [0, 5, 2, 6]; head 0 keeps slots 3, 0 -> positions 6, 4;
    # head 1 keeps slots 1, 3 -> positions 5, 6
    rec = recorded_run([(range(6), [[4, 1, 5], [0, 5, 2]]), ([6], [[3, 0], [1, 3]]), ([7], None)])
    h0, h1 = replay(rec, 0, 0), replay(rec, 0, 1)
    assert [(s, k.tolist()) for s, k in h0.kept] == [(6, [4, 1, 5]), (7, [6, 4])]
    assert [(s, k.tolist()) for s, k in h1.kept] == [(6, [0, 5, 2]), (7, [5, 6])]
    never = rec.T  # 8: a drop step of 7 (evicted at the decode step) differs from "never"
    assert h0.drop.tolist() == [6, 7, 6, 6, never, 7, never, never]
    assert h1.drop.tolist() == [7, 6, 7, 6, 6, never, never, never]


def test_a_forward_without_compression_records_nothing():
    rec = recorded_run([(range(4), None), ([4], None)])
    assert rec.compressions == []
    assert replay(rec, 0, 0).drop.tolist() == [5] * 5

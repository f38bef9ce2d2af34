"""``--device`` (issue 49 item 5; needs the [real] extra, no download, no GPU): nothing in the model path assumes
the CPU.

No GPU is available where these tests run, so the path a GPU takes is checked on the CPU, in two halves:

* its arithmetic: :func:`realtrace.quality.replay.plain_attention` (what the replay computes off the CPU) equals the
  fused CPU kernel every committed result was computed with, as a property of random inputs, and on the tiny models
  of four architectures (:mod:`tests.tiny_models`) whole quality runs (replay logits, KL, displaced mass, output
  error, closed-loop schedules, regret on the complete rows) agree within stated tolerances -- "exact before fast":
  the fast kernel is checked against the plain formula;
* its placement: the same runs, and a capture, on a stand-in device (:mod:`tests.device_trap`), where a host tensor
  meeting a device tensor or a device tensor read by NumPy raises, give exactly the numbers of the plain kernel on
  the CPU.

Without CUDA, ``--device cuda`` is one line, exit 2 (``tests/test_model_architectures.py::test_cuda_is_one_line``);
with it, it is accepted (here with ``torch.cuda.is_available`` answered True)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_quality_replay import random_schedule
from tests.tiny_models import ARCHITECTURES, save_tiny_model

torch = pytest.importorskip("torch", reason="the device checks need the [real] extra")
pytest.importorskip("transformers", reason="the device checks need the [real] extra")

T = 40
# plain_attention against the fused kernel on N(0, 1) inputs: the same sums in another order, float32 -- measured
# below 1e-6 on outputs and log-sum-exps of size ~1-5.
KERNEL_TOL = 1e-5
# Through the tiny models' 3 layers (logits up to ~10, rows far from uniform: initializer_range 0.4) the two kernels'
# last-bit differences grow to at most 1.0e-5 on the logits, 1.1e-5 nats of KL and of dnll, 3.7e-6 of output error,
# 1.3e-6 of displaced mass, 3e-8 of regret per step (measured over the four architectures at K = 5); the same top-1
# and closed-loop schedules.  The replay-equals-decode tests allow 1e-4 too.  A log-sum-exp that forgets the mask
# moves the displaced mass by more than 100 TOL.
TOL = 1e-4


def fused(q, k, v, causal, mask, scale):
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=mask,
                                                                       scale=scale)[:2]


@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 4), st.integers(1, 24), st.sampled_from([4, 8, 16]),
       st.integers(0, 2), st.booleans())
def test_the_plain_kernel_is_the_fused_cpu_kernel(seed, heads, n_keys, dim, first, starve):
    """Queries ``first ..`` of ``n_keys`` (``first = 0``: the kernel's own causal mask and a resident mask; else an
    explicit mask holding the causal part, as :class:`realtrace.quality.replay.MaskedPass` calls it), a random NM
    schedule's resident mask, and with ``starve`` every position dropped on arrival at some rows (an empty resident
    set: output 0 and log-sum-exp 0 from both)."""
    from realtrace.quality.replay import plain_attention
    from realtrace.quality.schedule import resident_bias

    first = min(first, n_keys - 1)
    rng = np.random.default_rng(seed)
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, heads, n, dim, generator=g) for n in (n_keys - first, n_keys, n_keys))
    drop = np.array([rng.integers(i, n_keys + 1) for i in range(n_keys)], dtype=np.int64)
    if starve:  # positions 0 .. m-1 dropped on arrival: rows 0 .. m-1 attend to nothing
        m = int(rng.integers(1, n_keys + 1))
        drop[:m] = np.arange(m)
    mask = torch.empty(n_keys - first, n_keys)
    resident_bias(drop, first, mask.numpy())
    scale = dim ** -0.5
    want_o, want_l = fused(q, k, v, first == 0, mask, scale)
    got_o, got_l = plain_attention(torch, q, k, v, first == 0, mask, scale)
    assert got_o.shape == want_o.shape and got_l.shape == want_l.shape
    assert float((got_o - want_o).abs().max()) < KERNEL_TOL
    assert float((got_l - want_l).abs().max()) < KERNEL_TOL


@pytest.fixture(scope="module", params=ARCHITECTURES)
def tiny(request, tmp_path_factory):
    """A tiny model directory of one architecture, its ids and a one-prompt file over them."""
    directory = save_tiny_model(tmp_path_factory.mktemp(request.param) / "model", request.param, seed=11)
    ids = [int(x) for x in np.random.default_rng(5).integers(0, 95, T)]
    prompts = directory.parent / "p.jsonl"
    prompts.write_text(json.dumps({"name": "p", "text": " ".join(f"w{i}" for i in ids[:T - 6]),
                                   "answer": " " + " ".join(f"w{i}" for i in ids[T - 6:])}) + "\n")
    return request.param, directory, ids, prompts


CONFIGS = ["TOVA", "H2O", "LRU"]


def quality(tiny, monkeypatch, plain: bool, lm=None) -> dict:
    """``quality TOVA H2O LRU`` (closed and open loop) and the optimum at K = 5 (below every window of the tiny
    models) on the tiny prompt, every row kept,
    with the plain kernel on the CPU (``plain``) or the fused one; on ``lm`` when given (the trapped model)."""
    from realtrace.quality import replay, run

    monkeypatch.setattr(replay, "_PLAIN_ON_CPU", plain)
    if lm is not None:
        monkeypatch.setattr(run, "worker_model", lambda *args: lm)
    _, directory, _, prompts = tiny
    return run.evaluate(CONFIGS, (5,), mode="both", prompts_file=str(prompts), workers=0, no_cache=True,
                        steps=True, progress=False, model=lm.source if lm is not None else str(directory))


def per_row(res: dict) -> dict:
    """``(config, metric) -> array`` of every run's per-row metrics and schedule on the prompt, and its regret."""
    out = {}
    for r in res["runs"]:
        for name, values in r.get("steps", {}).get("p", {}).items():
            out[r["config"], name] = np.asarray(values, dtype=np.float64)
        out[r["config"], "regret"] = np.array([r["total"]["regret_stream"]])
    return out


def test_quality_runs_with_the_plain_kernel_equal_the_fused_cpu_kernel(tiny, monkeypatch):
    """Replay logits, KL, displaced mass, output error, closed-loop schedules and the regret of every run agree
    within :data:`TOL`; a log-sum-exp that forgets the mask fails that."""
    from realtrace.model import load_model
    from realtrace.quality import replay
    from realtrace.quality.replay import OpenLoop

    arch, directory, ids, _ = tiny
    fused_runs, plain_runs = (per_row(quality(tiny, monkeypatch, plain)) for plain in (False, True))
    assert fused_runs.keys() == plain_runs.keys()
    evicting = [c for c in CONFIGS if fused_runs[c, "kl"].max() > 1e-3]
    assert len(evicting) >= 2, evicting  # the runs evict what the model attends to
    for key, want in fused_runs.items():
        got = plain_runs[key]
        if key[1] == "drop":  # the closed loop's choices: the same positions at the same steps
            assert np.array_equal(got, want), key
        else:
            assert np.abs(got - want).max() < TOL, (key, np.abs(got - want).max())
    lm = load_model(install=False, threads=1, model=str(directory))
    geo = lm.geometry
    drops = random_schedule(geo.layers, geo.kv_heads, T, np.random.default_rng(3), first=8)

    def replayed():
        pass_, hidden = replay.replay(lm, ids, OpenLoop(drops), geo.layers, geo.kv_heads)
        with torch.no_grad():
            return lm.model.lm_head(hidden).numpy(), pass_.record.displaced

    logits = {}
    for plain in (False, True):
        monkeypatch.setattr(replay, "_PLAIN_ON_CPU", plain)
        logits[plain] = replayed()
    assert np.abs(logits[True][0] - logits[False][0]).max() < TOL
    assert np.abs(logits[True][1] - logits[False][1]).max() < TOL

    plain = replay.plain_attention

    def unmasked_lse(torch_, query, key, value, causal, mask, scale):  # L over every key: the mask forgotten
        out, _ = plain(torch_, query, key, value, causal, mask, scale)
        return out, torch.logsumexp(torch.matmul(query, key.transpose(-2, -1)) * scale, dim=-1)

    monkeypatch.setattr(replay, "plain_attention", unmasked_lse)
    assert np.abs(replayed()[1] - logits[False][1]).max() > 100 * TOL


def test_no_tensor_of_the_model_path_is_left_on_the_host(tiny, monkeypatch, tmp_path):
    """On the stand-in device (:mod:`tests.device_trap`) a quality run (reference, optimum, closed and open loop,
    logits, rows and charges) and a capture give exactly the plain kernel's numbers on the CPU, every tensor of the
    computation on the device: a mask left on the host, a tensor made without ``device=`` or a ``.numpy()`` without
    ``.cpu()`` would raise."""
    from realtrace import capture as capture_module, load_traceset
    from realtrace.model import load_model
    from tests.device_trap import trapped_model

    arch, directory, ids, prompts = tiny
    on_cpu = quality(tiny, monkeypatch, plain=True)
    text = tmp_path / "p.txt"
    text.write_text(" ".join(f"w{i}" for i in ids[:24]))

    def captured(out):
        return load_traceset(capture_module.capture(out, tokens=4, prompt=str(text), layers="all", top=6,
                                                    install=False, quiet=True, model=str(directory)))

    cpu_traces = captured(tmp_path / "cpu")
    with trapped_model(load_model(install=False, threads=1, model=str(directory))) as on_device:
        assert on_device.model.device.type == "meta" and on_device.source.device == "meta"
        res = quality(tiny, monkeypatch, plain=False, lm=on_device)  # not the CPU: the plain kernel
    capture_lm = load_model(install=False, threads=1, attention=capture_module.ATTENTION_NAME, model=str(directory))
    with trapped_model(capture_lm) as on_device:
        monkeypatch.setattr(capture_module, "load_model", lambda *args, **kwargs: on_device)
        device_traces = captured(tmp_path / "device")
    assert res["model"]["device"] == "meta"
    res["model"]["device"] = "cpu"
    assert json.dumps(res, default=lambda a: a.tolist(), sort_keys=True) == \
        json.dumps(on_cpu, default=lambda a: a.tolist(), sort_keys=True)
    assert device_traces.meta["tokens"] == cpu_traces.meta["tokens"]
    for name, trace in cpu_traces.traces.items():
        other = device_traces.traces[name]
        assert all(np.array_equal(getattr(trace, f), getattr(other, f))
                   for f in ("indptr", "indices", "weights", "residual")), name


def test_cuda_is_accepted_where_cuda_is_available(monkeypatch):
    """``--device cuda`` resolves when ``torch.cuda.is_available()``; without it one line names the device."""
    from kvcore.errors import ParameterError
    from realtrace.model import resolve_model

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_model("smollm2-135m", "cuda").device == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ParameterError, match="^--device cuda: CUDA is not available here"):
        resolve_model("smollm2-135m", "cuda")


def test_the_press_bridge_chooses_on_the_device_what_it_chooses_on_the_cpu(tiny):
    """The full-cache prefill with its rows (:func:`realtrace.quality.prefill.trace_pass`, eager attention under a
    mask built on the host), kvpress's TOVA and Knorm fanned out on it, and a recorded TOVA run with its greedy
    answer (:func:`realtrace.press.recorder.run_press`): the same rows, choices and answer on the stand-in device
    as on the CPU."""
    pytest.importorskip("kvpress", reason="presses need the [kvpress] extra")
    from realtrace.model import load_model
    from realtrace.press.recorder import run_press
    from realtrace.press.registry import PRESSES, build_press, ratio_for_budget
    from realtrace.quality.prefill import trace_pass
    from tests.device_trap import trapped_model

    arch, directory, ids, _ = tiny
    n_prompt = T - 6

    def press(name: str):
        return build_press(PRESSES[name.lower()], ratio_for_budget(n_prompt, 5), False, 1, None)

    def bridged(lm) -> list:
        traces, drops = trace_pass(lm, ids, n_prompt, lm.geometry.kv_heads, 4,
                                   [(name, press(name), False) for name in ("TOVA", "Knorm")])
        record, _, answer = run_press(lm, press("TOVA"), ids, n_prompt, answer_from=n_prompt, max_new=3)
        kept = [(c.forward, c.layer, c.head, c.kept_slots.tolist()) for c in record.compressions]
        return [{key: [getattr(tr, f).tolist() for f in ("indptr", "indices", "weights", "residual")]
                 for key, tr in traces.items()}, {name: d.tolist() for name, d in drops.items()}, kept, answer]

    on_cpu = bridged(load_model(install=False, threads=1, model=str(directory)))
    with trapped_model(load_model(install=False, threads=1, model=str(directory))) as on_device:
        assert bridged(on_device) == on_cpu
    assert any(len(kept) < n_prompt for _, _, _, kept in on_cpu[2])  # the press dropped something

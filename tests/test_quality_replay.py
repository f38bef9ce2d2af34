"""The quality replay inside the real model (needs the [real] extra and the model wheel, skipped with the reason
otherwise; CI installs both, .ci/run): masking equals dropping from the cache, the closed loop in one pass equals
decoding token by token with the policy inside and with TOVA's and H2O's rules written out, the lazy exact optimum,
own prompts through the positive control, the press fan-out -- all on short prompts (48 tokens or a few hundred).
Marked slow (``--runslow``): closed and open loop on a whole prompt, and the positive controls of the default set."""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

from tests.model_fixture import PACKAGED, shared_model


T_SHORT = 48  # the short prompt of the equivalence tests: 48 token-by-token decodes of the 30-layer model
SINKS_WINDOW = "StreamingLLM"  # 4 sinks + the most recent tokens: its choices never read the attention


@pytest.fixture(scope="module")
def lm():
    return shared_model()


@pytest.fixture(scope="module")
def short_ids(lm):
    return first_ids(lm)


@pytest.fixture(scope="module", params=PACKAGED)
def packaged(request):
    """Each packaged model (SmolLM2, Gemma 3) with its short prompt: the equivalence tests run on both."""
    lm = shared_model(model=request.param)
    return lm, first_ids(lm)


def first_ids(lm):
    """The first :data:`T_SHORT` tokens of ``kv-24-12`` as ``lm`` reads it (after its BOS when it wants one)."""
    from realtrace.quality.run import tokenize_prompts

    return list(tokenize_prompts(["kv-24-12"], lm.tokenizer, lm.start)[0].ids[:T_SHORT])


def shape(lm):
    cfg = lm.model.config
    return cfg.num_hidden_layers, cfg.num_key_value_heads


class DropDecoder:
    """The independent reference: decode token by token with no transformers cache at all; every layer and KV head
    keeps its own store of (position, key, value) and physically deletes a position when its schedule drops it, so
    query ``t`` attends exactly to the positions still stored.  Beside it a store that never deletes gives the
    full-cache output with the same queries, keys and values (for the attention-output error and displaced mass).

    ``decide(layer, head, t, stored)`` returns the positions to delete at step ``t`` (after token ``t`` was stored);
    ``observe(layer, head, t, positions, weights)`` (optional) sees the head-mean attention over what is left.

    On a sliding-window layer (the ``sliding_window`` the model hands its attention function) query ``t`` sees the
    stored positions ``i > t - W`` only, and the full-cache output is over the window as well (the model's own
    mask); a stored position outside it stays stored and is observed with weight 0."""

    NAME = "kvquality_test_drop"
    # each decoder registers under its own name: once kvpress is imported (press tests in the same process), a
    # name registered earlier can keep serving an earlier decoder, with another model's keys in its stores
    COUNT = itertools.count()

    def __init__(self, torch, heads, rep, decide, observe=None):
        self.torch, self.heads, self.rep, self.decide, self.observe = torch, heads, rep, decide, observe
        self.kept, self.full, self.t = {}, {}, 0
        self.error, self.displaced = {}, {}

    def __call__(self, module, query, key, value, *args, **kwargs):
        torch, layer, t = self.torch, module.layer_idx, self.t
        window = kwargs.get("sliding_window")
        seen = [i for i in range(t + 1) if window is None or i > t - window]
        outs = []
        for g in range(self.heads):
            k, v = key[0, g, -1], value[0, g, -1]
            full = self.full.setdefault((layer, g), {})
            kept = self.kept.setdefault((layer, g), {})
            full[t] = kept[t] = (k, v)
            for i in self.decide(layer, g, t, sorted(kept)):
                del kept[i]
            q = query[0, g * self.rep:(g + 1) * self.rep, 0]  # (rep, dim)
            pos = [i for i in sorted(kept) if i in seen]
            kk = torch.stack([kept[i][0] for i in pos])
            vv = torch.stack([kept[i][1] for i in pos])
            w = torch.softmax(q @ kk.T * module.scaling, dim=-1)
            o = w @ vv
            kf = torch.stack([full[i][0] for i in seen])
            vf = torch.stack([full[i][1] for i in seen])
            wf = torch.softmax(q @ kf.T * module.scaling, dim=-1)
            of = wf @ vf
            gone = [j for j, i in enumerate(seen) if i not in kept]
            self.displaced[(layer, g, t)] = float(wf[:, gone].sum(dim=1).mean()) if gone else 0.0
            self.error[(layer, g, t)] = float((o - of).norm() / of.norm())
            if self.observe is not None:
                observed = dict(zip(pos, w.mean(dim=0).double().numpy()))
                self.observe(layer, g, t, np.asarray(sorted(kept)), np.array([observed.get(i, 0.0)
                                                                               for i in sorted(kept)]))
            outs.append(o)
        return torch.cat(outs, dim=0)[None, None], None

    def run(self, lm, ids):
        """The logits of every step ``(T, vocabulary)``."""
        from realtrace.quality.replay import register

        register(lm.transformers)
        name = f"{self.NAME}_{next(self.COUNT)}"
        lm.transformers.AttentionInterface.register(name, self)
        old = lm.model.config._attn_implementation
        lm.model.set_attn_implementation(name)
        try:
            rows = []
            for t, tok in enumerate(ids):
                self.t = t
                rows.append(lm.forward([tok], None, [t]).logits[0, -1])
            return lm.torch.stack(rows).numpy()
        finally:
            lm.model.set_attn_implementation(old)


def scheduled(drops):
    """``decide`` of a fixed schedule: delete the stored positions whose drop step has come."""
    return lambda layer, g, t, stored: [i for i in stored if drops[layer, g, i] <= t]


def masked_logits(lm, ids, drops, start=0, prefix=None):
    from realtrace.quality.replay import OpenLoop, replay

    L, H = shape(lm)
    pass_, hidden = replay(lm, ids, OpenLoop(drops), L, H, start, prefix)
    with lm.torch.no_grad():
        return pass_, lm.model.lm_head(hidden).numpy()


def random_schedule(L, H, T, rng, first=20):
    """Per layer and KV head a different NM schedule: each position after the first is dropped with probability
    1/2, at a random step from ``max(position, first)`` on (``drop = position``: dropped on arrival)."""
    drops = np.full((L, H, T), T, dtype=np.int64)
    for layer in range(L):
        for g in range(H):
            for i in range(1, T):
                if rng.random() < 0.5:
                    drops[layer, g, i] = rng.integers(max(i, first), T + 1)
    return drops


# Float32 logits of this model are of size 10-30; the two computations differ only in summation order (one fused
# kernel over the whole sequence against per-step matmuls over the stored keys), an error of a few float32 ulps per
# reduction carried through 30 residual layers: measured max |difference| 5.8e-5 - 9.9e-5 (random_schedule seeds
# 7, 8, 9 on kv-24-12's first T_SHORT tokens; logits up to 31, CPU, torch 2.13).  TOL leaves a factor ~5;
# a single position dropped one step too early on one head of one layer moves the logits by > 1e-2 (checked below).
TOL = 5e-4


def test_masking_equals_dropping_from_the_cache(packaged):
    from realtrace.quality.replay import replay
    from realtrace.quality.schedule import first_drop

    lm, short_ids = packaged
    L, H = shape(lm)
    T = len(short_ids)
    rep = lm.model.config.num_attention_heads // H
    drops = random_schedule(L, H, T, np.random.default_rng(7))
    ref = DropDecoder(lm.torch, H, rep, scheduled(drops))
    want = ref.run(lm, short_ids)
    pass_, got = masked_logits(lm, short_ids, drops)
    assert np.abs(got - want).max() < TOL
    # the attention-output error and displaced mass the pass records, against the decoder's (same q, k, v)
    err = np.array([[[ref.error[(layer, g, t)] for t in range(T)] for g in range(H)] for layer in range(L)])
    disp = np.array([[[ref.displaced[(layer, g, t)] for t in range(T)] for g in range(H)] for layer in range(L)])
    assert disp.max() > 0.05 and err.max() > 0.05  # the schedule does displace attention
    np.testing.assert_allclose(pass_.record.displaced, disp, atol=2e-5)
    np.testing.assert_allclose(pass_.record.error, err, atol=2e-4)
    # resumed from the full cache's keys and values at the first drop, as the study runs it: the same rows
    full, _ = replay(lm, short_ids, None, L, H, keep_qkv=True)
    start = first_drop(drops)
    assert 0 < start < T
    _, resumed = masked_logits(lm, short_ids, drops, start, full.keep_qkv)
    assert np.abs(resumed - got[start:]).max() < TOL
    # deliberately broken schedules are caught: one position dropped early on one head, or two KV heads swapped
    # (two layers on a model with one KV head)
    early = drops.copy()
    g = min(1, H - 1)
    early[3, g, np.flatnonzero(drops[3, g] == T)[1]] = start
    swapped = drops[:, [1, 0, *range(2, H)]] if H > 1 else drops[[1, 0, *range(2, L)]]
    for broken in (early, swapped):
        assert np.abs(masked_logits(lm, short_ids, broken)[1] - want).max() > 20 * TOL


class PolicyInside:
    """Closed loop the slow way: one policy per layer and KV head, driven through the NM protocol by hand at every
    decode step (token ``t`` admitted, victims asked while over ``k``; after the attention, the policy observes the
    resident positions' head-mean weights -- the complete row, or its ``top`` largest entries sorted by position)."""

    def __init__(self, factory, k, seed, top=None):
        self.factory, self.k, self.seed, self.top = factory, k, seed, top
        self.policies, self.evictions = {}, {}

    def decide(self, layer, g, t, stored):
        key = (layer, g)
        if key not in self.policies:
            p = self.factory()
            p.reset(self.k, np.random.default_rng([self.seed, layer, g]), "nm")
            self.policies[key] = p
        p = self.policies[key]
        p.admit(t, t, 0.0)
        need = len(stored) - self.k
        victims = [int(v) for v in p.evict(t, need, frozenset())] if need > 0 else []
        self.evictions.setdefault(key, []).extend((t, v) for v in victims)
        return victims

    def observe(self, layer, g, t, pos, w):
        if self.top is not None and w.size > self.top:
            keep = np.sort(np.argpartition(w, -self.top)[-self.top:])
            pos, w = pos[keep], w[keep]
        self.policies[(layer, g)].observe(t, pos, w)


class RuleInside:
    """TOVA and H2O written out in the decoder itself, without the toolkit's policies: over budget, TOVA drops the
    stored position with the lowest attention in the previous query's row (the newest position, not yet attended,
    is kept), H2O the position with the least attention accumulated since its arrival among all but the
    ``max(1, k // 2)`` most recent (ties to the smaller position).  The rows are what the model computed over the
    stored positions (renormalised over them: the dropped keys are gone)."""

    def __init__(self, rule, k):
        self.rule, self.k, self.last, self.total, self.evictions = rule, k, {}, {}, {}

    def decide(self, layer, g, t, stored):
        key = (layer, g)
        if len(stored) <= self.k:
            return []
        if self.rule == "TOVA":
            last = self.last[key]
            victim = min((i for i in stored if i != t), key=lambda i: (last[i], i))
        else:
            total, recent = self.total.setdefault(key, {}), max(1, self.k // 2)
            victim = min((i for i in stored if i <= t - recent), key=lambda i: (total.get(i, 0.0), i))
        self.evictions.setdefault(key, []).append((t, victim))
        return [victim]

    def observe(self, layer, g, t, pos, w):
        self.last[(layer, g)] = dict(zip(pos.tolist(), w.tolist()))
        total = self.total.setdefault((layer, g), {})
        for i, a in zip(pos.tolist(), w.tolist()):
            total[i] = total.get(i, 0.0) + a


def closed_loop_pass(lm, ids, factory, k, seed=3, top=None):
    from realtrace.quality.replay import ClosedLoop, replay

    L, H = shape(lm)
    plan = ClosedLoop(factory, k, seed=seed, top=top)
    _, hidden = replay(lm, ids, plan, L, H)
    with lm.torch.no_grad():
        return plan, lm.model.lm_head(hidden).numpy()


@pytest.mark.parametrize("name, top", [("TOVA", 8), ("H2O", 8), ("ACC", 8), ("LRU", 8), ("LRU", None),
                                       ("Scissorhands", None), ("GD-A", None), ("Random", None), ("Default", None)])
def test_closed_loop_in_one_pass_equals_decoding_with_the_policy_inside(lm, short_ids, name, top):
    import policies
    from realtrace.quality.schedule import drop_from_evictions

    L, H = shape(lm)
    T, k = len(short_ids), 16
    rep = lm.model.config.num_attention_heads // H
    # the Section 10 default as its replays run it (floor K/4, 4 sinks), so that its pool and its draws are used
    factory = policies.resolve(name, {"recent": k // 4} if name == "Default" else {})
    inside = PolicyInside(factory, k, seed=3, top=top)
    want = DropDecoder(lm.torch, H, rep, inside.decide, inside.observe).run(lm, short_ids)
    plan, got = closed_loop_pass(lm, short_ids, factory, k, top=top)
    assert plan.compiled_layers == L
    assert plan.reads_rows() == (name not in ("LRU", "Random") or top is not None)  # no scores for these two
    for layer in range(L):
        for g in range(H):
            assert np.array_equal(plan.drops[layer][g], drop_from_evictions(inside.evictions[(layer, g)], T))
    assert np.abs(got - want).max() < TOL


@pytest.mark.parametrize("name", ["TOVA", "H2O"])
def test_closed_loop_tova_and_h2o_equal_a_real_decode_of_their_rule(packaged, name):
    """Issue 27: by default the closed loop observes the complete row over the resident set, so its TOVA and H2O
    evict exactly what a decode applying the published rule to the model's attention evicts, on every layer and KV
    head; observing only the top 8 entries of each row, they do not."""
    import policies
    from realtrace.quality.schedule import drop_from_evictions

    lm, short_ids = packaged
    L, H = shape(lm)
    T, k = len(short_ids), 16
    rep = lm.model.config.num_attention_heads // H
    rule = RuleInside(name, k)
    DropDecoder(lm.torch, H, rep, rule.decide, rule.observe).run(lm, short_ids)
    wanted = {key: drop_from_evictions(rule.evictions[key], T) for key in rule.evictions}
    assert len(wanted) == L * H and all((d < T).sum() == T - k for d in wanted.values())
    factory = policies.resolve(name)
    plan, _ = closed_loop_pass(lm, short_ids, factory, k)
    assert plan.compiled_layers == L  # the compiled closed loop (kvcore.closed_loop) ran every layer
    differ = [(layer, g) for layer in range(L) for g in range(H) if not np.array_equal(plan.drops[layer][g],
                                                                                         wanted[(layer, g)])]
    assert differ == []  # (the logits of one schedule both ways: test_masking_equals_dropping_from_the_cache)
    truncated, _ = closed_loop_pass(lm, short_ids, factory, k, top=8)
    assert any(not np.array_equal(truncated.drops[layer][g], wanted[(layer, g)]) for layer in range(L)
               for g in range(H))


def test_the_optimum_is_lazy_and_exact_on_complete_rows(packaged):
    """Issue 27's invariant: the optimum holds min(t + 1, K) positions at every step of every head, and it is
    solved on complete rows (its gap bound is 0 up to rounding); solved on top-2 rows the schedule is still lazy and
    its reported gap is positive."""
    from realtrace.quality.run import Config, PromptIds, _Reference, _schedule
    from realtrace.quality.schedule import resident_counts

    lm, short_ids = packaged
    T, k = len(short_ids), 12
    prompt = PromptIds("short", "test", tuple(short_ids), T - 4, "")
    ref = _Reference(lm, prompt, (k,), [])
    want = np.minimum(np.arange(T) + 1, k)
    cfg = Config("opt", "OPT", "open", "OPT")
    drops, _, gap = _schedule(ref, cfg, k, 0, None, None, {})
    assert all(np.array_equal(resident_counts(d), want) for d in drops.reshape(-1, T))
    assert np.abs(gap).max() < 1e-9
    drops2, _, gap2 = _schedule(ref, cfg, k, 0, None, 2, {})
    assert all(np.array_equal(resident_counts(d), want) for d in drops2.reshape(-1, T))
    assert gap2.min() > -1e-9 and gap2.max() > 1e-4


@pytest.mark.slow
def test_closed_and_open_loop_agree_for_sinks_and_window_only(lm):
    from realtrace.quality.run import evaluate

    res = evaluate([SINKS_WINDOW, "TOVA"], [64], ["kv-24-12"], mode="both", workers=0, steps=True, progress=False)
    runs = {r["config"]: r for r in res["runs"]}
    closed, opened = runs[SINKS_WINDOW], runs[f"{SINKS_WINDOW} (open loop)"]
    (steps_c,), (steps_o,) = closed["steps"].values(), opened["steps"].values()
    assert np.array_equal(steps_c["drop"], steps_o["drop"])
    assert closed["total"] == opened["total"] and closed["prompts"] == opened["prompts"]
    assert closed["total"]["kl_stream"] > 0.01  # the window did change the output
    # an attention-driven rule sees different weights in the two loops, so it chooses differently
    (tova_c,), (tova_o,) = runs["TOVA"]["steps"].values(), runs["TOVA (open loop)"]["steps"].values()
    assert not np.array_equal(tova_c["drop"], tova_o["drop"])


def full_cache_answer(lm, ids: list[int], n_prompt: int) -> np.ndarray:
    """The full cache's teacher-forced greedy prediction of every answer token."""
    from realtrace.quality.replay import replay

    L, H = shape(lm)
    _, hidden = replay(lm, ids, None, L, H)
    with lm.torch.no_grad():
        return lm.model.lm_head(hidden[n_prompt - 1:-1]).argmax(dim=-1).numpy()


@pytest.mark.slow
def test_positive_controls(lm):
    """The full cache answers every default prompt right (so the default set is a usable control), and the control
    can fail: with the code in the context changed (every digit d -> d + 5 mod 10; the answer's token sequence occurs
    once in the prompt) the reference answer is judged wrong, and the prediction agrees with the changed code on more
    tokens than with the reference -- the model reads the context (it does not always copy every digit: on
    needle-1200-d50 it answered 9031 for 8031)."""
    from realtrace.quality import prompts as qprompts
    from realtrace.quality.metrics import answer_right
    from realtrace.quality.run import tokenize_prompts

    digit = {lm.tokenizer.convert_tokens_to_ids(str(d)): d for d in range(10)}
    for p in tokenize_prompts(list(qprompts.DEFAULT), lm.tokenizer):
        ids, answer = list(p.ids), np.asarray(p.answer)
        assert answer_right(full_cache_answer(lm, ids, p.n_prompt), answer), p.name
        code = [int(a) for a in answer if int(a) in digit]
        at = [i for i in range(p.n_prompt - len(code) + 1) if ids[i:i + len(code)] == code]
        assert len(at) == 1, (p.name, at)
        changed = [next(t for t, d in digit.items() if d == (digit[c] + 5) % 10) for c in code]
        moved = ids[:at[0]] + changed + ids[at[0] + len(code):p.n_prompt]
        new_answer = answer.copy()
        new_answer[[int(a) in digit for a in answer]] = changed
        pred = full_cache_answer(lm, moved + new_answer.tolist(), p.n_prompt)
        assert not answer_right(pred, answer), p.name
        assert (pred == new_answer).sum() > (pred == answer).sum(), (p.name, pred, answer, new_answer)


@pytest.mark.parametrize("press_name", ["TOVA", "Knorm", "SnapKV"])
def test_press_fan_out_records_what_the_press_keeps_alone(lm, press_name):
    """One prefill shared by several (press, budget) pairs gives each the schedule of that press run alone through
    the bridge's recorder (realtrace.press.recorder.run_press), per layer and KV head."""
    pytest.importorskip("kvpress", reason="presses need the [kvpress] extra")
    from realtrace.press.recorder import run_press
    from realtrace.press.registry import PRESSES, build_press, ratio_for_budget
    from realtrace.press.schedule import replay as replay_record
    from realtrace.quality.prefill import trace_pass
    from realtrace.quality.run import tokenize_prompts

    L, H = shape(lm)
    p = tokenize_prompts(["kv-24-12"], lm.tokenizer)[0]
    ids, n_prompt = list(p.ids), p.n_prompt
    spec = PRESSES[press_name.lower()]
    budgets = (16, 48)
    fan = [(f"{press_name}@{k}", build_press(spec, ratio_for_budget(n_prompt, k), False, 1, None), spec.headwise)
           for k in budgets] + [("StreamingLLM@16", build_press(PRESSES["streamingllm"],
                                                                ratio_for_budget(n_prompt, 16), False, 1, None),
                                 False)]
    _, drops = trace_pass(lm, ids, n_prompt, H, 8, fan)
    for k in budgets:
        alone = build_press(spec, ratio_for_budget(n_prompt, k), False, 1, None)
        record = run_press(lm, alone, ids, n_prompt)[0]
        want = np.array([[replay_record(record, layer, g).drop for g in range(H)] for layer in range(L)])
        got = drops[f"{press_name}@{k}"]
        assert got.shape == want.shape and np.array_equal(got, want), (press_name, k, np.argwhere(got != want)[:5])


def test_own_prompts_go_through_the_positive_control(lm, tmp_path):
    """A prompts file with one prompt the full cache answers right and one it answers wrongly (the expected answer
    is not what the text says): the second is excluded from accuracy and named, and counted nowhere."""
    import json

    from realtrace.quality.run import evaluate

    text = "The secret word is apple. Repeat the secret word.\nThe secret word is"
    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "right", "text": text, "answer": " apple"}) + "\n"
                    + json.dumps({"name": "wrong", "text": text, "answer": " banana"}) + "\n")
    res = evaluate(["OPT"], [6], None, workers=0, progress=False, prompts_file=str(path))
    assert [p["name"] for p in res["prompts"]] == ["right", "wrong"]
    assert [p["full_cache_right"] for p in res["prompts"]] == [True, False]
    assert res["excluded"] == ["wrong"]
    (opt,) = [r for r in res["runs"] if r["kind"] == "opt"]
    assert opt["total"]["counted"] == 1 and opt["total"]["right"] <= 1
    assert opt["max_resident"] == 6


def test_answered_only_runs_nothing_on_a_prompt_the_full_cache_gets_wrong(lm, tmp_path):
    """``--answered-only``: the prompt that fails the control is still listed and excluded, but has no run; every
    run of the study equals the study of the answered prompt alone (whose means are over it alone) -- and without
    the option the failing prompt is run (the control of this test)."""
    import json

    from realtrace.quality.run import evaluate

    text = "The secret word is apple. Repeat the secret word.\nThe secret word is"
    both, alone = tmp_path / "both.jsonl", tmp_path / "alone.jsonl"
    right = json.dumps({"name": "right", "text": text, "answer": " apple"}) + "\n"
    both.write_text(right + json.dumps({"name": "wrong", "text": text, "answer": " banana"}) + "\n")
    alone.write_text(right)
    kw = {"workers": 0, "progress": False, "no_cache": True}
    skipped = evaluate(["H2O"], [6], None, prompts_file=str(both), answered_only=True, **kw)
    ran = evaluate(["H2O"], [6], None, prompts_file=str(both), **kw)
    single = evaluate(["H2O"], [6], None, prompts_file=str(alone), **kw)
    assert skipped["excluded"] == ran["excluded"] == ["wrong"] and skipped["settings"]["answered_only"] is True
    assert "answered_only" not in ran["settings"]
    assert all(set(r["prompts"]) == {"wrong", "right"} for r in ran["runs"] if r["kind"] != "full")
    assert [r["config"] for r in skipped["runs"]] == [r["config"] for r in single["runs"]]
    for a, b in zip(skipped["runs"], single["runs"]):
        if a["kind"] == "full":
            continue  # the full cache's row also names the excluded prompt's length and answer likelihood
        assert set(a["prompts"]) == {"right"} and a["total"] == b["total"] and a["prompts"] == b["prompts"]


def test_a_configured_policy_runs_with_its_parameters(lm, tmp_path):
    """``quality Default -p recent=2 -p n_sinks=1``: the replay builds the policy with those parameters -- its
    schedule differs from the registered Default's (recency floor 256: at K = 6 a sliding window) -- and reports it
    under its configured name, within the budget."""
    import json

    from realtrace.quality.run import evaluate, parse_config

    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "p", "text": "The secret word is apple. Repeat the secret word.\nThe secret "
                                                     "word is", "answer": " apple"}) + "\n")
    cfgs = parse_config("Default", "closed", {"recent": 2, "n_sinks": 1}) + parse_config("Default")
    res = evaluate(cfgs, [6], None, workers=0, progress=False, prompts_file=str(path), steps=True)
    runs = {r["config"]: r for r in res["runs"] if r["kind"] == "policy"}
    assert set(runs) == {"Default(n_sinks=1, recent=2)", "Default"}
    assert all(r["max_resident"] <= 6 for r in runs.values())
    a, b = (runs[n]["steps"]["p"]["drop"] for n in ("Default(n_sinks=1, recent=2)", "Default"))
    assert not np.array_equal(a, b)


SECRET = "The secret word is apple. Repeat the secret word.\nThe secret word is"


def without_cache_status(res: dict) -> dict:
    """A result with the per-prompt cache status and the per-step arrays set aside (everything else must match)."""
    return {**res, "prompts": [{k: v for k, v in p.items() if k != "cache"} for p in res["prompts"]],
            "runs": [{k: v for k, v in r.items() if k != "steps"} for r in res["runs"]]}


def test_a_warm_cache_run_equals_a_cold_one(lm, tmp_path):
    """Issues 30 and 29: the same study three times on one short prompt -- cold (the reference, the press's choice,
    the optimum, the open-loop passes and the compiled closed-loop run computed and stored), warm (all read back, a
    policy run through its Python instances run again), and with the cache off -- gives the same result: every metric
    and every schedule exactly equal, not only to rounding; the statuses say which was which."""
    import json

    from realtrace.quality.run import evaluate

    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "p", "text": SECRET, "answer": " apple"}) + "\n")
    names = ["TOVA", "LIFO", "OPT"] + (["press:Knorm"] if importlib.util.find_spec("kvpress") else [])
    cache = tmp_path / "cache"

    def study(**kw):
        return evaluate(names, [6], None, workers=0, progress=False, prompts_file=str(path), steps=True, **kw)

    cold, warm, off = study(cache_dir=str(cache)), study(cache_dir=str(cache)), study(no_cache=True)
    presses = len(names) - 3
    none = {"press_choices_cached": 0, "optima_cached": 0, "passes_cached": 0, "closed_loop_runs_cached": 0}
    # TOVA's closed loop runs a compiled rule and is read back; LIFO's (Python instances) is run again
    assert [r["prompts"][0]["cache"] for r in (cold, warm, off)] == [
        {"reference": "computed", **none},
        {"reference": "cached", "press_choices_cached": presses, "optima_cached": 1, "passes_cached": 1 + presses,
         "closed_loop_runs_cached": 1},
        {"reference": "off", **none}]
    assert [len(list(cache.glob(f"{kind}-*.npz"))) for kind in ("reference", "press", "optimum", "pass", "run")] == [
        1, presses, 1, 1 + presses, 1]
    assert without_cache_status(warm) == without_cache_status(cold) == without_cache_status(off)
    for a, b in zip(cold["runs"], warm["runs"]):
        for q, arr in a.get("steps", {}).get("p", {}).items():
            assert np.array_equal(arr, b["steps"]["p"][q]), (a["config"], q)
    assert {r["config"] for r in cold["runs"]} == {*names, "full cache"}


def test_a_pass_read_from_the_cache_is_the_pass_of_its_schedule(lm, tmp_path):
    """An open-loop pass is stored under its schedule and first row, an optimum and a closed-loop run under their
    budget: after a study of H2O (closed loop) and the optimum at K = 6, one of H2O closed and open loop at K = 5 and
    6 -- open loop at K = 6 the same first row as the optimum (checked: the control that a key without the schedule
    would confuse them), another schedule -- reads exactly the optimum, its pass and H2O's closed-loop run at K = 6
    and equals the same study without the cache, every per-step array included."""
    import json

    from realtrace.quality.run import evaluate
    from realtrace.quality.schedule import first_drop

    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "p", "text": SECRET, "answer": " apple"}) + "\n")

    def study(names, budgets, **kw):
        return evaluate(names, budgets, None, workers=0, progress=False, prompts_file=str(path), steps=True, **kw)

    cache = str(tmp_path / "cache")
    study(["H2O"], [6], cache_dir=cache)
    warm, off = (study(["H2O"], [5, 6], mode="both", **kw) for kw in ({"cache_dir": cache}, {"no_cache": True}))
    assert warm["prompts"][0]["cache"] == {"reference": "cached", "press_choices_cached": 0, "optima_cached": 1,
                                           "passes_cached": 1, "closed_loop_runs_cached": 1}
    assert without_cache_status(warm) == without_cache_status(off)
    drops = {}
    for a, b in zip(warm["runs"], off["runs"]):
        for q, arr in a.get("steps", {}).get("p", {}).items():
            assert np.array_equal(arr, b["steps"]["p"][q]), (a["config"], a["budget"], q)
        if a["budget"] == 6:
            drops[a["config"]] = a["steps"]["p"]["drop"]
    h2o, opt = drops["H2O (open loop)"], drops["OPT"]
    assert first_drop(h2o) == first_drop(opt) and not np.array_equal(h2o, opt)


def test_a_prompt_split_by_budget_gives_the_result_of_one_task(lm, tmp_path, monkeypatch):
    """Issue 30: a prompt whose work is split into budget groups for several workers
    (:func:`realtrace.quality.groups.budget_groups`; here forced by pretending to 4 workers, the tasks run serially in
    this process) gives exactly the result of one task per prompt: every run in the same order, every metric and
    schedule equal.  The split itself is checked to have happened (the control)."""
    import json

    import realtrace.quality.groups as groups_mod
    from kvcore.tasks import TaskPool
    from realtrace.quality.run import evaluate

    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "long", "text": SECRET + " apple. " + SECRET, "answer": " apple"}) + "\n"
                    + json.dumps({"name": "short", "text": SECRET, "answer": " apple"}) + "\n")
    names = ["H2O", "Random", "OPT"] + (["press:Knorm"] if importlib.util.find_spec("kvpress") else [])

    def study():
        return evaluate(names, [4, 6, 8], None, workers=0, progress=False, prompts_file=str(path), steps=True,
                        no_cache=True)

    one = study()
    split = []
    monkeypatch.setattr(TaskPool, "slots", lambda self: 4)
    groups = groups_mod.budget_groups
    monkeypatch.setattr(groups_mod, "budget_groups", lambda *a: split.append(groups(*a)) or split[-1])
    many = study()
    assert split and max(split[0]) > 1, split
    assert without_cache_status(many) == without_cache_status(one)
    for a, b in zip(one["runs"], many["runs"]):
        for prompt, arrays in a.get("steps", {}).items():
            for q, arr in arrays.items():
                assert np.array_equal(arr, b["steps"][prompt][q]), (a["config"], prompt, q)
    assert [p["cache"]["reference"] for p in many["prompts"]] == ["off", "off"]


def test_runs_replaying_the_same_schedule_share_one_pass(lm, tmp_path, monkeypatch):
    """Issue 30: FIFO and LRU (threshold 0, complete rows) keep the same positions, known before the pass, so a study
    of both replays one pass for the two; each run equals the run of its policy alone, every per-step array included.
    The control: StreamingLLM, another schedule of the same first row, gets its own pass (3 configs, 2 passes)."""
    import json

    import realtrace.quality.run as run_mod

    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "p", "text": SECRET, "answer": " apple"}) + "\n")
    passes = []
    replayed = run_mod._replayed
    monkeypatch.setattr(run_mod, "_replayed", lambda *a: passes.append(a[4]) or replayed(*a))

    def study(names):
        out = run_mod.evaluate(names, [6], None, workers=0, progress=False, prompts_file=str(path), steps=True,
                               no_cache=True, no_opt=True)
        return {r["config"]: r for r in out["runs"] if r["config"] != "full cache"}

    together = study(["FIFO", "LRU", "StreamingLLM"])
    assert len(passes) == 2
    for name in ("FIFO", "LRU", "StreamingLLM"):
        alone = study([name])[name]
        assert set(alone) == set(together[name])
        for key, value in alone.items():
            if key == "steps":
                for q, arr in value["p"].items():
                    assert np.array_equal(arr, together[name]["steps"]["p"][q]), (name, q)
            else:
                assert np.array_equal(value, together[name][key]), (name, key)
    assert np.array_equal(together["FIFO"]["steps"]["p"]["drop"], together["LRU"]["steps"]["p"]["drop"])


@pytest.mark.slow
def test_the_command_line_fills_the_cache_that_a_later_run_reads(lm, tmp_path):
    """``quality StreamingLLM --budget 6 --no-opt --cache-dir DIR --json`` as a user types it: no optimum in the
    result, the reference computed and stored, and the model's de-quantized copy made and read (the command ran from
    the copy); the same study in this process (the model from the GGUF file) then reads the reference (``cached``)
    and equals the command's result."""
    import json

    from realtrace.quality.run import evaluate
    from tests.command_line import run_module

    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps({"name": "p", "text": SECRET, "answer": " apple"}) + "\n")
    cache = tmp_path / "cache"
    code, out, err = run_module("paper_check", "quality", "StreamingLLM", "--budget", "6", "--prompts-file", path,
                                "--no-opt", "--cache-dir", cache, "--workers", "0", "--threads", "1", "--json")
    assert code == 0, err[-2000:]
    cold = json.loads(out)
    assert [r["config"] for r in cold["runs"]] == ["StreamingLLM", "full cache"]
    assert cold["prompts"][0]["cache"]["reference"] == "computed" and cold["settings"]["no_opt"] is True
    assert len(list(cache.glob("model-*"))) == 1 and "(converted copy)" in err
    warm = evaluate(["StreamingLLM"], [6], None, workers=0, progress=False, prompts_file=str(path), no_opt=True,
                    cache_dir=str(cache))
    assert warm["prompts"][0]["cache"]["reference"] == "cached"
    assert json.loads(json.dumps(without_cache_status(warm))) == without_cache_status(cold)

"""Eviction schedules replayed inside the real model (needs the ``[real]`` extra; the press fan-out needs
``[kvpress]``).

Every pass here is one teacher-forced forward of the model (``--model``, :mod:`realtrace.model`) through an attention function
registered with transformers' attention interface (``AttentionInterface.register``; the model's attention modules
look it up by ``config._attn_implementation`` and call it with the module, whose ``layer_idx`` says which layer it
is).  Two functions are registered:

``kvquality`` (:class:`MaskedPass`) -- the replay.  Query ``t`` of layer ``l`` attends, for each KV head ``g``, to
    the resident set ``R_t`` of that layer and head only: ``keep[t, i] = (i <= t) and (t < drop[l, g, i])``
    (:func:`realtrace.quality.schedule.resident_mask`), applied as an additive ``-inf`` mask to the query heads that
    share KV head ``g`` (grouped- or multi-query attention: query heads ``rg .. rg+r-1``, ``r`` per KV head), so a
    masked key gets weight exactly 0
    and the softmax renormalises over ``R_t``.  That is exactly what dropping the key from the cache does for every
    later query, since a dropped key never comes back (NM); a test computes both ways.  Beside the output the pass
    computes, per layer, KV head and query step, with the *same* queries, keys and values (the paper's Section 9
    surrogate linearises exactly this):

    * the attention-output error ``e = ||O_R - O|| / ||O||``, where ``O`` is the full-cache output of the ``r`` query
      heads (concatenated, ``r x d`` values) and ``O_R`` the output with the softmax renormalised over ``R_t``;
    * the displaced mass ``m = mean_h sum_{i <= t, i not in R_t} softmax_h(q k / sqrt(d))_i`` -- the attention
      the full cache puts on evicted keys, averaged over the ``r`` query heads exactly as :mod:`realtrace.capture`
      reduces a KV head's row, so on an unperturbed layer it is the step's NM regret (Eq. 4) with nothing truncated.

    Per head the two are tied by ``O = (1 - m_h) O_R + m_h Vbar_E`` (``Vbar_E`` the evicted keys' values averaged
    with their full-cache weights), so ``O_R - O = m_h (O_R - Vbar_E)``: the error is the displaced mass times how
    far the evicted values lie from the renormalised output -- first order in ``m`` when that distance is typical
    (the surrogate's regime), larger for an outlier value, smaller when the evicted values match the retained
    average (paper Section 9's two failure directions).  Both come from one attention call per mask that returns
    the log-sum-exp ``L`` beside the output: ``m_h = 1 - exp(L_R - L)``.  On the CPU it is the fused kernel
    ``aten._scaled_dot_product_flash_attention_for_cpu`` (every committed result was computed with it); on any
    other device (``--device cuda``) :func:`plain_attention`, the same formula in plain torch ops on that device,
    checked against the CPU kernel on the CPU (tests/test_model_device.py).

``kvquality_trace`` (:class:`realtrace.quality.prefill.TracePass`) -- the full cache with its attention weights: transformers' own
    eager attention (``eager_attention_forward``) under an explicit causal mask, each KV head's rows optionally
    reduced and sparsified exactly as the capture does (:func:`realtrace.capture.sparsify_block`: GQA mean, top
    entries, exact residual).  The quality study keeps no rows from it (it charges on complete rows,
    :mod:`realtrace.quality.exact`); it runs as kvpress's pipeline does (prefill the prompt with a cache, then the continuation), which lets every bridged
    prefill press compress the same prefill (:class:`realtrace.quality.prefill.PressFanOut`).

Sliding-window layers (SPEC section 8, :mod:`realtrace.geometry`).  On a layer with window ``W`` the model itself
lets query ``t`` see only keys ``i > t - W``.  The replay's mask is that mask intersected with the resident set:
drop vector ``min(drop[i], i + W)`` (:func:`window_drop`); the full cache ``O`` and its log-sum-exp are the
windowed ones, so a key outside the window is displaced by nobody; and in closed loop the policy observes it with
weight 0 (its scaled products are ``-inf`` outside the window, :func:`outside_window`).

Open and closed loop.  In *open loop* the schedule is given before the pass (the exact optimum, a policy run on the
full-cache trace, a press's recorded choice, a saved file).  In *closed loop* (:class:`ClosedLoop`) one instance of
an online NM policy per layer and KV head runs inside the pass, driven through :class:`kvcore.engine.NMSimulator`,
observing the weights the model computes under its own evictions.  Causality makes this one pass exact: the state of
token ``t`` at layer ``l`` depends only on tokens ``<= t`` at layers ``<= l``, so running layer ``l``'s policies over
all steps, masking, and only then computing layer ``l + 1`` gives every query the same inputs as decoding token by
token with evictions (a test drives the same policies token by token and compares).

Devices.  The model's tensors (queries, keys, values, the full-cache reference a pass resumes from, scores) stay
on the model's device; what a policy or a metric reads crosses to the host with ``.cpu()`` (a no-op on the CPU),
and every mask is built on the host (:mod:`realtrace.quality.schedule` writes it through a NumPy view) and moved
to the device with ``.to(device)``.

A replay starts where the schedule first drops something: the rows before are the full cache's, so the pass resumes
from the full-cache keys and values of those positions (a ``DynamicCache``, logical positions kept) and computes only
the rows after.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from kvcore.closed_loop import closed_loop_drops, observed_row_kernel, rule_for
from kvcore.engine import NMSimulator, policy_name, takes_model

from .schedule import drop_from_evictions, resident_bias

MASKED = "kvquality"
TRACE = "kvquality_trace"


def window_drop(n_keys: int, window: int | None) -> np.ndarray | None:
    """The model's own sliding-window mask as a drop vector over ``n_keys`` positions: key ``i`` leaves the window
    at step ``i + W`` (transformers' ``kv_idx > q_idx - sliding_window``); None for a full layer or a window that
    covers every key."""
    if window is None or window >= n_keys:
        return None
    return np.minimum(np.arange(n_keys, dtype=np.int64) + window, n_keys)


def outside_window(scores: np.ndarray, window: int | None) -> np.ndarray:
    """``scores`` ``(heads, T, T)`` with ``-inf`` where key ``i`` is outside query ``t``'s window (``i <= t - W``),
    in place: what the model's softmax gives weight 0."""
    T = scores.shape[1]
    if window is not None and window < T:
        gone = np.arange(T)[None, :] <= np.arange(T)[:, None] - window
        scores[:, gone] = -np.inf
    return scores


# ---- the engine-facing policy wrapper (pure numpy) --------------------------------------------------------------

class ModelObserved:
    """An NM policy whose observations are the model's attention under its own evictions.

    The engine hands ``observe(t, items, weights)`` the resident set ``R_t`` (:func:`run_head` feeds it rows that list
    exactly ``R_{t-1} U {t}``); this wrapper replaces ``weights`` by what the model computes for query ``t`` over
    ``R_t``: per query head ``h`` of the KV head, ``softmax_{i in R_t}(s_h[t, i])`` with ``s_h = q_h k^T * scale``
    (float32, as the model; the maximum is subtracted first), then the mean over the heads (the reduction of
    :mod:`realtrace.capture`): the complete row over ``R_t`` by default, exactly what the model computed (issue 27),
    or with ``top`` set its ``top`` largest entries (the capture's row format; the rest of the row is not seen).  These weights are renormalised over the resident set, unlike SPEC section 2's raw full-cache
    weights: in closed loop the evicted keys no longer exist, so nothing else is computed.  Every other call goes to
    the wrapped policy unchanged.  The weights come from :func:`kvcore.closed_loop.observed_row` (float64; with
    ``top``, among equal weights the smaller positions are kept), the one function the compiled closed loop
    observes through too."""

    def __init__(self, inner, scores: np.ndarray, top: int | None):
        self.inner, self.scores, self.top = inner, scores, top
        self.name = policy_name(inner)
        self.deterministic = bool(getattr(inner, "deterministic", True))
        self.resident = np.zeros(0, dtype=np.int64)

    def reset(self, capacity, rng, model="nm"):
        if takes_model(self.inner.reset):
            self.inner.reset(capacity, rng, model)
        else:
            self.inner.reset(capacity, rng)
        self.resident = np.zeros(0, dtype=np.int64)

    def admit(self, t, item, cost):
        self.inner.admit(t, item, cost)

    def hit(self, t, item, cost):
        self.inner.hit(t, item, cost)

    def evict(self, t, need, protected):
        return self.inner.evict(t, need, protected)

    def observe(self, t, items, weights):
        self.resident = items
        self.inner.observe(t, *observed_row_kernel(self.scores, t, items, 0 if self.top is None else self.top))


def run_head(policy, capacity: int, rng: np.random.Generator, scores: np.ndarray, top: int | None) -> np.ndarray:
    """Drive ``policy`` through :class:`~kvcore.engine.NMSimulator` over all ``T`` steps of one layer and KV head
    (``scores``: the group's scaled query-key products ``(heads, T, T)``); returns the drop vector.

    Each step's row lists ``R_{t-1} U {t}`` with weight 0: the engine admits token ``t``, takes the policy's victims
    (checking the contract), and hands the policy the survivors ``R_t``, whose weights :class:`ModelObserved`
    computes.  The simulator's own regret is therefore 0 and unused: regret is charged on the full-cache trace, the
    displaced mass by :class:`MaskedPass`.  The rows are built here (sorted, in range, finite), so they enter the
    simulator the way :func:`kvcore.engine.run_nm` feeds a validated trace, without the per-row input checks; the
    policy contract is checked on every step."""
    obs = ModelObserved(policy, scores, top)
    sim = NMSimulator(obs, capacity, rng, record=True)
    zeros = np.zeros(capacity + 1)
    T = scores.shape[1]
    for t in range(T):
        row = np.append(obs.resident, t)
        sim._serve(row, zeros[: row.size], 0.0)
    return drop_from_evictions(sim.evictions, T, f"policy {obs.name}")


@dataclass
class ClosedLoop:
    """An online policy inside the pass: one fresh instance per layer and KV head (``factory()``), cache
    ``capacity``, each with its own generator ``default_rng([seed, layer, head])``, observing the complete row over its
    resident set (``top=None``) or its ``top`` largest entries (:class:`ModelObserved`).

    When every instance is exactly a policy with a compiled rule (:func:`kvcore.closed_loop.rule_for`: FIFO,
    StreamingLLM, TOVA, H2O, ACC, LRU, any parameters; Scissorhands dropping one position per step; GD-A with the
    attention tie-break and unit or zero weights; Random and the Section 10 Default, drawing from each head's
    generator as its instance would) all KV heads of a layer run compiled, with the schedules of the Python path
    (:func:`run_head`; property-tested equal); any other policy, a subclass or a ``module:Class`` runs through
    :func:`run_head`.  ``compiled=False`` forces the Python path.  ``compiled_layers`` counts the layers the
    compiled path ran."""

    factory: Callable[[], Any]
    capacity: int
    seed: int = 0
    top: int | None = None
    compiled: bool = True
    drops: dict[int, np.ndarray] = field(default_factory=dict)
    compiled_layers: int = 0

    def reads_rows(self) -> bool:
        """Whether the pass must compute the layer's scaled products for this plan: not when every instance runs a
        compiled rule that reads no rows (FIFO, StreamingLLM, Random, LRU at threshold 0 on complete rows, the §10
        default while its floor and sinks cover the budget), which saves a ``(query heads, T, T)`` product per
        layer."""
        rule = rule_for(self.factory(), self.capacity) if self.compiled else None
        return rule is None or rule.reads_rows(self.top)

    def runs_compiled(self) -> bool:
        """Whether every layer runs one compiled rule (:meth:`layer_drops`): the instances are exactly a registered
        policy class with its methods unaltered, so the schedule is a function of the rows, the rule's code and
        parameters, the budget, the seed and ``top`` -- what a stored closed-loop run is keyed by
        (:func:`realtrace.quality.cache.closed_loop_key`)."""
        return self.compiled and rule_for(self.factory(), self.capacity) is not None

    def drops_without_rows(self, layers: int, heads: int, query_heads: int, T: int) -> np.ndarray:
        """``(layers, heads, T)``: every layer's drops before any pass, for a plan that reads no rows
        (:meth:`reads_rows` false): the same calls, generators and schedule as inside a pass over ``T`` tokens."""
        empty = np.empty((query_heads, T, 0), np.float32)
        return np.stack([self.layer_drops(layer, heads, empty) for layer in range(layers)])

    def layer_drops(self, layer: int, heads: int, scores: np.ndarray) -> np.ndarray:
        """``scores``: the layer's scaled products ``(query heads, T, T)``, KV head ``g`` served by the query heads
        ``g*rep .. g*rep+rep-1`` (``(query heads, T, 0)`` when :meth:`reads_rows` said none are needed); the
        layer's drops ``(heads, T)``."""
        rep = scores.shape[0] // heads
        instances = [self.factory() for _ in range(heads)]
        rules = {rule_for(p, self.capacity) for p in instances} if self.compiled else {None}
        rngs = [np.random.default_rng([self.seed, layer, g]) for g in range(heads)]
        if None not in rules and len(rules) == 1:
            out = closed_loop_drops(scores, heads, self.capacity, self.top, rules.pop(), rngs=rngs)
            self.compiled_layers += 1
        elif scores.shape[2] == 0:
            raise RuntimeError(f"closed loop, layer {layer}: the factory's instances differ from the first one "
                               f"(which reads no rows), so no scores were computed for them")
        else:
            out = np.stack([run_head(p, self.capacity, rngs[g], scores[g * rep:(g + 1) * rep], self.top)
                            for g, p in enumerate(instances)])
        self.drops[layer] = out
        return out


@dataclass
class OpenLoop:
    """A schedule fixed before the pass: ``drops`` of shape ``(layers, KV heads, T)``."""

    drops: np.ndarray

    def reads_rows(self) -> bool:
        return False

    def layer_drops(self, layer: int, heads: int, scores: np.ndarray) -> np.ndarray:
        return self.drops[layer]


# ---- the passes (torch) -----------------------------------------------------------------------------------------

_ACTIVE: list = []  # the pass the registered attention functions serve (one at a time)


# The scale is read from the module: importing kvpress re-wraps every registered attention function and passes
# ``dropout`` positionally, where a ``scaling`` parameter would receive it.
def _masked_attention(module, query, key, value, *args, **kwargs):
    return _ACTIVE[0].attend(module.layer_idx, query, key, value, module.scaling)


def _trace_attention(module, query, key, value, *args, **kwargs):
    return _ACTIVE[0].attend(module, query, key, value, module.scaling)


def register(transformers) -> None:
    """Make ``attn_implementation`` ``kvquality`` and ``kvquality_trace`` known to transformers (idempotent)."""
    transformers.AttentionInterface.register(MASKED, _masked_attention)
    transformers.AttentionInterface.register(TRACE, _trace_attention)


class _Active:
    """``with _Active(lm, impl, pass_)``: the model runs with attention implementation ``impl`` served by ``pass_``,
    and with the one it had before afterwards (left switched, a later plain forward -- a press run alone -- would call
    a pass that is no longer there)."""

    def __init__(self, lm, impl: str, pass_):
        self.lm, self.impl, self.pass_ = lm, impl, pass_
        self.previous = None

    def __enter__(self):
        if _ACTIVE:
            raise RuntimeError("a quality pass is already running in this process")
        register(self.lm.transformers)
        self.previous = self.lm.model.config._attn_implementation
        self.lm.model.set_attn_implementation(self.impl)
        _ACTIVE.append(self.pass_)
        return self.pass_

    def __exit__(self, *exc):
        _ACTIVE.clear()
        self.lm.model.set_attn_implementation(self.previous)


def causal_bias(torch, start: int, n_keys: int):
    """``(n_keys - start, n_keys)`` additive mask of queries ``start ..`` over all keys, on the host (a caller
    writes through its NumPy view, then moves it to the model's device): 0 where ``key <= query``, ``-inf`` above
    (queries sit at the end of the keys, as in a prefill resumed from a cache)."""
    t = torch.arange(start, n_keys, device="cpu").unsqueeze(1)
    return torch.zeros(n_keys - start, n_keys, device="cpu").masked_fill(
        torch.arange(n_keys, device="cpu").unsqueeze(0) > t, float("-inf"))


# Tests only (never a user option): run :func:`plain_attention` on the CPU too, to check it against the fused CPU
# kernel it replaces on other devices.
_PLAIN_ON_CPU = False


def plain_attention(torch, query, key, value, causal: bool, mask, scale: float):
    """``(O, L)``: ``O = softmax(S) V`` and ``L = log sum_j exp(S_j)`` per query row, ``S = Q K^T scale + mask``
    (plus ``-inf`` above the diagonal, aligned top-left, when ``causal``), in plain torch ops on the inputs'
    device -- the two outputs of the fused CPU kernel, in its shapes ``(1, heads, rows, d)`` and ``(1, heads,
    rows)``, computed as it does: with ``M`` the row's largest score, ``w = exp(S - M)``, ``O = (w V) / sum w`` and
    ``L = M + log sum w``.  A row whose every key is masked gets ``O = 0`` and ``L = 0``, as from the fused kernel
    (the replay overwrites that ``L`` with ``-inf``).  It holds the ``(heads, rows, keys)`` scores the fused kernel
    avoids."""
    s = torch.matmul(query, key.transpose(-2, -1)).mul_(scale)
    if causal:
        s.masked_fill_(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    if mask is not None:
        s.add_(mask)
    peak = s.amax(dim=-1, keepdim=True)
    peak.masked_fill_(peak == float("-inf"), 0.0)  # a row attending nothing: every w is exp(-inf) = 0
    w = s.sub_(peak).exp_()
    total = w.sum(dim=-1, keepdim=True)
    total.masked_fill_(total == 0.0, 1.0)  # ... so O = 0 / 1 and L = 0 + log 1
    return torch.matmul(w, value).div_(total), (peak + total.log()).squeeze(-1)


SCORE_BLOCK = 256  # query rows per product in causal_scores


def causal_scores(torch, query, key, scaling: float):
    """``(heads, T, T)`` float32: ``query key^T * scaling`` (``query``, ``key``: ``(heads, T, d)``) at and below
    the diagonal, computed in blocks of ``SCORE_BLOCK`` to ``2 SCORE_BLOCK - 1`` query rows against the keys up to
    the block's last row, each written in place into one tensor and scaled there: about half the products of the
    full square, and no second ``(heads, T, T)`` tensor.  Above the diagonal the tensor is left unset: a policy
    observes positions ``<= t`` only (its resident set).  Each entry is the same BLAS dot product of ``d`` terms as
    in the full product (a test compares the two bit for bit); measured at T = 1,996, 9 heads, one thread: 0.10 s
    against 0.29 s."""
    T = query.shape[1]
    out = torch.empty(query.shape[0], T, T, device=query.device)
    kt = key.transpose(1, 2)
    r0 = 0
    while r0 < T:
        # no block shorter than SCORE_BLOCK rows: a product of a few rows takes another BLAS path (a one-row block
        # was seen to round differently from the full product)
        r1 = T if T - r0 < 2 * SCORE_BLOCK else r0 + SCORE_BLOCK
        block = out[:, r0:r1, :r1]
        torch.matmul(query[:, r0:r1], kt[:, :, :r1], out=block)
        block.mul_(scaling)
        r0 = r1
    return out


@dataclass
class LayerRecord:
    """Per layer, KV head and query step ``(layers, KV heads, T)``: the attention-output error and the displaced mass
    (module docstring; 0 on rows the pass did not recompute)."""

    error: np.ndarray
    displaced: np.ndarray


class MaskedPass:
    """The replay pass (module docstring).  ``plan`` gives each layer's drop vectors (:class:`OpenLoop`,
    :class:`ClosedLoop`, or None for the full cache); ``start``: the first row computed (the earlier ones come from
    ``prefix``, the full-cache pass's queries, keys and values per layer, on ``device``, the model's: a
    ``torch.device`` or its name);
    ``keep_qkv``: store this pass's queries, keys and values for later passes to resume from."""

    def __init__(self, torch, plan, layers: int, heads: int, T: int, start: int = 0,
                 prefix: dict | None = None, keep_qkv: bool = False, windows: tuple | None = None,
                 device="cpu"):
        self.torch, self.plan, self.start, self.prefix, self.T = torch, plan, start, prefix, T
        self.device = torch.device(device)
        self.windows = windows or (None,) * layers  # per layer: None (full causal) or the sliding window W
        self.window_bias: dict = {}  # W -> the additive mask of the model's own window, rows ``first ..``
        self.keep_qkv = {} if keep_qkv else None
        self.record = LayerRecord(np.zeros((layers, heads, T), np.float32), np.zeros((layers, heads, T), np.float32))
        # The fused kernel skips the keys above the diagonal only under ``is_causal``, whose mask is aligned top-left:
        # for that the queries must start at row 0 (the rows before ``start`` from the full-cache pass), ~T^2 / 2
        # products; rows from ``start`` under an explicit causal mask cost (T - start) T.  The cheaper is taken (a
        # prefill press's pass covers only the answer rows); the two compute the same numbers, bit for bit
        # (measured: the online softmax adds exact zeros for masked keys either way).
        self.first = 0 if 2 * start < T else start
        self.causal = causal_bias(torch, start, T).to(self.device) if self.first else None
        self.bias = None  # the additive resident mask of rows ``first ..`` on the host, rewritten per KV head
        self.fused = self.device.type == "cpu" and not _PLAIN_ON_CPU

    def _attention(self, qg, kg, vg, mask, scaling):
        """One attention call over the queries from row ``first`` (causal from row 0, else ``mask`` holds the
        causal part): its output and log-sum-exp for the rows from ``start`` (module docstring: the fused CPU
        kernel, or :func:`plain_attention`)."""
        cut = self.start - self.first
        if self.fused:
            both = self.torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                qg, kg, vg, 0.0, self.first == 0, attn_mask=mask, scale=scaling)
        else:
            both = plain_attention(self.torch, qg, kg, vg, self.first == 0, mask, scaling)
        return (x[:, :, cut:] for x in both)

    def attend(self, layer: int, query, key, value, scaling):
        torch, s, first = self.torch, self.start, self.first
        n_keys, heads = key.shape[2], key.shape[1]
        rep = query.shape[1] // heads
        if self.keep_qkv is not None:
            self.keep_qkv[layer] = (query, key, value)
        reads = self.plan is not None and self.plan.reads_rows()
        # the scores and the causal kernel take every query from row 0
        q_all = torch.cat([self.prefix[layer][0][:, :, :s], query], dim=2) if s and (reads or not first) else query
        drops = None
        if self.plan is not None:
            if reads:
                # the closed loop's observations come from every query head's scaled products q k^T, all rows
                scores = outside_window(causal_scores(torch, q_all[0], key[0].repeat_interleave(rep, dim=0),
                                                      scaling).cpu().numpy(), self.windows[layer])
            else:
                scores = np.empty((query.shape[1], n_keys, 0), np.float32)
            drops = self.plan.layer_drops(layer, heads, scores)
        q_rows = q_all if first == 0 else query
        own = window_drop(n_keys, self.windows[layer])  # the model's own mask (None: causal alone)
        own_bias = self.causal if own is None else self._window_bias(own)
        outs = []
        for g in range(heads):
            qg = q_rows[:, g * rep:(g + 1) * rep]
            kg = key[:, g:g + 1].expand(-1, rep, -1, -1)
            vg = value[:, g:g + 1].expand(-1, rep, -1, -1)
            full, lse = self._attention(qg, kg, vg, own_bias, scaling)
            drop = None if drops is None else np.ascontiguousarray(
                drops[g] if own is None else np.minimum(drops[g], own), dtype=np.int64)
            if drop is None or (drop >= n_keys).all() or (own is not None and (drop == own).all()):
                outs.append(full)
                continue
            if self.bias is None:
                self.bias = torch.empty(n_keys - first, n_keys, device="cpu")
            empty = resident_bias(drop, first, self.bias.numpy())
            out, lse_r = self._attention(qg, kg, vg, self.bias.to(self.device), scaling)
            # an empty resident set (a trace the coupled or static optimum starves) attends to nothing: the kernel
            # returns output 0 and log-sum-exp 0 there, but every key is displaced (L_R = -inf, m = 1)
            lse_r = lse_r.masked_fill(torch.from_numpy(empty[s - first:]).to(self.device), float("-inf"))
            diff = (out - full)[0].permute(1, 0, 2).reshape(n_keys - s, -1)
            ref = full[0].permute(1, 0, 2).reshape(n_keys - s, -1)
            self.record.error[layer, g, s:] = (diff.norm(dim=1) / ref.norm(dim=1)).cpu().numpy()
            displaced = (1.0 - torch.exp(lse_r - lse)).clamp_(min=0.0).mean(dim=1)[0]
            self.record.displaced[layer, g, s:] = displaced.cpu().numpy()
            outs.append(out)
        return torch.cat(outs, dim=1).transpose(1, 2).contiguous(), None

    def _window_bias(self, own: np.ndarray):
        """The additive mask of the model's own window (drop vector ``own``), rows ``first ..``, made on the host
        once per window size and kept on the device."""
        W = int(own[0])
        if W not in self.window_bias:
            bias = self.torch.empty(own.size - self.first, own.size, device="cpu")
            resident_bias(own, self.first, bias.numpy())
            self.window_bias[W] = bias.to(self.device)
        return self.window_bias[W]


def replay(lm, ids: list[int], plan, layers: int, heads: int, start: int = 0, prefix: dict | None = None,
           keep_qkv: bool = False, windows: tuple | None = None):
    """One :class:`MaskedPass` over ``ids`` from row ``start`` (module docstring); returns ``(pass, hidden)`` with
    ``hidden`` the final hidden states of rows ``start ..`` (``(rows, hidden size)``, before the LM head), on the
    model's device; ``prefix``'s tensors must be there too.
    ``windows``: each layer's sliding window (default: the model's own, :attr:`realtrace.model.LoadedModel.geometry`;
    a test passes others to see a wrong mask fail)."""
    torch = lm.torch
    T = len(ids)
    windows = lm.geometry.windows if windows is None else windows
    pass_ = MaskedPass(torch, plan, layers, heads, T, start, prefix, keep_qkv, windows, lm.model.device)
    cache = None
    if start > 0:
        cache = lm.new_cache()
        for layer in range(layers):
            _, k, v = prefix[layer]
            cache.update(k[:, :, :start], v[:, :, :start], layer)
    with _Active(lm, MASKED, pass_):
        out = lm.forward(ids[start:], cache, list(range(start, T)) if start else None, body_only=True)
    return pass_, out.last_hidden_state[0]


__all__ = ["ClosedLoop", "LayerRecord", "MASKED", "MaskedPass", "ModelObserved", "OpenLoop", "TRACE", "causal_bias",
           "outside_window", "plain_attention", "register", "replay", "run_head", "window_drop"]

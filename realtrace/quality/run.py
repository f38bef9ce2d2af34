"""One quality study: eviction schedules replayed in a model (``--model``, SmolLM2-135M-Instruct by default;
:mod:`realtrace.model`) on retrieval prompts, every output metric beside the regret each schedule is charged on the
complete attention rows of the full cache (issues 20, 27).

What runs, per prompt (one task of :mod:`kvcore.tasks`, or one per group of its budgets on several workers,
:mod:`realtrace.quality.groups`; tasks run serially, on a local cluster or on ``--scheduler``):

1. with presses, the eager prefill (:func:`realtrace.quality.prefill.trace_pass`): every bridged prefill press's
   choice at every budget on the same prefill;
2. the full cache replayed (:func:`~realtrace.quality.replay.replay` with nothing dropped): the reference logits and
   the full-cache queries, keys and values every later pass resumes from, and from which the complete attention row
   of every layer, KV head and step is computed when needed (:mod:`realtrace.quality.exact`);
   (1 and 2 come from the on-disk cache when it holds them, :mod:`realtrace.quality.cache`: the choices of 1 per
   press and budget, the queries, keys, values and final hidden states of 2; the log-probabilities are recomputed
   from those hidden states);
3. per configuration and budget ``K``, one replay (``OPT`` is added unless ``no_opt``, and ``OPT:static`` beside
   ``OPT:coupled``; an optimum is solved at every
   budget of the prompt on its first use, each head's trace built once; runs whose schedule is known before the
   pass and equal, from the same first row, share one pass):

   * ``OPT`` -- the exact NM optimum of each layer's and KV head's complete rows at ``K``, made lazy (it holds
     ``min(t + 1, K)`` positions at every step; :func:`realtrace.quality.exact.lazy_optimum`), open loop; with
     ``opt_top`` solved on the top ``opt_top`` entries per row instead, its distance from the optimum bounded and
     reported (``opt_gap``); ``OPT:static`` and ``OPT:coupled`` spend the same total memory ``K x layers x KV
     heads`` split once by the exact static allocation, or shared by all traces at every step (the dynamic coupled
     optimum; :mod:`realtrace.quality.optima`);
   * ``OPT:VARIANT`` -- another optimum of :mod:`realtrace.quality.optima` (``OPT:value``: of the ``value`` cost
     below), lazy, open loop, with ``OPT`` beside it;
   * a policy (a registered NM policy or ``module:Class``) -- closed loop by default (one instance per layer and KV
     head inside the pass, :class:`~realtrace.quality.replay.ClosedLoop`, observing the complete row the model
     computes over its resident set, or its ``top`` largest entries), or open loop (``kvcore.engine.run_nm`` on
     the full-cache rows, complete or cut to ``top`` entries);
   * ``press:NAME`` -- a kvpress prefill press keeping ``K`` prompt positions (ratio from
     :func:`realtrace.press.registry.ratio_for_budget`) and then every continuation token, as kvpress's pipeline does (so its
     cache holds up to ``K`` + answer length positions, the policies' at most ``K``); its choice is made on the
     full-cache prefill, the same in the real press run (kvpress compresses after each layer's attention), and
     replayed as masks;
   * ``file:PATH`` -- a saved schedule (:mod:`realtrace.quality.schedule`; an ``.npz`` with one array ``drop`` per
     prompt, named ``drop_<prompt>``, shape ``(layers, KV heads, T)``), open loop, checked to hold at most ``K``.

What is reported per run (definitions in :mod:`realtrace.quality.metrics` and :mod:`realtrace.quality.replay`):

* ``regret`` -- the schedule's NM regret (paper Eq. 4) on the complete full-cache rows
  (:func:`realtrace.quality.exact.charge_many`, every run of the prompt on each head's rows computed once: nothing
  unattributed), per step, mean over traces;
* ``max_resident`` / ``max_resident_total`` -- the largest cache of any one layer and KV head, and the largest
  number of positions held by all of them together at one step (``OPT:static`` and ``OPT:coupled`` spend the
  total ``K x layers x KV heads`` of ``OPT`` at ``K`` unevenly: one trace may hold more than ``K``);
* ``regret_sum`` -- the regret summed over every layer, KV head and step (all rows, not only the stream), and for
  an optimum ``opt_lower``, the optimum of the rows it was solved on summed likewise (``regret_sum`` minus the
  summed gap): a lower bound of the exact optimum of that kind, so the optima compare at equal total memory;
* ``opt_gap`` (the optimum only) -- its complete-row cost minus the optimum of the rows it was solved on, per step
  (``/ T``), mean over traces: 0 up to float rounding on complete rows (the default), an upper bound of its distance
  from the exact optimum with ``opt_top``;
* ``prompt_kept`` -- the memory a schedule spends on the prompt: prompt positions resident at the first answer
  step, mean over layers and KV heads (a prefill press: what it kept, ``K`` for a uniform one, the same total when
  its per-layer or per-head budgets average ``K``; the lazy optimum: ``K - 1``, the answer's first token takes one);
* ``value`` -- its value-weighted cost on the same rows: each lost ``a[t, i]`` times ``||v_i - o_t||``, ``o_t`` the
  KV head's full-cache output (paper §3, §9, :mod:`realtrace.quality.value_cost`), per step, mean over traces (the
  optimum's ``opt_gap`` is in the units of the cost its variant minimizes: mass for ``OPT``, value cost for
  ``OPT:value``);
* ``error`` and ``displaced`` -- the attention-output error and the displaced mass of each layer and KV head, mean
  over the *stream* rows;
* ``kl``, ``dnll``, ``top1`` -- per row against the full cache on the same tokens, averaged over two scopes:
  ``stream`` (rows ``K .. T-2``: every row after the budget binds; nothing can be dropped earlier) and ``answer``
  (the rows that predict the answer tokens);
* ``accuracy`` -- the share of prompts answered right (teacher-forced argmax = every answer token) among those the
  full cache answers right (the positive control; the others are listed in ``excluded``, and with ``answered_only``
  get no runs: every mean is then over the answered prompts).

Means are over prompts (each prompt weighs the same), then over the traces of a layer group
(:func:`realtrace.geometry.layer_groups`: thirds of the layers; 0-9, 10-19, 20-29 of 30) or of all layers.
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from kvcore.errors import ParameterError
from kvcore.numbers import integer

from . import prompts as qprompts
from .inputs import PromptIds, check_budgets, read_prompts_file, tokenize_prompts
from .groups import merged_prompt, task_groups
from .aggregate import FULL, LAYERED, SCALARS, SCOPES, SUMS, aggregate, full_cache_run  # noqa: F401 (re-exported)
from .charges import Charges, add_charges, charged
from .logits import FullLogp, block_rows, logp_blocks
from .metrics import StepMetrics, answer_right, scope_mean, step_metrics
from . import stored
from .cache import Store, cache_dir as checked_cache_dir, full_cache, model_identity, press_drops, reference_key
from .configs import KINDS, MODES, Config, all_configs, config_label, parse_config  # noqa: F401 (re-exported)
from .optima import OPT
from .schedule import (ScheduleError, check_capacity, check_schedule, check_schedule_file, drop_from_evictions,
                       first_drop, read_schedule_file, resident_counts)



# ---- one task: one prompt, its (budget, config) pairs ---------------------------------------------------------

_MODEL: dict[tuple, object] = {}


def worker_model(threads: int, cache: str | Path | None = None, model: str | None = None, device: str = "cpu"):
    """The model (``--model`` and ``--device``; default SmolLM2 on the CPU), loaded once per process (a task never
    installs it: the command did, before dispatching), from its de-quantized copy in the ``cache`` directory
    (:meth:`realtrace.quality.cache.Store.model_copy`) if there is one."""
    from ..model import resolve_model

    if (threads, source := resolve_model(model, device)) not in _MODEL:
        _load(threads, Store(cache).model_copy(model=source), source)
    return _MODEL[threads, source]


def preload_model(cache: str | Path, threads: int = 1) -> bool:
    """Load the model into :func:`worker_model`'s slot for ``threads`` from its de-quantized copy in ``cache`` when
    the copy is there and passes its check (never made here); True when the slot holds a model.  For a process that
    forks workers (:mod:`paper_check.step_host`): each then starts with the model in memory instead of reading and
    checking the copy again (about 2.8 s of CPU each)."""
    from ..model import resolve_model

    if (threads, source := resolve_model()) not in _MODEL:
        copy = Store(cache).model_copy(make=False)
        if copy is None:
            return False
        _load(threads, copy, source)
    return True


def _load(threads: int, copy: Path | None, source) -> None:
    from ..model import load_model

    _MODEL.clear()  # one model per process: a task's thread count and model are the command's
    _MODEL[threads, source] = load_model(install=False, threads=threads, converted=copy, model=source)


class _Reference:
    """The full cache on one prompt: its complete attention rows (:meth:`rows`), press schedules, logits and the
    keys/values passes resume from."""

    def __init__(self, lm, prompt: PromptIds, budgets: tuple[int, ...], presses: list[str], store=None):
        self.store = store = store if store is not None else Store(None)
        geo = lm.geometry
        self.L, self.H, self.query_heads, self.windows = geo.layers, geo.kv_heads, geo.query_heads, geo.windows
        self.prompt, ids, self.budgets = prompt, list(prompt.ids), budgets
        self.T = len(ids)
        self.torch, self.scaling = lm.torch, lm.model.model.layers[0].self_attn.scaling
        # both from the on-disk cache when it holds them (:mod:`realtrace.quality.cache`), else computed and stored
        self.press_drops, self.presses_cached = press_drops(lm, prompt, budgets, presses, store)
        self.key = reference_key(model_identity(lm), ids)  # the optima, passes and runs stored for it extend it
        self.qkv, hidden, self.status = full_cache(lm, prompt, store, self.key)
        self.optima_cached = self.passes_cached = self.runs_cached = 0
        self.targets = np.asarray(ids[1:], dtype=np.int64)
        # every row: the exact optimum may drop a token its trace never charges before the cache is full
        self.logp = FullLogp(lm, hidden, self.T - 1, self.targets)
        self.argmax = self.logp.argmax
        a0 = prompt.n_prompt - 1
        self.right = answer_right(self.argmax[a0:], self.targets[a0:])
        self.nll_answer = float(-self.logp.picked[a0:].mean())

    def rows(self, layer: int, g: int):
        """The complete head-mean attention rows ``(T, T)`` of layer ``layer``, KV head ``g`` in the full cache
        (:func:`realtrace.quality.exact.head_rows`, computed on the model's device; recomputed on each call:
        SmolLM2's 90 at T = 2,000 would take 2.9 GB), on the host, where the optima and charges read them."""
        from .exact import head_rows

        query, key, _ = self.qkv[layer]
        return head_rows(self.torch, query, key, g, self.scaling, self.windows[layer]).cpu()

    def values(self, layer: int, g: int) -> np.ndarray:
        """The value vectors ``(T, head dim)`` of layer ``layer``, KV head ``g`` in the full cache, float64."""
        return self.qkv[layer][2][0, g].cpu().to(self.torch.float64).numpy()

    def trace(self, layer: int, g: int, top: int | None):
        """:meth:`rows` as a trace, complete (``top=None``) or cut to ``top`` entries per row."""
        from .exact import rows_trace

        return rows_trace(self.rows(layer, g), top, f"{self.prompt.name} L{layer:02d} kv{g}")


def _schedule(ref: _Reference, cfg: Config, k: int, seed: int, top: int | None, opt_top: int | None, memo: dict
              ) -> tuple[np.ndarray | None, object, np.ndarray | None]:
    """``(drops, plan, gap)`` of one config at budget ``k``: drops for open loop, a closed-loop plan otherwise; for
    the optimum ``gap`` ``(L, H)`` = its complete-row cost minus the optimum of the rows it was solved on (0 up to
    rounding on complete rows, :func:`realtrace.quality.exact.lazy_optimum`).  ``memo`` (one per prompt) keeps what
    serves several runs: an optimum is solved (or read from the on-disk cache) at every budget of the prompt on its
    first call, a file read once."""
    from .replay import ClosedLoop

    T = ref.T
    if cfg.kind == "opt":
        if (cfg.spec, opt_top) not in memo:
            memo[cfg.spec, opt_top] = stored.optima(ref, cfg.spec, opt_top,
                                                    notes=memo.setdefault(("notes", cfg.spec, opt_top), {}))
        drops, gap = memo[cfg.spec, opt_top][k]
        return drops, None, gap
    if cfg.kind == "press":
        return ref.press_drops[f"{cfg.spec}@{k}"], None, None
    if cfg.kind == "file":
        drops = _file_schedule(memo, cfg.spec, ref)
        for layer in range(ref.L):
            for g in range(ref.H):
                check_capacity(drops[layer, g], k, f"{cfg.spec}: {ref.prompt.name} layer {layer} KV head {g}")
        return drops, None, None
    import policies

    factory = policies.resolve(cfg.spec, dict(cfg.params) or None)
    if cfg.mode == "closed":
        return None, ClosedLoop(factory, k, seed, top), None
    from kvcore.engine import run_nm

    return np.stack([np.stack([drop_from_evictions(
        run_nm(factory(), ref.trace(layer, g, top), k, seed=np.random.default_rng([seed, layer, g]),
               record=True).evictions, T) for g in range(ref.H)]) for layer in range(ref.L)]), None, None


def _file_schedule(memo: dict, path: str, ref: _Reference) -> np.ndarray:
    if path not in memo:
        memo[path] = read_schedule_file(path)
    key = f"drop_{ref.prompt.name}"
    if key not in memo[path]:
        raise ScheduleError(f"{path}: no array {key} (saved for: {', '.join(sorted(memo[path])) or 'nothing'})")
    return check_schedule(memo[path][key], ref.L, ref.H, ref.T, f"{path}:{key}")


def _replayed(lm, ref: _Reference, drops: np.ndarray | None, plan, start: int) -> tuple:
    """The pass of one schedule (``drops`` open loop, or the closed-loop ``plan``) from row ``start`` and its per-row
    metrics: ``(kl, dnll, top1, argmax, error, displaced)``."""
    from .replay import OpenLoop, replay

    T = ref.T
    kl, dnll = np.zeros(T - 1), np.zeros(T - 1)
    top1, argmax = np.ones(T - 1, dtype=bool), ref.argmax.copy()
    error = displaced = np.zeros((ref.L, ref.H, T), np.float32)
    if start < T:
        pass_, hidden = replay(lm, list(ref.prompt.ids), plan if plan is not None else OpenLoop(drops), ref.L, ref.H,
                               start, ref.qkv)
        error, displaced = pass_.record.error, pass_.record.displaced
    if start < T - 1:  # row T - 1 predicts nothing: a first drop there (a press on a one-token answer) changes none
        m = StepMetrics.concat([step_metrics(ref.logp.block(a, a + b.shape[0]), b, ref.targets[a:a + b.shape[0]])
                                for a, b in zip(range(start, T - 1, block_rows(lm)),
                                                logp_blocks(lm, hidden, start, T - 1, start))])
        kl[start:], dnll[start:], top1[start:], argmax[start:] = m.kl, m.dnll, m.top1, m.argmax
    return kl, dnll, top1, argmax, error, displaced


def _one_run(lm, ref: _Reference, cfg: Config, k: int, seed: int, top: int | None, opt_top: int | None, memo: dict,
             steps: bool) -> tuple[dict, np.ndarray, np.ndarray | None]:
    """One (config, budget): its schedule replayed and every output metric; returns ``(run, drops, gap)`` -- the
    charges on the full-cache rows are added for all runs of the prompt at once (:func:`add_charges`)."""
    drops, plan, gap = _schedule(ref, cfg, k, seed, top, opt_top, memo)
    T, n_prompt = ref.T, ref.prompt.n_prompt
    start = k if plan is not None else first_drop(drops)
    if plan is not None and not plan.reads_rows():  # a schedule the pass cannot change: known now
        drops, plan = plan.drops_without_rows(ref.L, ref.H, ref.query_heads, T), None
    # a pass is a function of its schedule and first row: runs of a prompt that replay the same share one
    # (FIFO and LRU at threshold 0 on complete rows keep the same positions)
    key = None if plan is not None else \
        ("pass", start, hashlib.sha256(np.ascontiguousarray(drops, dtype=np.int64)).hexdigest())
    # a pass from the on-disk cache when an earlier run made the same (module realtrace.quality.stored)
    if key in memo:
        kl, dnll, top1, argmax, error, displaced = memo[key]
    elif key is None:
        kl, dnll, top1, argmax, error, displaced, drops = stored.closed_loop_run(
            ref, plan, cfg, k, seed, top, lambda: _replayed(lm, ref, None, plan, start))
    else:
        memo[key] = kl, dnll, top1, argmax, error, displaced = stored.open_loop_pass(
            ref, drops, start, lambda: _replayed(lm, ref, drops, None, start))
    a0 = n_prompt - 1
    counts = np.stack([resident_counts(d) for d in drops.reshape(-1, T)])
    out = {"config": cfg.name, "kind": cfg.kind, "mode": cfg.mode, "budget": k,
           "max_resident": int(counts.max()), "max_resident_total": int(counts.sum(axis=0).max()),
           "prompt_kept": float((drops[:, :, :n_prompt] > n_prompt).sum(axis=2).mean()),
           "right": answer_right(argmax[a0:], ref.targets[a0:]),
           "opt_gap": None if gap is None else float(gap.mean() / T)}
    certificate = memo.get(("notes", cfg.spec, opt_top), {}).get(k, {}).get("certificate")
    if certificate is not None:
        out["opt_certificate"] = certificate
    for scope, r0 in (("stream", k), ("answer", a0)):
        for name, per_step in (("error", error), ("displaced", displaced)):
            out[f"{name}_{scope}"] = per_step[:, :, r0:T - 1].mean(axis=2)
        for name, per_row in (("kl", kl), ("dnll", dnll), ("top1", top1)):
            out[f"{name}_{scope}"] = scope_mean(per_row, r0, T - 1)
    if steps:
        out["steps"] = {"kl": kl.astype(np.float32), "dnll": dnll.astype(np.float32), "top1": top1,
                        "error": error, "displaced": displaced, "drop": drops.astype(np.int32)}
    return out, drops, gap


def run_task(task: dict) -> dict:
    """One prompt: the reference, then every (budget, config) of ``task["pairs"]`` (module docstring); the runs in
    that order.  ``task`` holds everything it needs (prompt ids, budgets, configs and the pairs of their indices
    that run, seed, top, threads), so it runs the same anywhere."""
    lm = worker_model(task["threads"], task["cache"], task["model"], task["device"])
    prompt = PromptIds(**task["prompt"])
    configs = [Config(**{**c, "params": tuple(map(tuple, c["params"]))}) for c in task["configs"]]
    budgets = tuple(task["budgets"])
    t0 = time.monotonic()
    presses = [c.spec for c in configs if c.kind == "press"]
    ref = _Reference(lm, prompt, budgets, presses, Store(task["cache"]))
    if task["progress"]:
        sys.stderr.write(f"  {prompt.name}: full-cache reference {ref.status}, {ref.presses_cached} of "
                         f"{len(presses) * len(budgets)} press choices cached ({time.monotonic() - t0:.0f} s)\n")
    memo: dict = {}
    # the positive control, decided first
    pairs = [(k, configs[c]) for k, c in task["pairs"]] if ref.right or not task["answered_only"] else []
    mass = [cfg.kind == "opt" and cfg.spec == OPT for _, cfg in pairs]
    done: list = [None] * len(pairs)
    charges = Charges(ref, [k for k, _ in pairs])

    def charge_head(layer: int, g: int, rows: np.ndarray, solved: dict) -> None:
        if all(k in solved for (k, _), m in zip(pairs, mass) if m):
            charges.add_head(layer, g, rows, np.stack([solved[k] if m else done[r][1][layer, g]
                                                       for r, ((k, _), m) in enumerate(zip(pairs, mass))]))

    # the mass optimum's runs last: when it is solved here, every other schedule is known by then, and each head's
    # complete rows serve its solve and all the charges (made once, not twice)
    for j in sorted(range(len(pairs)), key=lambda j: mass[j]):
        k, cfg = pairs[j]
        if mass[j] and (OPT, task["opt_top"]) not in memo:
            memo[OPT, task["opt_top"]] = stored.optima(ref, OPT, task["opt_top"], charge_head)
        done[j] = _one_run(lm, ref, cfg, k, task["seed"], task["top"], task["opt_top"], memo, task["steps"])
        if task["progress"]:
            sys.stderr.write(f"  {prompt.name}: {cfg.name} at K = {k} ({time.monotonic() - t0:.0f} s)\n")
            sys.stderr.flush()
    runs = [out for out, _, _ in done]
    if done:
        out_charges = charges.out if charges.complete else charged(ref, [drops for _, drops, _ in done],
                                                                   [k for k, _ in pairs])
        for (out, _, gap), run_charges in zip(done, out_charges):
            add_charges(out, run_charges, gap)
    if task["progress"]:
        sys.stderr.write(f"  {prompt.name}: {len(runs)} runs charged on the full-cache rows; read from the cache: "
                         f"{ref.optima_cached} optima, {ref.passes_cached} open-loop passes, {ref.runs_cached} "
                         f"closed-loop runs ({time.monotonic() - t0:.0f} s)\n")
    info = {"name": prompt.name, "what": prompt.what, "tokens": prompt.T, "prompt_tokens": prompt.n_prompt,
            "answer_tokens": prompt.T - prompt.n_prompt, "sha256": prompt.sha256,
            "full_cache_right": ref.right, "nll_answer_full": ref.nll_answer,
            "cache": {"reference": ref.status, "press_choices_cached": ref.presses_cached,
                      "optima_cached": ref.optima_cached, "passes_cached": ref.passes_cached,
                      "closed_loop_runs_cached": ref.runs_cached}}
    return {"prompt": info, "runs": runs}


# ---- the study -----------------------------------------------------------------------------------------------------

def evaluate(configs: list[str | Config], budgets: tuple[int, ...] | list[int], prompts: list[str] | None = None,
             mode: str = "closed", seed: int = 0, top: int | None = None, workers: int | None = None,
             scheduler: str | None = None, threads: int = 1, steps: bool = False, progress: bool = True,
             say=None, opt_top: int | None = None, prompts_file: str | None = None, no_opt: bool = False,
             cache_dir: str | None = None, no_cache: bool = False, answered_only: bool = False, model=None,
             device: str = "cpu") -> dict:
    """The quality study (module docstring) as a JSON-able dict: ``settings``, ``prompts`` (with the positive
    control), ``excluded``, and ``runs`` -- one per (config, budget), the exact optimum at every budget (unless
    ``no_opt``) and the full cache included -- each with ``total``, ``groups`` (early/middle/late), ``layers`` and
    ``prompts``.  The full-cache reference comes from the on-disk cache (``cache_dir``, else the environment's or the
    default one; ``no_cache``: none) where it holds it (:mod:`realtrace.quality.cache`).  With
    ``steps=True`` every run also carries ``steps`` arrays per prompt (numpy: per-row ``kl``, ``dnll``, ``top1``;
    per layer/KV head/row ``error``, ``displaced``; the schedule ``drop``), which :func:`write` saves as ``.npz``.
    ``model``, ``device``: ``--model`` and ``--device`` (:func:`realtrace.model.resolve_model`; default SmolLM2 on
    the CPU); ``model`` in the result records it (:func:`realtrace.model.model_record`)."""
    return evaluate_many([(configs, budgets)], prompts, mode, seed, top, workers, scheduler, threads, steps, progress,
                         say, opt_top, prompts_file, no_opt, cache_dir, no_cache, answered_only, model, device)[0]


def _study(configs: list[str | Config], budgets, mode: str, no_opt: bool) -> tuple[list[Config], tuple[int, ...]]:
    """One study's configs (each once; unless ``no_opt``, ``OPT`` added, and ``OPT:static`` where ``OPT:coupled``
    runs) and budgets (sorted, each once), checked."""
    budgets = tuple(sorted(set(integer(k, "--budget", 1) for k in budgets)))
    if not budgets:
        raise ParameterError("give at least one budget")
    cfgs: list[Config] = []
    for c in configs:
        for cfg in ([c] if isinstance(c, Config) else parse_config(c, mode)):
            if cfg not in cfgs:
                cfgs.append(cfg)
    if no_opt and any(c.spec == OPT for c in cfgs):
        raise ParameterError(f"--no-opt: {OPT} is asked for by name (a variant OPT:NAME may run without it)")
    if not no_opt:  # OPT beside every run; the static split beside the coupled optimum (what its gain is over)
        for spec, beside in ((OPT, True), ("OPT:static", any(c.spec == "OPT:coupled" for c in cfgs))):
            if beside and not any(c.spec == spec for c in cfgs):
                cfgs += parse_config(spec)
    return cfgs, budgets


def evaluate_many(studies: list[tuple[list[str | Config], tuple[int, ...] | list[int]]],
                  prompts: list[str] | None = None, mode: str = "closed", seed: int = 0, top: int | None = None,
                  workers: int | None = None, scheduler: str | None = None, threads: int = 1, steps: bool = False,
                  progress: bool = True, say=None, opt_top: int | None = None, prompts_file: str | None = None,
                  no_opt: bool = False, cache_dir: str | None = None, no_cache: bool = False,
                  answered_only: bool = False, model=None, device: str = "cpu") -> list[dict]:
    """Several studies on the same prompts and settings, ``studies`` their ``(configs, budgets)``, run as one: each
    prompt's reference, press choices, optima and complete rows (every charge) are made once for all of them, and a
    (config, budget) two studies share runs once.  Returns one result per study, each what :func:`evaluate` returns
    for it, except the prompts' ``cache`` counts, which count what the whole run read from the cache (each run
    depends only on its prompt, config and budget; ``tests/test_quality_studies.py`` compares them)."""
    from kvcore.tasks import TaskPool

    from ..model import load_tokenizer, model_record, resolve_model, source_geometry
    from ..tokenizer import sequence_start

    say = say or (lambda msg: None)
    source = resolve_model(model, device)  # a bad --model or --device is one line, before anything else
    seed = integer(seed, "--seed", 0)
    top = None if top is None else integer(top, "--top", 1)
    opt_top = None if opt_top is None else integer(opt_top, "--opt-top", 1)
    threads = integer(threads, "--threads", 1)
    jobs = [_study(configs, budgets, mode, no_opt) for configs, budgets in studies]
    if not jobs:
        raise ParameterError("give at least one study")
    cfgs = list(dict.fromkeys(c for job_cfgs, _ in jobs for c in job_cfgs))
    budgets = tuple(sorted({k for _, job_budgets in jobs for k in job_budgets}))
    job_pairs = [[(k, cfgs.index(c)) for k in job_budgets for c in job_cfgs] for job_cfgs, job_budgets in jobs]
    pairs = list(dict.fromkeys(p for job in job_pairs for p in job))
    store_dir = checked_cache_dir(cache_dir, no_cache)
    own = read_prompts_file(prompts_file) if prompts_file is not None else []
    builtin = list(prompts or ([] if own else qprompts.DEFAULT))
    for n in builtin:
        if qprompts.parse_name(n)[0] == "haystack":
            from .inputs import haystack_files

            haystack_files()  # a missing wheel is one line, before anything loads
    clash = sorted(set(builtin) & {p.name for p in own})
    if clash:
        raise ParameterError(f"prompt {clash[0]} is both built-in and in --prompts-file {prompts_file}")
    names = builtin + [p.name for p in own]
    from ..press.registry import check_press_applies, load_lukv_curve, press_spec

    if any(c.kind == "press" for c in cfgs):
        from ..press.registry import import_kvpress

        import_kvpress()  # a missing extra is one line, before anything loads
    # every input is checked before the model loads: what needs no tokens before the tokenizer too (a saved
    # schedule against the smallest budget it runs at, its layers and KV heads once the model's are known)
    files = {c.spec: (read_schedule_file(c.spec), min(b[0] for job_cfgs, b in jobs if c in job_cfgs))
             for c in cfgs if c.kind == "file"}
    for path, (arrays, k) in files.items():
        check_schedule_file(arrays, path, names, None, None, k)  # the form and budget: before the [real] extra
    # the geometry from the configuration of a model this process already loaded (tests), its copy in the cache,
    # or its file (SmolLM2's GGUF: 5 s, once: the copy is made next)
    loaded = [lm for (_, src), lm in _MODEL.items() if src == source]
    store = Store(store_dir)
    geo = loaded[0].geometry if loaded else source_geometry(source, store.model_copy(make=False, model=source), True)
    for c in cfgs:
        if c.kind == "press":
            check_press_applies(press_spec(c.spec), geo, source.spec)  # before any forward pass
        curve = press_spec(c.spec).curve if c.kind == "press" else None
        if curve is not None:
            load_lukv_curve(curve, (geo.layers, geo.kv_heads))
    for path, (arrays, k) in files.items():
        check_schedule_file(arrays, path, names, geo.layers, geo.kv_heads, k)
    # the tokenizer of a model this process already loaded, else the tokenizer alone: from the model's copy in the
    # cache, made first if missing (the workers then load the copy), or from the GGUF file (SmolLM2: ~13 s of CPU)
    tok = loaded[0].tokenizer if loaded else load_tokenizer(
        install=True, say=say, converted=store.model_copy(install=True, say=say, model=source), model=source)
    ids = tokenize_prompts(builtin + own, tok, sequence_start(source, tok))
    check_budgets(budgets, ids)
    for path, (arrays, k) in files.items():
        check_schedule_file(arrays, path, names, geo.layers, geo.kv_heads, k, {p.name: p.T for p in ids})
    say(f"quality: {len(cfgs)} configs x {len(budgets)} budgets on {len(ids)} prompts ({sum(p.T for p in ids)} "
        f"tokens)" + (f", {len(jobs)} studies: {len(pairs)} runs per prompt" if len(jobs) > 1 else ""))
    with TaskPool(workers, scheduler) as pool:
        plan = task_groups([p.T for p in ids], budgets, pool.slots())  # the costliest first: they finish together
        common = {"configs": [asdict(c) for c in cfgs], "seed": seed, "top": top, "opt_top": opt_top,
                  "threads": threads, "steps": steps, "progress": progress and pool.serial,
                  "cache": store_dir and str(store_dir), "answered_only": answered_only,
                  "model": source.spec if source.registered else str(source.path), "device": source.device}
        tasks = [{"prompt": asdict(ids[i]), "budgets": group, "pairs": [p for p in pairs if p[0] in group], **common}
                 for i, group in plan]
        done = pool.map(run_task, tasks, progress=progress, key="quality")
    record = model_record(source, geo)
    prompt_info, runs = [], []  # per prompt: its info; its runs by (budget, config index)
    for n in range(len(ids)):
        parts = [(task, r) for (i, _), task, r in zip(plan, tasks, done) if i == n]
        prompt_info.append(merged_prompt([r for _, r in parts]))
        runs.append({tuple(p): run for task, r in parts for p, run in zip(task["pairs"], r["runs"])})
    out = []
    for (job_cfgs, job_budgets), wanted in zip(jobs, job_pairs):
        results = [{"prompt": info, "runs": [by_pair[p] for p in wanted] if by_pair else []}  # none: not answered
                   for info, by_pair in zip(prompt_info, runs)]
        agg = aggregate(results, geo.layer_groups())
        agg["runs"].append(full_cache_run([p for p in agg["prompts"] if p["full_cache_right"] or not answered_only],
                                          geo.layer_groups()))
        if steps:
            by_run = {(r["config"], r["budget"]): r for r in agg["runs"]}
            for res in results:
                for run in res["runs"]:
                    by_run[(run["config"], run["budget"])].setdefault("steps", {})[res["prompt"]["name"]] = \
                        run["steps"]
        out.append({"settings": {"configs": [c.name for c in job_cfgs], "budgets": list(job_budgets), "mode": mode,
                                 "seed": seed, "top": top, "opt_top": opt_top, "prompts": names, "no_opt": no_opt,
                                 **({"answered_only": True} if answered_only else {})},
                    "model": record, **agg})
    return out

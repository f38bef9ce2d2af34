"""Result tables for the paper's recommendations (Sections 10 and 11): the Section 10 default policy against every
other NM policy, and the Section 11 prediction for the decayed, recency-floored policy, each against the exact NM
optimum (``kvcore.optima.nm_opt``), with seeds where a policy is randomized.  The claims are
:mod:`theorems.claims.recommendations`; the test module ``theorems/test_default_policy.py`` asserts on the tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import policies
from adversary import (adaptive_k_plus_one_nm, adversarial_and_benign, decoy_and_sleeper, decoy_and_sleeper_roles,
                       topic_shift)
from kvcore.measure import measure
from kvcore.optima import nm_opt
from realtrace import DATA_DIR, input_dir, load_default_traces, set_name
from realtrace.experiments import SECTION11_POLICIES, section11, section11_windows

from ..tables import Row, Table
from .practice import nm_policy_names, pick_real


def section10_params(name: str, k: int) -> dict:
    """The parameters of a policy in the Section 10 / 11 comparisons at budget ``k``: the default (and its fixed-tie
    control) with a recency floor of ``k/4`` (the paper: "a few hundred" at budgets of thousands), 4 sinks and a
    half-life equal to the floor; every other NM policy at its registered defaults (no parameters)."""
    if name in ("Default", "Default-FixedTies"):
        return {"recent": max(1, k // 4), "n_sinks": 4}
    return {}


def compared_policy(name: str, k: int):
    """A factory of policy ``name`` configured by :func:`section10_params` at budget ``k``."""
    return policies.resolve(name, section10_params(name, k) or None)


def default_policy_traces(T: int, k: int, real: int = 0) -> dict[str, tuple[str, object]]:
    """:func:`adversary.adversarial_and_benign` plus ``real`` committed real traces (benign)."""
    out = adversarial_and_benign(T, k)
    if real:
        ts, _ = load_default_traces()
        out.update({f"real {n}": ("benign", ts.traces[n]) for n in pick_real(ts.names(), real)})
    return out


def default_policy_rivals() -> list[str]:
    """The Section 10 default and every registered NM policy that is not a variant of it (a subclass, such as the
    fixed-tie control, would only compare the default with itself)."""
    default = policies.get("Default").cls
    return [n for n in nm_policy_names() if n == "Default" or not issubclass(policies.get(n).cls, default)]


def default_policy_table(T: int, k: int, seeds: int = 8, real: int = 0, names=None) -> Table:
    """The Section 10 default against every other NM policy (default: :func:`default_policy_rivals`) and the exact optimum, NM
    regret per trace of :func:`default_policy_traces`, plus the adaptive NM adversary
    (``adversary.adaptive_k_plus_one_nm``) built against each policy itself (every policy is its own worst case
    there).  Randomized policies: mean of ``seeds`` seeds with a 95% interval.  ``params['kind']`` is
    adversarial/benign, ``params['steps']`` the trace's rows."""

    names = default_policy_rivals() if names is None else list(names)
    table = Table("default-policy", "the Section 10 default is safe on adversarial traces and loses nothing on "
                                    "benign ones")
    for wname, (kind, tr) in default_policy_traces(T, k, real).items():
        opt = nm_opt(tr, k)
        for n in names:
            m = measure(compared_policy(n, k), tr, k, model="nm", seeds=range(seeds), opt=opt)
            table.add(Row.of(table.result, m, wname, params={"kind": kind, "steps": tr.T}))
    for n in names:
        tr = adaptive_k_plus_one_nm(compared_policy(n, k)(), k, T, seed=0)
        m = measure(compared_policy(n, k), tr, k, model="nm", seeds=(0,))
        table.add(Row.of(table.result, m, "adaptive NM adversary (own)", params={"kind": "adversarial", "steps": tr.T}))
    return table


def gda_validation(T: int, k: int, budgets_real=(32, 64), real: int = 0, seeds: int = 4) -> dict:
    """The Section 11 prediction -- the decayed, recency-floored policy matches the heavy-hitter policies on benign
    windows and separates from them on a shifted or adversarial suffix -- on synthetic traces and the committed real
    traces, reusing :func:`realtrace.experiments.section11` (per-window regret per step of the Section 10 default
    configured by :func:`section10_params`, the registered plain GD-A, H2O, StreamingLLM, TOVA, ACC and the exact NM
    optimum; the default, randomized, is the mean of ``seeds`` seeds).  Synthetic: a topic shift (benign window =
    the last quarter of topic 1, suffix = the first quarter of topic 2) and decoy-and-sleeper (benign = the priming
    steps, suffix = the sleeper suffix).  Returns ``({trace name: [WindowResult.as_dict(), ...]}, {trace name:
    trace})``."""

    run = {"policies": SECTION11_POLICIES + (("Default",),), "configure": section10_params, "seeds": range(seeds)}
    out, traces = {}, {}
    L = max(T // 2, 16)
    ts_tr = topic_shift(2 * L, L, max(2, k // 2), sinks=4, sink_mass=0.3, seed=7)
    q = L // 4
    out["topic shift"] = [r.as_dict() for r in section11(ts_tr.trace, (k,), range(L - q, L), range(L, L + q), **run)]
    traces["topic shift"] = ts_tr.trace
    roles = decoy_and_sleeper_roles(k)
    ds = decoy_and_sleeper(k, 1 / (4 * k), T)
    out["decoy-and-sleeper"] = [r.as_dict() for r in section11(
        ds, (k,), range(0, roles.suffix_start), range(roles.suffix_start, ds.T),
        range(roles.sleeper, roles.sleeper + 1), **run)]
    traces["decoy-and-sleeper"] = ds
    if real:
        tset, _ = load_default_traces()
        benign, suffix, sleeper = section11_windows(tset)
        for n in pick_real(tset.names(), real):
            out[f"real {n}"] = [r.as_dict() for r in section11(tset.traces[n], budgets_real, benign, suffix,
                                                               sleeper, **run)]
            traces[f"real {n}"] = tset.traces[n]
    return out, traces


QUALITY_DIR = DATA_DIR / "quality_section10"   # committed; readers read realtrace.input_dir of its name
QUALITY_POLICIES = ("Default", "H2O")
QUALITY_SAME = ("mode", "seed", "top", "opt_top", "prompts")
QUALITY_READ = ("right", "dnll_answer", "kl_stream")
SHIFT_DIR = DATA_DIR / "quality_section11_shift"
SHIFT_POLICIES = ("Default", "H2O", "TOVA")
SHIFT_READ = QUALITY_READ + ("regret_stream", "regret_answer")


def _replay_set(directory: Path, pols: tuple[str, ...], read: tuple[str, ...], with_opt: bool) -> dict | None:
    """The ``--json`` documents of ``python -m paper_check quality`` (or of :func:`realtrace.quality.run.evaluate`,
    which it prints) in ``directory``, one or more per budget (``<anything>_K<budget>.json``, each at that budget
    alone), checked to share their settings and model and to hold, per budget, exactly one run of each policy of
    ``pols`` configured as :func:`section10_params` says; None when the directory holds none.  Per
    ``"<prompt> K=<budget>"``: the prompt's tokens, the positive control and per policy the measurements ``read``;
    with ``with_opt`` also the optimum's (``"OPT"``; every file of a budget carries the same one, read from the
    first) and its ``opt_gap`` per budget (the mean over prompts, per step, of how far the optimum solved on top rows
    can be above the exact one)."""
    from realtrace.quality.run import config_label

    files = sorted(Path(directory).glob("*_K*.json"))
    if not files:
        return None
    docs = {f.name: json.loads(f.read_text()) for f in files}
    budgets = sorted({int(f.stem.rsplit("_K", 1)[1]) for f in files})
    first = next(iter(docs.values()))
    out = {"source": set_name(Path(directory).name), "files": sorted(docs), "model": first["model"]["exact"],
           "mode": first["settings"]["mode"], "budgets": budgets, "configs": {}, "cases": {}}
    if with_opt:
        out["opt_gap"] = {}
    for name, doc in docs.items():
        k = int(name[:-len(".json")].rsplit("_K", 1)[1])
        differ = [key for key in QUALITY_SAME if doc["settings"][key] != first["settings"][key]]
        if doc["settings"]["budgets"] != [k]:
            differ.append("budgets")
        if doc["model"] != first["model"]:
            differ.append("model")
        if differ:
            raise ValueError(f"{directory}/{name}: settings differ from {files[0].name}'s: {', '.join(differ)}")
    for k in budgets:
        mine = {n: d for n, d in docs.items() if n[:-len(".json")].endswith(f"_K{k}")}
        for pol in pols:
            label = config_label(pol, section10_params(pol, k))
            found = [(n, r) for n, d in mine.items() for r in d["runs"] if r["kind"] == "policy" and r["config"] == label]
            if len(found) != 1:
                runs = [r["config"] for d in mine.values() for r in d["runs"] if r["kind"] == "policy"]
                raise ValueError(f"{directory}/*_K{k}.json: expected one policy run {label}, found {len(found)}"
                                 + (" (missing)" if not found else "") + f"; policy runs there: {runs}")
            (fname, run), = found
            out["configs"][f"{pol} K={k}"] = label
            opt = [r for r in mine[fname]["runs"] if r["kind"] == "opt"]
            if with_opt and pol == pols[0]:
                if len(opt) != 1:
                    raise ValueError(f"{directory}/{fname}: expected one optimum run, found {len(opt)}")
                out["opt_gap"][f"K={k}"] = opt[0]["total"]["opt_gap"]
            for p in mine[fname]["prompts"]:
                case = out["cases"].setdefault(f"{p['name']} K={k}", {
                    "prompt": p["name"], "budget": k, "tokens": p["tokens"],
                    "full_cache_right": p["full_cache_right"]})
                case[pol] = {q: run["prompts"][p["name"]][q] for q in read}
                if with_opt and pol == pols[0]:
                    case["OPT"] = {q: opt[0]["prompts"][p["name"]][q] for q in read}
    return out


def section10_quality(directory: Path | None = None) -> dict | None:
    """The committed quality replay of the Section 10 default and H2O on benign prompts
    (``realtrace/data/PROVENANCE.md``), read without torch by :func:`_replay_set`; a pair whose settings or model
    differ, or a default not configured by :func:`section10_params`, is a ``ValueError`` naming the file.  Per
    ``"<prompt> K=<budget>"`` and policy: ``right``, ``dnll_answer`` (mean change in the answer tokens' NLL),
    ``kl_stream`` (mean KL from the full cache over the rows after the budget binds).  ``directory`` defaults to
    the input set ``quality_section10`` (:func:`realtrace.input_dir`)."""
    return _replay_set(directory or input_dir(QUALITY_DIR.name), QUALITY_POLICIES, QUALITY_READ, with_opt=False)


def shift_quality(directory: Path | None = None, also: tuple[str, ...] = ()) -> dict | None:
    """The committed quality replay of the Section 10 default, H2O and TOVA on the distribution-shifted prompts
    ``shift-G-dD`` (:mod:`realtrace.quality.prompts`; ``realtrace/data/PROVENANCE.md``), read like
    :func:`section10_quality`, with each policy's NM regret per step (``regret_stream``: the rows after the budget
    binds; ``regret_answer``: the rows that predict the answer, the suffix that needs the sleeper) and the
    optimum's beside them (``"OPT"``; tracking gap = a policy's regret minus the optimum's).  ``directory`` defaults
    to the input set ``quality_section11_shift``; ``also`` names further measurements to read (the figure's
    ``kl_answer``)."""
    return _replay_set(directory or input_dir(SHIFT_DIR.name), SHIFT_POLICIES, SHIFT_READ + tuple(also),
                       with_opt=True)

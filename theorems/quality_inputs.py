"""The quality input sets: the committed model-backed results the quality claims decide from, and how to remake them.

Each claim that reads the model's output (or its values) reads a directory ``realtrace/data/<name>`` of committed
results, written by the commands in ``realtrace/data/PROVENANCE.md`` (or the directory's own ``PROVENANCE.md``), and
read without torch.  :data:`QUALITY_INPUTS` declares, per directory, the commands that regenerate it (those
PROVENANCE commands, with the output path replaced by a placeholder; files that are studies of the same prompts by
one process that runs them together, :mod:`realtrace.quality.studies`) and the claims that read it.  ``python -m
paper_check --full`` with the ``[real]`` extra runs them into a staging directory and decides those claims from the
fresh data (:mod:`paper_check.inputs`); a claim that adds a directory registers its recompute with one entry here.
(A module of its own beside :mod:`theorems.claims`, so the command line's ``--help`` names the sets without
importing every claim.)

Placeholders in a step's arguments: ``{python}`` the running interpreter, ``{dir}`` the directory being rebuilt,
``{scratch}`` an empty directory of the step's own (for commands that write a directory rather than stdout).

Several models (issue 49): a set declares the models it exists for (:attr:`QualityInput.models`); the default model's
set is ``realtrace/data/<name>``, another model's ``realtrace/data/<model>/<name>``
(:meth:`QualityInput.directory_for`), remade by the same steps run on that model (:meth:`QualityInput.steps_for`:
``--model M`` appended to every ``quality`` command and to every script, ``"model"`` in a studies spec, and the
presses kvpress cannot apply to the model dropped, :data:`REFUSED_PRESSES`).  The default model's steps are the
declared ones, unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from realtrace import DATA_MODEL

# presses kvpress cannot apply to a model (realtrace.press.registry.check_press_applies refuses them before any
# forward): dropped from that model's steps.  Gemma 3 keeps one rotary embedding per attention type, and
# ExpectedAttention reads the one (issue 49).
REFUSED_PRESSES = {"gemma3-270m": ("ExpectedAttention",)}
# the sets committed for Gemma 3 270M too (realtrace/data/gemma3-270m/PROVENANCE.md: its commands and their costs)
WITH_GEMMA = (DATA_MODEL, "gemma3-270m")

@dataclass(frozen=True)
class Step:
    """One command of a recompute: ``argv`` (with placeholders), the file of the set its stdout becomes
    (``stdout``), and the files it writes under ``{scratch}`` that become files of the set (``collect``: pairs of
    a path under the scratch directory and a file name in the set)."""

    argv: tuple[str, ...]
    stdout: str | None = None
    collect: tuple[tuple[str, str], ...] = ()

    def for_model(self, model: str, data_dir: str) -> "Step":
        """This step run on ``model`` (a registered ``--model`` name) instead of the default: a ``quality`` command
        or a script gets ``--model model`` appended (each script reads it with :func:`script_model`), a studies
        spec the setting ``"model"``; the presses in :data:`REFUSED_PRESSES` for it are dropped (from ``--presses``
        and from a spec's configs); an argument naming a committed file ``realtrace/data/<set>/...`` names that
        set's file of the model instead, ``data_dir`` (``realtrace/data/<model>``).  The default model: unchanged."""
        if model == DATA_MODEL:
            return self
        refused = REFUSED_PRESSES.get(model, ())
        argv = list(self.argv)
        if argv[1] == "-c" and argv[2] == STUDIES_SCRIPT:
            spec = json.loads(argv[3])
            spec["settings"]["model"] = model
            for study in spec["studies"]:
                study["configs"] = [c for c in study["configs"] if not (
                    isinstance(c, str) and c.startswith("press:") and c.split(":", 1)[1] in refused)]
            argv[3] = json.dumps(spec)
            return replace(self, argv=tuple(argv))
        for i in range(1, len(argv)):
            if argv[i - 1] == "--presses":
                argv[i] = ",".join(p for p in argv[i].split(",") if p.split("=", 1)[0] not in refused)
            if argv[i].startswith("realtrace/data/") or "=realtrace/data/" in argv[i]:
                argv[i] = argv[i].replace("realtrace/data/", f"{data_dir}/", 1)
        return replace(self, argv=(*argv, "--model", model))


@dataclass(frozen=True)
class QualityInput:
    """A committed input set ``realtrace/data/<name>``, the claims that read it, the steps that regenerate it, the
    extras those steps need, the committed files carried over unchanged (``keep``: an input of a step, or a
    file no claim reads, such as a timing), what its recompute costs (``minutes``), and the figures drawn from it
    (``figures``: ``paper_check`` builds them after the set is remade, the others while it is)."""

    name: str
    claims: tuple[str, ...]
    steps: tuple[Step, ...]
    extras: tuple[str, ...] = ("real",)
    keep: tuple[str, ...] = ()
    minutes: float = 0.0  # one core's minutes for its recompute in --full's order (docs/performance.md); costliest 1st
    figures: tuple[str, ...] = ()
    models: tuple[str, ...] = (DATA_MODEL,)  # the models whose results are committed (realtrace.model_data_dir)

    @property
    def directory(self) -> str:
        return f"realtrace/data/{self.name}"

    def directory_for(self, model: str) -> str:
        """Where ``model``'s results of this set are committed (:func:`realtrace.model_data_dir`)."""
        return self.directory if model == DATA_MODEL else f"realtrace/data/{model}/{self.name}"


    def keep_for(self, model: str) -> tuple[str, ...]:
        """The committed files ``model``'s recompute carries over from :meth:`directory_for`: all of :attr:`keep`
        for the default model; for another only those a step reads (an input, such as LU-KV's curve) -- the
        others (timings, saved cases, the sweep's script, the set's own PROVENANCE) record the default model's run."""
        if model == DATA_MODEL:
            return self.keep
        return tuple(f for f in self.keep if any(f in a for st in self.steps for a in st.argv))

    def steps_for(self, model: str) -> tuple[Step, ...]:
        """The steps that remake ``model``'s set (:meth:`Step.for_model`); a model the set does not declare is a
        KeyError."""
        if model not in self.models:
            raise KeyError(f"{self.name} is not declared for {model} (declared: {', '.join(self.models)})")
        return tuple(st.for_model(model, f"realtrace/data/{model}") for st in self.steps)


def _quality(*args: str, out: str) -> Step:
    """``python -m paper_check quality ARGS --json > {dir}/OUT``."""
    return Step(("{python}", "-m", "paper_check", "quality", *args, "--json"), stdout=out)


# several studies of the same prompts in one process, one file each (realtrace.quality.studies): each prompt's
# reference and complete rows made once for all of them; each file's own command is in the set's PROVENANCE.md
STUDIES_SCRIPT = "import sys; from realtrace.quality.studies import write_studies; write_studies(*sys.argv[1:])"


def _studies(settings: dict, *studies: tuple[str, list, list[int]]) -> Step:
    """The ``quality --json`` outputs ``studies`` -- ``(file, configs, budgets)``, on the prompts and with the
    settings ``settings`` -- remade in one process (:mod:`realtrace.quality.studies`)."""
    spec = {"settings": settings, "studies": [{"out": o, "configs": c, "budgets": b} for o, c, b in studies]}
    return Step(("{python}", "-c", STUDIES_SCRIPT, json.dumps(spec), "{scratch}"),
                collect=tuple((o, o) for o, _, _ in studies))


# realtrace/data/quality_workingset/PROVENANCE.md: the working sets, from the references the sweep cached
WORKINGSET_SCRIPT = """import json, sys
from theorems.quality_inputs import script_model
from theorems.results.workingset import measure
print(json.dumps(measure(say=lambda m: sys.stderr.write(m + "\\n"), model=script_model(sys.argv)), indent=1))
"""
WORKINGSET_PROMPTS = "needle-400-d10,needle-400-d90,needle-600-d10,needle-600-d90,kv-24-12,kv-40-20,shift-12-d50"
# realtrace/data/long_range_two_hop/PROVENANCE.md: the same two steps on the two-hop prompts
TWO_HOP_SCRIPT = """import json, sys
from theorems.quality_inputs import script_model
from theorems.results.workingset import HOP_PROMPTS, measure
print(json.dumps(measure(HOP_PROMPTS, say=lambda m: sys.stderr.write(m + "\\n"), model=script_model(sys.argv)),
                 indent=1))
"""
TWO_HOP_PROMPTS = ("alias-400-d10,alias-400-d90,alias-600-d10,alias-600-d90,chain-400-d10,chain-400-d90,"
                   "chain-600-d10,chain-600-d90")


def _workingset_sweep(prompts: str, *also: str) -> Step:
    """The working-set sweep (realtrace/data/quality_workingset/PROVENANCE.md) on ``prompts``, to ``sweep.json``."""
    return Step(("{python}", "-m", "paper_check", "quality", "--all", "--policies", "H2O,TOVA,StreamingLLM",
                 "--presses", "none", "--budgets", "16,32,64,128,256", "--prompts", prompts, "--opt-top", "32", *also,
                 "--threads", "1", "--workers", "1", "--out", "{scratch}", "--json"), stdout="sweep.json")
EASY5 = "needle-400-d10,needle-400-d50,kv-24-12,needle-600-d90,kv-40-1"


# the configs of _sweep29's --all, in its order: the policies, the presses, the optimum
SWEEP29 = ["H2O", "TOVA", "StreamingLLM", "FIFO", "press:SnapKV", "press:AdaKV", "press:Knorm",
           "press:ExpectedAttention", "OPT"]


def _sweep29(*args: str, out: str) -> Step:
    """One stage of issue 29's quality sweep (realtrace/data/quality_benchmark/PROVENANCE.md), its stdout to ``out``."""
    return Step(("{python}", "-m", "paper_check", "quality", "--all", "--policies", "H2O,TOVA,StreamingLLM,FIFO",
                 "--presses", "SnapKV,AdaKV,Knorm,ExpectedAttention", *args, "--workers", "1", "--threads", "1",
                 "--json", "--out", "{scratch}"), stdout=out)


SHORT5 = "needle-400-d10,needle-400-d50,kv-24-12,needle-600-d90,kv-40-1"
SHIFT = "shift-16-d0,shift-16-d50,shift-24-d50"
SURROGATE = "regret-surrogate"   # reads every realtrace/data/quality_* set (theorems.results.surrogate)
# realtrace/data/quality_heads/PROVENANCE.md: the sweep with --steps, then the per-head stream means derived from it
# (the arguments after the directory, ``--model M`` for another model, are added to the sweep)
HEADS_SCRIPT = "import sys; from realtrace.quality.heads import remake; remake(*sys.argv[1:])"

QUALITY_INPUTS: tuple[QualityInput, ...] = (
    QualityInput("quality_section10", ("default-policy", "gda-validation", SURROGATE), (
        _studies({"opt_top": 32, "workers": 1},
                 ("Default_K128.json", [["Default", {"recent": 32, "n_sinks": 4}]], [128]),
                 ("H2O_K128.json", ["H2O"], [128]),
                 ("Default_K256.json", [["Default", {"recent": 64, "n_sinks": 4}]], [256]),
                 ("H2O_K256.json", ["H2O"], [256])),), minutes=5.2, figures=("surrogate",), models=WITH_GEMMA),
    QualityInput("quality_section11_shift", ("gda-validation", SURROGATE), (
        _studies({"prompts": SHIFT.split(","), "opt_top": 32, "workers": 1, "threads": 1},
                 ("Default_K128.json", [["Default", {"recent": 32, "n_sinks": 4}]], [128]),
                 ("H2O_TOVA_K128.json", ["H2O", "TOVA"], [128]),
                 ("Default_H2O_TOVA_K256.json", [["Default", {"recent": 64, "n_sinks": 4}], "H2O", "TOVA"], [256])),),
        minutes=1.6, figures=("gda_shift", "surrogate"), models=WITH_GEMMA),
    QualityInput("quality_coupled", (SURROGATE, "surrogate-exactness"), (
        _quality("OPT:coupled", "--budgets", "64,128", "--prompts", SHORT5, "--workers", "1", "--threads", "1",
                 out="OPT_coupled.json"),
        _quality("OPT:static", "--budgets", "64,128", "--prompts", "needle-400-d50,needle-400-d10,kv-24-12",
                 "--workers", "1", "--threads", "1", out="OPT_static.json")),
        keep=("bench_needle-2000-d50.json", "bench_needle-2000-d50_top16.json"), minutes=9.0, figures=("surrogate",),
        models=WITH_GEMMA),
    QualityInput("quality_value", (SURROGATE, "surrogate-exactness"), (
        _quality("OPT:value", "--budget", "128", "--prompts", "kv-24-12", "--workers", "1", "--threads", "1",
                 out="OPT_value_K128_kv-24-12.json"),
        _quality("OPT:value", "--budget", "128", "--prompts", "needle-1200-d50", "--workers", "1", "--threads", "1",
                 out="OPT_value_K128_needle-1200-d50.json")), minutes=1.8, figures=("surrogate",), models=WITH_GEMMA),
    QualityInput("quality_budgets", (SURROGATE,), (
        Step(("{python}", "-m", "paper_check", "quality", "--all", "--policies", "none", "--presses",
              "PyramidKV,AdaKV,CriticalKV,CriticalAdaKV,SnapKV", "--budgets", "128", "--prompts", SHORT5, "--workers",
              "1", "--threads", "1", "--out", "{scratch}"), collect=(("quality.json", "presses_K128.json"),)),
        Step(("{python}", "-m", "paper_check", "quality", "--all", "--policies", "none", "--presses",
              "LUKV=realtrace/data/quality_budgets/lukv_curve_recall.npy", "--budgets", "128", "--prompts", SHORT5,
              "--opt-top", "1", "--workers", "1", "--threads", "1", "--out", "{scratch}"),
             collect=(("quality.json", "lukv_K128.json"),))),
        extras=("real", "kvpress"), keep=("lukv_curve_recall.npy", "PROVENANCE.md"), minutes=0.9,
        figures=("surrogate",), models=WITH_GEMMA),
    QualityInput("quality_workingset", ("quality-floor-working-set", "adaptive-budget-quality", "long-range-floor",
                                        SURROGATE), (
        _workingset_sweep(WORKINGSET_PROMPTS),
        Step(("{python}", "-c", WORKINGSET_SCRIPT), stdout="working_sets.json")), minutes=4.4,
        figures=("workingset", "surrogate"), models=WITH_GEMMA),
    QualityInput("long_range_two_hop", ("long-range-floor",), (
        _workingset_sweep(TWO_HOP_PROMPTS, "--answered-only"),  # half its prompts fail the control: no runs
        Step(("{python}", "-c", TWO_HOP_SCRIPT), stdout="working_sets.json")), minutes=2.6, models=WITH_GEMMA),
    QualityInput("quality_benchmark", ("tracking-benchmark", "fig14-measured", "opt-blind-spot", SURROGATE), (
        _studies({"prompts": EASY5.split(","), "workers": 1, "threads": 1},
                 ("easy_K64_K128.json", SWEEP29, [64, 128]), ("easy_K32.json", SWEEP29, [32])),
        _sweep29("--budgets", "64,128", "--prompts", SHIFT, "--opt-top", "32", out="hard_K64_K128.json")),
        keep=("sweep.sh",), minutes=6.3, figures=("14m", "bench", "surrogate"), models=WITH_GEMMA),
    # the saved case (the schedules of the optimum and the rule that beats it) is carried over, not re-extracted
    QualityInput("quality_blind_spot", ("opt-blind-spot", SURROGATE), (
        _sweep29("--budgets", "128", "--prompts", "needle-1200-d50", "--steps", out="long_K128.json"),),
        keep=("case_kv-40-1_K64_H2O.npz", "case_kv-40-1_K64_OPT.npz"), minutes=0.6, figures=("bench", "surrogate"),
        models=WITH_GEMMA),
    QualityInput("quality_heads", ("displaced-mass-output-error", SURROGATE), (
        Step(("{python}", "-c", HEADS_SCRIPT, "{dir}")),), extras=("real", "kvpress"), minutes=0.3,
        figures=("heads", "surrogate"), models=WITH_GEMMA),
    QualityInput("value_directions", ("surrogate-failure-directions",), (
        Step(("{python}", "-c", "import sys; from theorems.quality_inputs import script_model; "
              "from realtrace.quality.directions import record; "
              "record(sys.argv[1], 'kv-24-12', 128, 1, script_model(sys.argv))", "{dir}")),), minutes=0.2,
        figures=("value_directions",), models=WITH_GEMMA),
    # the complete rows of the committed trace set's 12 heads (realtrace/data/PROVENANCE.md): its recipe with
    # --top 617 (= T, every entry), one trace file per head and the manifest
    QualityInput("smollm2_recall_complete", ("regret-curve-convex", "equal-marginal-regret", "static-vs-coupled"), (
        Step(("{python}", "-m", "realtrace", "capture", "--prompt", "builtin:recall", "--continuation",
              "builtin:recall-answer", "--layers", "0,9,19,29", "--heads", "kv", "--top", "617", "--threads", "2",
              "--out", "{scratch}"),
             collect=tuple((f, f) for f in ["manifest.json"] + [f"L{layer:02d}_kv{g}.npz" for layer in (0, 9, 19, 29)
                                                                for g in range(3)])),), minutes=0.4,
        figures=("alloc",)),
    # realtrace/data/PROVENANCE.md: pairs of optima at equal memory, exact against truncated (claim
    # surrogate-exactness; the exact coupled and static optima are quality_coupled's, the value optimum
    # quality_value's).  Not named quality_*: regret-surrogate reads every quality_* set, and these optima repeat
    # quality_coupled's at K = 64, 128
    QualityInput("surrogate_paradox", ("surrogate-exactness",), tuple(
        _quality("OPT", "--budgets", "32,64,128,256", "--prompts", p, "--workers", "1", "--threads", "1",
                 out=f"OPT_exact_{p}.json") for p in SHORT5.split(",")) + (
        _quality("OPT", "--budgets", "32,64,128,256", "--prompts", SHORT5, "--opt-top", "32", "--workers", "1",
                 "--threads", "1", out="OPT_top32.json"),
        _quality("OPT:coupled", "--budgets", "32,64,128,256", "--prompts", SHORT5, "--opt-top", "32", "--no-opt",
                 "--workers", "1", "--threads", "1", out="OPT_coupled_top32.json"),
        _quality("OPT:static", "--budgets", "64,128", "--prompts", "needle-400-d50,needle-400-d10,kv-24-12",
                 "--opt-top", "32", "--no-opt", "--workers", "1", "--threads", "1", out="OPT_static_top32.json")),
        minutes=12.0),
)


def script_model(argv: list[str]) -> str | None:
    """The ``--model`` value a step's script was given (:meth:`Step.for_model` appends it), None for the default."""
    return argv[argv.index("--model") + 1] if "--model" in argv[:-1] else None


def claim_models(claim_id: str, among: tuple[QualityInput, ...] | None = None) -> tuple[str, ...]:
    """The models a claim is decided on (VERDICTS.md, "Several models"): those with every set it reads committed --
    for the regret-surrogate claim, which reads whatever quality sets a model has, those with any -- the default
    model first; ``()`` for a claim that reads no model's output.  ``among``: the declared sets (default: all)."""
    sets = [s for s in (QUALITY_INPUTS if among is None else among) if claim_id in s.claims]
    if not sets:
        return ()
    found = [set(s.models) for s in sets]
    have = set.union(*found) if claim_id == SURROGATE else set.intersection(*found)
    return tuple(sorted(have, key=lambda m: (m != DATA_MODEL, m)))


def model_record(claim_id: str, model: str) -> str:
    """How the input sets a claim reads name the model whose output they hold: the ``model`` record's ``exact``
    field (name, weights, quantization, package) of the first committed result that has one, with its file digest
    where the record gives it; the registered name when none does."""
    from realtrace import input_dir, reading_model

    with reading_model(model):
        for s in QUALITY_INPUTS:
            if claim_id not in s.claims or model not in s.models:
                continue
            for f in sorted(input_dir(s.name).glob("*.json")):
                record = json.loads(f.read_text()).get("model")
                if isinstance(record, dict) and "exact" in record:
                    digest = record.get("sha256")
                    return record["exact"] + (f", sha256 {digest}" if digest else "")
    return model


def input_set(name: str) -> QualityInput:
    """The declared set ``name``; KeyError when there is none."""
    return {s.name: s for s in QUALITY_INPUTS}[name]


__all__ = ["QUALITY_INPUTS", "REFUSED_PRESSES", "QualityInput", "Step", "claim_models", "input_set", "model_record",
           "script_model"]

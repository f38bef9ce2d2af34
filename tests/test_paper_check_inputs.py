"""The quality input sets (theorems.quality_inputs) and what ``paper_check`` decides the quality claims from
(paper_check.inputs, issue 29 "Acceptance"): the declaration matches the committed directories and their
PROVENANCE commands; the quick profile and a machine without the extras read the committed sets and say so in one
``FALLBACK:`` line; ``--full --recompute`` remakes the chosen sets into a staging directory, and a recompute that
fails is one line and falls back -- all through the command line as a user types it."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys

import pytest

from paper_check import inputs
from realtrace import DATA_DIR, input_dir, inputs_from
from tests.command_line import ROOT, is_one_line_error, run_module
from theorems.claims import CLAIMS
from theorems.quality_inputs import QUALITY_INPUTS, SURROGATE, QualityInput, Step, input_set
from theorems.results.recommendations import section10_quality

PROVENANCE = (DATA_DIR / "PROVENANCE.md").read_text() + "".join(p.read_text() for p in DATA_DIR.glob("*/PROVENANCE.md"))
BLOCK = "sys.modules['torch'] = sys.modules['transformers'] = sys.modules['kvpress'] = None; "


def run_paper_check(*args, blocked: bool = False, env=None, timeout: float = 600) -> tuple[int, str, str]:
    """``python -m paper_check ARGS`` (as ``runpy`` runs it), optionally with the extras' modules unimportable."""
    code = f"import runpy, sys; {BLOCK if blocked else ''}sys.argv[0] = 'paper_check'; " \
           "runpy.run_module('paper_check', run_name='__main__', alter_sys=True)"
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def fallback_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("FALLBACK:")]


# ---- the declaration --------------------------------------------------------------------------------------------

def test_every_committed_model_result_set_is_declared_with_its_claims():
    """Each ``realtrace/data/quality_*`` directory, ``value_directions``, ``long_range_two_hop``,
    ``smollm2_recall_complete`` and ``surrogate_paradox`` is declared (a
    claim that adds a set registers its recompute), every declared directory exists, names registered claims only,
    and -- since regret-surrogate reads every ``quality_*`` set -- names regret-surrogate there; each states what its
    recompute costs (the order --full remakes them in)."""
    declared = {s.name for s in QUALITY_INPUTS}
    committed = {p.name for p in DATA_DIR.glob("quality_*") if p.is_dir()}
    committed |= {"value_directions", "long_range_two_hop", "smollm2_recall_complete", "surrogate_paradox"}
    assert committed == declared
    for s in QUALITY_INPUTS:
        assert (ROOT / s.directory).is_dir() and s.claims and set(s.claims) <= set(CLAIMS), s.name
        assert (SURROGATE in s.claims) == s.name.startswith("quality_"), s.name
        assert s.minutes > 0, s.name


@pytest.mark.parametrize("s", QUALITY_INPUTS, ids=lambda s: s.name)
def test_the_steps_remake_exactly_the_committed_files(s):
    """What the steps write (their stdout files, the files they collect; ``value_directions``: what ``record``
    writes) plus the carried-over files are exactly the committed files of the set."""
    committed = {p.name for p in (ROOT / s.directory).iterdir() if p.is_file()} - {"PROVENANCE.md"}
    assert made_files(s) | (set(s.keep) - {"PROVENANCE.md"}) == committed


def made_files(s: QualityInput) -> set[str]:
    """The files ``s``'s steps write: their stdout files, the files they collect, and what a script writes itself
    (``value_directions``: what ``record`` writes; ``quality_heads``: ``remake``'s two files)."""
    made = {st.stdout for st in s.steps if st.stdout} | {name for st in s.steps for _, name in st.collect}
    if s.name == "value_directions":
        made |= {"directions.json", "outlier.npz", "aligned.npz"}
    if s.name == "quality_heads":  # remake writes the sweep's stdout and the per-head means derived from its folder
        made |= {"heads.json", "head_means.json"}
    return made


@pytest.mark.parametrize("s", QUALITY_INPUTS, ids=lambda s: s.name)
def test_every_step_is_the_provenance_command(s):
    """Each step's arguments, as the committed PROVENANCE writes them (whitespace and line continuations aside),
    appear there: a ``quality`` command verbatim up to its output, a script line by line and its arguments (the
    studies run as one: their spec, :mod:`realtrace.quality.studies`)."""
    text = " ".join(PROVENANCE.replace("\\\n", " ").split())
    for st in s.steps:
        args = [a for a in st.argv[1:] if a not in ("{dir}", "{scratch}")]
        if args[0] == "-c":
            for line in args[1].splitlines():
                assert " ".join(line.split()) in text, line
            for arg in args[2:]:
                assert " ".join(arg.split()) in text, arg
        else:
            shown = " ".join(["python", *(a for a in args if a != "--out")])
            assert shown in text.replace("$P", "").replace(" --out DIR", "") or \
                _with_prompt_variable(shown) in text, shown


def _with_prompt_variable(shown: str) -> str:
    """PROVENANCE writes a prompt list once as ``P=...`` and then ``--prompts $P``."""
    return re.sub(r"--prompts (\S+)", "--prompts $P", shown)


def test_unknown_set_names_raise():
    with pytest.raises(KeyError):
        input_set("quality_nothing")


# ---- selection and the FALLBACK line (pure) -------------------------------------------------------------------

def test_selection():
    names = {s.name for s in QUALITY_INPUTS}
    assert inputs.selected(None, full=True) == names and inputs.selected(None, full=False) == set()
    assert inputs.selected("all", True) == names and inputs.selected("none", True) == set()
    assert inputs.selected("value_directions, quality_value", True) == {"value_directions", "quality_value"}
    assert [s.name for s in inputs.sets_read_by(["surrogate-failure-directions"])] == ["value_directions"]
    assert [s.name for s in inputs.sets_read_by(["gda-validation"])] == ["quality_section10", "quality_section11_shift"]
    assert inputs.sets_read_by(["thm2-acc-unbounded"]) == []


def test_fallback_line_groups_sets_by_reason():
    line = inputs.fallback_line({"realtrace/data/a": "quick", "realtrace/data/b": "failed", "realtrace/data/c": "quick"})
    assert line == "FALLBACK: committed quality results used: realtrace/data/a, realtrace/data/c (quick); " \
                   "realtrace/data/b (failed)"


def test_a_stand_in_directory_is_what_the_readers_read(tmp_path):
    """:func:`realtrace.inputs_from` redirects the reader of a set (and only within the block): a copy of
    quality_section10 with one answer flipped reads back flipped."""
    copy = tmp_path / "quality_section10"
    shutil.copytree(DATA_DIR / "quality_section10", copy)
    f = sorted(copy.glob("H2O_K*.json"))[0]
    doc = json.loads(f.read_text())
    prompt = next(iter(doc["runs"][0]["prompts"]))
    run = next(r for r in doc["runs"] if r["kind"] == "policy")
    run["prompts"][prompt]["right"] = not run["prompts"][prompt]["right"]
    f.write_text(json.dumps(doc))
    k = f.stem.rsplit("_K", 1)[1]
    committed = section10_quality()["cases"][f"{prompt} K={k}"]["H2O"]["right"]
    with inputs_from({"quality_section10": copy}):
        assert input_dir("quality_section10") == copy
        assert section10_quality()["cases"][f"{prompt} K={k}"]["H2O"]["right"] is (not committed)
    assert input_dir("quality_section10") == DATA_DIR / "quality_section10"
    assert section10_quality()["cases"][f"{prompt} K={k}"]["H2O"]["right"] is committed


# ---- the command line -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, needle", [
    (("--recompute", "value_directions"), "--recompute needs --full"),
    (("--full", "--recompute", "quality_nothing"), "unknown input set quality_nothing"),
    (("--full", "--recompute", ","), "unknown input set (empty)"),
    (("claim", "regret-surrogate", "--recompute", "all"), "--recompute needs --full"),
])
def test_a_bad_recompute_option_is_a_one_line_error(args, needle, tmp_path):
    code, _, err = run_module("paper_check", *args, "--out", tmp_path)
    assert is_one_line_error(code, err, needle), err
    assert not list(tmp_path.glob(".paper_check-staging-*"))


def test_help_names_the_option_and_every_set():
    for args in ((), ("claim",)):
        code, out, _ = run_module("paper_check", *args, "--help")
        assert code == 0 and "--recompute" in out
        assert all(s.name in " ".join(out.split()) for s in QUALITY_INPUTS)


def test_without_the_extras_full_reads_the_committed_set_and_says_why(tmp_path):
    """``claim surrogate-failure-directions --full`` with torch, transformers and kvpress unimportable: one
    FALLBACK line naming value_directions of each model it is committed for and the missing extra; the claim
    decides from the committed sets."""
    code, out, err = run_paper_check("claim", "surrogate-failure-directions", "--full", "--json", "--out", tmp_path,
                                     blocked=True)
    assert code == 0, err
    assert fallback_lines(err) == ["FALLBACK: committed quality results used: realtrace/data/value_directions, "
                                   "realtrace/data/gemma3-270m/value_directions "
                                   "(the [real] extra does not import (torch, transformers))"], err
    assert json.loads(out)["evidence"]["inputs"] == ("realtrace/data/value_directions (committed), "
                                                     "realtrace/data/gemma3-270m/value_directions (committed)")
    assert "[inputs] value_directions step" not in err
    assert not list(tmp_path.glob(".paper_check-staging-*"))


def test_a_failed_recompute_is_one_line_and_falls_back(tmp_path):
    """A recompute whose command fails (here: the quality cache path is a file's child) is one line naming the set,
    the step and the command's own error; the set is read from its committed files, and the FALLBACK line says so."""
    import os

    for mod in ("torch", "transformers", "gguf"):
        pytest.importorskip(mod, reason="without the [real] extra nothing is recomputed (the test above)")
    env = dict(os.environ, KV_QUALITY_CACHE=str(tmp_path / "file" / "cache"))
    (tmp_path / "file").write_text("")
    code, out, err = run_paper_check("claim", "default-policy", "--full", "--recompute", "quality_section10",
                                     "--json", "--out", tmp_path / "out", env=env)
    assert code == 0, err
    failed = [ln for ln in err.splitlines() if "recompute of" in ln]  # one line per model the set is declared for
    assert len(failed) == 2 and failed[0].startswith(
        "paper_check: recompute of realtrace/data/quality_section10 failed: step 1/1 (python -c import sys; from "
        'realtrace.quality.studies import write_studies; write_studies(*sys.argv[1:]) {"settings": {"opt_top": 32, '
        '"workers": 1}, "studies": [{"out": "Default_K128.json", "configs": [["D ... ') \
        and failed[1].startswith("paper_check: recompute of realtrace/data/gemma3-270m/quality_section10 failed: ") \
        and all("KV_QUALITY_CACHE" in ln for ln in failed), err
    assert fallback_lines(err) == ["FALLBACK: committed quality results used: realtrace/data/quality_section10, "
                                   f"realtrace/data/gemma3-270m/quality_section10 ({inputs.FAILED})"], err
    assert json.loads(out)["evidence"]["inputs"] == ("realtrace/data/quality_section10 (committed), "
                                                     "realtrace/data/gemma3-270m/quality_section10 (committed)")
    assert not list((tmp_path / "out").glob(".paper_check-staging-*"))


@pytest.mark.slow
def test_full_recomputes_value_directions_from_the_model_and_decides_from_it(tmp_path):
    """The end-to-end recompute of the cheapest set (about a minute of CPU per model, for each model it is declared
    for): no FALLBACK line, the claim names the recomputed sets and matches the ledger's full verdict (exit 0), and
    the staging directory is gone."""
    pytest.importorskip("torch")
    from realtrace.model import MODEL_PACKAGE

    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        pytest.skip("model wheel not installed")
    code, out, err = run_paper_check("claim", "surrogate-failure-directions", "--full", "--recompute",
                                     "value_directions", "--json", "--out", tmp_path, timeout=1800)
    assert code == 0, err
    assert fallback_lines(err) == [], err
    assert json.loads(out)["evidence"]["inputs"] == ("realtrace/data/value_directions (recomputed), "
                                                     "realtrace/data/gemma3-270m/value_directions (recomputed)")
    assert not list(tmp_path.glob(".paper_check-staging-*"))


RENDEZVOUS = """import pathlib, sys, time
here, other = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
here.write_text("started")
deadline = time.monotonic() + 20
while not other.exists():  # finishes only if the other set's step runs at the same time
    if time.monotonic() > deadline:
        sys.exit("the other set never started while this one ran")
    time.sleep(0.05)
print(here.name)
"""


def test_two_sets_are_remade_at_once_the_costliest_first_and_a_failure_stops_no_other(tmp_path):
    """Three stand-in sets: two whose steps each wait for the other's to start (so they pass only when run at the
    same time), and one that fails; the failure is one line and the others are remade; the order is by cost."""
    pytest.importorskip("distributed", reason="the sets are remade at once on the [dist] extra's TaskPool")
    from theorems.quality_inputs import QualityInput, Step

    marks = tmp_path / "marks"
    marks.mkdir()

    def waiting(me: str, other: str, minutes: float) -> QualityInput:
        return QualityInput(me, (), (Step(("{python}", "-c", RENDEZVOUS, str(marks / me), str(marks / other)),
                                          stdout="out.txt"),), minutes=minutes)

    failing = QualityInput("broken", (), (Step(("{python}", "-c", "import sys; sys.exit('no model here')")),),
                           minutes=0.5)
    sets = [failing, waiting("a", "b", 1.0), waiting("b", "a", 2.0)]
    assert [s.name for s in sorted(sets, key=lambda s: -s.minutes)] == ["b", "a", "broken"]
    got = {name: failure for (_, name), failure in inputs.recompute_all(sets, tmp_path / "staging").items()}
    assert list(got) == ["b", "a", "broken"]
    assert got["a"] is None and got["b"] is None, got
    assert got["broken"].startswith("step 1/1 (python -c import sys") and got["broken"].endswith("no model here")
    for name in "ab":
        assert (tmp_path / "staging" / name / "out.txt").read_text() == f"{name}\n"


# ---- the recompute in the background ----------------------------------------------------------------------------

WAIT_FOR = """import pathlib, sys, time
go, deadline = pathlib.Path(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while not go.exists():  # finishes only once the caller's block has run this far
    if time.monotonic() > deadline:
        sys.exit("the block never ran while this step did")
    time.sleep(0.05)
print("remade")
"""


def stand_in(monkeypatch, go, seconds: float, claims=("x",)) -> QualityInput:
    """One declared stand-in set, ``slow``, read by claim ``x`` and figure ``f``: its step waits up to ``seconds``
    for the file ``go``."""
    s = QualityInput("slow", tuple(claims), (Step(("{python}", "-c", WAIT_FOR, str(go), str(seconds)),
                                                  stdout="out.txt"),), extras=(), minutes=1.0, figures=("f",))
    monkeypatch.setattr(inputs, "QUALITY_INPUTS", (s,))
    return s


def test_the_block_runs_while_the_sets_are_remade_and_reads_them_after_wait(tmp_path, monkeypatch):
    """The stand-in step finishes only after the block has run: so the block runs during the recompute.  Until
    ``wait`` the set is waiting (its reader raises InputPending, its claim and figure are named as waiting); after
    it the reader reads the remade copy."""
    from realtrace import InputPending

    go = tmp_path / "go"
    stand_in(monkeypatch, go, 30)
    with inputs.quality_inputs(["x", "y"], True, None, tmp_path) as q:
        assert q.waiting == {"slow"}
        assert q.waiting_claims(["x", "y"]) == {"x"} and q.waiting_figures(["f", "g"]) == {"f"}
        with pytest.raises(InputPending, match="realtrace/data/slow"):
            input_dir("slow")
        go.write_text("")
        assert q.wait() == {"x": {"realtrace/data/slow": "recomputed"}}
        assert q.waiting == frozenset() and q.waiting_claims(["x"]) == set()
        assert (input_dir("slow") / "out.txt").read_text() == "remade\n"
    assert input_dir("slow") == DATA_DIR / "slow"
    assert not list(tmp_path.glob(".paper_check-staging-*"))


def test_a_block_left_early_stops_the_recompute(tmp_path, monkeypatch):
    """An error in the block while a step runs (it would wait 60 s): the step is terminated, the context ends
    within seconds, the staging directory is gone and the set is readable again."""
    import time

    stand_in(monkeypatch, tmp_path / "never", 60)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="left early"):
        with inputs.quality_inputs(["x"], True, None, tmp_path):
            time.sleep(1)  # the step is running
            raise RuntimeError("left early")
    assert time.monotonic() - t0 < 30
    assert input_dir("slow") == DATA_DIR / "slow"
    assert not list(tmp_path.glob(".paper_check-staging-*"))


def test_a_figure_drawn_from_a_waiting_set_is_not_handed_out():
    from realtrace import InputPending
    from theorems.claims import Context
    from theorems.profile import PROFILES

    ctx = Context(PROFILES["quick"], ROOT, {"bench": ["figures/b.png"], "8": ["figures/e.png"]},
                  waiting=frozenset({"bench"}))
    assert ctx.figure_files("8") == ["figures/e.png"]
    with pytest.raises(InputPending, match="bench"):
        ctx.figure_files("8", "bench")


@pytest.mark.parametrize("s", QUALITY_INPUTS, ids=lambda s: s.name)
def test_each_figure_declared_for_a_set_reads_it(s):
    """The other direction of the declaration (a reader missing from it fails every quick run, which holds every
    set back from what does not declare it): each figure declared for ``s`` reads it."""
    import figures
    from realtrace import InputPending, inputs_pending
    from theorems.profile import PROFILES
    from theorems.results.overlays import figure_data
    from theorems import tables

    for fid in s.figures:
        assert fid in figures.FIGURES, fid
        tables._TABLES.clear()  # a table computed earlier in this process would not read the set again
        with inputs_pending({s.name}), pytest.raises(InputPending, match=s.name):
            figure_data(fid, PROFILES["quick"])


ALONE = """import pathlib, sys, time
marks, me = pathlib.Path(sys.argv[1]), sys.argv[2]
(marks / me).write_text("")
time.sleep(1.5)
others = sorted(p.name for p in marks.iterdir() if p.name != me)
(marks / me).unlink()
print("beside " + ",".join(others) if others else "alone")
"""


def test_the_runs_own_work_takes_one_of_the_recomputes_cores(tmp_path, monkeypatch):
    """While the run's own work holds a core (``on_one_core``), two sets that would be remade at once run their steps
    one after the other: each step sees no other running (with a free core they do, the test above)."""
    pytest.importorskip("distributed", reason="the sets are remade at once on the [dist] extra's TaskPool")
    marks = tmp_path / "marks"
    marks.mkdir()
    sets = tuple(QualityInput(n, ("x",), (Step(("{python}", "-c", ALONE, str(marks), n), stdout="out.txt"),),
                              extras=(), minutes=m) for n, m in (("a", 2.0), ("b", 1.0)))
    monkeypatch.setattr(inputs, "QUALITY_INPUTS", sets)
    with inputs.quality_inputs(["x"], True, None, tmp_path) as q:
        with q.on_one_core():
            q._thread.join()  # the whole recompute while this block holds its core
        assert q.wait() == {"x": {"realtrace/data/a": "recomputed", "realtrace/data/b": "recomputed"}}
        assert [(input_dir(n) / "out.txt").read_text() for n in "ab"] == ["alone\n", "alone\n"]


def test_a_recompute_that_breaks_is_named_a_failure_of_every_set(tmp_path, monkeypatch, capsys):
    """An exception inside the background recompute (not a step's failure) is not lost with its thread: each set
    it was remaking is reported failed, in one line each, and named in the FALLBACK line."""
    stand_in(monkeypatch, tmp_path / "never", 1)

    def broken(sets, staging):
        raise RuntimeError("boom")

    monkeypatch.setattr(inputs, "recompute_all", broken)
    with inputs.quality_inputs(["x"], True, None, tmp_path) as q:
        assert q.wait() == {"x": {"realtrace/data/slow": "committed"}}
    err = capsys.readouterr().err
    assert "paper_check: recompute of realtrace/data/slow failed: the recompute stopped: RuntimeError: boom" in err
    assert fallback_lines(err) == [f"FALLBACK: committed quality results used: realtrace/data/slow ({inputs.FAILED})"]

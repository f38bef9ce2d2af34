"""``python -m bench.mutation`` through its command line, the way the performance page shows it (needs the
``[mutation]`` extra, which .ci/run installs): a seeded sample scored, its survivors written; bad input refused."""

import json
import re

from tests.command_line import is_one_line_error, run_module


def test_a_seeded_sample_is_scored_and_its_survivors_written(tmp_path):
    args = ("--module", "kvcore/numbers.py", "--sample", "3", "--seed", "1", "--tests", "tests/test_numbers.py",
            "--workers", "1", "--survivors", tmp_path / "s.json")
    code, out, err = run_module("bench.mutation", *args, timeout=300)
    assert code == 0, err
    line = re.search(r"kvcore/numbers\.py +(\d+) of +(\d+) mutations +killed +(\d+) +survived +(\d+) +incompetent +"
                     r"(\d+) +score ([\d.]+)%", out)
    assert line, out
    sampled, total, killed, survived, incompetent, score = map(float, line.groups())
    assert sampled == 3 and total > 100 and killed + survived + incompetent == 3
    assert score == round(100 * killed / (killed + survived), 1)
    (record,) = json.loads((tmp_path / "s.json").read_text())
    assert record["module"] == "kvcore/numbers.py" and record["sampled"] == 3
    assert len(record["survivors"]) == survived and all("+++ b/kvcore/numbers.py" in s["diff"]
                                                          for s in record["survivors"])
    again = run_module("bench.mutation", *args, timeout=300)[1]
    assert re.sub(r"\(\d+ s\)", "", again) == re.sub(r"\(\d+ s\)", "", out), "the same seed, another sample"


def test_bad_input_is_one_line(tmp_path):
    for args, needle in ((("--module", "nope.py"), "no such source file"),
                         (("--module", "kvcore/numbers.py", "--sample", "-1"), "--sample"),
                         (("--module", "kvcore/numbers.py", "--survivors", tmp_path), "--survivors")):
        code, out, err = run_module("bench.mutation", *args)
        assert is_one_line_error(code, err, needle), (args, err)

"""The built-in retrieval prompts (realtrace.quality.prompts): pure Python, sized here with a stand-in tokenizer
(whitespace words), so no model is needed."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kvcore.errors import ParameterError
from realtrace.quality.prompts import DEFAULT, build, parse_name


def words(text: str) -> int:
    return len(text.split())


def test_needle_prompt_states_three_codes_in_depth_order_and_asks_one():
    for name, asked in (("needle-600-d10", 0), ("needle-600-d50", 1), ("needle-900-d90", 2)):
        p = build(name, words)
        text = p.text
        found = re.findall(r"The code for the (\w+) locker is (\d{4})\.", text)
        assert len(found) == 3 and len({c for c, _ in found}) == 3 and len({d for _, d in found}) == 3
        colour, code = found[asked]
        assert p.answer == f" {code}"
        assert text.endswith(f"Answer: The code for the {colour} locker is")
        # the needles sit after about 10%, 50% and 90% of the prose (paragraphs are not split)
        prose = sum(len(t) for n, t in p.parts if n.startswith("text_"))
        before = [sum(len(t) for n, t in p.parts[:i] if n.startswith("text_"))
                  for i, (n, _) in enumerate(p.parts) if n.startswith("needle_")]
        assert np.allclose(np.array(before) / prose, [0.1, 0.5, 0.9], atol=0.08), before
        assert sum(words(t) for _, t in p.parts) + words(p.answer) <= int(name.split("-")[1])


def _resolve(text: str) -> tuple[str, dict]:
    """The answer a reader of ``text`` derives by following its sentences (not the builder's bookkeeping), and where
    (fraction of the characters) the fact and the link to it stand."""
    question = re.search(r"Question: What is the code for the (\w+) locker\?", text)
    asked, end = question.group(1), question.start()
    codes = {m.group(1): (m.group(2), m.start() / end)
             for m in re.finditer(r"The code for the (\w+) locker is (\d{4})\.", text[:end])}
    same = {m.group(1): (m.group(2), m.start() / end)
            for m in re.finditer(r"The (\w+) locker has the same code as the (\w+) locker\.", text)}
    alias = {m.group(1): (m.group(2), m.start() / end)
             for m in re.finditer(r'"the (\w+) locker" means the (\w+) locker\.', text)}
    link, link_at = (same | alias)[asked]
    assert asked not in codes  # one hop is not enough
    code, fact_at = codes[link]
    return code, {"fact": fact_at, "link": link_at, "direct": len(codes), "alias": asked in alias}


@pytest.mark.parametrize("kind", ["chain", "alias"])
@pytest.mark.parametrize("depth", [10, 90])
def test_two_hop_prompts_need_both_sentences_and_put_the_first_at_the_depth(kind, depth):
    p = build(f"{kind}-600-d{depth}", words)
    code, where = _resolve(p.text)
    assert p.answer == f" {code}" and where["alias"] == (kind == "alias")
    # chain: the code stated at the depth and the link at the other end; alias: the definition at the depth
    first = where["fact"] if kind == "chain" else where["link"]
    second = where["link"] if kind == "chain" else where["fact"]
    assert abs(first - depth / 100) < 0.08 and abs(second - (1 - depth / 100)) < 0.08, where
    assert where["direct"] == 2  # the hop's code and the 50 % needle, a distractor
    assert build(f"{kind}-600-d{depth}", words) == p and p.text != build(f"needle-600-d{depth}", words).text


def test_kv_prompt_asks_the_right_line():
    p = build("kv-30-7", words)
    lines = p.parts[1][1].splitlines()
    assert len(lines) == 30 and len(set(lines)) == 30
    who, room = re.match(r"(.+) is staying in room (\d{4})\.", lines[6]).groups()
    assert p.answer == f" {room}" and p.text.endswith(f"Answer: {who} is staying in room")
    assert len({re.match(r"(.+) is staying", ln).group(1) for ln in lines}) == 30


def test_prompts_are_deterministic_and_distinct():
    a, b = build("needle-700-d50", words), build("needle-700-d50", words)
    assert a == b
    assert build("needle-700-d10", words).text != a.text  # another prompt: other codes, other filler
    assert len({build(n, words).answer for n in DEFAULT}) == len(DEFAULT)


def test_bad_names_are_one_line_errors():
    for bad in ("needle-100-d10", "needle-500-d30", "kv-3-4", "haystack", "needle-500", "chain-500-d50",
                "alias-100-d10", "hop-500-d10"):
        with pytest.raises(ParameterError) as exc:
            build(bad, words)
        assert "\n" not in str(exc.value)
    assert parse_name("kv-64-64") == ("kv", 64, 64)


def test_shift_prompt_states_the_sleeper_once_inside_a_drilled_register():
    """shift-G-dD: a register of G distinct guests, G answered questions each repeating a register line verbatim
    (name and room), the locker code stated once at D % of those 2G lines and nowhere else, asked last."""
    for name, guests, depth in (("shift-16-d0", 16, 0), ("shift-16-d50", 16, 50), ("shift-24-d30", 24, 30)):
        p = build(name, words)
        parts = dict(p.parts)
        assert list(parts) == ["intro", "decoy_0", "sleeper", "decoy_1", "question"]
        decoy = parts["decoy_0"] + parts["decoy_1"]
        register = dict(re.findall(r"^(\w+ \w+) is staying in room (\d{4})\.$", decoy, re.M))
        drills = re.findall(r"Question: Which room is (\w+ \w+) staying in\?\nAnswer: \1 is staying in room "
                            r"(\d{4})\.", decoy)
        assert len(register) == guests and len(drills) == guests
        assert all(register[who] == room for who, room in drills)  # every drill reads a register line again
        assert len({who for who, _ in drills}) < guests  # drawn with replacement: some lines are read repeatedly
        colour, code = re.search(r"code for the (\w+) storage locker in the basement is (\d{4})\.",
                                 parts["sleeper"]).groups()
        assert p.answer == f" {code}" and p.text.count(code) == 1 and code not in register.values()
        assert p.text.endswith(f"Answer: The code for the {colour} storage locker in the basement is")
        lines_before = parts["decoy_0"].count("is staying in room")
        assert lines_before == round(depth / 100 * 2 * guests)
    assert build("shift-16-d50", words) == build("shift-16-d50", words)
    assert build("shift-16-d50", words).answer != build("shift-16-d0", words).answer
    assert parse_name("shift-24-d50") == ("shift", 24, 50)


@pytest.mark.parametrize("bad", ["shift-3-d0", "shift-16-d95", "shift-16-50", "shift-x-d0"])
def test_bad_shift_names_are_one_line_errors(bad):
    with pytest.raises(ParameterError) as exc:
        build(bad, words)
    assert "\n" not in str(exc.value) and bad in str(exc.value)

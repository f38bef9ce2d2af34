"""Built-in prompts for trace capture.  The texts were written for this toolkit and are dedicated to the public
domain (no third-party text is quoted), so a captured trace can be shipped and re-created anywhere.

``benign``
    A plain expository passage (on a river valley and its mill) and nothing else: ordinary generation, where
    attention is expected to be recency-heavy and persistent.
``recall``
    The same passage with a *sleeper*: a code (segment ``code``) stated once at the very start, left idle for the
    whole passage, and asked for at the end (the prompt ends right before the answer).  Later tokens then depend on
    early, long-idle tokens: the shifted/adversarial suffix of the paper's Section 11 (and the decoy-and-sleeper
    shape of Section 5) produced by a real model instead of by construction.

``needles`` (``builtin:needles`` = ``builtin:needles:8192``, or ``builtin:needles:N`` for a total of at most ``N``
    tokens with the teacher-forced answer ``builtin:needles-answer``)
    A long multi-needle recall document: an instruction, then reference prose with five locker codes (the needles)
    placed after 10%, 30%, 50%, 70% and 90% of it, then a question asking for the first (deepest) code.  The prose is
    the English text of the Python Language Reference help topics that CPython ships in its standard library
    (``pydoc_data.topics``, the text of ``help('assignment')`` etc.; PSF license), topics in sorted order, prose
    paragraphs only (indented grammar and code blocks are skipped), each paragraph's lines joined by spaces.  No
    download is needed and the text is identical wherever the same CPython minor version runs; the capture records
    the Python version and the sha256 of the prompt text in the manifest (``capture.prompt_sha256``).  The token
    budget is met by counting with the model's tokenizer, so the document is built when the tokenizer is loaded.

Each prompt is a list of named parts; the capture tokenizes the parts one by one and records each part's token span
as a *segment* in the trace set's manifest, so experiments can split a trace into its benign and suffix steps.
Derived segments (:func:`derived_segments`) name spans across parts: for ``needles``, ``code`` is the asked needle's
code (the sleeper of :mod:`realtrace.experiments`) and ``passage`` the whole document before the question.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kvcore.errors import ParameterError

PASSAGE = (
    "The valley runs north to south for about eleven miles, and a single river follows it the whole way. In spring "
    "the water is brown and fast, carrying the melt from the hills, and the fields on either bank stay soft until "
    "the middle of May. By midsummer the river slows, turns clear, and drops far enough that children can cross "
    "the shallows near the old ford on foot. Most families in the valley grow barley and potatoes, and a few keep "
    "sheep on the higher slopes where the soil is too thin for the plough.\n\n"
    "The mill stands where the valley narrows, a little below the ford. It was built of grey stone, with a wooden "
    "wheel on the river side and a loading door on the road side. For a long time it ground grain for every farm "
    "within a day's walk. A miller and two helpers worked it through the autumn, when the harvest came in, and the "
    "building was quiet for most of the rest of the year. The wheel turned a shaft, the shaft turned a pair of "
    "heavy stones, and the grain poured down between the stones from a wooden hopper above them.\n\n"
    "Keeping a mill running was mostly a matter of small repairs. The paddles of the wheel wore down and had to "
    "be replaced one at a time. The millstones lost their grooves and had to be dressed with a hammer and chisel, "
    "a slow job that took a full day for each stone. The sluice gate that fed water to the wheel jammed whenever "
    "branches came down the river after a storm, and someone had to wade in and clear it by hand. Good millers "
    "kept a written record of every repair, the weather on the day, and the amount of grain they ground.\n\n"
    "Those records are useful now for a different reason. Because the miller wrote down the river level each "
    "morning, the notebooks give a daily account of the water across many years. Anyone reading them can see the "
    "dry summers, when the wheel stopped for weeks, and the wet autumns, when the water rose over the lower "
    "fields. The same pages show when the first frost arrived, when the swallows left, and how the price of "
    "flour changed from one season to the next.\n\n"
    "Today the wheel no longer turns. The stones are still inside, resting on their frame, and the hopper hangs "
    "empty above them. Visitors walk up from the village on summer afternoons, look at the wheel, and read a "
    "board by the door that explains how the mill worked. Some of them cross the ford on the way back, the way "
    "people have crossed it for centuries, and stop on the far bank to watch the water run over the stones.\n\n"
)

RECALL_CODE = "4 7 1 9 3"

PROMPTS: dict[str, list[tuple[str, str]]] = {
    "benign": [("passage", PASSAGE)],
    "recall": [
        ("key", "Remember this locker code for later:"),
        ("code", f" {RECALL_CODE}.\n\n"),
        ("passage", PASSAGE),
        ("question", "Question: What was the locker code given at the start?\nAnswer: The locker code is"),
    ],
}

# Teacher-forced continuations.  ``recall-answer`` is the correct answer to the ``recall`` question followed by a
# sentence that points back at the start, so the suffix must read the sleeper tokens (greedy decoding by this small
# model does not reliably retrieve the code, so forcing the right answer is what makes the suffix depend on them).
CONTINUATIONS: dict[str, str] = {
    "recall-answer": (f" {RECALL_CODE}. It was given in the first line, before the passage about the valley and its "
                      "mill."),
    "needles-answer": " 8 2 6 0 5. It was the first of the five codes, given near the start of the reference text.",
}

# ---- the long multi-needle document ----------------------------------------------------------------------------

NEEDLES = (("red", "8 2 6 0 5"), ("blue", "3 9 4 1 7"), ("green", "6 0 8 3 2"), ("yellow", "1 5 7 9 4"),
           ("white", "9 3 2 6 8"))
NEEDLE_DEPTHS = (0.1, 0.3, 0.5, 0.7, 0.9)  # share of the reference prose before each needle
NEEDLES_DEFAULT_TOKENS = 8192  # SmolLM2-135M's context
NEEDLES_MIN_TOKENS = 256
NEEDLES_INTRO = ("Five locker codes are hidden in the reference text below. Remember every code and the colour of "
                 "its locker; you will be asked for one of them at the end.\n\n")
NEEDLES_QUESTION = ("\n\nQuestion: What was the code of the red locker, the first code in the text?\n"
                    "Answer: The code of the red locker is")


def needle_sentence(colour: str, code: str) -> tuple[str, str, str]:
    """``(lead, code, tail)`` of one needle; the code is its own part so its tokens are a segment."""
    return f"\n\nThe code of the {colour} locker is", f" {code}", ". Remember it.\n\n"


def reference_paragraphs() -> list[str]:
    """The prose paragraphs of CPython's ``pydoc_data.topics`` (see the module docstring), in a fixed order."""
    from pydoc_data.topics import topics

    out = []
    for key in sorted(topics):
        for para in re.split(r"\n\s*\n", topics[key]):
            para = para.strip("\n")
            lines = para.split("\n")
            if not para.strip() or lines[0][:1].isspace() or any(set(ln.strip()) <= set("*=-") for ln in lines):
                continue  # indented grammar/code, or a heading with its underline
            out.append(" ".join(ln.strip() for ln in lines))
    return out


def needles_prompt(total_tokens: int, count_tokens: Callable[[str], int]) -> list[tuple[str, str]]:
    """The ``needles`` document with at most ``total_tokens`` tokens including ``builtin:needles-answer``, counted
    part by part with ``count_tokens`` (the capture tokenizes part by part the same way)."""
    if total_tokens < NEEDLES_MIN_TOKENS:
        raise ParameterError(f"--prompt builtin:needles:{total_tokens}: needs at least {NEEDLES_MIN_TOKENS} tokens")
    fixed = [("key", NEEDLES_INTRO), ("question", NEEDLES_QUESTION)]
    for colour, code in NEEDLES:
        fixed += list(zip(("lead", "code", "tail"), needle_sentence(colour, code)))
    budget = total_tokens - sum(count_tokens(t) for _, t in fixed) - count_tokens(CONTINUATIONS["needles-answer"])
    paras = iter(reference_paragraphs())
    bounds = [0.0, *NEEDLE_DEPTHS, 1.0]
    parts: list[tuple[str, str]] = [("key", NEEDLES_INTRO)]
    pending = None
    for j in range(len(bounds) - 1):
        share = int(budget * bounds[j + 1]) - int(budget * bounds[j])
        text = ""
        while True:
            para = pending if pending is not None else next(paras, None)
            pending = None
            if para is None:
                break
            cand = para if not text else text + "\n\n" + para
            if count_tokens(cand) <= share:
                text = cand
                continue
            # the paragraph does not fit: take as many of its sentences as do, the rest opens the next part
            sentences = re.split(r"(?<=[.:;]) ", para)
            n_fit = 0
            while n_fit < len(sentences) and count_tokens(
                    cand[: len(cand) - len(para)] + " ".join(sentences[: n_fit + 1])) <= share:
                n_fit += 1
            if n_fit:
                text = cand[: len(cand) - len(para)] + " ".join(sentences[:n_fit])
            pending = " ".join(sentences[n_fit:])
            break
        parts.append((f"text_{j}", text))
        if j < len(NEEDLES):
            colour, code = NEEDLES[j]
            lead, digits, tail = needle_sentence(colour, code)
            parts += [(f"needle_{j}", lead), (f"needle_{j}_code", digits), (f"needle_{j}_tail", tail)]
    parts.append(("question", NEEDLES_QUESTION))
    return parts


def known_answer(prompt: str) -> str | None:
    """The code a built-in recall prompt asks for (``"4 7 1 9 3"`` for ``builtin:recall``, the first needle's for
    ``builtin:needles[:N]``), or None for any other prompt."""
    if prompt == "builtin:recall":
        return RECALL_CODE
    if prompt.startswith("builtin:needles"):
        return NEEDLES[0][1]
    return None


def parse_builtin(name: str) -> tuple[str, int | None]:
    """``"recall"`` -> ``("recall", None)``; ``"needles:4096"`` -> ``("needles", 4096)``; checks the name."""
    base, _, arg = name.partition(":")
    if base not in PROMPTS and base != "needles":
        raise ParameterError(f"--prompt builtin:{name}: unknown built-in prompt (known: "
                             f"{', '.join(sorted([*PROMPTS, 'needles[:N]']))})")
    if base != "needles":
        if arg:
            raise ParameterError(f"--prompt builtin:{name}: only builtin:needles takes a length (:N)")
        return base, None
    try:
        n = int(arg) if arg else NEEDLES_DEFAULT_TOKENS
    except ValueError:
        raise ParameterError(f"--prompt builtin:{name}: {arg!r} is not a token count") from None
    if n < NEEDLES_MIN_TOKENS:
        raise ParameterError(f"--prompt builtin:{name}: needs at least {NEEDLES_MIN_TOKENS} tokens")
    return base, n


def derived_segments(segments: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """Named spans across parts (module docstring): for the needles document, ``code`` (the asked needle's digits)
    and ``passage`` (everything between the instruction and the question)."""
    if "needle_0_code" in segments and "question" in segments and "key" in segments:
        return {"code": segments["needle_0_code"], "passage": (segments["key"][1], segments["question"][0])}
    return {}


def builtin_continuation(name: str) -> str:
    try:
        return CONTINUATIONS[name]
    except KeyError:
        raise ParameterError(f"--continuation builtin:{name}: unknown built-in continuation (known: "
                             f"{', '.join(sorted(CONTINUATIONS))})") from None


def builtin_prompt(name: str, count_tokens: Callable[[str], int] | None = None) -> list[tuple[str, str]]:
    """The named parts ``[(segment, text), ...]`` of a built-in prompt (see module docstring); ``needles`` needs
    the tokenizer's ``count_tokens``."""
    base, n = parse_builtin(name)
    if base != "needles":
        return PROMPTS[base]
    if count_tokens is None:
        raise ParameterError(f"--prompt builtin:{name}: the needles document is sized with the model's tokenizer")
    return needles_prompt(n, count_tokens)

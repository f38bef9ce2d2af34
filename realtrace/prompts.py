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

Each prompt is a list of named parts; the capture tokenizes the parts one by one and records each part's token span
as a *segment* in the trace set's manifest, so experiments can split a trace into its benign and suffix steps.
"""

from __future__ import annotations

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

PROMPTS: dict[str, list[tuple[str, str]]] = {
    "benign": [("passage", PASSAGE)],
    "recall": [
        ("key", "Remember this locker code for later:"),
        ("code", " 4 7 1 9 3.\n\n"),
        ("passage", PASSAGE),
        ("question", "Question: What was the locker code given at the start?\nAnswer: The locker code is"),
    ],
}

# Teacher-forced continuations.  ``recall-answer`` is the correct answer to the ``recall`` question followed by a
# sentence that points back at the start, so the suffix must read the sleeper tokens (greedy decoding by this small
# model does not reliably retrieve the code, so forcing the right answer is what makes the suffix depend on them).
CONTINUATIONS: dict[str, str] = {
    "recall-answer": " 4 7 1 9 3. It was given in the first line, before the passage about the valley and its mill.",
}


def builtin_continuation(name: str) -> str:
    try:
        return CONTINUATIONS[name]
    except KeyError:
        raise ParameterError(f"--continuation builtin:{name}: unknown built-in continuation (known: "
                             f"{', '.join(sorted(CONTINUATIONS))})") from None


def builtin_prompt(name: str) -> list[tuple[str, str]]:
    """The named parts ``[(segment, text), ...]`` of a built-in prompt (see module docstring)."""
    try:
        return PROMPTS[name]
    except KeyError:
        raise ParameterError(f"--prompt builtin:{name}: unknown built-in prompt (known: "
                             f"{', '.join(sorted(PROMPTS))})") from None

"""Claims that are numbers computed from a formula: Eq. 2, Eq. 3 (paper §2.1, §3-4) and the worked numbers of the
figure page (seed 002), recomputed with the toolkit's own formula and policy code and compared at the precision the
source states them."""

from __future__ import annotations

from kvcore import formulas as F
from kvcore.formulas import ema_half_life, ema_update, eviction_priority, recency_decay

from .registry import ClaimResult, Context, claim

MB, GB = 1e6, 1e9


def _at_precision(x: float, digits: int) -> float:
    """``x`` rounded half-up at ``digits`` decimals, as a person reading a printed table would (no binary drift)."""
    from decimal import ROUND_HALF_UP, Decimal

    return float(Decimal(repr(x)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


@claim("eq2-kv-bytes", "§2.1", "For a 7B model (32 layers, 32 KV heads, d = 128, fp16) the cache costs about half a "
       "megabyte per token, so 32K tokens cost about 16 GB at batch 1; the 70B GQA model is cheaper per token than "
       "the 13B one.")
def eq2(ctx: Context) -> ClaimResult:
    p7, p13, p70 = (c.bytes_per_token for c in F.PAPER_CONFIGS)
    ctx32 = F.kv_cache_bytes(32, 32, 128, 2, 32 * 1024)
    ok = abs(p7 / F.MiB - 0.5) < 1e-12 and abs(ctx32 / F.GiB - 16) < 1e-12 and p70 < p13
    return ClaimResult(
        "holds" if ok else "refuted",
        f"7B: {p7:,.0f} B/token = 0.5 MiB ({p7 / MB:.3f} MB); 32,768 tokens = {ctx32 / F.GiB:.0f} GiB "
        f"({ctx32 / GB:.2f} GB); 70B GQA {p70:,.0f} < 13B {p13:,.0f} B/token.  Exact in binary units (MiB, GiB); "
        "the paper's 'megabyte'/'gigabyte' are binary.",
        {"bytes_per_token": {c.name: c.bytes_per_token for c in F.PAPER_CONFIGS}, "MiB_per_token_7B": p7 / F.MiB,
         "MB_per_token_7B": p7 / MB, "cache_32K_GiB": ctx32 / F.GiB, "cache_32K_GB": ctx32 / GB,
         "70B_cheaper_than_13B": p70 < p13, "70B_cheaper_than_7B": p70 < p7},
        {"MB_per_token_7B": "about 0.5", "cache_32K_GB": "roughly 16", "70B_cheaper_than_13B": True},
        {"test": "tests/test_formulas.py", "figure": ctx.figures.get("2", [])})


@claim("eq3-throughput", "§3, §4", "In the memory-bound regime batch and throughput grow by about S/k; k = 2000, "
       "S = 16000 gives about 8x; H2O's 5x and TOVA's 8x budget cuts explain the gains those papers report.")
def eq3(ctx: Context) -> ClaimResult:
    gain = F.throughput_gain(16000, 2000)
    free = F.free_memory(F.CONFIG_7B, F.A100_80GB)
    whole = F.batch_gain(free, 16000, 2000, F.CONFIG_7B.bytes_per_token)
    roof = F.max_throughput_gain(F.CONFIG_7B, F.A100_80GB, 16000, 2000)
    from figures.published_data import points

    budget = {p["system"]: p["value"] for p in points("budget_fraction") if p["paper_states"]}
    reported = {p["system"]: p["value"] for p in points("throughput_gain") if p["paper_states"]}
    predicted = {s: F.throughput_gain(round(1 / budget[s]), 1) for s in ("H2O", "TOVA")}
    reported = {s: reported[s] for s in predicted}
    explained = all(abs(predicted[s] - reported[s]) / reported[s] < 0.25 for s in predicted)
    return ClaimResult(
        "holds" if explained and gain == 8 else "holds-with-correction",
        f"S/k = {gain:g} (whole batches on an A100-80GB: {whole:.2f}; roofline: {roof:.2f}), so the 8x example holds; "
        "but the budget cuts do not explain the cited gains: Eq. 3 predicts 5x and 8x where H2O reports up to 29x "
        "(against offloading baselines, not a budget effect) and TOVA 4.8x.",
        {"S_over_k": gain, "whole_batch_gain_A100_7B": whole, "roofline_gain_A100_7B": roof,
         "budget_fraction": {s: budget[s] for s in predicted}, "predicted_gain_from_budget_cut": predicted,
         "reported_throughput_gain": reported, "within_25_percent": explained},
        {"gain_k2000_S16000": "about 8x", "explains": "H2O 5x and TOVA 8x budget cuts explain their gains"},
        {"test": "tests/test_formulas.py", "figure": ctx.figures.get("6", []) + ctx.figures.get("15", []),
         "data": "figures/data/published.json"},
        correction="Eq. 3's S/k holds for the worked example; the reported gains of H2O (up to 29x, measured against "
                   "offloading inference systems) and TOVA (4.8x) are not the budget factors 5 and 8.")


@claim("blk-bytes", "seed 002", "A block of 16 tokens is 5.00 MiB.")
def blk_bytes(ctx: Context) -> ClaimResult:
    from adversary.block_workload import BLOCK_MODEL, block_bytes, block_capacity

    b = block_bytes()
    return ClaimResult(
        "holds" if b == 5 * F.MiB else "refuted",
        f"16 tokens x 2 x {BLOCK_MODEL.layers} layers x {BLOCK_MODEL.kv_heads} KV heads x {BLOCK_MODEL.head_dim} x "
        f"{BLOCK_MODEL.bytes_per_elem:g} B = {b / F.MiB:.2f} MiB for {BLOCK_MODEL.name} (the page names no model; this "
        f"is the standard shape that gives exactly 5 MiB); 32 GiB holds {block_capacity(32)} blocks.",
        {"block_bytes": b, "block_MiB": b / F.MiB, "model": BLOCK_MODEL.name, "blocks_in_32_GiB": block_capacity(32)},
        {"block_MiB": 5.00}, {"test": "tests/test_figure_page_numbers.py"})


EMA_INPUTS = (0.45, 0.12, 0.30, 0.08, 0.35)
EMA_PAGE = (0.023, 0.028, 0.042, 0.044, 0.059)


@claim("blk-ema-table", "seed 002", "EMA with alpha = 0.05 over 0.45, 0.12, 0.30, 0.08, 0.35 gives 0.023, 0.028, "
       "0.042, 0.044, 0.059, against a raw mean of 0.26.")
def blk_ema(ctx: Context) -> ClaimResult:
    exact, carried, s, c = [], [], 0.0, 0.0
    for x in EMA_INPUTS:
        s = ema_update(s, x, 0.05)
        c = _at_precision(ema_update(c, x, 0.05), 3)   # the page's own arithmetic: round, then carry
        exact.append(s)
        carried.append(c)
    shown = [_at_precision(v, 3) for v in exact]
    mean = sum(EMA_INPUTS) / len(EMA_INPUTS)
    ok_exact = tuple(shown) == EMA_PAGE
    return ClaimResult(
        "holds" if ok_exact else "holds-with-correction",
        f"Exact EMA {', '.join(f'{v:.4f}' for v in exact)} rounds to {shown}; the page's values "
        f"{list(EMA_PAGE)} come from rounding each step to 3 decimals before the next ({carried}); raw mean "
        f"{mean:.2f}.",
        {"exact": exact, "exact_rounded_3": shown, "rounded_then_carried": carried, "raw_mean": mean},
        {"ema": list(EMA_PAGE), "raw_mean": 0.26},
        {"test": "tests/test_figure_page_numbers.py", "figure": ctx.figures.get("seed002", [])},
        correction=None if ok_exact else
        f"carried at full precision the EMA is {', '.join(f'{v:.3f}' for v in exact)}; the table rounds each step "
        "before feeding it to the next.")


@claim("blk-half-life", "seed 002", "alpha = 0.05 gives a half-life of 13.5 decode steps.")
def blk_half_life(ctx: Context) -> ClaimResult:
    h = ema_half_life(0.05)
    return ClaimResult("holds" if _at_precision(h, 1) == 13.5 else "refuted",
                       f"ln 0.5 / ln 0.95 = {h:.4f} steps.", {"half_life": h}, {"half_life": 13.5},
                       {"test": "tests/test_figure_page_numbers.py"})


@claim("blk-recency-decay", "seed 002", "With beta = 0.001 the recency decay is about 63% at 1000 steps and 86% at "
       "2000; 1/beta is about 100 s at 10 tokens/s.")
def blk_decay(ctx: Context) -> ClaimResult:
    d1, d2, d50 = recency_decay(1000, 0.001), recency_decay(2000, 0.001), recency_decay(50, 0.001)
    seconds = (1 / 0.001) / 10
    ok = round(100 * d1) == 63 and round(100 * d2) == 86 and seconds == 100
    return ClaimResult("holds" if ok else "refuted",
                       f"1 - e^-1 = {d1:.4f}, 1 - e^-2 = {d2:.4f}, 1000 steps / 10 tok/s = {seconds:g} s "
                       f"(and {d50:.4f} at 50 steps, used for block A).",
                       {"decay_1000": d1, "decay_2000": d2, "decay_50": d50, "seconds": seconds},
                       {"decay_1000": "about 63%", "decay_2000": "about 86%", "seconds": "about 100"},
                       {"test": "tests/test_figure_page_numbers.py"})


@claim("blk-priority-examples", "seed 002", "Block A (score 0.059, 50 steps idle) has priority 0.046 and is kept; "
       "block B (score 0.02, 2000 steps idle) has priority 0.848 and is evicted.")
def blk_priority(ctx: Context) -> ClaimResult:
    a, b = eviction_priority(0.059, 50, 0.001), eviction_priority(0.02, 2000, 0.001)
    b_page_way = _at_precision((1 - 0.02) * _at_precision(recency_decay(2000, 0.001), 3), 3)
    ok_a, ok_b = _at_precision(a, 3) == 0.046, _at_precision(b, 3) == 0.848
    verdict = "holds" if ok_a and ok_b else ("holds-with-correction" if ok_a and b_page_way == 0.848 else "refuted")
    return ClaimResult(
        verdict,
        f"A: {a:.4f} (kept), B: {b:.4f} (evicted, the higher priority); the page's 0.848 comes from rounding the "
        f"decay to 0.865 first ({b_page_way}).",
        {"priority_A": a, "priority_B": b, "B_with_rounded_decay": b_page_way, "B_evicted_before_A": b > a},
        {"priority_A": 0.046, "priority_B": 0.848},
        {"test": "tests/test_figure_page_numbers.py", "figure": ctx.figures.get("seed002", [])},
        correction=None if verdict == "holds" else f"block B's priority is {b:.3f}, not 0.848")


DECISION_CELLS = {"recent high score (0.85, 20 steps)": (0.85, 20, 0.003),
                  "system prompt (0.72, 3000 steps)": (0.72, 3000, 0.266),
                  "new block (0.05, 10 steps)": (0.05, 10, 0.009),
                  "filler (0.03, 5000 steps)": (0.03, 5000, 0.963)}


@claim("blk-decision-matrix", "seed 002", "The four quadrant examples have priorities 0.003, 0.266, 0.009 and 0.963.")
def blk_matrix(ctx: Context) -> ClaimResult:
    got = {name: eviction_priority(s, age, 0.001) for name, (s, age, _) in DECISION_CELLS.items()}
    ok = all(_at_precision(got[n], 3) == want for n, (_, _, want) in DECISION_CELLS.items())
    return ClaimResult("holds" if ok else "refuted",
                       "Recomputed: " + ", ".join(f"{v:.4f}" for v in got.values()) + ".",
                       {"priority": got}, {"priority": {n: w for n, (_, _, w) in DECISION_CELLS.items()}},
                       {"test": "tests/test_figure_page_numbers.py", "figure": ctx.figures.get("seed002", [])})

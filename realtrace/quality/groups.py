"""How a quality study's work is cut into tasks: a prompt whose share would keep one worker busy alone is split into
groups of its budgets (:func:`budget_groups`), each group one task with the prompt's whole reference, and the
groups' results are put back together as one task's (:func:`merged_prompt`, and the runs by their budget and
config).  Splitting changes no number: each run
depends only on its prompt, configuration and budget (the closed loop's generators are seeded per layer and KV head,
an optimum is solved per budget), which a test checks by forcing a split."""

from __future__ import annotations

import math


def budget_groups(lengths: list[int], n_budgets: int, slots: int) -> list[int]:
    """How many tasks each prompt's work is split into, its budgets dealt round-robin among them (group ``j`` takes
    budgets ``j, j + n, j + 2n, ...`` of ``n`` groups).  A prompt's cost is taken as ``T^2`` (its attention and the
    exact optimum's exit arcs both grow so); a prompt costing more than ``1 / (2 * slots)`` of the whole is split
    into as many groups as bring each under that share (at most one per budget), so that no task keeps one of
    ``slots`` workers busy long after the others are done (longest-first scheduling then ends by 1.5 times the
    balanced time: each worker starts its last task before the balanced time, and no task takes more than half of
    it -- when costs go as ``T^2``).  Each extra group recomputes the prompt's fixed work (the reference and the
    charging rows when not cached, the optimum's network), so a serial run (``slots`` 1) splits nothing."""
    cost = [T * T for T in lengths]
    if slots <= 1 or not cost:
        return [1] * len(lengths)
    share = sum(cost) / (2 * slots)
    return [min(n_budgets, max(1, math.ceil(c / share))) for c in cost]


def task_groups(lengths: list[int], budgets: tuple[int, ...], slots: int) -> list[tuple[int, tuple[int, ...]]]:
    """The tasks of a study on prompts of ``lengths`` tokens at ``budgets`` for ``slots`` workers: ``(prompt index,
    its budgets)`` per task, the costliest first (longest-first scheduling)."""
    groups = budget_groups(lengths, len(budgets), slots)
    tasks = [(i, budgets[j::n]) for i, n in enumerate(groups) for j in range(n)]
    return sorted(tasks, key=lambda task: -lengths[task[0]] ** 2 / groups[task[0]])


def merged_prompt(parts: list[dict]) -> dict:
    """One prompt's information from its groups' results (:func:`budget_groups`; their runs are matched to their
    studies by :func:`realtrace.quality.run.evaluate_many`): the reference ``computed`` when any group computed it,
    the counts of press choices, optima, passes and closed-loop runs read from the cache summed."""
    if len(parts) == 1:
        return parts[0]["prompt"]
    statuses = {p["prompt"]["cache"]["reference"] for p in parts}
    return {**parts[0]["prompt"], "cache": {
        "reference": "computed" if "computed" in statuses else statuses.pop(),
        **{count: sum(p["prompt"]["cache"][count] for p in parts)
           for count in ("press_choices_cached", "optima_cached", "passes_cached", "closed_loop_runs_cached")}}}


__all__ = ["budget_groups", "merged_prompt", "task_groups"]

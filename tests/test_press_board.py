"""The press leaderboard's output (no torch): ranking, deterministic figure bytes, atomic files, the report section's
FALLBACK line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from realtrace.press import board as pb
from realtrace.press.rows import COMPLETE_NOTE


def fake_run(press, mode, ratio, budget, rows, answer=None):
    traces = [{"trace": f"L{layer:02d}_kv0", "layer": layer, "group": g, "budget": budget, "press": p, "opt": o,
               "one_shot": None, "toolkit": None, "charged_mass": 10.0}
              for layer, g, p, o in rows]
    total = {k: sum(r[k] for r in traces) for k in ("press", "opt", "charged_mass")}
    total.update(one_shot=None, toolkit=None)
    return {"press": press, "mode": mode, "ratio": ratio, "budget_arg": None, "traceset": "ts", "T": 100,
            "start": 80, "rows": "complete", "charged": COMPLETE_NOTE, "versions": {"kvpress": "0.5.5", "transformers": "5.2.0"}, "traces": traces,
            "total": total, "answer": answer}


RUNS = [
    fake_run("A", "prefill", 0.5, 60, [(0, "early", 1.0, 0.5), (29, "late", 2.0, 0.5)]),
    fake_run("A", "prefill", 0.9, 30, [(0, "early", 3.0, 1.0), (29, "late", 4.0, 1.0)]),
    fake_run("B", "prefill", 0.5, 60, [(0, "early", 0.6, 0.5), (29, "late", 0.6, 0.5)],
             {"baseline": " x", "press": " y", "changed": True, "expected": "1 2", "baseline_correct": False,
              "press_correct": False}),
    fake_run("B", "prefill", 0.9, 30, [(0, "early", 1.5, 1.0), (29, "late", 1.5, 1.0)]),
    fake_run("C", "decoding", None, 80, [(0, "early", 0.5, 0.5), (29, "late", 0.5, 0.5)]),
]


def test_ranking_by_mean_excess_share():
    ranked = pb.ranking(RUNS)
    assert [r["press"] for r in ranked] == ["C (decoding)", "B", "A"]
    a = ranked[-1]
    # A: (3 - 1) / 20 at ratio 0.5 and (7 - 2) / 20 at 0.9
    assert a["mean_excess_share"] == pytest.approx((2 / 20 + 5 / 20) / 2)
    assert ranked[1]["points"][0]["answer_changed"] is True


def test_curve_points_per_group():
    pts = pb.curve_points(RUNS, "late")
    assert pts["A"] == [(30.0, 4.0, 1.0), (60.0, 2.0, 0.5)]
    assert pb.curve_points(RUNS, None)["B"] == [(30.0, 3.0, 2.0), (60.0, 1.2, 1.0)]


def test_figure_bytes_are_deterministic_and_written_atomically(tmp_path):
    a = pb.figure(RUNS, tmp_path / "a")
    b = pb.figure(RUNS, tmp_path / "b")
    assert [p.name for p in a] == ["press_regret_vs_budget.png", "press_regret_vs_budget.svg"]
    for pa, pb_ in zip(a, b):
        assert pa.read_bytes() == pb_.read_bytes()
    assert not list((tmp_path / "a").glob(".*"))  # no temporary file left


def test_markdown_names_the_charged_rows_and_the_ranking():
    md = pb.markdown(RUNS, pb.ranking(RUNS))
    assert f"Note: {COMPLETE_NOTE}." in md and "rows 80..99" in md
    assert md.index("| 1 | C (decoding)") < md.index("| 3 | A |")
    assert "Greedy answer without any press: ' x'" in md


def test_section_falls_back_with_one_line_without_the_extras(tmp_path):
    code = ("import sys; sys.modules['kvpress'] = None; sys.modules['torch'] = None; "
            "from realtrace.press.board import press_section; "
            f"md, data = press_section({str(tmp_path)!r}); print(md); assert data is None")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    fallback = [ln for ln in r.stdout.splitlines() if ln.startswith("FALLBACK: ")]
    assert len(fallback) == 1 and "[real,kvpress]" in fallback[0] and "press --all" in fallback[0]
    assert not any(tmp_path.iterdir())

"""Figures are legible as drawn: nothing cut at the edge, no text on text, no legend or label over a curve, a bar or
a marker, no annotation arrow across a curve, every label inside its panel, every table cell's text inside its cell.

:func:`layout_problems` measures the rendered figure (Agg, at the saved resolution): text and legend boxes against
each other, against the figure edge, and against the data artists' pixels (lines sampled along their segments,
markers as discs, bars as boxes, error bars as segments).  An annotation's arrow may touch only the point it
points at.  tests/test_figures.py applies it to every registered figure, formula-only and with a representative overlay
of each data format; the figures with their quick-profile overlays (as ``python -m paper_check`` draws them) are
checked by ``python -m tests.test_figure_layout [IDS...]``.
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.container import BarContainer
from matplotlib.table import Table
from matplotlib.text import Annotation, Text

from figures import FIGURES, _style, render, spec
from kvcore.command import Command, entry
from tests.command_line import is_one_line_error, run_module

PAD = 1.0  # pixels a box is shrunk by before it counts as touching something


def _boxes_overlap(a, b, pad: float = PAD) -> bool:
    return (a.x0 + pad < b.x1 - pad and b.x0 + pad < a.x1 - pad and a.y0 + pad < b.y1 - pad
            and b.y0 + pad < a.y1 - pad)


def _inside(inner, outer, pad: float = PAD) -> bool:
    return (inner.x0 >= outer.x0 - pad and inner.x1 <= outer.x1 + pad and inner.y0 >= outer.y0 - pad
            and inner.y1 <= outer.y1 + pad)


def _densify(points: np.ndarray, step: float = 2.0) -> np.ndarray:
    """Points every ``step`` pixels along a polyline (NaN gaps respected)."""
    out = []
    for a, b in zip(points[:-1], points[1:]):
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            continue
        n = max(1, int(np.hypot(*(b - a)) / step))
        out.append(a + (b - a) * np.linspace(0, 1, n + 1)[:, None])
    if not out:
        return points[np.all(np.isfinite(points), axis=1)]
    return np.vstack(out)


def _text_name(t: Text) -> str:
    return repr(t.get_text()[:40])


def _data_pixels(ax, renderer):
    """(name, pixel points, radius) of every data artist of ``ax`` clipped to the axes box, and bar boxes."""
    box = ax.get_window_extent(renderer)
    clip = lambda p: p[(p[:, 0] >= box.x0 - 1) & (p[:, 0] <= box.x1 + 1) & (p[:, 1] >= box.y0 - 1)  # noqa: E731
                       & (p[:, 1] <= box.y1 + 1)]
    points, rects = [], []
    for ln in ax.get_lines():
        if not ln.get_visible():
            continue
        xy = ln.get_transform().transform(np.column_stack([ln.get_xdata(orig=False), ln.get_ydata(orig=False)]))
        name = f"line {ln.get_label()!r}"
        if ln.get_linestyle() not in ("None", "", " ", "none"):
            points.append((name, clip(_densify(xy)), ln.get_linewidth() * renderer.dpi / 72 / 2))
        if ln.get_marker() not in ("None", "", " ", "none", None):
            points.append((name + " marker", clip(xy), ln.get_markersize() * renderer.dpi / 72 / 2))
    for coll in ax.collections:
        if isinstance(coll, LineCollection):
            for seg in coll.get_segments():
                xy = coll.get_transform().transform(np.asarray(seg))
                points.append(("error bar", clip(_densify(xy)), 1.0))
        elif isinstance(coll, PathCollection):
            xy = coll.get_offset_transform().transform(coll.get_offsets())
            points.append(("scatter", clip(xy), 3.0))
    for container in ax.containers:
        if isinstance(container, BarContainer):
            for patch in container.patches:
                if np.isfinite(patch.get_height()) and patch.get_height() > 0:
                    rects.append((f"bar {container.get_label()!r}", patch.get_window_extent(renderer)))
    return points, rects


def _hits(box, points, rects, pad: float = PAD):
    for name, xy, radius in points:
        if xy.size and np.any((xy[:, 0] > box.x0 - radius + pad) & (xy[:, 0] < box.x1 + radius - pad)
                              & (xy[:, 1] > box.y0 - radius + pad) & (xy[:, 1] < box.y1 + radius - pad)):
            return name
    for name, r in rects:
        if _boxes_overlap(box, r):
            return name
    return None


def layout_problems(fig) -> list[str]:
    """Every legibility defect of ``fig`` as one line each (empty: none found)."""
    with matplotlib.rc_context(_style.RC):
        fig.set_dpi(_style.RC["savefig.dpi"])
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
    page = fig.bbox
    problems: list[str] = []
    labels: list[tuple[str, object, object]] = []   # (name, box, owning axes or None)

    def add(name, artist, ax):
        if artist is None or not artist.get_visible() or (isinstance(artist, Text) and not artist.get_text()):
            return
        box = artist.get_window_extent(renderer)
        if box.width <= 0 or box.height <= 0:
            return
        if not _inside(box, page):
            problems.append(f"{name} is cut at the figure edge")
        labels.append((name, box, ax))

    for t in fig.texts:
        if t is not fig._suptitle:
            add(f"figure text {_text_name(t)}", t, None)
    add("suptitle", fig._suptitle, None)
    for leg in fig.legends:
        add("figure legend", leg, None)
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for title in (ax.title, ax._left_title, ax._right_title):
            add(f"axes {i} title {_text_name(title)}", title, None)
        if ax.axison:
            add(f"axes {i} x label", ax.xaxis.label, None)
            add(f"axes {i} y label", ax.yaxis.label, None)
            for axis in (ax.xaxis, ax.yaxis):
                for tick in axis._update_ticks():   # the ticks inside the view limits: the ones drawn
                    add(f"axes {i} tick label {_text_name(tick.label1)}", tick.label1, None)
        for t in ax.texts:
            add(f"axes {i} label {_text_name(t)}", t, ax)
        if ax.get_legend() is not None:
            add(f"axes {i} legend", ax.get_legend(), ax)
        for child in ax.get_children():
            if isinstance(child, Table):
                for (r, c), cell in child.get_celld().items():
                    if not _inside(cell.get_text().get_window_extent(renderer), cell.get_window_extent(renderer)):
                        problems.append(f"axes {i} table cell ({r}, {c}) text spills out of its cell")

    for a in range(len(labels)):
        for b in range(a + 1, len(labels)):
            (na, ba, _), (nb, bb, _) = labels[a], labels[b]
            if _boxes_overlap(ba, bb):
                problems.append(f"{na} overlaps {nb}")

    data = {}
    for ax in fig.axes:
        if ax.get_visible():
            data[ax] = _data_pixels(ax, renderer)
    for name, box, owner in labels:
        for ax, (points, rects) in data.items():
            hit = _hits(box, points, rects)
            if hit:
                problems.append(f"{name} lies on {hit}")
        if owner is not None and "legend" not in name and not _inside(box, owner.get_window_extent(renderer)):
            problems.append(f"{name} reaches outside its panel")
    for ax in fig.axes:
        for t in ax.texts:
            if isinstance(t, Annotation) and t.arrow_patch is not None:
                path = t.arrow_patch.get_path().transformed(t.arrow_patch.get_transform())
                xy = _densify(path.vertices)
                target = t.xycoords == "data" and ax.transData.transform(t.xy)
                if target is not False:
                    xy = xy[np.hypot(*(xy - target).T) > 14]   # the tip may touch what it points at
                for name, pts, radius in data[ax][0]:
                    if not pts.size or not xy.size:
                        continue
                    d = np.hypot(xy[:, None, 0] - pts[None, :, 0], xy[:, None, 1] - pts[None, :, 1])
                    if (d < radius + 0.5).any():
                        problems.append(f"arrow of {_text_name(t)} crosses {name}")
    return problems


SAMPLE = {
    "7": {"points": [{"k": 16, "h": h, "ratio": 16 / (17 - h) * 0.97, "label": "cyclic k+1"} for h in range(1, 17)]
          + [{"k": 4, "h": h, "ratio": 4 / (5 - h) * 0.6, "label": "seeded"} for h in range(1, 5)]},
    "8": {"deterministic": [{"k": k, "ratio": k * 0.95, "label": "best deterministic"} for k in (2, 4, 8, 16)],
          "randomized": [{"k": k, "ratio": r * f, "ci_low": r * f * 0.97, "ci_high": r * f * 1.03, "policy": name,
                          "guarantee": g, "workload": w}
                         for k, r in ((2, 1.5), (4, 2.08), (8, 2.72)) for name, g, f in (("Marking", "2H_k-1", 1.2),
                                                                                      ("OnlineMin", "H_k", 0.95))
                         for w in ("uniform k+1", "two new per phase")], "runs": "40 phases, 16 seeds"},
    "13": {"points": [{"s": s, "k": 64, "regret_per_step": 0.9 * (1.0 - s / 3), "label": "R-LRU-H, k = 64"}
                      for s in (0.8, 1.2, 1.6)]},
    "seed002": {"sweeps": {f"workload {j}": {"alpha_sweep": {str(a): 30.0 + 5 * j + 10 * a for a in
                                                             (0.5, 0.3, 0.15, 0.05, 0.01, 0.003, 0.001)},
                                             "reference": {"LRU": 41.0, "LFU": 20.0 + j}, "bound": 80.0}
                           for j in range(2)},
                "persistence": {f"workload {j}": {"LFU": {"reset": 10, "persistent": 20},
                                                  "EMA alpha=0.01": {"reset": 30, "persistent": 31}}
                                for j in range(2)}},
    "alloc": {"budgets": [24, 48, 96, 192, 384, 768], "uniform": [3232, 2407, 1610, 860, 330, 60],
              "static": [3014, 2226, 1459, 781, 290, 41], "dynamic": [2922, 2119, 1362, 716, 250, 30], "heads": 12,
              "trace": "realtrace/data/smollm2_recall: 12 KV heads, T = 617, exact certified flows"},
    "surrogate": {"points": [{"set": f"quality_set{s}", "prompt": f"prompt-{p}", "regret_stream": 0.02 * (1 + p + r),
                              "kl_stream": 0.001 * (1 + p) * (1 + 3 * r), "regret_answer": 0.03 * (1 + p + r),
                              "dnll_answer": 0.4 * (p + r) - 0.3} for s in range(4) for p in range(4) for r in range(3)],
                  "correlation": {n: {"pooled": 0.6, "pooled_ci95": [0.5, 0.7], "within": 0.8,
                                      "within_ci95": [0.7, 0.9]} for n in ("stream", "answer")}},
    "gda_shift": {"budgets": [128, 256], "prompts": "realtrace/data/quality_section11_shift: three prompts",
                  "policies": {p: {"gap": [[0.03 + 0.01 * j, 0.035, 0.04], [0.04, 0.045 + 0.01 * j, 0.05]],
                                   "kl_answer": [[2.0, 2.2, 2.4], [2.0 - j, 2.1, 2.3]]}
                               for j, p in enumerate(("Default", "H2O", "TOVA"))}
                  | {"OPT": {"kl_answer": [[1.5, 1.6, 1.7], [0.0, 0.1, 0.2]]}}},
    "value_directions": {"groups": {g: {"value_by_mass": 1300.0 * (i + 1), "value_by_value": 1250.0 * (i + 1),
                                        "mass_by_mass": 520.0 - 50 * i, "mass_by_value": 555.0 - 50 * i}
                                    for i, g in enumerate(("early", "middle", "late"))},
                         "source": "realtrace/data/value_directions: kv-24-12 (429 tokens), K = 128, 90 KV heads"},
    "workingset": {"grid": [16, 32, 64, 128, 256],
                   "prompts": [{"name": n, "group": g, "ws": w} for n, g, w in (
                       ("a", "sharp", 20.5), ("b", "sharp", 25.0), ("c", "broad", 60.2), ("d", "broad", 90.0))],
                   "floors": {"OPT": {"a": 16, "b": 32, "c": 64, "d": None},
                              "H2O": {"a": 32, "b": 64, "c": 128, "d": None},
                              "TOVA": {"a": 32, "b": 32, "c": 128, "d": 256},
                              "StreamingLLM": {"a": None, "b": None, "c": None, "d": None}},
                   "adaptive": {p: {"fixed": 8, "adaptive": 10} for p in ("OPT", "H2O", "TOVA", "StreamingLLM")},
                   "fixed": "32/64/128", "notes": ["4 prompts the full cache answers; a computed sentence."]},
    "heads": {"points": {g: {"xy": {"displaced": [0.02 * (1 + i + r) for r in range(20)],
                                    "error": [0.015 * (1 + i + r) * (1 + 0.1 * (r % 3)) for r in range(20)]}}
                         for i, g in enumerate(("early", "middle", "late"))},
              "heads": [{"layer": i, "kv_head": j, "group": ("early", "middle", "late")[i // 10],
                         "rho": 0.95 - 0.01 * i, "ci": [0.85 - 0.01 * i, 0.99], "cv": 0.1 + 0.01 * i + 0.02 * j}
                        for i in range(30) for j in range(3)],
              "bounds": {"rho": 0.8, "cv": 0.25},
              "notes": ["90 heads x 54 points: a computed sentence."]},
}


def test_checker_sees_a_legend_on_a_curve_and_a_cut_label():
    fig = _style.new_figure()
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], label="a")
    ax.plot([0, 1], [1, 0], label="b")
    ax.legend(loc="center")
    ax.text(0.98, 0.5, "a label running past the right edge of the figure", transform=ax.transAxes)
    problems = layout_problems(fig)
    assert any("legend lies on line 'a'" in p for p in problems)
    assert any("cut at the figure edge" in p for p in problems)


def test_the_command_checks_named_figures_and_refuses_unknown_ones():
    """``python -m tests.test_figure_layout [IDS...]`` as a user types it (from the repository root)."""
    code, out, err = run_module("tests.test_figure_layout", "2")
    assert code == 0 and out.strip() == "2: ok", out + err
    assert run_module("tests.test_figure_layout", "--help")[0] == 0
    code, _, err = run_module("tests.test_figure_layout", "99")
    assert is_one_line_error(code, err, "unknown figure '99'"), err


def _check_layouts(args) -> int:
    """Check the figures ``args.ids`` (all when empty) with their quick-profile overlays; 1 if one has a problem."""
    from theorems.profile import PROFILES
    from theorems.results.overlays import figure_data

    bad = 0
    for fid in [spec(f).fig_id for f in args.ids] or list(FIGURES):
        problems = layout_problems(render(fid, figure_data(fid, PROFILES["quick"])))
        print(f"{fid}: {'ok' if not problems else ''}")
        for p in problems:
            print(f"   {p}")
        bad += bool(problems)
    return 1 if bad else 0


def _layout_arguments(p) -> None:
    p.add_argument("ids", nargs="*", metavar="ID", help="figure ids (default: every figure)")


LAYOUT_COMMAND = Command(prog="python -m tests.test_figure_layout", description="Check the figures' layout (overlapping texts, clipped "
                         "labels) with their quick-profile overlays; exit 1 if one has a problem.",
                         add_arguments=_layout_arguments, run=_check_layouts)


if __name__ == "__main__":
    entry(LAYOUT_COMMAND.prog, lambda: LAYOUT_COMMAND.main)

"""Diagrams and tables generated from data structures in code (Figs. 1, 4, 5, 10, 12).

The three flowcharts of the paper (Section 1's reduction map, Section 2.4's decode-and-evict loop, Section 6's
GD-A state) are :class:`networkx.DiGraph` objects built here from the paper's node and edge lists (paraphrased
labels); each node carries a grid position ``pos = (column, row)`` and a ``shape`` (``box`` or ``decision``), each
edge an optional ``label``.  Fig. 5 is rendered from :data:`DICTIONARY`; Fig. 12 from ``policies.gda.UNIFICATION``.
"""

from __future__ import annotations

import textwrap

import networkx as nx
from matplotlib.patches import FancyArrowPatch

from . import _data
from ._style import new_figure, titled
from .registry import figure


def _graph(nodes: list[tuple], edges: list[tuple]) -> nx.DiGraph:
    """``nodes``: (id, label, (col, row), shape); ``edges``: (u, v), (u, v, label) or (u, v, label, bend).

    ``bend`` is the arc3 curvature of a back edge that would otherwise cross a box (0 = straight).
    """
    g = nx.DiGraph()
    for node_id, label, pos, shape in nodes:
        g.add_node(node_id, label=label, pos=pos, shape=shape)
    for e in edges:
        u, v = e[0], e[1]
        if u not in g or v not in g:
            raise ValueError(f"edge {u}->{v} names an unknown node")
        g.add_edge(u, v, label=e[2] if len(e) > 2 else "", bend=e[3] if len(e) > 3 else 0.0)
    return g


# Figure 1 (Section 1 flowchart): the reduction map.
REDUCTION_MAP = _graph(
    [("A", "Decoding under a\nKV memory budget k", (2, 0), "box"),
     ("B", "Cost model?", (2, 1), "decision"),
     ("C", "Weighted caching", (0.9, 2), "box"),
     ("D", "Attention-mass\nregret minimization", (3.3, 2), "box"),
     ("C1", "Lower bound k\n(deterministic)", (0, 3), "box"),
     ("C2", "Landlord / Greedy-Dual:\nk-competitive", (1.15, 3.35), "box"),
     ("C3", "Marking 2H_k;\noptimal H_k (randomized)", (0, 4.2), "box"),
     ("D1", "Belady analog:\nkeep max future mass", (4, 3), "box"),
     ("D2", "Persistence bound:\nregret <= tail mass", (2.9, 3.35), "box"),
     ("E", "Greedy-Dual-Attention\n(this paper)", (2, 4.5), "box"),
     ("F", "Recovers LRU, StreamingLLM,\nH2O as special cases", (2, 5.5), "box")],
    [("A", "B"), ("B", "C", "evicted KV recomputed\n(cost w_i)"), ("B", "D", "eviction\npermanent"),
     ("C", "C1"), ("C", "C2"), ("C", "C3"), ("D", "D1"), ("D", "D2"), ("C2", "E"), ("D2", "E"), ("E", "F")])

# Figure 4 (Section 2.4 flowchart): the decode-and-evict loop.
DECODE_LOOP = _graph(
    [("Q", "new query q_t", (0, 0), "box"),
     ("ATT", "attend over cache\n(Eq. 1)", (1.5, 0), "box"),
     ("OUT", "output token", (3, 0), "box"),
     ("NEWKV", "append new K, V", (4.5, 0), "box"),
     ("CACHE", "KV cache\n(<= k slots)", (1.5, 1.3), "box"),
     ("FULL", "budget\nexceeded?", (4.5, 1.3), "decision"),
     ("EVICT", "eviction policy\ndrops one pair", (3, 2.4), "box")],
    [("Q", "ATT"), ("CACHE", "ATT"), ("ATT", "OUT"), ("OUT", "NEWKV"), ("NEWKV", "FULL"),
     ("FULL", "CACHE", "no"), ("FULL", "EVICT", "yes"), ("EVICT", "CACHE")])

# Figure 10 (Section 6 flowchart): the Greedy-Dual-Attention state machine.
GDA_STATE = _graph(
    [("A", "token i attended\n(mass above threshold)", (0, 0), "box"),
     ("B", "refresh credit\nc_i = max(c_i, w_i)", (0, 1.5), "box"),
     ("C", "memory pressure", (2.2, 0), "box"),
     ("D", "delta = min_j c_j", (2.2, 1), "box"),
     ("E", "c_j -= delta for all j", (2.2, 2), "box"),
     ("F", "any c_i = 0?", (2.2, 3), "decision"),
     ("G", "evict argmin recent attention\namong tokens with c_i = 0", (2.2, 4.1), "box"),
     ("H", "k-competitive\n(Landlord, Theorem 3)", (0.6, 5), "box")],
    [("A", "B"), ("C", "D"), ("D", "E"), ("E", "F"), ("F", "G", "yes"), ("F", "D", "no", 0.9), ("G", "H"),
     ("B", "H")])


def draw_flowchart(ax, g: nx.DiGraph) -> None:
    """Draw ``g`` top-down at its nodes' grid positions: boxes, diamonds for decisions, labelled arrows."""
    cols = [p[0] for p in nx.get_node_attributes(g, "pos").values()]
    rows = [p[1] for p in nx.get_node_attributes(g, "pos").values()]
    ax.set_xlim(min(cols) - 0.8, max(cols) + 0.8)
    ax.set_ylim(-max(rows) - 0.6, -min(rows) + 0.6)
    texts = {}
    for n, attrs in g.nodes(data=True):
        col, row = attrs["pos"]
        decision = attrs["shape"] == "decision"
        style = "round4,pad=0.5" if decision else "round,pad=0.45"
        face = "#fff2cc" if decision else "#dae8fc"
        texts[n] = ax.text(col, -row, attrs["label"], ha="center", va="center", fontsize=9, zorder=3,
                           bbox={"boxstyle": style, "fc": face, "ec": "#334455", "lw": 1.0})
    for u, v, attrs in g.edges(data=True):
        (x0, y0), (x1, y1) = g.nodes[u]["pos"], g.nodes[v]["pos"]
        bend = attrs["bend"]
        arrow = FancyArrowPatch(posA=(x0, -y0), posB=(x1, -y1), arrowstyle="-|>", mutation_scale=12, lw=1.1,
                                color="#334455", connectionstyle=f"arc3,rad={bend}", zorder=4,
                                patchA=texts[u].get_bbox_patch(), patchB=texts[v].get_bbox_patch())
        ax.add_patch(arrow)
        if attrs["label"]:
            # arc3 puts its control point at the chord's midpoint pushed by bend * (dy, -dx) in display space;
            # the curve passes half-way to it (the limits and margins are fixed, so transData is final here).
            (px0, py0), (px1, py1) = ax.transData.transform([(x0, -y0), (x1, -y1)])
            dx, dy = px1 - px0, py1 - py0
            mid = ((px0 + px1) / 2 + 0.5 * bend * dy, (py0 + py1) / 2 - 0.5 * bend * dx)
            mx, my = ax.transData.inverted().transform(mid)
            ax.text(mx, my, attrs["label"], fontsize=8, ha="center", va="center", color="#7a1f1f", zorder=5,
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none"})
    ax.set_axis_off()


def _flowchart_figure(fig_id: str, data, g: nx.DiGraph, title: str, width: float, height: float):
    _data.mapping(fig_id, data, set())
    fig = new_figure(width, height, top=0.9, bottom=0.02, left=0.02, right=0.98)
    ax = fig.add_subplot()
    draw_flowchart(ax, g)
    fig.plotted["graph"] = {"nodes": {n: a["label"] for n, a in g.nodes(data=True)},
                            "edges": [[u, v, a["label"]] for u, v, a in g.edges(data=True)]}
    titled(fig, title)
    return fig


@figure("1", "fig01_reduction_map", "Reduction map", "diagram of networkx graph figures.diagrams.REDUCTION_MAP",
        "Map of the reduction (paper Section 1): decoding under a budget splits by cost model into weighted "
        "caching (recompute model) and attention-mass regret (no-refetch model), each with its bounds, meeting in "
        "Greedy-Dual-Attention.  Generated as the diagram of networkx graph figures.diagrams.REDUCTION_MAP.",
        number=1)
def fig1(data: dict | None = None):
    """The Section 1 flowchart (no data)."""
    return _flowchart_figure("1", data, REDUCTION_MAP, "Figure 1: KV eviction as online caching, the reduction map",
                             10, 7.5)


@figure("4", "fig04_decode_loop", "Decode-and-evict loop", "diagram of networkx graph figures.diagrams.DECODE_LOOP",
        "One decoding step with a budget (paper Section 2.4): attend over the cache (Eq. 1), emit a token, append "
        "its key and value, and evict one pair when the budget is exceeded.  Generated as the diagram of networkx "
        "graph figures.diagrams.DECODE_LOOP.", number=4)
def fig4(data: dict | None = None):
    """The Section 2.4 flowchart (no data)."""
    return _flowchart_figure("4", data, DECODE_LOOP, "Figure 4: the decode-and-evict loop", 10, 5.2)


@figure("10", "fig10_gda_state", "GD-A state", "diagram of networkx graph figures.diagrams.GDA_STATE",
        "The Greedy-Dual-Attention state machine (paper Section 6): attention refreshes a credit to max(c_i, w_i); "
        "memory pressure charges rent delta = min_j c_j to every resident token until some credit is zero, and the "
        "zero-credit token with the least recent attention is evicted.  Generated as the diagram of networkx graph "
        "figures.diagrams.GDA_STATE.", number=10)
def fig10(data: dict | None = None):
    """The Section 6 flowchart (no data)."""
    return _flowchart_figure("10", data, GDA_STATE, "Figure 10: Greedy-Dual-Attention state", 9, 7.5)


# Figure 5: the dictionary between KV eviction and caching (paper Section 3), one row per concept.
DICTIONARY_COLUMNS = ("KV-cache eviction", "Online caching", "Recompute model (RM)", "No-refetch model (NM)")
DICTIONARY = (
    ("token i (its K, V at every layer)", "item / page", "item with fetch cost w_i", "item that can leave only once"),
    ("budget k tokens", "cache size k", "k slots", "k slots"),
    ("attention row a[t, .] at step t", "request(s) at step t",
     "requests Q_t = {t} + {i : a[t,i] >= theta}", "weighted request on every token <= t"),
    ("resident set R_t", "cache contents", "must contain Q_t after step t", "any subset, |R_t| <= k"),
    ("evicted token attended again", "fault", "recompute, pay w_i (grows with i)",
     "no refetch: regret += a[t,i]"),
    ("cost of a run", "number / weight of faults", "sum of w_i over faults", "Eq. 4: sum_t sum_{i not in R_t} a[t,i]"),
    ("offline optimum", "Belady (furthest next use)", "furthest next above-threshold use; min-cost flow if weighted",
     "max retained mass (min-cost flow); paper: 'keep top-k future mass'"),
    ("StreamingLLM sinks + window", "LRU with pinned pages", "k-competitive (Landlord family)", "-"),
    ("H2O / accumulated attention", "LFU with attention as count", "not competitive (Theorem 2, RM version)",
     "unbounded regret (Theorem 2)"),
    ("decayed attention score", "Greedy-Dual credit with aging", "k-competitive (GD-A, Theorem 3)",
     "regret <= tail mass under persistence (Theorem 4)"),
)


def _table_figure(title: str, columns, rows, col_widths):
    """A table figure; long cells are wrapped to their column and each row is as tall as its tallest cell."""
    width_in, line_in = 13.0, 0.17
    body = [list(r) for r in rows] if rows else [["(none)"] + [""] * (len(columns) - 1)]
    chars = [max(8, int(w * width_in * 72 / (8.5 * 0.62))) for w in col_widths]
    wrapped = [["\n".join(line for part in str(c).split("\n") for line in textwrap.wrap(part, n))
                for c, n in zip(r, chars)] for r in [list(columns)] + body]
    lines = [max(c.count("\n") + 1 for c in r) for r in wrapped]
    table_in = sum(line_in * n + 0.12 for n in lines)
    height_in = table_in + 1.2
    fig = new_figure(width_in, height_in, top=1 - 0.75 / height_in, bottom=0.02, left=0.01, right=0.99)
    ax = fig.add_subplot()
    ax.set_axis_off()
    table = ax.table(cellText=wrapped[1:], colLabels=wrapped[0], colWidths=list(col_widths), loc="upper center",
                     cellLoc="left", colLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(8.5)
    axes_in = height_in * (fig.subplotpars.top - fig.subplotpars.bottom)
    for (r, _c), cell in table.get_celld().items():
        cell.set_height((line_in * lines[r] + 0.12) / axes_in)
        cell.PAD = 0.02
        if r == 0:
            cell.set_text_props(fontweight="bold")
            cell.set_facecolor("#dae8fc")
        elif r % 2 == 0:
            cell.set_facecolor("#f5f5f5")
    fig.plotted["table"] = {"columns": list(columns), "rows": [list(r) for r in rows]}
    titled(fig, title)
    return fig


@figure("5", "fig05_dictionary", "Dictionary RM/NM <-> caching", "table of figures.diagrams.DICTIONARY",
        "The dictionary between KV-cache eviction and online caching under the two cost models (paper Section 3; "
        "SPEC section 2).  Generated as the table of figures.diagrams.DICTIONARY.", number=5)
def fig5(data: dict | None = None):
    """The RM/NM dictionary (no data)."""
    _data.mapping("5", data, set())
    return _table_figure("Figure 5: KV eviction <-> online caching, under both cost models", DICTIONARY_COLUMNS,
                         DICTIONARY, (0.22, 0.2, 0.29, 0.29))


UNIFICATION_FIELDS = ("label", "gda_params", "equivalent", "equivalent_params", "model", "note")
# Column headings of Fig. 12, one per field of UNIFICATION_FIELDS (the note column shows the record's finding).
UNIFICATION_HEADINGS = ("the paper's policy", "GD-A parameters", "equals policy", "with parameters", "cost model",
                        "finding (opening clause of the record's note)")


def unification_rows() -> list[tuple[str, ...]]:
    """Rows of ``policies.gda.UNIFICATION`` (the records the policy tests check) as text.  A record may be a mapping
    or an object with the fields of :data:`UNIFICATION_FIELDS`; dict-valued parameters are printed as
    ``key=value`` pairs in key order.
    """
    from policies.gda import UNIFICATION as records

    rows = []
    for rec in records:
        get = rec.get if isinstance(rec, dict) else (lambda name, _r=rec: getattr(_r, name, ""))
        rows.append(tuple(_cell(get(f)) for f in UNIFICATION_FIELDS))
    return rows


def finding(note: str) -> str:
    """The opening clause of a UNIFICATION note -- its verdict, before the first colon or full stop (the reasoning
    that follows is in the record and in ``tests/test_gda_unification.py``)."""
    for i, ch in enumerate(note):
        if ch == ":" or (ch == "." and (i + 1 == len(note) or note[i + 1] == " ")):
            return note[:i].strip()
    return note.strip()


def _cell(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={value[k]}" for k in sorted(value))
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return "" if value is None else str(value)


@figure("12", "fig12_gda_unification", "GD-A unification table", "table of policies.gda.UNIFICATION",
        "Greedy-Dual-Attention at different parameter settings and the deployed policy each one equals (paper "
        "Section 6): generated as the table of policies.gda.UNIFICATION, the records the policy tests check "
        "(tests/test_gda_unification.py, eviction for eviction).  The last column is the opening clause of each "
        "record's note, its verdict; the full note in the record gives the reasoning and the counterexamples.",
        number=12)
def fig12(data: dict | None = None):
    """The unification table read from ``policies.gda.UNIFICATION`` (no data)."""
    _data.mapping("12", data, set())
    rows = [(label, params.replace(", ", "\n"), equivalent, eq_params.replace(", ", "\n"), model.upper(),
             finding(note)) for label, params, equivalent, eq_params, model, note in unification_rows()]
    return _table_figure("Figure 12: one policy, GD-A, at several settings", UNIFICATION_HEADINGS, rows,
                         (0.17, 0.16, 0.11, 0.12, 0.07, 0.37))

"""PNG plots of run reports and run comparisons (matplotlib, Agg backend; no display needed).

Every function takes the JSON-ready series of `evoduet_graph.report.series.run_series`, writes one
PNG and returns its path, or returns None when the run has no data for that plot (the report
says so instead of drawing an empty frame).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "GATE_COLORS",
    "plot_compare",
    "plot_llm_usage",
    "plot_ndg",
    "plot_predictions",
    "plot_scores",
    "plot_urls",
]

GATE_COLORS = {
    "no-op": "#4c72b0",
    "look-up": "#dd8452",
    "retrieve": "#55a868",
    None: "#8c8c8c",
}
"""Marker colour of a candidate by its iteration's gate decision."""

_DPI = 110


def pyplot() -> Any:
    """Matplotlib's ``pyplot`` on the Agg backend (files only, never a window).

    The one place that loads matplotlib, for the run report and the bench alike.
    """
    import matplotlib.pyplot as plt  # start-up: ~450 ms, paid only when a figure is drawn

    plt.switch_backend("Agg")
    return plt


def _subplots(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """A new figure and its axes (matplotlib's ``subplots``, Agg backend)."""
    fig, axes = pyplot().subplots(*args, **kwargs)
    return fig, axes


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    pyplot().close(fig)
    return path


def _finish_iteration_plot(
    fig: Any, ax: Any, path: Path, *, ylabel: str, title: str, legend_loc: str | None = None
) -> Path:
    """Label an iteration-axis plot (integer ticks, grid, legend) and save it (`_save`).

    Args:
        fig: the figure.
        ax: its one axes, x = iteration.
        path: where the PNG goes.
        ylabel: the y axis label.
        title: the plot title.
        legend_loc: matplotlib's legend ``loc`` (None: its default).

    Returns:
        ``path``.
    """
    ax.set_xlabel("iteration")
    ax.xaxis.set_major_locator(pyplot().MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if legend_loc is None:
        ax.legend(fontsize=8)
    else:
        ax.legend(fontsize=8, loc=legend_loc)
    return _save(fig, path)


def plot_scores(series: dict[str, Any], path: Path) -> Path | None:
    """Best score so far (step line) and every candidate's score vs iteration.

    Candidates are coloured by their iteration's gate decision, invalid ones are ticks under the
    axis.
    """
    best = [p for p in series["best"] if p[1] is not None]
    cands = series["candidates"]
    if not best and not cands:
        return None
    fig, ax = _subplots(figsize=(8, 4.6))
    if best:
        ax.plot(
            [p[0] for p in best],
            [p[1] for p in best],
            drawstyle="steps-post",
            color="black",
            lw=2,
            label="best so far",
            zorder=3,
        )
    for decision, color in GATE_COLORS.items():
        mine = [c for c in cands if c["gate"] == decision and c["valid"] and c["score"] is not None]
        if mine:
            ax.scatter(
                [c["iteration"] for c in mine],
                [c["score"] for c in mine],
                s=22,
                color=color,
                alpha=0.8,
                label=f"candidate after {decision or 'unknown gate'}",
                zorder=4,
            )
    invalid = [c for c in cands if not c["valid"]]
    if invalid:
        strip = ax.get_xaxis_transform()  # x in data, y in axes coordinates
        ax.scatter(
            [c["iteration"] for c in invalid],
            [0.03] * len(invalid),
            marker="x",
            s=18,
            color="#c44e52",
            transform=strip,
            label=f"invalid / failed candidate ({len(invalid)})",
            zorder=4,
        )
    return _finish_iteration_plot(
        fig,
        ax,
        path,
        ylabel="score (internal fitness, higher is better)",
        title=f"{series.get('task') or 'run'}: scores by iteration",
        legend_loc="best",
    )


def plot_ndg(series: dict[str, Any], path: Path) -> Path | None:
    """NDG of the best program so far vs iteration (needs the task's reference score)."""
    points = series["ndg"]
    if not points:
        return None
    fig, ax = _subplots(figsize=(8, 4))
    ax.plot([p[0] for p in points], [p[1] for p in points], drawstyle="steps-post", lw=2)
    ax.axhline(0, color="grey", ls=":", lw=1, label="initial program (0%)")
    ax.axhline(100, color="black", ls="--", lw=1, label="reference (100%)")
    return _finish_iteration_plot(
        fig,
        ax,
        path,
        ylabel="NDG (%)",
        title=f"{series.get('task') or 'run'}: normalized discovery gain",
    )


def plot_predictions(series: dict[str, Any], path: Path) -> Path | None:
    """Predicted vs realised child score.

    Predicted (mean over a record's final documents) vs realised child score, one point per
    realised outcome, with the diagonal and each parent's score as a reference.
    """
    points = series["predictions"]
    if not points:
        return None
    fig, ax = _subplots(figsize=(5.6, 5))
    for decision in ("retrieve", "look-up"):
        mine = [p for p in points if p["decision"] == decision]
        if mine:
            ax.scatter(
                [p["predicted"] for p in mine],
                [p["realised"] for p in mine],
                color=GATE_COLORS[decision],
                s=30,
                label=decision,
                zorder=3,
            )
    ax.scatter(
        [p["predicted"] for p in points],
        [p["parent"] for p in points],
        marker="_",
        color="grey",
        s=60,
        label="parent score",
        zorder=2,
    )
    values = [v for p in points for v in (p["predicted"], p["realised"], p["parent"])]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05 or 0.05
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="black", ls="--", lw=1, label="y = x")
    ax.set_xlabel("predicted child score")
    ax.set_ylabel("realised child score")
    ax.set_title("predicted vs realised")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_urls(series: dict[str, Any], path: Path) -> Path | None:
    """Cumulative distinct and repeated (seen before) returned URLs vs iteration."""
    rows = series["urls"]
    if not rows:
        return None
    fig, ax = _subplots(figsize=(8, 4))
    xs = [r["iteration"] for r in rows]
    ax.plot(xs, [r["distinct_total"] for r in rows], marker="o", label="distinct URLs")
    ax.plot(xs, [r["repeated_total"] for r in rows], marker="s", label="repeated URLs")
    return _finish_iteration_plot(
        fig,
        ax,
        path,
        ylabel="returned URLs (cumulative)",
        title="search results: new vs seen before",
    )


def plot_llm_usage(series: dict[str, Any], path: Path) -> Path | None:
    """LLM calls, tokens (input + output) and latency per node (three bar panels)."""
    by_node = {n: u for n, u in series["llm"]["by_node"].items() if u["calls"]}
    if not by_node:
        return None
    nodes = sorted(by_node)
    fig, axes = _subplots(1, 3, figsize=(11, 3.8))
    panels = [
        ("calls", [by_node[n]["calls"] for n in nodes], None),
        ("tokens", [by_node[n]["input_tokens"] for n in nodes], "input"),
        ("latency (s)", [by_node[n]["latency_s"] for n in nodes], None),
    ]
    for ax, (title, values, label) in zip(axes, panels, strict=True):
        ax.bar(nodes, values, color="#4c72b0", label=label)
        if title == "tokens":
            ax.bar(
                nodes,
                [by_node[n]["output_tokens"] for n in nodes],
                bottom=values,
                color="#dd8452",
                label="output",
            )
            ax.legend(fontsize=8)
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=35, labelsize=8)
        for tick in ax.get_xticklabels():
            tick.set_horizontalalignment("right")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("LLM usage per node (query_evolution includes its inner nodes)", fontsize=10)
    return _save(fig, path)


def plot_compare(
    runs: Sequence[tuple[str, dict[str, Any]]], path: Path, *, key: str = "best"
) -> Path | None:
    """Overlay several runs: ``key="best"`` (best score so far) or ``"ndg"`` vs iteration."""
    curves = [(label, [p for p in s[key] if p[1] is not None]) for label, s in runs]
    curves = [(label, pts) for label, pts in curves if pts]
    if not curves:
        return None
    fig, ax = _subplots(figsize=(8, 4.6))
    for label, pts in curves:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], drawstyle="steps-post", lw=2, label=label)
    if key == "ndg":
        ax.axhline(100, color="black", ls="--", lw=1, label="reference (100%)")
    tasks = sorted({str(s.get("task")) for _, s in runs})
    return _finish_iteration_plot(
        fig,
        ax,
        path,
        ylabel="NDG (%)" if key == "ndg" else "best score so far (higher is better)",
        title=("NDG" if key == "ndg" else "best score") + " vs iteration: " + ", ".join(tasks),
    )

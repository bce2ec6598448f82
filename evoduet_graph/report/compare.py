"""Runs side by side: one table row per run and overlaid best-so-far / NDG plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from evoduet_graph.report.correlation import RankCorrelation
from evoduet_graph.report.markdown import md_pct, md_share, md_table, md_usd
from evoduet_graph.report.plots import plot_compare
from evoduet_graph.report.series import run_series
from evoduet_graph.report.summary import paper_metrics, run_summary
from evoduet_graph.report.summary_types import RunSummary
from evoduet_graph.rundir import layout

# -- comparisons -------------------------------------------------------------------------------


def run_label(rdir: Path, used: set[str]) -> str:
    """The run's name in a comparison: its folder name, numbered when ``used`` has it."""
    label = rdir.name or str(rdir)
    n = 2
    while label in used:
        label = f"{rdir.name} ({n})"
        n += 1
    used.add(label)
    return label


def _gate_mode(rdir: Path) -> str | None:
    try:
        data = yaml.safe_load((rdir / layout.CONFIG).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    gate = data.get("gate") if isinstance(data, dict) else None
    return gate.get("mode") if isinstance(gate, dict) else None


def compare_row(rdir: Path, label: str, summary: RunSummary) -> dict[str, Any]:
    """One run's row of the comparison (`compare_runs`; ``evoduet view``'s compare mode)."""
    best = summary.best
    total = summary.llm.total
    return {
        "run": label,
        "run_dir": str(rdir),
        "task": summary.task,
        "model": summary.model,
        "gate": _gate_mode(rdir),
        "iterations": summary.iterations,
        "best_score": best.score if best else None,
        "metric_value": best.metric_value if best else None,
        "ndg": best.ndg if best else None,
        "improvements": summary.improvements,
        "llm_calls": int(total.calls),
        "tokens": int(total.input_tokens + total.output_tokens),
        "wall_s": round(summary.wall_s, 1),
        **paper_metrics(summary),
    }


def compare_runs(
    run_dirs: list[str | Path], *, out_dir: str | Path | None = None
) -> dict[str, Any]:
    """Compare runs: one table row per run and overlaid best-so-far / NDG vs iteration plots.

    Args:
        run_dirs: two or more run directories (one works too).
        out_dir: where to write ``best.png``, ``ndg.png`` and ``compare.md``; None: no files.

    Returns:
        ``{"rows": [...], "markdown": str, "plots": {name: Path}, "markdown_path": Path|None}``;
        a row has ``run``, ``run_dir``, ``task``, ``model``, ``gate``, ``iterations``,
        ``best_score``, ``metric_value``, ``ndg``, ``improvements``, ``llm_calls``,
        ``tokens``, ``wall_s`` and the keys of `paper_metrics`.

    Raises:
        FileNotFoundError: a run directory does not exist.
    """
    rows: list[dict[str, Any]] = []
    runs: list[tuple[str, dict[str, Any]]] = []
    used: set[str] = set()
    for run_dir in run_dirs:
        rdir = Path(run_dir)
        summary = run_summary(rdir)
        series = run_series(rdir, summary=summary)
        label = run_label(rdir, used)
        rows.append(compare_row(rdir, label, summary))
        runs.append((label, series))
    headers = [
        "run",
        "task",
        "model",
        "gate",
        "iterations",
        "best score",
        "metric value",
        "NDG (%)",
        "improvements",
        "LLM calls",
        "tokens",
        "wall (s)",
    ]
    keys = [
        "run",
        "task",
        "model",
        "gate",
        "iterations",
        "best_score",
        "metric_value",
        "ndg",
        "improvements",
        "llm_calls",
        "tokens",
        "wall_s",
    ]
    table = md_table(headers, [[r[k] for k in keys] for r in rows])
    knowledge = md_table(
        [
            "run",
            "improved with evidence predicted to beat the parent",
            "improved without documents",
            "predicted vs realised",
            "repeated-URL share",
            "LLM cost (USD)",
            "search calls",
            "Tavily credits",
        ],
        [
            [
                r["run"],
                md_share(r["improved_predicted_better"], r["n_predicted_better"]),
                md_share(r["improved_no_documents"], r["n_no_documents"]),
                RankCorrelation(r["rank_n"], r["rank_rho"], r["rank_low"], r["rank_high"]).text(),
                md_pct(r["repeated_url_share"]),
                md_usd(r["llm_usd"]),
                r["search_calls"],
                r["search_credits"],
            ]
            for r in rows
        ],
    )
    tasks = {r["task"] for r in rows}
    note = (
        "\n> The runs are on different tasks: their scores are on different scales; compare NDG.\n"
        if len(tasks) > 1
        else ""
    )
    plots: dict[str, Path] = {}
    md_path = None
    text = (
        f"# EvoDuet run comparison\n\n{table}\n{note}\n## Knowledge figures\n\n"
        "Improvement rate: iterations in which a valid child beat its parent.\n\n"
        f"{knowledge}\n"
    )
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for key, name in (("best", "best"), ("ndg", "ndg")):
            path = plot_compare(runs, out / f"{name}.png", key=key)
            if path is not None:
                plots[name] = path
        captions = {"best": "Best score so far vs iteration", "ndg": "NDG vs iteration"}
        images = "".join(f"\n![{captions[k]}]({p.name})\n" for k, p in plots.items())
        md_path = out / "compare.md"
        md_path.write_text(text + images, encoding="utf-8")
    return {"rows": rows, "markdown": text, "plots": plots, "markdown_path": md_path}

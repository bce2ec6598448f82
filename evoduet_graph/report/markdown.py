"""The run report as Markdown, its plots and `write_report`.

The run report as Markdown (``report/report.md``) with its plots, and `write_report`, which
writes the Markdown, the PNGs and (optionally) the self-contained HTML page.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from evoduet_graph.report.calls import call_table
from evoduet_graph.report.html import markdown_to_html
from evoduet_graph.report.plots import (
    plot_llm_usage,
    plot_ndg,
    plot_predictions,
    plot_scores,
    plot_urls,
)
from evoduet_graph.report.series import run_series
from evoduet_graph.report.summary import MAX_HISTORY_ROWS, run_summary
from evoduet_graph.report.summary_types import (
    CallFigures,
    CostFigures,
    ImprovementFigures,
    ModelUsage,
    NodeUsage,
    NoveltyFigures,
)
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.usage import INCLUSIVE_NODES

PLOT_TITLES = {
    "scores": "Best score so far and every candidate's score by iteration, by gate decision",
    "ndg": "NDG of the best program so far by iteration",
    "predictions": "Predicted vs realised child score",
    "urls": "Distinct vs repeated returned URLs over time",
    "llm": "LLM calls, tokens and latency per node",
}
"""The report's plots: name (``report/<name>.png``) → caption."""


# ------------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 6) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else "n/a"
    return str(value)


def _cell(value: Any) -> str:
    return _fmt(value).replace("|", "\\|").replace("\n", " ")


def md_table(headers: list[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table of ``rows`` under ``headers`` (cells formatted, pipes escaped)."""
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def md_pct(share: float | None) -> str:
    """A share (0-1) as a percentage with one decimal, ``n/a`` for None."""
    return "n/a" if share is None else f"{100 * share:.1f}%"


def _images(plots: dict[str, str] | None, *names: str) -> list[str]:
    """Markdown image lines for the plots that exist (``plots``: name → link)."""
    out = []
    for name in names:
        link = (plots or {}).get(name)
        if link:
            out += [f"![{PLOT_TITLES.get(name, name)}]({link})", ""]
    return out


def _calls_section(figures: CallFigures | None) -> list[str]:
    """The ``## Model calls per node`` section.

    ``## Model calls per node`` (`evoduet_graph.report.calls`), when the run has
    ``llm_call`` events.
    """
    if figures is None or not figures.by_node:
        return []
    headers, rows = call_table(figures)
    return [
        "## Model calls per node: prompt cache and model time",
        "",
        (
            "Cached: prompt tokens the model did not evaluate again (the embedded model reuses "
            "the prefix its context already holds; hosted models report their prompt-cache hits)."
        ),
        "",
        md_table(headers, rows),
        "",
    ]


def _model_section(models: Mapping[str, ModelUsage]) -> list[str]:
    """``## LLM usage per model`` (calls, tokens, cached tokens, estimated USD), when known."""
    if not models:
        return []
    rows = [
        [
            m,
            int(u.calls),
            int(u.input_tokens),
            int(u.cached_input_tokens),
            int(u.output_tokens),
            "n/a" if u.usd is None else round(u.usd, 6),
        ]
        for m, u in models.items()
    ]
    header = ["model", "calls", "input tokens", "cached input tokens", "output tokens"]
    return [
        "## LLM usage per model",
        "",
        md_table([*header, "USD (estimated)"], rows),
        "",
    ]


def _gate_can_retrieve(run_dir: Path) -> bool:
    """Whether the run's config writes a D_search file.

    It searches (`can_retrieve`) or reads oracle documents, and keeps a search database (else no
    file is written).
    """
    try:
        data = yaml.safe_load((run_dir / layout.CONFIG).read_text(encoding="utf-8")) or {}
        gate = (data.get("gate") or {}).get("mode", "never")
        retrieval = data.get("retrieval") or {}
        searches = (
            gate != "never"
            or bool((data.get("joint_search") or {}).get("enabled"))
            or retrieval.get("grounding") == "online"
        )
        return searches and retrieval.get("use_search_database", True) is not False
    except (OSError, ValueError, AttributeError):
        return True


def report_markdown(
    run_dir: str | Path,
    *,
    plots: dict[str, str] | None = None,
    series: dict[str, Any] | None = None,
) -> str:
    """The run report as Markdown.

    The run report as Markdown: overview, gate, search, prediction, queries by realised Δ,
    LLM usage, wall time, failures, fallbacks, per-iteration tables and the lineage of the best
    program with a diff per step (see `run_summary` and `run_series` for the figures).

    Args:
        run_dir: the run directory.
        plots: plot name (`PLOT_TITLES`) → link to its PNG, shown in the matching section
            (`write_report` makes them); None: no images.
        series: `run_series` of the run, when the caller has it already.

    Raises:
        FileNotFoundError: ``run_dir`` is not a directory.
    """
    s = run_summary(run_dir)
    series = series if series is not None else run_series(run_dir, summary=s)
    out: list[str] = [f"# EvoDuet run report: {s.task or Path(s.run_dir).name}", ""]
    missing = [name for name, ok in s.files.items() if not ok]
    if not _gate_can_retrieve(Path(s.run_dir)):
        missing = [m for m in missing if m != layout.SEARCH_DB]  # never written then
    notes = []
    if missing:
        notes.append("missing files: " + ", ".join(f"`{m}`" for m in missing))
    if s.events.unreadable_lines:
        notes.append(f"{s.events.unreadable_lines} unreadable line(s) in `events.jsonl`")
    if s.search.dropped_lines:
        notes.append(f"{s.search.dropped_lines} unreadable line(s) in `search_database.jsonl`")
    if notes:
        out += ["> " + "; ".join(notes) + " (figures use what could be read).", ""]

    best = s.best
    best_iteration = best.iteration if best else "n/a"
    by_decision = s.improvement.by_decision
    metric = (best.metric if best else None) or "n/a"
    direction = (best.direction if best else None) or "n/a"
    overview = [
        ["run directory", s.run_dir],
        ["model", s.model],
        ["iterations completed", s.iterations],
        ["iterations planned", s.iterations_planned],
        ["stop reason", s.stop_reason or ("finished" if s.finished else "-")],
        ["sessions (resumed)", f"{s.sessions} ({s.resumed})"],
        ["wall time (s)", round(s.wall_s, 3)],
        ["initial score", s.initial_score],
        ["best score", best.score if best else None],
        ["best program", f"{best.id if best else 'n/a'} (iteration {best_iteration})"],
        [f"metric ({metric}, {direction})", best.metric_value if best else None],
        ["NDG (%)", best.ndg if best else None],
        ["improvements", s.improvements],
    ]
    out += [
        *_figures_section("Overview", overview),
        *_images(plots, "scores", "ndg"),
        "## Gate decisions",
        "",
        "Improved: a valid child beat its parent (strictly higher score).",
        "",
        md_table(
            ["decision", "iterations", "improved", "improvement rate"],
            [
                [
                    d,
                    n,
                    rate.improved if (rate := by_decision.get(d)) is not None else 0,
                    md_pct(rate.rate if rate is not None else None),
                ]
                for d, n in s.gate_decisions.items()
            ],
        ),
        "",
    ]
    search = s.search
    seen_share = md_pct(search.seen_before_share)
    search_rows: list[list[Any]] = [
        ["queries issued", search.queries],
        ["distinct queries", search.distinct_queries],
        ["results returned by the backend", search.results_returned],
        ["D_search records", search.records],
        *[
            [f"records: {decision}", n]
            for decision, n in sorted(search.records_by_decision.items())
        ],
        ["documents stored", search.documents_stored],
        ["URLs returned (D_search rounds)", search.returned_urls],
        ["distinct URLs", search.distinct_urls],
        ["returned URLs seen before", search.seen_before],
        ["repeated-URL share", seen_share],
    ]
    out += [*_figures_section("Search", search_rows), *_images(plots, "urls")]
    pred = s.prediction
    out += [
        "## Predicted vs realised child score",
        "",
        (
            f"Over {pred.records} D_search record(s) with a realised outcome: the mean "
            "score predicted for a record's final documents, for the parent that was mutated, "
            "against the mean score of the best valid child they fed "
            f"({pred.predictions} prediction(s) stored in all). Rank correlation "
            "(Spearman's ρ, 95% interval by Fisher's z): whether higher predictions went with "
            "better children."
        ),
        "",
        md_table(
            ["mean predicted", "mean realised", "mean absolute error", "rank correlation"],
            [[pred.mean_predicted, pred.mean_realised, pred.mean_abs_error, pred.rank.text()]],
        ),
        "",
    ]
    if pred.outcomes:
        out += [
            md_table(["outcome", "impacts"], [[k, v] for k, v in sorted(pred.outcomes.items())]),
            "",
        ]
    out += _images(plots, "predictions")
    out += _improvement_section(s.improvement, pred.predictions)
    out += _query_delta_section(series["query_deltas"])
    llm, wall = s.llm, s.wall_time
    nodes = sorted(set(llm.by_node) | set(wall.by_node))
    inclusive = sorted(INCLUSIVE_NODES & set(nodes))
    note = (
        f" `{'`, `'.join(inclusive)}` includes the inner loop's nodes and is left out of the "
        "totals."
        if inclusive
        else ""
    )
    out += [
        "## LLM usage per node",
        "",
        md_table(
            ["node", "calls", "input tokens", "output tokens", "latency (s)"],
            [
                [n, u.calls, u.input_tokens, u.output_tokens, round(u.latency_s, 3)]
                for n, u in llm.by_node.items()
            ]
            + [
                [
                    "**total**",
                    llm.total.calls,
                    llm.total.input_tokens,
                    llm.total.output_tokens,
                    round(llm.total.latency_s, 3),
                ]
            ],
        ),
        "",
        *_calls_section(s.llm_calls),
        *_images(plots, "llm"),
        *_model_section(s.llm_models),
        *_cost_section(s.cost, llm.total),
        "## Wall time per node",
        "",
        (note.strip() + "\n") if note else "",
        md_table(
            ["node", "executions", "errors", "total (s)", "mean (s)"],
            [
                [n, w.executions, w.errors, round(w.total_s, 3), round(w.mean_s, 4)]
                for n, w in wall.by_node.items()
            ]
            + [["**total**", "", "", round(wall.total_s, 3), ""]],
        ),
        "",
    ]
    fail = s.failures
    out += [
        "## Candidates and failures",
        "",
        md_table(
            [
                "candidates",
                "valid",
                "invalid",
                "failed",
                "rejected by evaluator",
                "duplicate (not evaluated)",
            ],
            [
                [
                    fail.candidates,
                    fail.valid,
                    fail.invalid,
                    fail.failed,
                    fail.rejected,
                    fail.duplicate,
                ]
            ],
        ),
        "",
    ]
    if fail.top_errors:
        out += ["Top error reasons:", "", md_table(["reason", "count"], fail.top_errors), ""]
    out += _novelty_section(s.novelty)
    out += [
        "## Fallbacks",
        "",
        md_table(["event", "count"], [[k, v] for k, v in s.fallbacks.items()]),
        "",
    ]
    history = s.history
    if history:
        shown = history[-MAX_HISTORY_ROWS:]
        out += ["## Per iteration", ""]
        if len(shown) < len(history):
            out += [f"Last {len(shown)} of {len(history)} iterations.", ""]
        out += [
            md_table(
                ["iteration", "gate", "candidates", "valid", "best child", "new best", "best"],
                [
                    [
                        h.iteration,
                        h.gate_decision,
                        h.candidates,
                        h.valid,
                        h.best_child,
                        "yes" if h.improved else "",
                        h.best_score,
                    ]
                    for h in shown
                ],
            ),
            "",
        ]
    out += _lineage_section(series["lineage"])
    return "\n".join(out).rstrip() + "\n"


def _improvement_section(imp: ImprovementFigures, predictions: int) -> list[str]:
    """The "Improvement rate by evidence" section.

    The paper's comparison of iterations whose evidence held a document predicted to beat the parent
    with iterations without documents.
    """
    rows = [
        [group, r.iterations, r.improved, md_pct(r.rate)] for group, r in imp.by_evidence.items()
    ]
    total = imp.all
    rows.append(["**all iterations**", total.iterations, total.improved, md_pct(total.rate)])
    return [
        "## Improvement rate by evidence",
        "",
        (
            "An iteration improved when a valid child beat its parent. Its evidence held a "
            "document predicted to beat the parent when one of the documents it was given had a "
            "predicted child score, made for that parent, above the parent's score (paper: "
            "67.1% of such iterations improved vs 52.1% of iterations without documents)."
        ),
        "",
        md_table(["evidence", "iterations", "improved", "improvement rate"], rows),
        "",
    ]


def md_share(won: int, n: int) -> str:
    """``"66.7% (2/3)"``; ``"n/a (0/0)"`` without iterations."""
    return f"{md_pct(won / n if n else None)} ({won}/{n})"


def md_usd(value: float | None) -> str:
    """A cost in USD, or why there is none (an unpriced model)."""
    return "n/a (unpriced model)" if value is None else f"${value:.6f}"


def _cost_section(cost: CostFigures, total: NodeUsage) -> list[str]:
    """The "Cost" section: USD of the LLM tokens and the search calls, with or without a budget."""
    source = {
        "local": "the embedded model is free",
        "config": "`budget.prices` of the run's config",
        "genai-prices": "the genai-prices catalogue",
        None: "no price known: set `budget.prices`",
    }[cost.price_source]
    rows = [
        ["model", cost.model],
        ["price source", source],
        [
            "USD per 1M input / output tokens",
            "n/a"
            if cost.usd_per_mtok_input is None
            else f"{cost.usd_per_mtok_input:.4g} / {cost.usd_per_mtok_output:.4g}",
        ],
        [
            "LLM tokens (input / output)",
            f"{int(total.input_tokens):,} / {int(total.output_tokens):,}",
        ],
        ["LLM cost (USD)", md_usd(cost.llm_usd)],
        ["search backend", cost.search_backend or "n/a"],
        ["search calls (failed)", f"{cost.search_calls} ({cost.search_failed})"],
        [
            "Tavily credits",
            "n/a (not Tavily)" if cost.search_credits is None else cost.search_credits,
        ],
    ]
    return _figures_section("Cost", rows)


def _figures_section(title: str, rows: list[list[Any]]) -> list[str]:
    """A ``## title`` section holding one figure/value table."""
    return [f"## {title}", "", md_table(["figure", "value"], rows), ""]


_TOP_QUERIES = 5


def _novelty_section(nov: NoveltyFigures) -> list[str]:
    """The "Novelty rejections" section: near-duplicate drafts rejected before evaluation."""
    out = ["## Novelty rejections", ""]
    if not nov.rejections:
        return [*out, "No candidate was rejected as a near-duplicate before evaluation.", ""]
    rows = [
        ["drafts rejected (never evaluated)", nov.rejections],
        *[[f"by {kind} check", n] for kind, n in nov.by_kind.items()],
        ["resampled (model asked again)", nov.resampled],
        ["accepted after the resample", nov.accepted_after_resample],
        ["candidates recorded as duplicate", nov.duplicates],
    ]
    out += [md_table(["figure", "value"], rows), ""]
    if nov.similar_to:
        out += [
            "Programs most often matched:",
            "",
            md_table(["program", "rejections"], nov.similar_to),
            "",
        ]
    return out


def _query_delta_section(rows: list[dict[str, Any]]) -> list[str]:
    """The report's "Queries by realised Δ" section.

    "Queries by realised Δ": the records whose evidence gave the largest positive and
    negative score change.
    """
    out = ["## Queries by realised Δ", ""]
    if not rows:
        return [*out, "No D_search record has a realised Δ yet.", ""]

    def table(chosen: list[dict[str, Any]]) -> str:
        return md_table(
            ["Δ", "iteration", "record", "decision", "queries / documents"],
            [
                [
                    r["delta"],
                    r["iteration"],
                    r["record_id"],
                    r["decision"],
                    "; ".join(r["queries"]) or "look-up: " + ", ".join(r["documents"]),
                ]
                for r in chosen
            ],
        )

    positive = [r for r in rows if r["delta"] > 0][:_TOP_QUERIES]
    negative = sorted((r for r in rows if r["delta"] < 0), key=lambda r: r["delta"])
    out += ["Largest positive Δ (the child beat its parent):", ""]
    out += [table(positive) if positive else "(none)", ""]
    out += ["Largest negative Δ:", ""]
    out += [table(negative[:_TOP_QUERIES]) if negative else "(none)", ""]
    return out


def _lineage_section(steps: list[dict[str, Any]]) -> list[str]:
    """The "Lineage of the best program" section: parent chain, scores, a diff per step."""
    out = ["## Lineage of the best program", ""]
    if not steps:
        missing = "No readable program store (`programs.sqlite` is missing or damaged) to trace"
        return [*out, f"{missing} the lineage from.", ""]
    out += [
        md_table(
            ["step", "program", "iteration", "score", "Δ score", "metric value"],
            [
                [i, st["id"], st["iteration"], st["score"], st["delta"], st["metric_value"]]
                for i, st in enumerate(steps)
            ],
        ),
        "",
    ]
    for i, st in enumerate(steps[1:], start=1):
        out += [
            f"### Step {i}: {steps[i - 1]['id']} → {st['id']} (iteration {st['iteration']})",
            "",
            "```diff",
            (st["diff"] or "(no change)").replace("```", "`\u200b``"),
            "```",
            "",
        ]
    return out


# ------------------------------------------------------------------------------------------
# Report files: PNG plots, Markdown, self-contained HTML; comparisons of several runs
# ------------------------------------------------------------------------------------------


def write_plots(series: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write the report's PNG plots into ``out_dir``.

    Returns name → path of those drawn (a plot without data, e.g. NDG without a reference score, is
    skipped).
    """
    makers = {
        "scores": plot_scores,
        "ndg": plot_ndg,
        "predictions": plot_predictions,
        "urls": plot_urls,
        "llm": plot_llm_usage,
    }
    written: dict[str, Path] = {}
    for name, make in makers.items():
        path = make(series, out_dir / f"{name}.png")
        if path is not None:
            written[name] = path
    return written


def write_report(
    run_dir: str | Path, *, out_dir: str | Path | None = None, html: bool = False
) -> dict[str, Any]:
    """Write the plots, ``report.md`` and (``html=True``) a self-contained ``report.html``.

    Args:
        run_dir: the run directory (read only, except for ``out_dir`` inside it).
        out_dir: where to write; default ``<run_dir>/report``.
        html: also write ``report.html`` with every image inlined (base64), so the one file
            can be mailed or attached.

    Returns:
        ``{"markdown": str, "markdown_path": Path, "html_path": Path | None,
        "plots": {name: Path}, "series": run_series(...)}``.

    Raises:
        FileNotFoundError: ``run_dir`` is not a directory.
    """
    rdir = Path(run_dir)
    summary = run_summary(rdir)
    series = run_series(rdir, summary=summary)
    out = Path(out_dir) if out_dir is not None else rdir / layout.REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    plots = write_plots(series, out)
    md_path = out / "report.md"
    text = report_markdown(rdir, plots={k: p.name for k, p in plots.items()}, series=series)
    md_path.write_text(text, encoding="utf-8")
    html_path = None
    if html:
        html_path = out / "report.html"
        title = f"EvoDuet run report: {summary.task or rdir.name}"
        html_path.write_text(markdown_to_html(text, base=out, title=title), encoding="utf-8")
    return {
        "markdown": text,
        "markdown_path": md_path,
        "html_path": html_path,
        "plots": plots,
        "series": series,
    }


def relink(markdown: str, plots: dict[str, Path], where: Path) -> str:
    """``markdown`` with its plot links made relative to the folder ``where``.

    ``markdown`` with its plot links made relative to the folder ``where`` (for a copy of
    the report written elsewhere, e.g. ``evoduet report --out FILE``).
    """
    for path in plots.values():
        rel = os.path.relpath(path.resolve(), where.resolve())
        markdown = markdown.replace(f"]({path.name})", f"]({Path(rel).as_posix()})")
    return markdown

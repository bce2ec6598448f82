"""The bench's markdown summary and matplotlib plots (Agg backend, PNG files).

* `write_summary` → ``<out>/summary.md``: mean ± sd NDG over seeds per task and method and
  overall (pooled over every finished run of a method), mean best metric per task and method,
  mean cost per run (LLM calls, tokens, wall seconds), each method against openevolve-mode
  read against the seed spread (`reference_section`), NDG at equal compute (tokens and wall
  time, `equal_compute_section`), the knowledge figures per method
  (improvement rates by evidence, repeated-URL share, USD, search calls), failed runs,
  versions.
* `write_plots` → ``<out>/plots/best_<task>.png`` (best-so-far of the task metric against
  iterations, model tokens and wall time: one line per seed, the seeds' mean and range per
  method, initial and reference dashed) and
  ``<out>/plots/ndg.png`` (NDG bars per task and overall, one bar per method, sd whiskers).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evoduet_graph.bench.curves import AXES, Axis, best_at, curve, seed_band
from evoduet_graph.bench.jobs import METHOD_ORDER
from evoduet_graph.bench.output import RunRecord
from evoduet_graph.bench.spread import difference
from evoduet_graph.report.correlation import rank_correlation
from evoduet_graph.report.plots import pyplot

__all__ = ["mean_sd", "ndg_table", "write_plots", "write_summary"]

_COLORS = {"evoduet": "#1f77b4", "openevolve-mode": "#ff7f0e", "openevolve": "#2ca02c"}
_FALLBACK = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def mean_sd(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (None for no values; sd None for one value)."""
    if not values:
        return None, None
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    return mean, sd


def _cell(values: Sequence[float], digits: int = 1) -> str:
    mean, sd = mean_sd(values)
    if mean is None:
        return "—"
    text = f"{mean:.{digits}f}"
    text += f" ± {sd:.{digits}f}" if sd is not None else ""
    return f"{text} (n={len(values)})"


def _g(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _methods(records: Sequence[RunRecord]) -> list[str]:
    seen = list(dict.fromkeys(r.key[1] for r in records))
    return [m for m in METHOD_ORDER if m in seen] + [m for m in seen if m not in METHOD_ORDER]


def _tasks(records: Sequence[RunRecord]) -> list[str]:
    return list(dict.fromkeys(r.key[0] for r in records))


def ndg_table(records: Sequence[RunRecord]) -> dict[str, dict[str, list[float]]]:
    """``{task or "overall": {method: [final NDG of each finished run]}}``."""
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        if rec.outcome is None:
            continue
        ndg = rec.ndg(rec.outcome.best)
        if ndg is None:
            continue
        task, method, _seed = rec.key
        table[task][method].append(ndg)
        table["overall"][method].append(ndg)
    return table


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _pooled(figs: list[dict[str, Any]], key: str) -> str:
    """Improved / iterations of one evidence group over runs, as ``"60.0% (3/5)"``."""
    n = sum(int(f[f"n_{key}"] or 0) for f in figs)
    won = sum(int(f[f"improved_{key}"] or 0) for f in figs)
    return f"{100 * won / n:.1f}% ({won}/{n})" if n else "—"


def _rank_section(records: Sequence[RunRecord], methods: list[str]) -> list[str]:
    """Predicted vs realised child score per method and task, the seeds' pairs pooled.

    Spearman's ρ with n and its 95% interval (`evoduet_graph.report.correlation`), over the
    (predicted, realised) pairs of a method's finished runs on one task (one score scale). A
    method none of whose runs made a prediction (no hypothetical evidence scoring: the
    baseline, the oracle's fixed documents, a joint-level search) gets no rows; the section
    names it instead, so an empty row is not read as a failed correlation.
    """
    rows = []
    predicts_nothing = []
    for m in methods:
        pooled: dict[str, list[list[float]]] = {}
        for r in records:
            if r.key[1] != m or r.outcome is None or "knowledge" not in r.outcome.details:
                continue
            pairs = r.outcome.details["knowledge"].get("prediction_pairs") or []
            pooled.setdefault(r.key[0], []).extend(pairs)
        if not any(pooled.values()):
            predicts_nothing.append(m)
            continue
        rows += [[m, task, rank_correlation(pairs).text()] for task, pairs in pooled.items()]
    if not any(row[2] and "undefined" not in row[2] for row in rows):
        return []
    lines = [
        "## Predicted vs realised child score",
        "",
        "Spearman's ρ of the hypothetical evidence scores of each retrieval's final documents "
        "against the best child they fed; seeds pooled per task; 95% interval by Fisher's z.",
        "",
        _md_table(["method", "task", "rank correlation"], rows),
        "",
    ]
    if predicts_nothing:
        names = ", ".join(predicts_nothing)
        lines += [f"No predicted scores (no hypothetical evidence scoring): {names}.", ""]
    return lines


VALID_SHARE_FLOOR = 0.5
"""Below this share of valid children a method's figures on a task say little about it."""


def validity_section(
    records: Sequence[RunRecord], methods: list[str], tasks: list[str]
) -> list[str]:
    """Share of valid children per task and method, pooled over seeds; low shares flagged.

    A child is every candidate of an iteration (an unusable answer, a failed call or a
    duplicate included); valid: evaluated and accepted by the evaluator. A share under
    `VALID_SHARE_FLOOR` is marked: the model could not follow that method's prompt on the
    task, and its NDG says more about the edit format than about the method.
    """
    rows = []
    flagged = 0
    for t in tasks:
        row = [t]
        for m in methods:
            details = [
                r.outcome.details
                for r in records
                if r.key[:2] == (t, m) and r.outcome is not None and "children" in r.outcome.details
            ]
            n = sum(int(d["children"]) for d in details)
            valid = sum(int(d["valid_children"]) for d in details)
            if not n:
                row.append("—")
                continue
            low = valid / n < VALID_SHARE_FLOOR
            flagged += low
            row.append(f"{100 * valid / n:.0f}% ({valid}/{n}){' ⚠' if low else ''}")
        rows.append(row)
    if not any(cell != "—" for row in rows for cell in row[1:]):
        return []
    note = (
        f" ⚠: under {VALID_SHARE_FLOOR:.0%} valid ({flagged} cell(s)): read that method's "
        "figures on that task with care."
        if flagged
        else ""
    )
    return [
        "## Valid children per task and method: pooled over seeds",
        "",
        "Children: every candidate the runs asked the model for; valid: evaluated and accepted."
        + note,
        "",
        _md_table(["task", *methods], rows),
        "",
    ]


def equal_compute_section(
    records: Sequence[RunRecord], methods: list[str], tasks: list[str]
) -> list[str]:
    """NDG per task and method at the same model compute, in tokens and in wall time.

    The budget of a task is the smallest total (tokens, or wall seconds) of its finished runs,
    every method's included, so every run is observed there; each run's NDG is that of its
    best program by fitness once it had spent the budget (`evoduet_graph.bench.curves.best_at`).
    A method that spends more per iteration is compared at fewer iterations.
    """
    if len(methods) < 2:
        return []
    rows = []
    for t in tasks:
        done = [r for r in records if r.key[0] == t and r.outcome is not None]
        axes: tuple[Axis, ...] = ("tokens", "wall_s")
        for axis in axes:
            ends = [c[-1][0] for r in done if r.outcome and (c := curve(r.outcome.points, axis))]
            if not ends:
                continue
            budget = min(ends)
            cells = []
            for m in methods:
                values = []
                for r in done:
                    if r.key[1] == m and r.outcome is not None:
                        ndg = r.ndg(best_at(r.outcome.points, axis, budget))
                        if ndg is not None:
                            values.append(ndg)
                cells.append(_cell(values))
            shown = f"{budget:,.0f} tokens" if axis == "tokens" else f"{budget / 60:.1f} min"
            rows.append([t, shown, *cells])
    if not rows:
        return []
    return [
        "## NDG (%) at equal compute: mean ± sd over seeds",
        "",
        "Each run's NDG once it had spent the task's budget: the smallest total of the task's "
        "finished runs, in model tokens (prompt + completion) or in wall time, so every run "
        "is observed there. A method that spends more per iteration is read at fewer "
        "iterations; `plots/best_<task>.png` draws the whole curves on both axes.",
        "",
        _md_table(["task", "budget", *methods], rows),
        "",
    ]


REFERENCE_METHOD = "openevolve-mode"
"""The method the others are read against: the same scaffold without the knowledge layer."""


def reference_section(
    table: dict[str, dict[str, list[float]]], methods: list[str], tasks: list[str]
) -> list[str]:
    """Each method's NDG against openevolve-mode's, per task, read against the seed spread.

    `evoduet_graph.bench.spread.difference`: the difference of means, the exact permutation
    p-value, and whether the two methods' seed ranges are apart.
    """
    if REFERENCE_METHOD not in methods or len(methods) < 2:
        return []
    rows = []
    for t in tasks:
        reference = table[t][REFERENCE_METHOD]
        for m in methods:
            if m == REFERENCE_METHOD or not table[t][m] or not reference:
                continue
            d = difference(table[t][m], reference)
            rows.append(
                [
                    t,
                    m,
                    "—" if d.delta is None else f"{d.delta:+.1f}",
                    f"{min(d.values):.1f} to {max(d.values):.1f}",
                    f"{min(d.reference):.1f} to {max(d.reference):.1f}",
                    "—" if d.p_value is None else f"{d.p_value:.2f}",
                    ("yes" if d.apart else "no") if d.seeded else "— (one seed)",
                ]
            )
    if not rows:
        return []
    return [
        f"## NDG against {REFERENCE_METHOD}: beyond the seed spread?",
        "",
        "Δ: the method's mean NDG minus openevolve-mode's, in points, per task. p: the exact "
        "two-sided permutation test of Δ over every split of the two methods' runs (with three "
        "seeds against three it cannot go below 0.1). Beyond the spread: every seed of one "
        "method above every seed of the other, each with two or more seeds.",
        "",
        _md_table(
            [
                "task",
                "method",
                "Δ NDG",
                "method's seeds",
                f"{REFERENCE_METHOD}'s seeds",
                "p",
                "beyond the spread",
            ],
            rows,
        ),
        "",
    ]


def knowledge_section(records: Sequence[RunRecord], methods: list[str]) -> list[str]:
    """The "Knowledge figures per method" section.

    The paper's improvement rates (pooled over the finished runs of a method: improved /
    iterations), the mean repeated-URL share, the mean LLM cost in USD (n/a when a run's model is
    unpriced) and the mean search calls per run. Methods that are not our graph (OpenEvolve) have no
    such figures.
    """
    rows = []
    for m in methods:
        figs = [
            r.outcome.details["knowledge"]
            for r in records
            if r.key[1] == m and r.outcome is not None and "knowledge" in r.outcome.details
        ]
        if not figs:
            continue

        shares = [f["repeated_url_share"] for f in figs if f["repeated_url_share"] is not None]
        usd = [f["llm_usd"] for f in figs]
        calls = [float(f["search_calls"]) for f in figs]
        credits = [f["search_credits"] for f in figs if f["search_credits"] is not None]
        rows.append(
            [
                m,
                str(len(figs)),
                _pooled(figs, "predicted_better"),
                _pooled(figs, "no_documents"),
                f"{100 * sum(shares) / len(shares):.1f}%" if shares else "—",
                "n/a" if any(u is None for u in usd) else f"{sum(usd) / len(usd):.6f}",
                f"{sum(calls) / len(calls):.1f}",
                f"{sum(credits) / len(credits):.1f}" if credits else "—",
            ]
        )
    if not rows:
        return []
    return [
        *_rank_section(records, methods),
        "## Knowledge figures per method: finished runs",
        "",
        (
            "Improved: a valid child beat its parent. Paper: 67.1% of iterations whose "
            "evidence held a document predicted to beat the parent vs 52.1% without documents."
        ),
        "",
        _md_table(
            [
                "method",
                "runs",
                "improved, evidence predicted to beat the parent",
                "improved, no documents",
                "repeated-URL share",
                "LLM USD per run",
                "search calls per run",
                "Tavily credits per run",
            ],
            rows,
        ),
    ]


def _versions_line(model: str, sha256: str, versions: dict[str, Any]) -> str:
    git = versions.get("evoduet_graph_git")
    return (
        f"Model: {model or 'n/a'}"
        + (f" (sha256 `{sha256}`)" if sha256 else "")
        + f". Versions: evoduet_graph {versions.get('evoduet_graph') or 'n/a'}"
        + (f" (git {git})" if git else "")
        + f", llama-cpp-python {versions.get('llama_cpp_python') or 'n/a'}"
        + f", openevolve {versions.get('openevolve') or 'n/a'}"
        + f", Python {versions.get('python') or 'n/a'}."
    )


def _provenance(records: Sequence[RunRecord], manifest: dict[str, Any]) -> list[str]:
    """The model and versions that made the runs, read from each run's record.

    A bench spread over several invocations (or machines) is summarised by whichever one ran
    last, so the summarising process's versions would misname runs made at another commit.
    Runs recorded without versions (older records) fall back to the manifest's.
    """
    fallback = manifest.get("versions") or {}
    model_info = manifest.get("model") or {}
    groups: dict[str, list[str]] = {}
    for rec in records:
        versions = rec.data.get("versions") or fallback
        line = _versions_line(
            str(rec.data.get("model") or model_info.get("model") or ""),
            str(rec.data.get("model_sha256") or model_info.get("model_sha256") or ""),
            versions,
        )
        task, method, seed = rec.key
        groups.setdefault(line, []).append(f"{task}/{method}/seed{seed}")
    if not groups:
        line = _versions_line(
            str(model_info.get("model") or ""), str(model_info.get("model_sha256") or ""), fallback
        )
        return [line]
    if len(groups) == 1:
        return [next(iter(groups))]
    lines = ["The runs were made with different models or versions:", ""]
    for line, runs in groups.items():
        lines.append(f"- {line} Runs ({len(runs)}): {', '.join(runs)}.")
    return lines


def write_summary(out: Path, records: Sequence[RunRecord], manifest: dict[str, Any]) -> Path:
    """Write ``<out>/summary.md`` and return its path."""
    methods = _methods(records)
    tasks = _tasks(records)
    table = ndg_table(records)
    parts = ["# Benchmark results", "", *_provenance(records, manifest)]
    parts += ["", "## NDG (%) per task and method: mean ± sd over seeds", ""]
    rows = [[t] + [_cell(table[t][m]) for m in methods] for t in tasks]
    rows.append(["**overall**"] + [_cell(table["overall"][m]) for m in methods])
    parts.append(_md_table(["task"] + methods, rows))
    parts += [
        "",
        (
            "NDG = (best − initial) / (reference − initial) × 100 on the task's own metric, "
            "where best is the metric of the run's best program by fitness (the program it "
            "delivers; the initial program included, so NDG is floored at 0), as in each "
            "run's report. Overall: pooled over every finished run of the method. "
            "OpenEvolve's programs are re-scored by our sandboxed evaluator."
        ),
        "",
        "## Best metric per task and method: mean ± sd over seeds",
        "",
    ]
    best: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    task_info: dict[str, Any] = {}
    for rec in records:
        if rec.task is not None:
            task_info[rec.key[0]] = rec.task
        if rec.outcome is not None and rec.outcome.best is not None:
            best[rec.key[0]][rec.key[1]].append(rec.outcome.best)
    rows = []
    for t in tasks:
        info = task_info.get(t)
        label = t
        if info is not None:
            label += (
                f" ({info.metric}, {info.direction}; initial {_g(info.initial_score)}, "
                f"reference {_g(info.sota_score)})"
            )
        rows.append([label] + [_cell(best[t][m], 6) for m in methods])
    parts.append(_md_table(["task"] + methods, rows))
    parts += ["", "## Cost per run: mean over finished runs", ""]
    rows = []
    for m in methods:
        mine = [r for r in records if r.key[1] == m]
        done = [r.outcome for r in mine if r.outcome is not None]
        failed = sum(1 for r in mine if r.status == "failed")
        other = len(mine) - len(done) - failed

        def avg(values: list[float], digits: int = 0) -> str:
            mean, _ = mean_sd(values)
            return "—" if mean is None else f"{mean:.{digits}f}"

        rows.append(
            [
                m,
                str(len(done)),
                str(failed),
                str(other),
                avg([float(o.iterations) for o in done], 1),
                avg([float(o.llm_calls) for o in done], 1),
                avg([float(o.tokens) for o in done]),
                avg([o.wall_s for o in done if o.wall_s is not None], 1),
            ]
        )
    parts.append(
        _md_table(
            [
                "method",
                "done",
                "failed",
                "unfinished",
                "iterations",
                "LLM calls",
                "tokens",
                "wall s",
            ],
            rows,
        )
    )
    parts += ["", *reference_section(table, methods, tasks)]
    parts += ["", *equal_compute_section(records, methods, tasks)]
    parts += ["", *validity_section(records, methods, tasks)]
    parts += ["", *knowledge_section(records, methods)]
    parts += ["", "## World knowledge per method: over finished runs", ""]
    parts.append(_knowledge_table(methods, records))
    parts += [
        "",
        (
            "Improvement rate: share of iterations whose best valid child beats its parent, "
            "for iterations whose mutation prompt carried documents (retrieved, looked up, "
            "oracle, or found by a joint-level search) and for the others. Queries and "
            "distinct URLs: mean per run; repeated-URL share: returned URLs already returned "
            "earlier in the same run, pooled over runs. USD: priced models only."
        ),
    ]
    failures = [r for r in records if r.status == "failed"]
    if failures:
        parts += ["", "## Failed runs", ""]
        rows = [
            [r.key[0], r.key[1], str(r.key[2]), (r.data.get("error") or "").splitlines()[0][:200]]
            for r in failures
        ]
        parts.append(_md_table(["task", "method", "seed", "error"], rows))
    notes = [(r, note) for r in records if r.outcome is not None for note in r.outcome.notes]
    if notes:
        parts += ["", "## Notes", ""]
        parts += [f"- {r.key[0]}/{r.key[1]}/seed{r.key[2]}: {note}" for r, note in notes]
    parts += [
        "",
        (
            "Files: `results.csv` (one row per task, method, seed and iteration), `runs.csv` "
            "(one row per run), `plots/`, `manifest.json`, `runs/<task>/<method>/seed<k>/`."
        ),
        "",
    ]
    path = out / "summary.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _rate(improved: int, total: int) -> str:
    return "—" if not total else f"{100 * improved / total:.0f}% ({improved}/{total})"


def _knowledge_table(methods: list[str], records: Sequence[RunRecord]) -> str:
    """The per-method table of the bench.

    Per method: NDG mean ± sd, improvement rate with / without documents, queries,
    distinct URLs, repeated-URL share, LLM calls, tokens, USD and wall seconds (means per
    finished run; rates and the URL share pooled).
    """
    rows = []
    for m in methods:
        done = [r for r in records if r.key[1] == m and r.outcome is not None]
        ndgs = [n for r in done if (n := r.ndg(r.outcome.best)) is not None]  # type: ignore[union-attr]
        know = [
            r.outcome.details.get("knowledge") or {}  # type: ignore[union-attr]
            for r in done
        ]

        def total(key: str, entries: list[dict[str, Any]] = know) -> int:
            return sum(int(k.get(key) or 0) for k in entries)

        def mean(values: list[float], digits: int = 1) -> str:
            avg, _ = mean_sd(values)
            return "—" if avg is None else f"{avg:.{digits}f}"

        returned, repeated = total("returned_urls"), total("repeated_urls")
        rows.append(
            [
                m,
                _cell(ndgs),
                _rate(total("improved_with_documents"), total("iterations_with_documents")),
                _rate(total("improved_without_documents"), total("iterations_without_documents")),
                mean([float(k.get("queries") or 0) for k in know]),
                mean([float(k.get("distinct_urls") or 0) for k in know]),
                "—" if not returned else f"{100 * repeated / returned:.1f}%",
                mean([float(r.outcome.llm_calls) for r in done]),  # type: ignore[union-attr]
                mean([float(r.outcome.tokens) for r in done], 0),  # type: ignore[union-attr]
                mean([float(k["llm_usd"]) for k in know if k.get("llm_usd") is not None], 4),
                mean([r.outcome.wall_s for r in done if r.outcome.wall_s is not None]),  # type: ignore[union-attr]
            ]
        )
    return _md_table(
        [
            "method",
            "NDG %",
            "improved with docs",
            "improved without docs",
            "queries",
            "distinct URLs",
            "repeated URLs",
            "LLM calls",
            "tokens",
            "USD",
            "wall s",
        ],
        rows,
    )


def _color(method: str, methods: list[str]) -> str:
    if method in _COLORS:
        return _COLORS[method]
    extra = [m for m in methods if m not in _COLORS]
    return _FALLBACK[extra.index(method) % len(_FALLBACK)]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


_AXIS_LABELS: dict[Axis, tuple[str, float]] = {
    "iteration": ("iteration", 1.0),
    "tokens": ("model tokens, thousands (prompt + completion, cumulative)", 1e-3),
    "wall_s": ("wall time, minutes (cumulative)", 1 / 60),
}


def _plot_seeds(
    ax: Any, curves: list[list[tuple[float, float]]], scale: float, color: str, method: str
) -> None:
    """One method's seeds on one axis: each seed thin, their mean bold, their range a band."""
    if not curves:
        return
    for c in curves:
        xs = [x * scale for x, _ in c]
        ax.plot(xs, [y for _, y in c], color=color, alpha=0.3, lw=1, drawstyle="steps-post")
    band = seed_band(curves)
    if not band.xs:
        return
    xs = [x * scale for x in band.xs]
    if len(curves) > 1:
        ax.fill_between(xs, band.low, band.high, step="post", color=color, alpha=0.15, lw=0)
    ax.plot(
        xs,
        band.mean,
        color=color,
        lw=2,
        label=f"{method} (mean of {len(curves)})",
        drawstyle="steps-post",
    )


def write_plots(out: Path, records: Sequence[RunRecord]) -> list[Path]:
    """Write the PNG plots into ``<out>/plots`` and return their paths."""
    plt = pyplot()

    plot_dir = out / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    methods = _methods(records)
    written: list[Path] = []

    for task_name in _tasks(records):
        mine = [r for r in records if r.key[0] == task_name and r.outcome is not None]
        if not mine:
            continue
        task = next((r.task for r in mine if r.task is not None), None)
        fig, axes = plt.subplots(1, len(AXES), figsize=(16, 4.8), sharey=True)
        for ax, axis in zip(axes, AXES, strict=True):
            label, scale = _AXIS_LABELS[axis]
            for m in methods:
                curves = [
                    curve(r.outcome.points, axis)
                    for r in mine
                    if r.key[1] == m and r.outcome is not None
                ]
                _plot_seeds(ax, [c for c in curves if c], scale, _color(m, methods), m)
            if task is not None:
                if task.initial_score is not None:
                    ax.axhline(task.initial_score, color="grey", ls=":", lw=1, label="initial")
                if task.sota_score is not None:
                    ax.axhline(task.sota_score, color="black", ls="--", lw=1, label="reference")
            ax.set_xlabel(label)
            ax.grid(alpha=0.3)
        axes[0].xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        metric = task.metric if task is not None else "metric"
        direction = (
            f" ({'higher' if task is None or task.direction == 'max' else 'lower'} is better)"
        )
        axes[0].set_ylabel(f"best {metric} so far{direction}")
        axes[0].legend(fontsize=8)
        fig.suptitle(
            f"{task_name}: best so far per seed (thin), seeds' mean (bold) and range (band)"
        )
        fig.tight_layout()
        path = plot_dir / f"best_{_safe(task_name)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    table = ndg_table(records)
    groups = [t for t in _tasks(records) if t in table] + (
        ["overall"] if "overall" in table else []
    )
    if groups:
        fig, ax = plt.subplots(figsize=(max(6.0, 1.8 * len(groups) + 2), 4.5))
        width = 0.8 / max(1, len(methods))
        for j, m in enumerate(methods):
            means, sds = [], []
            for g in groups:
                mean, sd = mean_sd(table[g][m])
                means.append(mean if mean is not None else math.nan)
                sds.append(sd if sd is not None else 0.0)
            bars = [i + (j - (len(methods) - 1) / 2) * width for i in range(len(groups))]
            ax.bar(bars, means, width, yerr=sds, capsize=3, color=_color(m, methods), label=m)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, rotation=15, ha="right")
        ax.set_ylabel("NDG (%), mean ± sd over seeds")
        ax.set_title("NDG per method")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = plot_dir / "ndg.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written

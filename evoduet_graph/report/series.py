"""Per-iteration series of a run (best score, NDG, URLs, predictions, query deltas, lineage).

The data behind the plots and the report's tables, JSON-ready.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoduet_graph.candidates.bundle import FILE_HEADER, bundle_diff_summary
from evoduet_graph.candidates.diffs import code_diff_summary
from evoduet_graph.report.summary import (
    candidates_by_iteration,
    gate_by_iteration,
    latest_by_iteration,
    prediction_points,
    run_summary,
)
from evoduet_graph.report.summary_types import RunSummary
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.read import load_programs, read_json, read_jsonl
from evoduet_graph.search.base import normalize_url
from evoduet_graph.search.database import SearchDatabase, load_search_db
from evoduet_graph.task import TaskError, load_task

# ------------------------------------------------------------------------------------------
# Series for plots, lineage, queries by Δ
# ------------------------------------------------------------------------------------------


def _load_task_of(rdir: Path) -> Any | None:
    """The run's task (from ``run.json``), or None when its folder cannot be loaded."""
    meta = read_json(rdir / layout.RUN_META) or {}
    task_dir = meta.get("task_dir")
    if not task_dir:
        return None
    try:
        return load_task(task_dir)
    except (TaskError, OSError, ValueError):
        return None


def _url_series(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """URLs returned per iteration with searches: new distinct and repeated ones.

    Per iteration with searches: URLs returned, new distinct and repeated ones (cumulative
    totals too); a URL is *repeated* when its normalised form was returned before.
    """
    seen: set[str] = set()
    per: dict[int, dict[str, int]] = {}
    for ev in events:
        if ev.get("event") != "search" or not isinstance(ev.get("iteration"), int):
            continue
        row = per.setdefault(ev["iteration"], {"returned": 0, "new": 0, "repeated": 0})
        for url in ev.get("urls") or []:
            key = normalize_url(str(url))
            row["returned"] += 1
            if key in seen:
                row["repeated"] += 1
            else:
                seen.add(key)
                row["new"] += 1
    out, distinct, repeated = [], 0, 0
    for it in sorted(per):
        distinct += per[it]["new"]
        repeated += per[it]["repeated"]
        out.append(
            {"iteration": it, **per[it], "distinct_total": distinct, "repeated_total": repeated}
        )
    return out


def query_deltas(db: SearchDatabase | None) -> list[dict[str, Any]]:
    """D_search records with a realised Δ, highest Δ first.

    ``record_id``, ``iteration``, ``decision``, ``queries`` (the query chain; a look-up has none),
    ``documents`` (final doc ids), ``delta`` (mean realised Δ) and ``outcomes``.
    """
    rows = []
    for record in db.records() if db is not None else []:
        delta = record.realised_delta
        if delta is None:
            continue
        rows.append(
            {
                "record_id": record.record_id,
                "iteration": record.iteration,
                "decision": record.decision,
                "queries": record.queries,
                "documents": list(record.final_doc_ids),
                "delta": delta,
                "outcomes": [i.outcome for i in record.impacts],
            }
        )
    return sorted(rows, key=lambda r: (-r["delta"], r["record_id"]))


def lineage_steps(
    programs: list[Any] | None, best_id: str | None, task: Any | None = None, max_lines: int = 40
) -> list[dict[str, Any]]:
    """The parent chain of ``best_id`` (oldest first, as `evoduet_graph.rundir.best.lineage`).

    ``id``, ``iteration``, ``score``, ``metric_value`` (with ``task``), ``delta`` (score change from
    the parent) and ``diff`` (`evoduet_graph.candidates.diffs.code_diff_summary` from the parent;
    None for the first program; a folder program: one diff per changed file,
    `evoduet_graph.candidates.bundle.bundle_diff_summary`).
    """
    rows = {p.id: p for p in programs or []}
    chain: list[Any] = []
    seen: set[str] = set()
    current = best_id
    while current is not None and current in rows and current not in seen:
        seen.add(current)
        chain.append(rows[current])
        current = rows[current].parent_id
    chain.reverse()
    folder = task.is_folder if task is not None else _looks_like_bundles(chain)
    diff_of = bundle_diff_summary if folder else code_diff_summary
    steps = []
    for i, row in enumerate(chain):
        parent = chain[i - 1] if i else None
        metric_value = None
        if task is not None and row.metrics:
            metric_value = task.metric_value(row.metrics)
        steps.append(
            {
                "id": row.id,
                "iteration": row.iteration,
                "score": row.score,
                "metric_value": metric_value,
                "delta": (
                    row.score - parent.score
                    if parent is not None and row.score is not None and parent.score is not None
                    else None
                ),
                "diff": (
                    diff_of(parent.code or "", row.code or "", max_lines=max_lines)
                    if parent is not None
                    else None
                ),
            }
        )
    return steps


def _looks_like_bundles(chain: list[Any]) -> bool:
    """Without the task folder: whether every program of the chain is a folder bundle."""
    return bool(chain) and all((row.code or "").startswith(FILE_HEADER) for row in chain)


def run_series(run_dir: str | Path, *, summary: RunSummary | None = None) -> dict[str, Any]:
    """What the report's plots draw, per iteration, as a JSON-ready dict.

    Returns:
        ``task`` (name), ``metric`` / ``direction`` (None without the task folder),
        ``best`` (``[iteration, best score so far]`` from iteration 0), ``candidates``
        (``iteration``, ``id``, ``score``, ``valid``, ``status``, ``gate``), ``ndg`` and
        ``metric_values`` (``[iteration, value]`` of the best program so far; empty without
        the task folder, its reference scores or the program store), ``predictions``
        (`prediction_points`), ``urls`` (`_url_series`), ``query_deltas``, ``lineage``
        (`lineage_steps` of the best program) and ``llm`` (per node, from `run_summary`).

    Raises:
        FileNotFoundError: ``run_dir`` is not a directory.
    """
    rdir = Path(run_dir)
    summary = summary if summary is not None else run_summary(rdir)
    events, _ = read_jsonl(rdir / layout.EVENTS)
    db = load_search_db(rdir / layout.SEARCH_DB)
    programs = load_programs(rdir / layout.PROGRAMS)
    task = _load_task_of(rdir)
    rows = {p.id: p for p in programs or []}
    gates = {it: ev.get("gate_decision") for it, ev in gate_by_iteration(events).items()}

    best_series: list[list[Any]] = []
    if summary.initial_score is not None:
        best_series.append([0, summary.initial_score])
    best_series += [[h.iteration, h.best_score] for h in summary.history]

    candidates = []
    for it, cands in sorted(candidates_by_iteration(events).items()):
        for cid, cand in sorted(cands.items()):
            candidates.append(
                {
                    "iteration": it,
                    "id": cid,
                    "score": cand.get("score"),
                    "valid": bool(cand.get("valid")),
                    "status": cand.get("status"),
                    "gate": gates.get(it),
                }
            )

    ndg: list[list[Any]] = []
    metric_values: list[list[Any]] = []
    if task is not None and rows:
        best_id: str | None = "initial" if "initial" in rows else None
        records = latest_by_iteration(events, "record")
        for it in [0, *sorted(i for i in records if i > 0)]:
            if it and records[it].get("best_id"):
                best_id = str(records[it]["best_id"])
            row = rows.get(best_id or "")
            value = task.metric_value(row.metrics) if row is not None and row.metrics else None
            if value is None:
                continue
            metric_values.append([it, value])
            gain = task.ndg(value)
            if gain is not None:
                ndg.append([it, gain])

    best_id_final = summary.best.id if summary.best is not None else None
    if best_id_final is None and rows:
        valid = [p for p in rows.values() if p.valid and p.score is not None]
        best_id_final = max(valid, key=lambda p: p.score or 0.0).id if valid else None
    about_task = (
        {"metric": task.metric, "direction": task.direction, "reference": task.sota_score}
        if task is not None
        else dict.fromkeys(("metric", "direction", "reference"))
    )
    return {
        "task": summary.task,
        **about_task,
        "best": best_series,
        "candidates": candidates,
        "ndg": ndg,
        "metric_values": metric_values,
        "predictions": prediction_points(db),
        "urls": _url_series(events),
        "query_deltas": query_deltas(db),
        "lineage": lineage_steps(programs, best_id_final, task),
        "llm": summary.llm.to_dict(),
    }

"""Run report: the figures of one run directory as a dict and as Markdown (DESIGN.md §6).

Reads, never writes, the run directory:

* ``events.jsonl`` — node executions (wall time, LLM usage), gate decisions, searches,
  fallbacks (`evoduet_graph.events`);
* ``search_database.jsonl`` — D_search (`SearchDatabase`; loaded from a temporary copy,
  because loading cuts a torn last line and a report must not touch a run's files);
* ``programs.sqlite`` — every candidate with its status and error (`ProgramStore`);
* ``best_program.json`` — the best program's score, metric value and NDG.

Every file may be missing (a run killed early) and torn or unreadable lines are skipped and
counted, so a report is always produced. ``evoduet report RUN_DIR`` prints `report_markdown`.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from evoduet_graph.search.database import SearchDatabase
from evoduet_graph.store import ProgramStore

__all__ = ["FALLBACK_EVENTS", "INCLUSIVE_NODES", "report_markdown", "run_summary"]

FALLBACK_EVENTS = (
    "gate_fallback",
    "gate_lookup_fallback",
    "gate_invalid_ids",
    "gate_error",
    "query_fallback",
    "query_error",
    "score_fallback",
    "score_error",
    "search_error",
    "retrieve_empty",
)
"""Events counted in the report's fallback table (degraded, never fatal, paths)."""

INCLUSIVE_NODES = frozenset({"retrieve"})
"""Nodes whose wall time and LLM usage include other nodes' (the inner loop runs inside
``retrieve``); they are listed per node but left out of the totals."""

GATE_DECISIONS = ("no-op", "look-up", "retrieve")

_TOP_ERRORS = 5
_MAX_HISTORY_ROWS = 100


# ------------------------------------------------------------------------------------------
# readers
# ------------------------------------------------------------------------------------------


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """JSON objects of a JSONL file and the number of lines that are not one (torn tail)."""
    if not path.is_file():
        return [], 0
    records: list[dict[str, Any]] = []
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(obj, dict):
                records.append(obj)
            else:
                bad += 1
    return records, bad


def _load_search_db(path: Path) -> SearchDatabase | None:
    """D_search loaded from a temporary copy of ``path`` (None when the file is missing)."""
    if not path.is_file():
        return None
    with tempfile.TemporaryDirectory(prefix="evoduet-report-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        return SearchDatabase(copy, fsync=False)


def _load_programs(path: Path) -> list[Any] | None:
    """Every program row of ``programs.sqlite`` (None when missing or unreadable)."""
    if not path.is_file():
        return None
    try:
        store = ProgramStore(path)
    except sqlite3.Error:
        return None
    try:
        return store.all_programs()
    except sqlite3.Error:
        return None
    finally:
        store.close()


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ------------------------------------------------------------------------------------------
# figures
# ------------------------------------------------------------------------------------------


def _num(value: Any) -> float:
    """A finite number from an event field, else 0.0."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return 0.0
    return x if math.isfinite(x) else 0.0


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _latest_by_iteration(events: list[dict[str, Any]], node: str) -> dict[int, dict[str, Any]]:
    """The last ``node`` event per iteration (a resumed run may have executed it twice)."""
    out: dict[int, dict[str, Any]] = {}
    for ev in events:
        if ev.get("event") == "node" and ev.get("node") == node and "error" not in ev:
            it = ev.get("iteration")
            if isinstance(it, int):
                out[it] = ev
    return out


def _sessions(events: list[dict[str, Any]]) -> tuple[int, int, float]:
    """``(sessions, resumed sessions, wall seconds)`` from run_start / run_end and the last
    event of a session that was killed."""
    sessions = resumed = 0
    wall = 0.0
    start: float | None = None
    last: float | None = None
    for ev in events:
        t = ev.get("time")
        if not isinstance(t, int | float):
            continue
        if ev.get("event") == "run_start":
            if start is not None and last is not None:
                wall += max(0.0, last - start)
            sessions += 1
            resumed += bool(ev.get("resumed"))
            start = last = float(t)
            continue
        last = float(t)
        if ev.get("event") == "run_end" and start is not None:
            wall += max(0.0, last - start)
            start = None
    if start is not None and last is not None:
        wall += max(0.0, last - start)
    return sessions, resumed, wall


def _node_figures(events: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per-node LLM usage and wall time (sums over every execution)."""
    llm: dict[str, dict[str, float]] = defaultdict(
        lambda: {"calls": 0, "input_tokens": 0, "output_tokens": 0, "latency_s": 0.0}
    )
    wall: dict[str, dict[str, float]] = defaultdict(
        lambda: {"executions": 0, "errors": 0, "total_s": 0.0}
    )
    for ev in events:
        if ev.get("event") != "node" or not isinstance(ev.get("node"), str):
            continue
        node = ev["node"]
        w = wall[node]
        w["executions"] += 1
        w["errors"] += "error" in ev
        w["total_s"] += _num(ev.get("elapsed_s"))
        u = llm[node]
        u["calls"] += int(_num(ev.get("llm_calls")))
        u["input_tokens"] += int(_num(ev.get("input_tokens")))
        u["output_tokens"] += int(_num(ev.get("output_tokens")))
        u["latency_s"] += _num(ev.get("llm_latency_s"))
    for w in wall.values():
        w["mean_s"] = w["total_s"] / w["executions"] if w["executions"] else 0.0
    keys = ("calls", "input_tokens", "output_tokens", "latency_s")
    llm_total = {k: sum(u[k] for n, u in llm.items() if n not in INCLUSIVE_NODES) for k in keys}
    wall_total = sum(w["total_s"] for n, w in wall.items() if n not in INCLUSIVE_NODES)
    return (
        {"by_node": {n: dict(u) for n, u in sorted(llm.items())}, "total": llm_total},
        {"by_node": {n: dict(w) for n, w in sorted(wall.items())}, "total_s": wall_total},
    )


def _search_figures(events: list[dict[str, Any]], db: SearchDatabase | None) -> dict[str, Any]:
    searches = [e for e in events if e.get("event") == "search"]
    queries = [str(e.get("query", "")) for e in searches]
    out: dict[str, Any] = {
        "queries": len(queries),
        "distinct_queries": len({" ".join(q.lower().split()) for q in queries}),
        "results_returned": sum(len(e.get("urls") or []) for e in searches),
        "records": 0,
        "records_by_decision": {},
        "record_queries": 0,
        "documents_stored": 0,
        "returned_urls": 0,
        "distinct_urls": 0,
        "seen_before": 0,
        "seen_before_share": None,
        "dropped_lines": 0,
    }
    if db is None:
        return out
    records = db.records()
    stats = db.url_stats()
    out.update(
        records=len(records),
        records_by_decision=dict(Counter(r.decision for r in records)),
        record_queries=sum(len(r.queries) for r in records),
        documents_stored=int(stats["documents"]),
        returned_urls=int(stats["returned"]),
        distinct_urls=int(stats["distinct"]),
        seen_before=int(stats["seen_before"]),
        seen_before_share=float(stats["seen_before_share"]) if stats["returned"] else None,
        dropped_lines=db.dropped_lines,
    )
    return out


def _prediction_figures(db: SearchDatabase | None) -> dict[str, Any]:
    """Mean predicted child score of a record's final documents vs the realised child score,
    over records with at least one realised (evaluated) outcome."""
    predicted: list[float] = []
    realised: list[float] = []
    errors: list[float] = []
    outcomes: Counter[str] = Counter()
    if db is not None:
        for record in db.records():
            for impact in record.impacts:
                outcomes[impact.outcome] += 1
            children = [i.child_score for i in record.impacts if i.child_score is not None]
            scores = []
            for doc_id in record.final_doc_ids:
                doc = db.get_document(doc_id)
                if doc is not None and doc.predicted_score is not None:
                    scores.append(doc.predicted_score)
            if not children or not scores:
                continue
            p, r = sum(scores) / len(scores), sum(children) / len(children)
            predicted.append(p)
            realised.append(r)
            errors.append(abs(p - r))
    return {
        "records": len(predicted),
        "mean_predicted": _mean(predicted),
        "mean_realised": _mean(realised),
        "mean_abs_error": _mean(errors),
        "outcomes": dict(outcomes),
    }


def _error_reason(error: str | None, status: str) -> str:
    text = (error or "").strip().splitlines()
    reason = text[0].strip() if text else f"({status}, no message)"
    return reason if len(reason) <= 100 else reason[:97] + "..."


def _failure_figures(programs: list[Any] | None, events: list[dict[str, Any]]) -> dict[str, Any]:
    """Candidates by outcome and the most common reasons for invalid / failed ones.

    Uses the program store; without it, the candidates logged by ``evaluate`` / ``generate``.
    """
    rows: list[tuple[str, bool, str | None]] = []
    source = "programs.sqlite"
    if programs is not None:
        rows = [(p.status, bool(p.valid), p.error) for p in programs if p.kind != "initial"]
    else:
        source = "events.jsonl"
        latest: dict[str, dict[str, Any]] = {}
        for ev in events:
            if ev.get("event") == "node" and ev.get("node") in ("generate", "evaluate"):
                for cand in ev.get("candidates") or []:
                    if isinstance(cand, dict) and "id" in cand:
                        latest[str(cand["id"])] = cand
        rows = [
            (str(c.get("status")), bool(c.get("valid")), c.get("error")) for c in latest.values()
        ]
    reasons: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    known = ("valid", "invalid", "failed", "rejected")
    for status, valid, error in rows:
        if status == "evaluated" and valid:
            counts["valid"] += 1
            continue
        kind = "rejected" if status == "evaluated" else status
        counts[kind] += 1
        reasons[_error_reason(error, kind)] += 1
    return {
        "source": source if rows or programs is not None else None,
        "candidates": len(rows),
        "valid": counts["valid"],
        "invalid": counts["invalid"],
        "failed": counts["failed"],
        "rejected": counts["rejected"],
        "other": sum(v for k, v in counts.items() if k not in known),
        "top_errors": [[r, n] for r, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0]))][
            :_TOP_ERRORS
        ],
    }


def _history(events: list[dict[str, Any]], initial: float | None) -> list[dict[str, Any]]:
    gates = _latest_by_iteration(events, "gate")
    evaluated = _latest_by_iteration(events, "evaluate")
    generated: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        if ev.get("event") == "node" and ev.get("node") == "generate":
            it = ev.get("iteration")
            if isinstance(it, int):
                generated[it].extend(c for c in ev.get("candidates") or [] if isinstance(c, dict))
    records = _latest_by_iteration(events, "record")
    history = []
    best = initial
    for it in sorted(records):
        if it <= 0:
            continue
        rec = records[it]
        improved = "best_score" in rec
        if improved:
            best = rec.get("best_score")
        cands = {str(c.get("id")): c for c in generated.get(it, [])}
        for c in evaluated.get(it, {}).get("candidates") or []:
            if isinstance(c, dict):
                cands[str(c.get("id"))] = c
        history.append(
            {
                "iteration": it,
                "gate_decision": gates.get(it, {}).get("gate_decision"),
                "candidates": len(cands),
                "valid": sum(1 for c in cands.values() if c.get("valid")),
                "best_child": max(
                    (
                        c["score"]
                        for c in cands.values()
                        if c.get("valid") and c.get("score") is not None
                    ),
                    default=None,
                ),
                "improved": improved,
                "best_score": best,
            }
        )
    return history


def run_summary(run_dir: str | Path) -> dict[str, Any]:
    """The figures of a run directory (DESIGN.md §6) as a JSON-ready dict.

    Args:
        run_dir: an ``evoduet`` run directory; any of its files may be missing.

    Returns:
        A dict with ``run_dir``, ``task``, ``files`` (which inputs exist), ``events``
        (count, unreadable lines), ``sessions`` / ``resumed`` / ``wall_s`` (run sessions and
        their wall seconds), ``iterations`` (completed), ``stop_reason``, ``best`` (id,
        iteration, score, metric, metric_value, ndg, direction; None without
        ``best_program.json``), ``initial_score``, ``improvements``, ``gate_decisions``
        (count per decision), ``search`` (queries issued and distinct, results returned,
        D_search records, documents, distinct URLs and share of returned URLs seen before),
        ``prediction`` (mean predicted vs mean realised child score over records with
        impacts), ``llm`` and ``wall_time`` (per node; totals leave out `INCLUSIVE_NODES`),
        ``failures`` (candidates by outcome, top error reasons), ``fallbacks`` (count per
        event of `FALLBACK_EVENTS`) and ``history`` (one row per completed iteration).
        Scores are on the internal higher-is-better scale; the metric value on the task's.

    Raises:
        FileNotFoundError: ``run_dir`` is not a directory.
    """
    rdir = Path(run_dir)
    if not rdir.is_dir():
        raise FileNotFoundError(f"run directory not found: {rdir}")
    names = ("events.jsonl", "search_database.jsonl", "programs.sqlite", "best_program.json")
    files = {name: (rdir / name).is_file() for name in names}
    events, bad_events = _read_jsonl(rdir / "events.jsonl")
    db = _load_search_db(rdir / "search_database.jsonl")
    programs = _load_programs(rdir / "programs.sqlite")
    best = _read_json(rdir / "best_program.json")
    meta = _read_json(rdir / "run.json") or {}

    starts = [e for e in events if e.get("event") == "run_start"]
    ends = [e for e in events if e.get("event") == "run_end"]
    sessions, resumed, wall = _sessions(events)
    initial = next(
        (p.score for p in programs or [] if p.id == "initial"),
        next(
            (e.get("best_score") for e in events if e.get("node") == "initialize"),
            None,
        ),
    )
    records = _latest_by_iteration(events, "record")
    gates = _latest_by_iteration(events, "gate")
    decisions = Counter(str(e.get("gate_decision")) for e in gates.values())
    llm, wall_time = _node_figures(events)
    task = starts[-1].get("task") if starts else None
    if task is None and meta.get("task_dir"):
        task = Path(str(meta["task_dir"])).name
    return {
        "run_dir": str(rdir),
        "task": task,
        "model": starts[-1].get("model") if starts else None,
        "files": files,
        "events": {"count": len(events), "unreadable_lines": bad_events},
        "sessions": sessions,
        "resumed": resumed,
        "wall_s": wall,
        "iterations": max((it for it in records if it > 0), default=0),
        "iterations_planned": starts[-1].get("iterations") if starts else None,
        "stop_reason": ends[-1].get("stop_reason") if ends else None,
        "finished": bool(ends) and (not starts or ends[-1]["time"] >= starts[-1].get("time", 0)),
        "best": (
            {
                k: best.get(k)
                for k in ("id", "iteration", "score", "metric", "metric_value", "ndg", "direction")
            }
            if best
            else None
        ),
        "initial_score": initial,
        "improvements": sum(1 for it, e in records.items() if it > 0 and "best_score" in e),
        "gate_decisions": {
            **{d: decisions.get(d, 0) for d in GATE_DECISIONS},
            **{d: n for d, n in decisions.items() if d not in GATE_DECISIONS},
        },
        "search": _search_figures(events, db),
        "prediction": _prediction_figures(db),
        "llm": llm,
        "wall_time": wall_time,
        "failures": _failure_figures(programs, events),
        "fallbacks": {
            name: sum(1 for e in events if e.get("event") == name) for name in FALLBACK_EVENTS
        },
        "history": _history(events, initial),
    }


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


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.1f}%"


def report_markdown(run_dir: str | Path) -> str:
    """The run report as Markdown: overview, gate, search, prediction, LLM usage, wall time,
    failures, fallbacks and per-iteration tables (see `run_summary` for the figures).

    Raises:
        FileNotFoundError: ``run_dir`` is not a directory.
    """
    s = run_summary(run_dir)
    out: list[str] = [f"# EvoDuet run report: {s['task'] or Path(s['run_dir']).name}", ""]
    missing = [name for name, ok in s["files"].items() if not ok]
    notes = []
    if missing:
        notes.append("missing files: " + ", ".join(f"`{m}`" for m in missing))
    if s["events"]["unreadable_lines"]:
        notes.append(f"{s['events']['unreadable_lines']} unreadable line(s) in `events.jsonl`")
    if s["search"]["dropped_lines"]:
        notes.append(
            f"{s['search']['dropped_lines']} unreadable line(s) in `search_database.jsonl`"
        )
    if notes:
        out += ["> " + "; ".join(notes) + " (figures use what could be read).", ""]

    best = s["best"] or {}
    best_iteration = best.get("iteration", "n/a")
    metric, direction = best.get("metric") or "n/a", best.get("direction") or "n/a"
    out += [
        "## Overview",
        "",
        _table(
            ["figure", "value"],
            [
                ["run directory", s["run_dir"]],
                ["model", s["model"]],
                ["iterations completed", s["iterations"]],
                ["iterations planned", s["iterations_planned"]],
                ["stop reason", s["stop_reason"] or ("finished" if s["finished"] else "-")],
                ["sessions (resumed)", f"{s['sessions']} ({s['resumed']})"],
                ["wall time (s)", round(s["wall_s"], 3)],
                ["initial score", s["initial_score"]],
                ["best score", best.get("score")],
                ["best program", f"{best.get('id', 'n/a')} (iteration {best_iteration})"],
                [f"metric ({metric}, {direction})", best.get("metric_value")],
                ["NDG (%)", best.get("ndg")],
                ["improvements", s["improvements"]],
            ],
        ),
        "",
        "## Gate decisions",
        "",
        _table(["decision", "iterations"], [[d, n] for d, n in s["gate_decisions"].items()]),
        "",
    ]
    search = s["search"]
    seen_share = _pct(search["seen_before_share"])
    out += [
        "## Search",
        "",
        _table(
            ["figure", "value"],
            [
                ["queries issued", search["queries"]],
                ["distinct queries", search["distinct_queries"]],
                ["results returned by the backend", search["results_returned"]],
                ["D_search records", search["records"]],
                *[
                    [f"records: {decision}", n]
                    for decision, n in sorted(search["records_by_decision"].items())
                ],
                ["documents stored", search["documents_stored"]],
                ["URLs returned (D_search rounds)", search["returned_urls"]],
                ["distinct URLs", search["distinct_urls"]],
                ["returned URLs seen before", f"{search['seen_before']} ({seen_share})"],
            ],
        ),
        "",
    ]
    pred = s["prediction"]
    out += [
        "## Predicted vs realised child score",
        "",
        (
            f"Over {pred['records']} D_search record(s) with a realised outcome: the mean "
            "predicted score of a record's final documents against the mean score of the best "
            "valid child they fed."
        ),
        "",
        _table(
            ["mean predicted", "mean realised", "mean absolute error"],
            [[pred["mean_predicted"], pred["mean_realised"], pred["mean_abs_error"]]],
        ),
        "",
    ]
    if pred["outcomes"]:
        out += [
            _table(["outcome", "impacts"], [[k, v] for k, v in sorted(pred["outcomes"].items())]),
            "",
        ]
    llm, wall = s["llm"], s["wall_time"]
    nodes = sorted(set(llm["by_node"]) | set(wall["by_node"]))
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
        _table(
            ["node", "calls", "input tokens", "output tokens", "latency (s)"],
            [
                [n, u["calls"], u["input_tokens"], u["output_tokens"], round(u["latency_s"], 3)]
                for n, u in llm["by_node"].items()
            ]
            + [
                [
                    "**total**",
                    llm["total"]["calls"],
                    llm["total"]["input_tokens"],
                    llm["total"]["output_tokens"],
                    round(llm["total"]["latency_s"], 3),
                ]
            ],
        ),
        "",
        "## Wall time per node",
        "",
        (note.strip() + "\n") if note else "",
        _table(
            ["node", "executions", "errors", "total (s)", "mean (s)"],
            [
                [n, w["executions"], w["errors"], round(w["total_s"], 3), round(w["mean_s"], 4)]
                for n, w in wall["by_node"].items()
            ]
            + [["**total**", "", "", round(wall["total_s"], 3), ""]],
        ),
        "",
    ]
    fail = s["failures"]
    out += [
        "## Candidates and failures",
        "",
        _table(
            ["candidates", "valid", "invalid", "failed", "rejected by evaluator"],
            [[fail[k] for k in ("candidates", "valid", "invalid", "failed", "rejected")]],
        ),
        "",
    ]
    if fail["top_errors"]:
        out += ["Top error reasons:", "", _table(["reason", "count"], fail["top_errors"]), ""]
    out += [
        "## Fallbacks",
        "",
        _table(["event", "count"], [[k, v] for k, v in s["fallbacks"].items()]),
        "",
    ]
    history = s["history"]
    if history:
        shown = history[-_MAX_HISTORY_ROWS:]
        out += ["## Per iteration", ""]
        if len(shown) < len(history):
            out += [f"Last {len(shown)} of {len(history)} iterations.", ""]
        out += [
            _table(
                ["iteration", "gate", "candidates", "valid", "best child", "new best", "best"],
                [
                    [
                        h["iteration"],
                        h["gate_decision"],
                        h["candidates"],
                        h["valid"],
                        h["best_child"],
                        "yes" if h["improved"] else "",
                        h["best_score"],
                    ]
                    for h in shown
                ],
            ),
            "",
        ]
    return "\n".join(out).rstrip() + "\n"

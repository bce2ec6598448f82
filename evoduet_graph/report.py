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

`write_report` is the one writer: it puts PNG plots (`evoduet_graph.plots`), ``report.md`` and,
on request, a self-contained ``report.html`` into ``<run_dir>/report/`` (nothing else in the
run directory changes). `compare_runs` overlays several runs (``evoduet compare``).
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

from evoduet_graph.report_calls import call_figures, call_table
from evoduet_graph.search.database import SearchDatabase
from evoduet_graph.store import ProgramStore

__all__ = [
    "FALLBACK_EVENTS",
    "INCLUSIVE_NODES",
    "PLOT_TITLES",
    "REPORT_DIR",
    "compare_runs",
    "lineage_steps",
    "markdown_to_html",
    "paper_metrics",
    "query_deltas",
    "report_markdown",
    "run_series",
    "run_summary",
    "write_report",
]

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
    "novelty_error",
)
"""Events counted in the report's fallback table (degraded, never fatal, paths)."""

INCLUSIVE_NODES = frozenset({"retrieve"})
"""Nodes whose wall time and LLM usage include other nodes' (the inner loop runs inside
``retrieve``); they are listed per node but left out of the totals."""

GATE_DECISIONS = ("no-op", "look-up", "retrieve")

PLOT_TITLES = {
    "scores": "Best score so far and every candidate's score by iteration, by gate decision",
    "ndg": "NDG of the best program so far by iteration",
    "predictions": "Predicted vs realised child score",
    "urls": "Distinct vs repeated returned URLs over time",
    "llm": "LLM calls, tokens and latency per node",
}
"""The report's plots: name (``report/<name>.png``) → caption."""

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


GATE_FALLBACK = "fallback"
"""The gate row of an iteration whose gate call failed or whose reply was unusable
(``gate_error`` / ``gate_fallback``): the run went on as a no-op, but the model decided
nothing, so it is not counted as the model's no-op."""


def _gate_by_iteration(events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The last ``gate`` node event per iteration (`_latest_by_iteration`), its
    ``gate_decision`` replaced by `GATE_FALLBACK` when that gate call emitted a
    ``gate_error`` / ``gate_fallback`` (both come before the node's own event)."""
    out: dict[int, dict[str, Any]] = {}
    fell_back: set[Any] = set()
    for ev in events:
        if ev.get("event") in ("gate_error", "gate_fallback"):
            fell_back.add(ev.get("iteration"))
        elif ev.get("event") == "node" and ev.get("node") == "gate":
            it = ev.get("iteration")
            if isinstance(it, int) and "error" not in ev:
                out[it] = {**ev, "gate_decision": GATE_FALLBACK} if it in fell_back else ev
            fell_back.discard(it)
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


def _model_figures(
    events: list[dict[str, Any]], rdir: Path, model: str | None
) -> dict[str, dict[str, float | None]]:
    """Calls, tokens and estimated USD per model (``llm_by_model`` of the node events; with
    ``llm.roles`` each role's calls count on its model), priced as the budget prices them
    (`evoduet_graph.budget.usage_cost`: `evoduet_graph.pricing`, the run's ``budget.prices``
    first); ``usd`` is None for an unpriced model."""
    from evoduet_graph.budget import usage_from_events

    totals = usage_from_events(events)
    _, usd = _llm_cost(rdir, totals, model)
    return {
        m: {**{k: float(v) for k, v in c.items()}, "usd": usd.get(m)}
        for m, c in sorted(totals.by_model.items())
    }


def _llm_cost(rdir: Path, totals: Any, model: str | None) -> tuple[float, dict[str, float | None]]:
    """`evoduet_graph.budget.usage_cost` of ``totals`` with the run's ``llm`` and ``budget``
    settings (``config.yaml``); ``model`` when the config names none."""
    from evoduet_graph.budget import other_models, usage_cost

    cfg = _run_config(rdir)
    llm_cfg = cfg.get("llm") if isinstance(cfg.get("llm"), dict) else {}
    budget = cfg.get("budget") if isinstance(cfg.get("budget"), dict) else {}
    prices = {
        str(k): (float(v[0]), float(v[1]))
        for k, v in (budget.get("prices") or {}).items()
        if isinstance(v, list | tuple) and len(v) == 2
    }
    return usage_cost(
        totals,
        str(llm_cfg.get("model") or model or ""),
        prices,
        llm_cfg.get("base_url"),
        other_models(llm_cfg),
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


def _record_predictions(db: SearchDatabase, record: Any) -> list[float]:
    """Predicted child scores of a record's final documents *for the record's parent* (the
    parent that was mutated): the record's own loop's prediction, else (look-up) the latest
    one made for that parent; documents without one are left out."""
    out = []
    for doc_id in record.final_doc_ids:
        found = db.prediction_for(doc_id, record.parent_id, record_id=record.record_id)
        if found is not None:
            out.append(found.predicted_score)
    return out


def _prediction_figures(db: SearchDatabase | None) -> dict[str, Any]:
    """Mean predicted child score of a record's final documents (predictions made for the
    parent that was mutated) vs the realised child score, over records with at least one
    realised (evaluated) outcome."""
    predicted: list[float] = []
    realised: list[float] = []
    errors: list[float] = []
    outcomes: Counter[str] = Counter()
    predictions = 0
    if db is not None:
        predictions = len(db.predictions())
        for record in db.records():
            for impact in record.impacts:
                outcomes[impact.outcome] += 1
            children = [i.child_score for i in record.impacts if i.child_score is not None]
            scores = _record_predictions(db, record)
            if not children or not scores:
                continue
            p, r = sum(scores) / len(scores), sum(children) / len(children)
            predicted.append(p)
            realised.append(r)
            errors.append(abs(p - r))
    return {
        "records": len(predicted),
        "predictions": predictions,
        "mean_predicted": _mean(predicted),
        "mean_realised": _mean(realised),
        "mean_abs_error": _mean(errors),
        "outcomes": dict(outcomes),
    }


EVIDENCE_GROUPS = (
    "evidence predicted to beat the parent",
    "documents, none predicted to beat the parent",
    "no documents",
)
"""How an iteration's evidence is classed for the improvement-rate table (paper §4: 67.1% of
iterations whose evidence held a document predicted to beat the parent improved on it, vs
52.1% of iterations without documents)."""


def _run_config(rdir: Path) -> dict[str, Any]:
    """The run's ``config.yaml`` as a dict (empty when missing or unreadable)."""
    import yaml

    try:
        data = yaml.safe_load((rdir / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _evidence_record(db: SearchDatabase | None, iteration: int) -> Any | None:
    """The D_search record that fed ``iteration`` (``ret_`` or ``lku_``), if any."""
    if db is None:
        return None
    for kind in ("ret", "lku"):
        record = db.get_record(f"{kind}_{iteration:06d}")
        if record is not None:
            return record
    return None


def _iteration_outcomes(
    events: list[dict[str, Any]], db: SearchDatabase | None, programs: list[Any] | None
) -> list[dict[str, Any]]:
    """One row per completed iteration: ``iteration``, ``gate_decision``, ``parent_id``,
    ``parent_score``, ``best_child`` (best valid child score or None), ``improved`` (a valid
    child beat its parent: strictly higher fitness), ``documents`` (evidence documents),
    ``best_prediction`` (highest child score predicted for that parent among them, None
    without one) and ``group`` (one of `EVIDENCE_GROUPS`)."""
    rows = {p.id: p for p in programs or []}
    selects = _latest_by_iteration(events, "select")
    gates = _gate_by_iteration(events)
    records = _latest_by_iteration(events, "record")
    cands = _candidates_by_iteration(events)
    children: dict[int, list[Any]] = defaultdict(list)
    for p in programs or []:
        if p.kind != "initial":
            children[p.iteration].append(p)
    out = []
    for it in sorted(i for i in records if i > 0):
        record = _evidence_record(db, it)
        parent_id = selects.get(it, {}).get("parent_id")
        if parent_id is None and record is not None:
            parent_id = record.parent_id
        if parent_id is None and children.get(it):
            parent_id = children[it][0].parent_id
        parent_score = rows[parent_id].score if parent_id in rows else None
        if parent_score is None and record is not None:
            parent_score = record.parent_score
        if programs is not None:
            scores = [c.score for c in children.get(it, []) if c.valid and c.score is not None]
        else:
            scores = [
                c["score"] for c in cands.get(it, {}).values()
                if c.get("valid") and c.get("score") is not None
            ]
        best_child = max(scores, default=None)
        improved = (
            best_child is not None and parent_score is not None and best_child > parent_score
        )
        docs = list(record.final_doc_ids) if record is not None else []
        predictions = _record_predictions(db, record) if db is not None and docs else []
        best_prediction = max(predictions, default=None)
        if not docs:
            group = EVIDENCE_GROUPS[2]
        elif _beats(best_prediction, parent_score):
            group = EVIDENCE_GROUPS[0]
        else:
            group = EVIDENCE_GROUPS[1]
        out.append(
            {
                "iteration": it,
                "gate_decision": gates.get(it, {}).get("gate_decision"),
                "parent_id": parent_id,
                "parent_score": parent_score,
                "best_child": best_child,
                "improved": improved,
                "documents": len(docs),
                "best_prediction": best_prediction,
                "group": group,
            }
        )
    return out


PREDICTION_TOLERANCE = 1e-6
"""Relative tolerance under which a predicted score counts as the parent's own: prompts show
scores rounded to 6 significant digits, and a model that copies the shown parent score (0.36
for 0.35999999999999993) predicts no change, not an improvement."""


def _beats(predicted: float | None, parent: float | None) -> bool:
    """Whether a prediction is above the parent's score beyond `PREDICTION_TOLERANCE`."""
    if predicted is None or parent is None:
        return False
    return predicted > parent and not math.isclose(
        predicted, parent, rel_tol=PREDICTION_TOLERANCE, abs_tol=1e-12
    )


def _rate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    improved = sum(1 for r in rows if r["improved"])
    return {
        "iterations": len(rows),
        "improved": improved,
        "rate": improved / len(rows) if rows else None,
    }


def _improvement_figures(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """Improvement rates (child beats its parent) by evidence group and by gate decision.

    Every completed iteration counts; one without a valid child did not improve."""
    by_group = {g: _rate([r for r in outcomes if r["group"] == g]) for g in EVIDENCE_GROUPS}
    decisions = [*GATE_DECISIONS] + sorted(
        {str(r["gate_decision"]) for r in outcomes} - set(GATE_DECISIONS)
    )
    by_decision = {
        d: _rate([r for r in outcomes if str(r["gate_decision"]) == d]) for d in decisions
    }
    return {"all": _rate(outcomes), "by_evidence": by_group, "by_decision": by_decision}


def _cost_figures(
    rdir: Path, events: list[dict[str, Any]], model: str | None, llm_total: dict[str, Any]
) -> dict[str, Any]:
    """USD of the run's LLM tokens (`evoduet_graph.pricing`: catalogue, ``budget.prices``,
    0 for ``local``, None when unpriced) and its search calls (Tavily credits), whatever the
    ``budget:`` section says."""
    from evoduet_graph.pricing import price_for, search_credits

    cfg = _run_config(rdir)
    llm_cfg = cfg.get("llm") if isinstance(cfg.get("llm"), dict) else {}
    budget = cfg.get("budget") if isinstance(cfg.get("budget"), dict) else {}
    retrieval = cfg.get("retrieval") if isinstance(cfg.get("retrieval"), dict) else {}
    # the configured model is what the budget prices too (an injected model's events carry its
    # class name)
    model = llm_cfg.get("model") or model
    prices = {
        str(k): (float(v[0]), float(v[1]))
        for k, v in (budget.get("prices") or {}).items()
        if isinstance(v, list | tuple) and len(v) == 2
    }
    price = price_for(str(model), prices, llm_cfg.get("base_url")) if model else None
    inp, out = int(llm_total.get("input_tokens", 0)), int(llm_total.get("output_tokens", 0))
    llm_usd = price.cost(inp, out) if price is not None else None
    from evoduet_graph.budget import usage_from_events

    totals = usage_from_events(events)
    if totals.by_model:  # per model (``llm.roles``, ``llm.models``): each at its own price
        total, per_model = _llm_cost(rdir, totals, model)
        llm_usd = None if all(v is None for v in per_model.values()) else total
    searches = [e for e in events if e.get("event") == "search"]
    failed = sum(1 for e in events if e.get("event") == "search_error" and e.get("query"))
    backend = retrieval.get("backend")
    calls = len(searches)
    return {
        "model": model,
        "price_source": price.source if price is not None else None,
        "usd_per_mtok_input": price.input_per_mtok if price is not None else None,
        "usd_per_mtok_output": price.output_per_mtok if price is not None else None,
        "llm_usd": llm_usd,
        "search_backend": backend,
        "search_calls": calls,
        "search_failed": failed,
        "search_credits": search_credits(
            backend, max(0, calls - failed), retrieval.get("tavily_search_depth")
        ),
    }


def paper_metrics(summary: dict[str, Any]) -> dict[str, Any]:
    """The paper's headline knowledge figures of one `run_summary`, flat (for ``compare``
    and the bench summary): improvement rates with documents predicted to beat the parent
    and without documents, the repeated-URL share, USD and search calls."""
    imp = summary["improvement"]["by_evidence"]
    cost = summary["cost"]
    return {
        "rate_predicted_better": imp[EVIDENCE_GROUPS[0]]["rate"],
        "n_predicted_better": imp[EVIDENCE_GROUPS[0]]["iterations"],
        "improved_predicted_better": imp[EVIDENCE_GROUPS[0]]["improved"],
        "rate_no_documents": imp[EVIDENCE_GROUPS[2]]["rate"],
        "n_no_documents": imp[EVIDENCE_GROUPS[2]]["iterations"],
        "improved_no_documents": imp[EVIDENCE_GROUPS[2]]["improved"],
        "repeated_url_share": summary["search"]["seen_before_share"],
        "llm_usd": cost["llm_usd"],
        "search_calls": cost["search_calls"],
        "search_credits": cost["search_credits"],
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
    known = ("valid", "invalid", "failed", "rejected", "duplicate")
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
        "duplicate": counts["duplicate"],
        "other": sum(v for k, v in counts.items() if k not in known),
        "top_errors": [[r, n] for r, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0]))][
            :_TOP_ERRORS
        ],
    }


def _novelty_figures(events: list[dict[str, Any]], programs: list[Any] | None) -> dict[str, Any]:
    """Candidates rejected before evaluation as near-duplicates (`evoduet_graph.novelty`).

    Counts the ``novelty_rejected`` events, one per (candidate, attempt) — a resumed run that
    re-ran a ``generate`` node logs its rejections again, the latest counts. ``rejections``:
    every rejected draft; ``by_kind``: per check (``exact``, ``token``, ``embedding``);
    ``resampled``: rejections after which the model was asked again; ``duplicates``:
    candidates recorded as ``duplicate`` (both drafts rejected, or no resample);
    ``accepted_after_resample``: resampled candidates whose second draft passed the check and
    went on to evaluation (without the program store: were not recorded as duplicates);
    ``similar_to``: how often each reference was the one matched (top 5).
    """
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for ev in events:
        if ev.get("event") == "novelty_rejected" and ev.get("candidate_id") is not None:
            latest[(str(ev["candidate_id"]), int(_num(ev.get("attempt"))))] = ev
    kinds = Counter(str(ev.get("kind")) for ev in latest.values())
    resampled = {cid for (cid, _), ev in latest.items() if ev.get("resampled")}
    if programs is not None:
        duplicates = {p.id for p in programs if p.status == "duplicate"}
        passed = {p.id for p in programs if p.status in ("generated", "evaluated")}
    else:
        duplicates = {cid for (cid, _), ev in latest.items() if not ev.get("resampled")}
        passed = resampled - duplicates
    targets = Counter(str(ev.get("similar_to")) for ev in latest.values())
    return {
        "rejections": len(latest),
        "by_kind": {k: kinds.get(k, 0) for k in ("exact", "token", "embedding")}
        | {k: n for k, n in kinds.items() if k not in ("exact", "token", "embedding")},
        "resampled": len(resampled),
        "duplicates": len(duplicates),
        "accepted_after_resample": len(resampled & passed),
        "similar_to": [[k, n] for k, n in sorted(targets.items(), key=lambda x: (-x[1], x[0]))][
            :_TOP_ERRORS
        ],
    }


def _history(events: list[dict[str, Any]], initial: float | None) -> list[dict[str, Any]]:
    gates = _gate_by_iteration(events)
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
        impacts, predictions made for the parent that was mutated), ``improvement``
        (improvement rates by evidence group and by gate decision: `_improvement_figures`),
        ``cost`` (USD of the LLM tokens and search calls / Tavily credits: `_cost_figures`),
        ``llm`` and ``wall_time`` (per node; totals leave out `INCLUSIVE_NODES`),
        ``failures`` (candidates by outcome, top error reasons), ``novelty`` (near-duplicate
        rejections before evaluation, by check; `_novelty_figures`), ``fallbacks`` (count per
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
    gates = _gate_by_iteration(events)
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
        "improvement": _improvement_figures(_iteration_outcomes(events, db, programs)),
        "cost": _cost_figures(
            rdir, events, starts[-1].get("model") if starts else None, llm["total"]
        ),
        "llm": llm,
        "llm_calls": call_figures(events),
        "llm_models": _model_figures(events, rdir, starts[-1].get("model") if starts else None),
        "wall_time": wall_time,
        "failures": _failure_figures(programs, events),
        "novelty": _novelty_figures(events, programs),
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


def _images(plots: dict[str, str] | None, *names: str) -> list[str]:
    """Markdown image lines for the plots that exist (``plots``: name → link)."""
    out = []
    for name in names:
        link = (plots or {}).get(name)
        if link:
            out += [f"![{PLOT_TITLES.get(name, name)}]({link})", ""]
    return out


def _calls_section(figures: dict[str, Any] | None) -> list[str]:
    """``## Model calls per node`` (`evoduet_graph.report_calls`), when the run has
    ``llm_call`` events."""
    if not figures or not figures["by_node"]:
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
        _table(headers, rows),
        "",
    ]


def _model_section(models: dict[str, dict[str, float]]) -> list[str]:
    """``## LLM usage per model`` (calls, tokens, estimated USD), when the events have it."""
    if not models:
        return []
    rows = [
        [m, int(u["calls"]), int(u["input_tokens"]), int(u["output_tokens"]),
         "n/a" if u["usd"] is None else round(u["usd"], 6)]
        for m, u in models.items()
    ]
    return [
        "## LLM usage per model",
        "",
        _table(["model", "calls", "input tokens", "output tokens", "USD (estimated)"], rows),
        "",
    ]


def _gate_can_retrieve(run_dir: Path) -> bool:
    """Whether the run's config writes a D_search file: it searches (`can_retrieve`) or
    reads oracle documents, and keeps a search database (else no file is written)."""
    try:
        import yaml

        data = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8")) or {}
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
    """The run report as Markdown: overview, gate, search, prediction, queries by realised Δ,
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
    out: list[str] = [f"# EvoDuet run report: {s['task'] or Path(s['run_dir']).name}", ""]
    missing = [name for name, ok in s["files"].items() if not ok]
    if not _gate_can_retrieve(Path(s["run_dir"])):
        missing = [m for m in missing if m != "search_database.jsonl"]  # never written then
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
    by_decision = s["improvement"]["by_decision"]
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
        *_images(plots, "scores", "ndg"),
        "## Gate decisions",
        "",
        "Improved: a valid child beat its parent (strictly higher score).",
        "",
        _table(
            ["decision", "iterations", "improved", "improvement rate"],
            [
                [d, n, by_decision.get(d, {}).get("improved", 0),
                 _pct(by_decision.get(d, {}).get("rate"))]
                for d, n in s["gate_decisions"].items()
            ],
        ),
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
                ["returned URLs seen before", search["seen_before"]],
                ["repeated-URL share", seen_share],
            ],
        ),
        "",
        *_images(plots, "urls"),
    ]
    pred = s["prediction"]
    out += [
        "## Predicted vs realised child score",
        "",
        (
            f"Over {pred['records']} D_search record(s) with a realised outcome: the mean "
            "score predicted for a record's final documents, for the parent that was mutated, "
            "against the mean score of the best valid child they fed "
            f"({pred['predictions']} prediction(s) stored in all)."
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
    out += _images(plots, "predictions")
    out += _improvement_section(s["improvement"], pred["predictions"])
    out += _query_delta_section(series["query_deltas"])
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
        *_calls_section(s.get("llm_calls")),
        *_images(plots, "llm"),
        *_model_section(s.get("llm_models") or {}),
        *_cost_section(s["cost"], llm["total"]),
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
                    fail[k]
                    for k in ("candidates", "valid", "invalid", "failed", "rejected", "duplicate")
                ]
            ],
        ),
        "",
    ]
    if fail["top_errors"]:
        out += ["Top error reasons:", "", _table(["reason", "count"], fail["top_errors"]), ""]
    out += _novelty_section(s["novelty"])
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
    out += _lineage_section(series["lineage"])
    return "\n".join(out).rstrip() + "\n"


def _improvement_section(imp: dict[str, Any], predictions: int) -> list[str]:
    """"Improvement rate by evidence": the paper's comparison of iterations whose evidence held
    a document predicted to beat the parent with iterations without documents."""
    rows = [
        [group, r["iterations"], r["improved"], _pct(r["rate"])]
        for group, r in imp["by_evidence"].items()
    ]
    total = imp["all"]
    rows.append(["**all iterations**", total["iterations"], total["improved"], _pct(total["rate"])])
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
        _table(["evidence", "iterations", "improved", "improvement rate"], rows),
        "",
    ]


def _share(won: int, n: int) -> str:
    """``"66.7% (2/3)"``; ``"n/a (0/0)"`` without iterations."""
    return f"{_pct(won / n if n else None)} ({won}/{n})"


def _usd(value: float | None) -> str:
    return "n/a (unpriced model)" if value is None else f"${value:.6f}"


def _cost_section(cost: dict[str, Any], total: dict[str, Any]) -> list[str]:
    """"Cost": USD of the LLM tokens and the search calls, with or without a budget."""
    source = {
        "local": "the embedded model is free",
        "config": "`budget.prices` of the run's config",
        "genai-prices": "the genai-prices catalogue",
        None: "no price known: set `budget.prices`",
    }[cost["price_source"]]
    rows = [
        ["model", cost["model"]],
        ["price source", source],
        ["USD per 1M input / output tokens",
         "n/a" if cost["usd_per_mtok_input"] is None
         else f"{cost['usd_per_mtok_input']:.4g} / {cost['usd_per_mtok_output']:.4g}"],
        ["LLM tokens (input / output)",
         f"{int(total['input_tokens']):,} / {int(total['output_tokens']):,}"],
        ["LLM cost (USD)", _usd(cost["llm_usd"])],
        ["search backend", cost["search_backend"] or "n/a"],
        ["search calls (failed)", f"{cost['search_calls']} ({cost['search_failed']})"],
        ["Tavily credits", "n/a (not Tavily)" if cost["search_credits"] is None
         else cost["search_credits"]],
    ]
    return ["## Cost", "", _table(["figure", "value"], rows), ""]


_TOP_QUERIES = 5


def _novelty_section(nov: dict[str, Any]) -> list[str]:
    """"Novelty rejections": near-duplicate drafts rejected before evaluation."""
    out = ["## Novelty rejections", ""]
    if not nov["rejections"]:
        return [*out, "No candidate was rejected as a near-duplicate before evaluation.", ""]
    out += [
        _table(
            ["figure", "value"],
            [
                ["drafts rejected (never evaluated)", nov["rejections"]],
                *[[f"by {kind} check", n] for kind, n in nov["by_kind"].items()],
                ["resampled (model asked again)", nov["resampled"]],
                ["accepted after the resample", nov["accepted_after_resample"]],
                ["candidates recorded as duplicate", nov["duplicates"]],
            ],
        ),
        "",
    ]
    if nov["similar_to"]:
        out += [
            "Programs most often matched:",
            "",
            _table(["program", "rejections"], nov["similar_to"]),
            "",
        ]
    return out


def _query_delta_section(rows: list[dict[str, Any]]) -> list[str]:
    """"Queries by realised Δ": the records whose evidence gave the largest positive and
    negative score change."""
    out = ["## Queries by realised Δ", ""]
    if not rows:
        return [*out, "No D_search record has a realised Δ yet.", ""]

    def table(chosen: list[dict[str, Any]]) -> str:
        return _table(
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
    """"Lineage of the best program": the parent chain with scores and a diff per step."""
    out = ["## Lineage of the best program", ""]
    if not steps:
        missing = "No readable program store (`programs.sqlite` is missing or damaged) to trace"
        return [*out, f"{missing} the lineage from.", ""]
    out += [
        _table(
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
# Series for plots, lineage, queries by Δ
# ------------------------------------------------------------------------------------------


def _load_task_of(rdir: Path) -> Any | None:
    """The run's task (from ``run.json``), or None when its folder cannot be loaded."""
    from evoduet_graph.task import TaskError, load_task

    meta = _read_json(rdir / "run.json") or {}
    task_dir = meta.get("task_dir")
    if not task_dir:
        return None
    try:
        return load_task(task_dir)
    except (TaskError, OSError, ValueError):
        return None


def _candidates_by_iteration(events: list[dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
    """Latest logged state of every candidate, per iteration (generate, then evaluate)."""
    out: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for ev in events:
        if ev.get("event") != "node" or ev.get("node") not in ("generate", "evaluate"):
            continue
        it = ev.get("iteration")
        if not isinstance(it, int):
            continue
        for cand in ev.get("candidates") or []:
            if isinstance(cand, dict) and cand.get("id") is not None:
                out[it][str(cand["id"])] = {**out[it].get(str(cand["id"]), {}), **cand}
    return out


def _url_series(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per iteration with searches: URLs returned, new distinct and repeated ones (cumulative
    totals too); a URL is *repeated* when its normalised form was returned before."""
    from evoduet_graph.search.base import normalize_url

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
        out.append({"iteration": it, **per[it], "distinct_total": distinct, "repeated_total": repeated})
    return out


def _prediction_points(db: SearchDatabase | None) -> list[dict[str, Any]]:
    """One point per D_search record with a realised child score: the mean score predicted
    for its final documents *for the parent that was mutated* (`_record_predictions`) against
    the realised child score (and the parent's score)."""
    points: list[dict[str, Any]] = []
    if db is None:
        return points
    for record in db.records():
        predicted = _record_predictions(db, record)
        for impact in record.impacts:
            if impact.child_score is None or not predicted:
                continue
            points.append(
                {
                    "record_id": record.record_id,
                    "iteration": impact.iteration,
                    "decision": record.decision,
                    "predicted": sum(predicted) / len(predicted),
                    "realised": impact.child_score,
                    "parent": impact.parent_score,
                }
            )
    return points


def query_deltas(db: SearchDatabase | None) -> list[dict[str, Any]]:
    """D_search records with a realised Δ, highest Δ first: ``record_id``, ``iteration``,
    ``decision``, ``queries`` (the query chain; a look-up has none), ``documents`` (final doc
    ids), ``delta`` (mean realised Δ) and ``outcomes``."""
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
    """The parent chain of ``best_id`` (oldest first, as `evoduet_graph.results.lineage`):
    ``id``, ``iteration``, ``score``, ``metric_value`` (with ``task``), ``delta`` (score change
    from the parent) and ``diff`` (`evoduet_graph.diffs.code_diff_summary` from the parent;
    None for the first program)."""
    from evoduet_graph.diffs import code_diff_summary

    rows = {p.id: p for p in programs or []}
    chain: list[Any] = []
    seen: set[str] = set()
    current = best_id
    while current is not None and current in rows and current not in seen:
        seen.add(current)
        chain.append(rows[current])
        current = rows[current].parent_id
    chain.reverse()
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
                    code_diff_summary(parent.code or "", row.code or "", max_lines=max_lines)
                    if parent is not None
                    else None
                ),
            }
        )
    return steps


def run_series(run_dir: str | Path, *, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the report's plots draw, per iteration, as a JSON-ready dict.

    Returns:
        ``task`` (name), ``metric`` / ``direction`` (None without the task folder),
        ``best`` (``[iteration, best score so far]`` from iteration 0), ``candidates``
        (``iteration``, ``id``, ``score``, ``valid``, ``status``, ``gate``), ``ndg`` and
        ``metric_values`` (``[iteration, value]`` of the best program so far; empty without
        the task folder, its reference scores or the program store), ``predictions``
        (`_prediction_points`), ``urls`` (`_url_series`), ``query_deltas``, ``lineage``
        (`lineage_steps` of the best program) and ``llm`` (per node, from `run_summary`).

    Raises:
        FileNotFoundError: ``run_dir`` is not a directory.
    """
    rdir = Path(run_dir)
    summary = summary if summary is not None else run_summary(rdir)
    events, _ = _read_jsonl(rdir / "events.jsonl")
    db = _load_search_db(rdir / "search_database.jsonl")
    programs = _load_programs(rdir / "programs.sqlite")
    task = _load_task_of(rdir)
    rows = {p.id: p for p in programs or []}
    gates = {it: ev.get("gate_decision") for it, ev in _gate_by_iteration(events).items()}

    best_series: list[list[Any]] = []
    if summary["initial_score"] is not None:
        best_series.append([0, summary["initial_score"]])
    best_series += [[h["iteration"], h["best_score"]] for h in summary["history"]]

    candidates = []
    for it, cands in sorted(_candidates_by_iteration(events).items()):
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
        records = _latest_by_iteration(events, "record")
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

    best_id_final = (summary["best"] or {}).get("id")
    if best_id_final is None and rows:
        valid = [p for p in rows.values() if p.valid and p.score is not None]
        best_id_final = max(valid, key=lambda p: p.score).id if valid else None
    return {
        "task": summary["task"],
        "metric": task.metric if task is not None else None,
        "direction": task.direction if task is not None else None,
        "reference": task.sota_score if task is not None else None,
        "best": best_series,
        "candidates": candidates,
        "ndg": ndg,
        "metric_values": metric_values,
        "predictions": _prediction_points(db),
        "urls": _url_series(events),
        "query_deltas": query_deltas(db),
        "lineage": lineage_steps(programs, best_id_final, task),
        "llm": summary["llm"],
    }


# ------------------------------------------------------------------------------------------
# Report files: PNG plots, Markdown, self-contained HTML; comparisons of several runs
# ------------------------------------------------------------------------------------------

REPORT_DIR = "report"
"""Folder of a run directory that `write_report` writes (plots, report.md, report.html)."""


def write_plots(series: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write the report's PNG plots into ``out_dir``; returns name → path of those drawn
    (a plot without data, e.g. NDG without a reference score, is skipped)."""
    from evoduet_graph import plots as P

    makers = {
        "scores": P.plot_scores,
        "ndg": P.plot_ndg,
        "predictions": P.plot_predictions,
        "urls": P.plot_urls,
        "llm": P.plot_llm_usage,
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
    out = Path(out_dir) if out_dir is not None else rdir / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    plots = write_plots(series, out)
    md_path = out / "report.md"
    text = report_markdown(rdir, plots={k: p.name for k, p in plots.items()}, series=series)
    md_path.write_text(text, encoding="utf-8")
    html_path = None
    if html:
        html_path = out / "report.html"
        title = f"EvoDuet run report: {summary['task'] or rdir.name}"
        html_path.write_text(markdown_to_html(text, base=out, title=title), encoding="utf-8")
    return {
        "markdown": text,
        "markdown_path": md_path,
        "html_path": html_path,
        "plots": plots,
        "series": series,
    }


def relink(markdown: str, plots: dict[str, Path], where: Path) -> str:
    """``markdown`` with its plot links made relative to the folder ``where`` (for a copy of
    the report written elsewhere, e.g. ``evoduet report --out FILE``)."""
    import os

    for path in plots.values():
        rel = os.path.relpath(path.resolve(), where.resolve())
        markdown = markdown.replace(f"]({path.name})", f"]({Path(rel).as_posix()})")
    return markdown


# -- Markdown → HTML (the subset the report writes) ------------------------------------------

_HTML_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 0.6em; overflow-x: auto;
      font-size: 0.85em; }
code { font-family: Menlo, Consolas, monospace; }
blockquote { border-left: 4px solid #e0b000; margin: 0; padding: 0.2em 1em; background: #fffbe6; }
img { max-width: 100%; border: 1px solid #eee; }
.add { color: #116329; } .del { color: #a40e26; } .hunk { color: #6f42c1; }
"""


def _inline(text: str) -> str:
    """Escape ``text`` and render the inline Markdown the report uses (code, bold)."""
    import html as _html
    import re

    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if len(part) > 1 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{_html.escape(part[1:-1])}</code>")
        else:
            esc = _html.escape(part).replace("\\|", "|")
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", esc))
    return "".join(out)


def _image_tag(alt: str, link: str, base: Path | None) -> str:
    import base64
    import html as _html

    path = Path(link) if Path(link).is_absolute() or base is None else base / link
    try:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return f"<p><em>missing image {_html.escape(link)}</em></p>"
    return (
        f'<figure><img alt="{_html.escape(alt)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_html.escape(alt)}</figcaption></figure>"
    )


def _table_html(rows: list[str]) -> str:
    def cells(line: str) -> list[str]:
        import re

        body = line.strip()[1:-1]
        return [c.strip() for c in re.split(r"(?<!\\)\|", body)]

    head, body = cells(rows[0]), [cells(r) for r in rows[2:]]
    out = ["<table><thead><tr>", *(f"<th>{_inline(c)}</th>" for c in head), "</tr></thead><tbody>"]
    for row in body:
        out += ["<tr>", *(f"<td>{_inline(c)}</td>" for c in row), "</tr>"]
    out.append("</tbody></table>")
    return "".join(out)


def markdown_to_html(markdown: str, *, base: Path | None = None, title: str = "Report") -> str:
    """A self-contained HTML page from the Markdown subset `report_markdown` writes: headings,
    tables, fenced code (diffs coloured), block quotes, paragraphs and images — the PNGs are
    read (relative to ``base``) and inlined as base64 ``data:`` URIs.
    """
    import html as _html
    import re

    lines = markdown.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            lang = line[3:].strip()
            block = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1
            rendered = []
            for b in block:
                esc = _html.escape(b)
                if lang == "diff" and b.startswith("+"):
                    esc = f'<span class="add">{esc}</span>'
                elif lang == "diff" and b.startswith("-"):
                    esc = f'<span class="del">{esc}</span>'
                elif lang == "diff" and b.startswith("@@"):
                    esc = f'<span class="hunk">{esc}</span>'
                rendered.append(esc)
            out.append("<pre><code>" + "\n".join(rendered) + "</code></pre>")
            continue
        heading = re.match(r"^(#{1,6}) (.*)$", line)
        image = re.match(r"^!\[(.*)\]\((.+)\)$", line.strip())
        if heading:
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif image:
            out.append(_image_tag(image.group(1), image.group(2), base))
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            out.append(_table_html(rows) if len(rows) >= 2 else f"<p>{_inline(rows[0])}</p>")
            continue
        elif line.startswith(">"):
            out.append(f"<blockquote>{_inline(line.lstrip('> '))}</blockquote>")
        elif line.strip():
            para = [line]
            while (
                i + 1 < len(lines)
                and lines[i + 1].strip()
                and not re.match(r"^(#|\||>|```|!\[)", lines[i + 1])
            ):
                i += 1
                para.append(lines[i])
            out.append(f"<p>{_inline(' '.join(para))}</p>")
        i += 1
    body = "\n".join(out)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_html.escape(title)}</title><style>{_HTML_STYLE}</style></head>"
        f"<body>\n{body}\n</body></html>\n"
    )


# -- comparisons -------------------------------------------------------------------------------


def _run_label(rdir: Path, used: set[str]) -> str:
    label = rdir.name or str(rdir)
    n = 2
    while label in used:
        label = f"{rdir.name} ({n})"
        n += 1
    used.add(label)
    return label


def _gate_mode(rdir: Path) -> str | None:
    import yaml

    try:
        data = yaml.safe_load((rdir / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return None
    gate = data.get("gate") if isinstance(data, dict) else None
    return gate.get("mode") if isinstance(gate, dict) else None


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
    from evoduet_graph import plots as P

    rows: list[dict[str, Any]] = []
    runs: list[tuple[str, dict[str, Any]]] = []
    used: set[str] = set()
    for run_dir in run_dirs:
        rdir = Path(run_dir)
        summary = run_summary(rdir)
        series = run_series(rdir, summary=summary)
        label = _run_label(rdir, used)
        best = summary["best"] or {}
        total = summary["llm"]["total"]
        rows.append(
            {
                "run": label,
                "run_dir": str(rdir),
                "task": summary["task"],
                "model": summary["model"],
                "gate": _gate_mode(rdir),
                "iterations": summary["iterations"],
                "best_score": best.get("score"),
                "metric_value": best.get("metric_value"),
                "ndg": best.get("ndg"),
                "improvements": summary["improvements"],
                "llm_calls": int(total["calls"]),
                "tokens": int(total["input_tokens"] + total["output_tokens"]),
                "wall_s": round(summary["wall_s"], 1),
                **paper_metrics(summary),
            }
        )
        runs.append((label, series))
    headers = [
        "run", "task", "model", "gate", "iterations", "best score", "metric value", "NDG (%)",
        "improvements", "LLM calls", "tokens", "wall (s)",
    ]
    keys = [
        "run", "task", "model", "gate", "iterations", "best_score", "metric_value", "ndg",
        "improvements", "llm_calls", "tokens", "wall_s",
    ]
    table = _table(headers, [[r[k] for k in keys] for r in rows])
    knowledge = _table(
        [
            "run", "improved with evidence predicted to beat the parent",
            "improved without documents", "repeated-URL share", "LLM cost (USD)",
            "search calls", "Tavily credits",
        ],
        [
            [
                r["run"],
                _share(r["improved_predicted_better"], r["n_predicted_better"]),
                _share(r["improved_no_documents"], r["n_no_documents"]),
                _pct(r["repeated_url_share"]),
                _usd(r["llm_usd"]),
                r["search_calls"],
                r["search_credits"],
            ]
            for r in rows
        ],
    )
    tasks = {r["task"] for r in rows}
    note = (
        "\n> The runs are on different tasks: their scores are on different scales; compare "
        "NDG.\n"
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
            path = P.plot_compare(runs, out / f"{name}.png", key=key)
            if path is not None:
                plots[name] = path
        captions = {"best": "Best score so far vs iteration", "ndg": "NDG vs iteration"}
        images = "".join(f"\n![{captions[k]}]({p.name})\n" for k, p in plots.items())
        md_path = out / "compare.md"
        md_path.write_text(text + images, encoding="utf-8")
    return {"rows": rows, "markdown": text, "plots": plots, "markdown_path": md_path}

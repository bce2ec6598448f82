"""Run summary: the figures of one run directory as a typed `RunSummary` (docs/design.md §6).

Reads, never writes, the run directory (through `evoduet_graph.rundir.read`):

* ``events.jsonl`` — node executions (wall time, LLM usage), gate decisions, searches,
  fallbacks (`evoduet_graph.rundir.events`);
* ``search_database.jsonl`` — D_search (`SearchDatabase`; loaded from a temporary copy,
  because loading cuts a torn last line and a report must not touch a run's files);
* ``programs.sqlite`` — every candidate with its status and error (`ProgramStore`);
* ``best_program.json`` — the best program's score, metric value and NDG.

Every file may be missing (a run killed early) and torn or unreadable lines are skipped and
counted, so a summary is always produced. The summary's types and its JSON form
(``RunSummary.to_dict()``) are in `evoduet_graph.report.summary_types`. The Markdown report of it is
`evoduet_graph.report.markdown.report_markdown` (``evoduet report RUN_DIR``), the comparison
of several runs `evoduet_graph.report.compare.compare_runs`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

from evoduet_graph.report.calls import call_figures
from evoduet_graph.report.correlation import rank_correlation
from evoduet_graph.report.summary_types import (
    BestProgram,
    CostFigures,
    EventCounts,
    FailureFigures,
    HistoryRow,
    ImprovementFigures,
    LlmFigures,
    ModelUsage,
    NodeUsage,
    NodeWall,
    NoveltyFigures,
    PredictionFigures,
    Rate,
    RunSummary,
    SearchFigures,
    WallFigures,
)
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.budget import other_models, usage_cost
from evoduet_graph.rundir.pricing import price_for, search_credits
from evoduet_graph.rundir.read import load_programs, read_json, read_jsonl
from evoduet_graph.rundir.usage import (
    INCLUSIVE_NODES,
    finite_number,
    session_figures,
    usage_from_events,
)
from evoduet_graph.search.database import SearchDatabase, load_search_db

__all__ = [
    "FALLBACK_EVENTS",
    "GATE_DECISIONS",
    "GATE_FALLBACK",
    "RunSummary",
    "node_costs",
    "paper_metrics",
    "run_summary",
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

GATE_DECISIONS = ("no-op", "look-up", "retrieve")

_TOP_ERRORS = 5
MAX_HISTORY_ROWS = 100


# ------------------------------------------------------------------------------------------
# figures
# ------------------------------------------------------------------------------------------


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def latest_by_iteration(events: list[dict[str, Any]], node: str) -> dict[int, dict[str, Any]]:
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


def gate_by_iteration(events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The last ``gate`` node event per iteration, with fallbacks marked.

    The last ``gate`` node event per iteration (`latest_by_iteration`), its
    ``gate_decision`` replaced by `GATE_FALLBACK` when that gate call emitted a
    ``gate_error`` / ``gate_fallback`` (both come before the node's own event).
    """
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


def _node_figures(events: list[dict[str, Any]]) -> tuple[LlmFigures, WallFigures]:
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
        w["total_s"] += finite_number(ev.get("elapsed_s"))
        u = llm[node]
        u["calls"] += int(finite_number(ev.get("llm_calls")))
        u["input_tokens"] += int(finite_number(ev.get("input_tokens")))
        u["output_tokens"] += int(finite_number(ev.get("output_tokens")))
        u["latency_s"] += finite_number(ev.get("llm_latency_s"))
    for w in wall.values():
        w["mean_s"] = w["total_s"] / w["executions"] if w["executions"] else 0.0
    keys = ("calls", "input_tokens", "output_tokens", "latency_s")
    llm_total = {k: sum(u[k] for n, u in llm.items() if n not in INCLUSIVE_NODES) for k in keys}
    wall_total = sum(w["total_s"] for n, w in wall.items() if n not in INCLUSIVE_NODES)
    return (
        LlmFigures(
            by_node={n: NodeUsage(**u) for n, u in sorted(llm.items())},  # type: ignore[arg-type]
            total=NodeUsage(**llm_total),  # type: ignore[arg-type]
        ),
        WallFigures(
            by_node={n: NodeWall(**w) for n, w in sorted(wall.items())},  # type: ignore[arg-type]
            total_s=wall_total,
        ),
    )


def _model_figures(
    events: list[dict[str, Any]], rdir: Path, model: str | None
) -> dict[str, ModelUsage]:
    """Calls, tokens and estimated USD per model.

    Calls, tokens and estimated USD per model (``llm_by_model`` of the node events; with
    ``llm.roles`` each role's calls count on its model), priced as the budget prices them
    (`evoduet_graph.rundir.budget.usage_cost`: `evoduet_graph.rundir.pricing`, the run's
    ``budget.prices``
    first); ``usd`` is None for an unpriced model.
    """
    totals = usage_from_events(events)
    _, usd = _llm_cost(rdir, totals, model)
    return {
        m: ModelUsage(**{k: float(v) for k, v in c.items()}, usd=usd.get(m))
        for m, c in sorted(totals.by_model.items())
    }


def node_costs(
    events: list[dict[str, Any]], rdir: Path, cost: CostFigures
) -> dict[str, float | None]:
    """Estimated USD of each node's model calls, priced as the run's total (`_cost_figures`).

    A node whose events name their models (``llm_by_model``) has each model at its own price
    (`_llm_cost`: with ``llm.roles`` a node is priced at its role's model); otherwise its tokens
    are priced at the configured model's ``cost`` rates. None for a node whose models are all
    unpriced, and for the inclusive nodes (`INCLUSIVE_NODES`), whose calls are the inner
    nodes' and are priced there.
    """
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        if ev.get("event") == "node" and isinstance(ev.get("node"), str):
            by_node[ev["node"]].append(ev)
    pin, pout = cost.usd_per_mtok_input, cost.usd_per_mtok_output
    out: dict[str, float | None] = {}
    for node, evs in sorted(by_node.items()):
        totals = usage_from_events(evs)
        if node in INCLUSIVE_NODES:
            out[node] = None
        elif totals.by_model:
            total, per_model = _llm_cost(rdir, totals, cost.model)
            out[node] = None if all(v is None for v in per_model.values()) else total
        elif pin is not None and pout is not None:
            out[node] = (totals.input_tokens * pin + totals.output_tokens * pout) / 1e6
        else:
            out[node] = None
    return out


def _llm_cost(rdir: Path, totals: Any, model: str | None) -> tuple[float, dict[str, float | None]]:
    """The estimated USD of ``totals`` under the run's settings.

    `evoduet_graph.rundir.budget.usage_cost` of ``totals`` with the run's ``llm`` and ``budget``
    settings (``config.yaml``); ``model`` when the config names none.
    """
    cfg = _run_config(rdir)
    llm_cfg = _section(cfg, "llm")
    budget = _section(cfg, "budget")
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


def _search_figures(events: list[dict[str, Any]], db: SearchDatabase | None) -> SearchFigures:
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
        return SearchFigures(**out)
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
    return SearchFigures(**out)


def record_predictions(db: SearchDatabase, record: Any) -> list[float]:
    """Predicted child scores of a record's final documents for the record's parent.

    Predicted child scores of a record's final documents *for the record's parent* (the
    parent that was mutated): the record's own loop's prediction, else (look-up) the latest
    one made for that parent; documents without one are left out.
    """
    out = []
    for doc_id in record.final_doc_ids:
        found = db.prediction_for(doc_id, record.parent_id, record_id=record.record_id)
        if found is not None:
            out.append(found.predicted_score)
    return out


def prediction_points(db: SearchDatabase | None) -> list[dict[str, Any]]:
    """One (predicted, realised) point per D_search record with a realised child score.

    The mean score predicted for the record's final documents *for the parent that was
    mutated* (`record_predictions`) against the best valid child of the record's own
    iteration (and the parent's score). Impacts a record received from later look-ups of its
    documents (`SearchDatabase.sources_of`) are not points: their parent was another program,
    for which the record's predictions were not made.
    """
    points: list[dict[str, Any]] = []
    if db is None:
        return points
    for record in db.records():
        predicted = record_predictions(db, record)
        for impact in record.impacts:
            if impact.iteration != record.iteration or impact.child_score is None:
                continue
            if not predicted:
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


def _prediction_figures(db: SearchDatabase | None) -> PredictionFigures:
    """Predicted vs realised child score over the records (`prediction_points`).

    Means, the mean absolute error and Spearman's rank correlation with its 95% interval
    (`evoduet_graph.report.correlation`), with the impacts' outcomes counted.
    """
    outcomes: Counter[str] = Counter()
    predictions = 0
    if db is not None:
        predictions = len(db.predictions())
        for record in db.records():
            for impact in record.impacts:
                if impact.iteration == record.iteration:
                    outcomes[impact.outcome] += 1
    points = prediction_points(db)
    predicted = [p["predicted"] for p in points]
    realised = [p["realised"] for p in points]
    rank = rank_correlation(zip(predicted, realised, strict=True))
    return PredictionFigures(
        records=len(points),
        predictions=predictions,
        mean_predicted=_mean(predicted),
        mean_realised=_mean(realised),
        mean_abs_error=_mean([abs(p - r) for p, r in zip(predicted, realised, strict=True)]),
        outcomes=dict(outcomes),
        rank=rank,
        pairs=tuple(zip(predicted, realised, strict=True)),
    )


EVIDENCE_GROUPS = (
    "evidence predicted to beat the parent",
    "documents, none predicted to beat the parent",
    "no documents",
)
"""How an iteration's evidence is classed for the improvement-rate table (paper §4: 67.1% of
iterations whose evidence held a document predicted to beat the parent improved on it, vs
52.1% of iterations without documents)."""


def _section(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """Section ``name`` of a run's configuration (empty when missing or not a mapping)."""
    value = cfg.get(name)
    return value if isinstance(value, dict) else {}


def _run_config(rdir: Path) -> dict[str, Any]:
    """The run's ``config.yaml`` as a dict (empty when missing or unreadable)."""
    try:
        data = yaml.safe_load((rdir / layout.CONFIG).read_text(encoding="utf-8")) or {}
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


def prompt_documents(events: list[dict[str, Any]]) -> dict[int, list[str]]:
    """The evidence document ids each iteration's mutation prompt held, by iteration.

    Every row of the ladder counts, whatever put the documents there: the ``documents`` a node
    of the iteration handed to ``generate`` (``retrieve``, ``look_up``, the oracle's fixed
    documents through ``gate``; the latest such node event wins) and the documents the
    generating model's own searches returned inside the mutation call (``joint_search``).
    """
    handed: dict[int, list[str]] = {}
    joint: dict[int, list[str]] = defaultdict(list)
    for ev in events:
        it = ev.get("iteration")
        if not isinstance(it, int):
            continue
        if ev.get("event") == "node" and ev.get("node") != "generate" and "documents" in ev:
            handed[it] = [str(d) for d in ev.get("documents") or []]
        elif ev.get("event") == "joint_search":
            joint[it] += [str(d) for d in ev.get("doc_ids") or [] if str(d) not in joint[it]]
    out = {}
    for it in set(handed) | set(joint):
        ids = handed.get(it, [])
        out[it] = ids + [d for d in joint.get(it, []) if d not in ids]
    return out


def _iteration_outcomes(
    events: list[dict[str, Any]], db: SearchDatabase | None, programs: list[Any] | None
) -> list[dict[str, Any]]:
    """One row per completed iteration.

    ``iteration``, ``gate_decision``, ``parent_id``, ``parent_score``, ``best_child`` (best valid
    child score or None), ``improved`` (a valid child beat its parent: strictly higher fitness),
    ``documents`` (evidence documents in the mutation prompt: the feeding record's and
    `prompt_documents`), ``best_prediction`` (highest child score predicted for that parent
    among them, None without one) and ``group`` (one of `EVIDENCE_GROUPS`).
    """
    rows = {p.id: p for p in programs or []}
    selects = latest_by_iteration(events, "select")
    gates = gate_by_iteration(events)
    records = latest_by_iteration(events, "record")
    cands = candidates_by_iteration(events)
    in_prompt = prompt_documents(events)
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
                c["score"]
                for c in cands.get(it, {}).values()
                if c.get("valid") and c.get("score") is not None
            ]
        best_child = max(scores, default=None)
        improved = best_child is not None and parent_score is not None and best_child > parent_score
        docs = list(record.final_doc_ids) if record is not None else []
        docs += [d for d in in_prompt.get(it, []) if d not in docs]
        predictions = (
            record_predictions(db, record) if db is not None and record is not None else []
        )
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


def _rate(rows: list[dict[str, Any]]) -> Rate:
    improved = sum(1 for r in rows if r["improved"])
    return Rate(
        iterations=len(rows), improved=improved, rate=improved / len(rows) if rows else None
    )


def _improvement_figures(outcomes: list[dict[str, Any]]) -> ImprovementFigures:
    """Improvement rates (child beats its parent) by evidence group and by gate decision.

    Every completed iteration counts; one without a valid child did not improve.
    """
    by_group = {g: _rate([r for r in outcomes if r["group"] == g]) for g in EVIDENCE_GROUPS}
    decisions = [*GATE_DECISIONS] + sorted(
        {str(r["gate_decision"]) for r in outcomes} - set(GATE_DECISIONS)
    )
    by_decision = {
        d: _rate([r for r in outcomes if str(r["gate_decision"]) == d]) for d in decisions
    }
    return ImprovementFigures(all=_rate(outcomes), by_evidence=by_group, by_decision=by_decision)


def _cost_figures(
    rdir: Path, events: list[dict[str, Any]], model: str | None, llm_total: NodeUsage
) -> CostFigures:
    """USD of the run's LLM tokens and its search calls.

    USD of the run's LLM tokens (`evoduet_graph.rundir.pricing`: catalogue, ``budget.prices``,
    0 for ``local``, None when unpriced) and its search calls (Tavily credits), whatever the
    ``budget:`` section says.
    """
    cfg = _run_config(rdir)
    llm_cfg = _section(cfg, "llm")
    budget = _section(cfg, "budget")
    retrieval = _section(cfg, "retrieval")
    # the configured model is what the budget prices too (an injected model's events carry its
    # class name)
    model = llm_cfg.get("model") or model
    prices = {
        str(k): (float(v[0]), float(v[1]))
        for k, v in (budget.get("prices") or {}).items()
        if isinstance(v, list | tuple) and len(v) == 2
    }
    price = price_for(str(model), prices, llm_cfg.get("base_url")) if model else None
    inp, out = int(llm_total.input_tokens), int(llm_total.output_tokens)
    llm_usd = price.cost(inp, out) if price is not None else None
    totals = usage_from_events(events)
    if totals.by_model:  # per model (``llm.roles``, ``llm.models``): each at its own price
        total, per_model = _llm_cost(rdir, totals, model)
        llm_usd = None if all(v is None for v in per_model.values()) else total
    searches = [e for e in events if e.get("event") == "search"]
    failed = sum(1 for e in events if e.get("event") == "search_error" and e.get("query"))
    backend = retrieval.get("backend")
    calls = len(searches)
    return CostFigures(
        model=model,
        price_source=price.source if price is not None else None,
        usd_per_mtok_input=price.input_per_mtok if price is not None else None,
        usd_per_mtok_output=price.output_per_mtok if price is not None else None,
        llm_usd=llm_usd,
        search_backend=backend,
        search_calls=calls,
        search_failed=failed,
        search_credits=search_credits(
            backend, max(0, calls - failed), retrieval.get("tavily_search_depth")
        ),
    )


def paper_metrics(summary: RunSummary) -> dict[str, Any]:
    """The paper's headline knowledge figures of one `run_summary`, flat.

    The paper's headline knowledge figures of one `run_summary`, flat (for ``compare``
    and the bench summary): improvement rates with documents predicted to beat the parent
    and without documents, predicted vs realised (Spearman's ρ with n and 95% interval, and
    the pairs themselves, so a bench can pool seeds of one task), the repeated-URL share,
    USD and search calls.
    """
    better = summary.improvement.by_evidence[EVIDENCE_GROUPS[0]]
    no_docs = summary.improvement.by_evidence[EVIDENCE_GROUPS[2]]
    cost = summary.cost
    return {
        "rate_predicted_better": better.rate,
        "n_predicted_better": better.iterations,
        "improved_predicted_better": better.improved,
        "rate_no_documents": no_docs.rate,
        "n_no_documents": no_docs.iterations,
        "improved_no_documents": no_docs.improved,
        "rank_rho": summary.prediction.rank.rho,
        "rank_n": summary.prediction.rank.n,
        "rank_low": summary.prediction.rank.low,
        "rank_high": summary.prediction.rank.high,
        "prediction_pairs": [list(pair) for pair in summary.prediction.pairs],
        "repeated_url_share": summary.search.seen_before_share,
        "llm_usd": cost.llm_usd,
        "search_calls": cost.search_calls,
        "search_credits": cost.search_credits,
    }


def _error_reason(error: str | None, status: str) -> str:
    text = (error or "").strip().splitlines()
    reason = text[0].strip() if text else f"({status}, no message)"
    return reason if len(reason) <= 100 else reason[:97] + "..."


def _failure_figures(programs: list[Any] | None, events: list[dict[str, Any]]) -> FailureFigures:
    """Candidates by outcome and the most common reasons for invalid / failed ones.

    Uses the program store; without it, the candidates logged by ``evaluate`` / ``generate``.
    """
    rows: list[tuple[str, bool, str | None]] = []
    source = layout.PROGRAMS
    if programs is not None:
        rows = [(p.status, bool(p.valid), p.error) for p in programs if p.kind != "initial"]
    else:
        source = layout.EVENTS
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
    return FailureFigures(
        source=source if rows or programs is not None else None,
        candidates=len(rows),
        valid=counts["valid"],
        invalid=counts["invalid"],
        failed=counts["failed"],
        rejected=counts["rejected"],
        duplicate=counts["duplicate"],
        other=sum(v for k, v in counts.items() if k not in known),
        top_errors=tuple(sorted(reasons.items(), key=lambda x: (-x[1], x[0]))[:_TOP_ERRORS]),
    )


def _novelty_figures(events: list[dict[str, Any]], programs: list[Any] | None) -> NoveltyFigures:
    """Candidates rejected before evaluation as near-duplicates.

    Candidates rejected before evaluation as near-duplicates
    (`evoduet_graph.candidates.novelty`).

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
            latest[(str(ev["candidate_id"]), int(finite_number(ev.get("attempt"))))] = ev
    kinds = Counter(str(ev.get("kind")) for ev in latest.values())
    resampled = {cid for (cid, _), ev in latest.items() if ev.get("resampled")}
    if programs is not None:
        duplicates = {p.id for p in programs if p.status == "duplicate"}
        passed = {p.id for p in programs if p.status in ("generated", "evaluated")}
    else:
        duplicates = {cid for (cid, _), ev in latest.items() if not ev.get("resampled")}
        passed = resampled - duplicates
    targets = Counter(str(ev.get("similar_to")) for ev in latest.values())
    return NoveltyFigures(
        rejections=len(latest),
        by_kind={k: kinds.get(k, 0) for k in ("exact", "token", "embedding")}
        | {k: n for k, n in kinds.items() if k not in ("exact", "token", "embedding")},
        resampled=len(resampled),
        duplicates=len(duplicates),
        accepted_after_resample=len(resampled & passed),
        similar_to=tuple(sorted(targets.items(), key=lambda x: (-x[1], x[0]))[:_TOP_ERRORS]),
    )


def candidates_by_iteration(events: list[dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
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


def _history(events: list[dict[str, Any]], initial: float | None) -> tuple[HistoryRow, ...]:
    gates = gate_by_iteration(events)
    evaluated = latest_by_iteration(events, "evaluate")
    generated: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        if ev.get("event") == "node" and ev.get("node") == "generate":
            it = ev.get("iteration")
            if isinstance(it, int):
                generated[it].extend(c for c in ev.get("candidates") or [] if isinstance(c, dict))
    records = latest_by_iteration(events, "record")
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
            HistoryRow(
                iteration=it,
                gate_decision=gates.get(it, {}).get("gate_decision"),
                candidates=len(cands),
                valid=sum(1 for c in cands.values() if c.get("valid")),
                best_child=max(
                    (
                        c["score"]
                        for c in cands.values()
                        if c.get("valid") and c.get("score") is not None
                    ),
                    default=None,
                ),
                improved=improved,
                best_score=best,
            )
        )
    return tuple(history)


def run_summary(run_dir: str | Path) -> RunSummary:
    """The figures of a run directory (docs/design.md §6) as a typed, frozen `RunSummary`.

    Args:
        run_dir: an ``evoduet`` run directory; any of its files may be missing.

    Returns:
        The `RunSummary` (its attributes are documented there): run, sessions and stop,
        best program, gate decisions, search (queries issued and distinct, D_search records,
        documents, distinct URLs, share of returned URLs seen before), prediction (mean
        predicted vs realised child score for the parent that was mutated), improvement rates
        by evidence group and gate decision (`_improvement_figures`), cost (`_cost_figures`),
        LLM usage and wall time per node (totals leave out `INCLUSIVE_NODES`), failures,
        novelty rejections (`_novelty_figures`), fallbacks (`FALLBACK_EVENTS`) and one history
        row per completed iteration. ``to_dict()`` is its JSON form, unchanged from the dict
        this function returned before it was typed.

    Raises:
        FileNotFoundError: ``run_dir`` is not a directory.
    """
    rdir = Path(run_dir)
    if not rdir.is_dir():
        raise FileNotFoundError(f"run directory not found: {rdir}")
    names = (layout.EVENTS, layout.SEARCH_DB, layout.PROGRAMS, layout.BEST_META)
    files = {name: (rdir / name).is_file() for name in names}
    events, bad_events = read_jsonl(rdir / layout.EVENTS)
    db = load_search_db(rdir / layout.SEARCH_DB)
    programs = load_programs(rdir / layout.PROGRAMS)
    best = read_json(rdir / layout.BEST_META)
    meta = read_json(rdir / layout.RUN_META) or {}

    starts = [e for e in events if e.get("event") == "run_start"]
    ends = [e for e in events if e.get("event") == "run_end"]
    sessions, resumed, wall = session_figures(events)
    initial = next(
        (p.score for p in programs or [] if p.id == "initial"),
        next(
            (e.get("best_score") for e in events if e.get("node") == "initialize"),
            None,
        ),
    )
    records = latest_by_iteration(events, "record")
    gates = gate_by_iteration(events)
    decisions = Counter(str(e.get("gate_decision")) for e in gates.values())
    llm, wall_time = _node_figures(events)
    task = starts[-1].get("task") if starts else None
    if task is None and meta.get("task_dir"):
        task = Path(str(meta["task_dir"])).name
    model = starts[-1].get("model") if starts else None
    best_fields = ("id", "iteration", "score", "metric", "metric_value", "ndg", "direction")
    return RunSummary(
        run_dir=str(rdir),
        task=task,
        model=model,
        files=files,
        events=EventCounts(count=len(events), unreadable_lines=bad_events),
        sessions=sessions,
        resumed=resumed,
        wall_s=wall,
        iterations=max((it for it in records if it > 0), default=0),
        iterations_planned=starts[-1].get("iterations") if starts else None,
        stop_reason=ends[-1].get("stop_reason") if ends else None,
        finished=bool(ends) and (not starts or ends[-1]["time"] >= starts[-1].get("time", 0)),
        best=BestProgram(**{k: best.get(k) for k in best_fields}) if best else None,
        initial_score=initial,
        improvements=sum(1 for it, e in records.items() if it > 0 and "best_score" in e),
        gate_decisions={
            **{d: decisions.get(d, 0) for d in GATE_DECISIONS},
            **{d: n for d, n in decisions.items() if d not in GATE_DECISIONS},
        },
        search=_search_figures(events, db),
        prediction=_prediction_figures(db),
        improvement=_improvement_figures(_iteration_outcomes(events, db, programs)),
        cost=_cost_figures(rdir, events, model, llm.total),
        llm=llm,
        llm_calls=call_figures(events),
        llm_models=_model_figures(events, rdir, model),
        wall_time=wall_time,
        failures=_failure_figures(programs, events),
        novelty=_novelty_figures(events, programs),
        fallbacks={
            name: sum(1 for e in events if e.get("event") == name) for name in FALLBACK_EVENTS
        },
        history=_history(events, initial),
    )

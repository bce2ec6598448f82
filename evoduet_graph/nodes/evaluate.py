"""``evaluate`` node: run the task's evaluator on this iteration's generated candidates.

Candidates evaluate concurrently (up to ``evaluation.workers``) in the sandbox (DESIGN.md §5).
A completed evaluation is cached by the sha256 of the code in the program store, so a resumed
run, or a child identical to an earlier program, is never evaluated twice.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.evaluation import EvaluationOutcome
from evoduet_graph.nodes._common import context_of
from evoduet_graph.state import CandidateRecord, OuterState


def evaluate(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Evaluate every candidate with status ``generated``.

    Returns:
        ``{"candidates": [...]}`` with those candidates now ``evaluated`` (score, valid, error).
    """
    ctx = context_of(runtime)
    pending = [c for c in state.get("candidates", []) if c["status"] == "generated"]
    rows = {c["id"]: ctx.store.get_program(c["id"]) for c in pending}
    outcomes: dict[str, EvaluationOutcome] = {}
    to_run: list[str] = []
    for cid, row in rows.items():
        cached = ctx.store.cached_evaluation(row.code or "")
        if cached is not None:
            outcomes[cid] = cached
        else:
            to_run.append(cid)
    if to_run:
        results = ctx.evaluator.evaluate_many([rows[cid].code or "" for cid in to_run], to_run)
        for cid, outcome in zip(to_run, results, strict=True):
            ctx.store.put_evaluation(rows[cid].code or "", outcome)
            outcomes[cid] = outcome
    updated: list[CandidateRecord] = []
    for cand in pending:
        outcome, row = outcomes[cand["id"]], rows[cand["id"]]
        row.status, row.score, row.valid = "evaluated", outcome.score, outcome.valid
        row.metrics, row.artifacts, row.error = outcome.metrics, outcome.artifacts, outcome.error
        ctx.store.put_program(row)
        updated.append(
            CandidateRecord(
                id=cand["id"],
                index=cand["index"],
                status="evaluated",
                score=outcome.score,
                valid=outcome.valid,
                error=outcome.error,
            )
        )
    return {"candidates": updated}

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
    by_code: dict[str, list[str]] = {}  # identical children are evaluated once
    for cid, row in rows.items():
        by_code.setdefault(row.code or "", []).append(cid)
    outcomes: dict[str, EvaluationOutcome] = {}
    to_run: list[str] = []
    for code, cids in by_code.items():
        cached = ctx.store.cached_evaluation(code)
        if cached is not None:
            outcomes.update(dict.fromkeys(cids, cached))
        else:
            to_run.append(code)
    if to_run:
        first_ids = [by_code[code][0] for code in to_run]
        results = ctx.evaluator.evaluate_many(to_run, first_ids)
        for code, outcome in zip(to_run, results, strict=True):
            ctx.store.put_evaluation(code, outcome)
            outcomes.update(dict.fromkeys(by_code[code], outcome))
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

"""``evaluate`` node: run the task's evaluator on this iteration's generated candidates.

Candidates evaluate concurrently (up to ``evaluation.workers``) in the sandbox (docs/design.md §5).
Each completed evaluation is cached by the sha256 of the code in the program store as soon as
it finishes (not when the whole batch is done), so a resumed run, or a child identical to an
earlier program, is never evaluated twice: a kill loses at most the evaluations in flight.
A candidate the sandbox caught tampering with the evaluation (``error`` starting with
``tampering:``) is invalid like any failed candidate, so it never enters the population; a
``tampering`` event names it and what it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.evaluation import EvaluationOutcome
from evoduet_graph.evaluation.base import ParallelEvaluator
from evoduet_graph.evaluation.sandbox import TAMPERING_PREFIX
from evoduet_graph.nodes._common import context_of
from evoduet_graph.state import CandidateRecord, OuterState

MAX_EVALUATION_ATTEMPTS = 2
"""Evaluations of one program started in processes that died before it finished; the next
attempt records the program as invalid instead of running it (a candidate that kills the
run, e.g. by signalling its parent, must not make the run impossible to resume)."""


def poisoned_outcome(attempts: int) -> EvaluationOutcome:
    """Outcome of a program whose evaluation killed the run ``attempts - 1`` times."""
    return EvaluationOutcome(
        metrics={},
        artifacts={"skipped": f"{attempts - 1} earlier evaluation(s) never finished"},
        score=0.0,
        valid=False,
        error=(
            f"skipped: the evaluation of this program was started {attempts - 1} times and "
            "the process died each time (the program may kill its parent or the machine)"
        ),
        elapsed_s=0.0,
        stage=0,
    )


def _store(ctx: Context, code: str, pid: str, outcome: EvaluationOutcome) -> None:
    """Cache ``outcome`` in the program store; a caught tampering attempt is also an event."""
    ctx.store.put_evaluation(code, outcome)
    if outcome.error and outcome.error.startswith(TAMPERING_PREFIX):
        ctx.events.emit(
            "tampering", program_id=pid, what=outcome.error[len(TAMPERING_PREFIX) :][:2000]
        )


def _evaluate_one(ctx: Context, code: str, pid: str) -> EvaluationOutcome:
    """Count one started evaluation of ``code``, then run it, or skip a poisoned program.

    The attempt is counted when the evaluation starts, in the worker that runs it, not when
    it is queued: a kill while candidates wait for a free worker must not count against the
    ones that never ran (`MAX_EVALUATION_ATTEMPTS`).
    """
    attempts = ctx.store.start_evaluation(code)
    if attempts > MAX_EVALUATION_ATTEMPTS:
        ctx.events.emit("evaluation_skipped", program_id=pid, attempts=attempts)
        return poisoned_outcome(attempts)
    return ctx.evaluator.evaluate(code, pid)


def evaluate_and_store(
    ctx: Context, codes: Sequence[str], ids: Sequence[str]
) -> dict[str, EvaluationOutcome]:
    """Evaluate ``codes`` in parallel and store each outcome as it completes.

    Evaluate ``codes`` (up to the evaluator's ``workers``, else ``evaluation.workers``, at a
    time) and cache each outcome in the program store the moment it completes. A program
    whose evaluation was started `MAX_EVALUATION_ATTEMPTS` times by processes that died is
    recorded as invalid instead (`poisoned_outcome`, event ``evaluation_skipped``).

    Returns:
        code → outcome.
    """
    outcomes: dict[str, EvaluationOutcome] = {}
    if not codes:
        return outcomes
    evaluator = ctx.evaluator
    parallel = isinstance(evaluator, ParallelEvaluator) and evaluator.workers
    workers = parallel or ctx.config.evaluation.workers
    workers = max(1, min(int(workers), len(codes)))
    if workers == 1:
        for code, pid in zip(codes, ids, strict=True):
            outcomes[code] = _evaluate_one(ctx, code, pid)
            _store(ctx, code, pid, outcomes[code])
        return outcomes
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evoduet-eval") as pool:
        futures = {
            pool.submit(_evaluate_one, ctx, code, pid): (code, pid)
            for code, pid in zip(codes, ids, strict=True)
        }
        for future in as_completed(futures):
            code, pid = futures[future]
            outcomes[code] = future.result()
            _store(ctx, code, pid, outcomes[code])
    return outcomes


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
        for code, outcome in evaluate_and_store(ctx, to_run, first_ids).items():
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

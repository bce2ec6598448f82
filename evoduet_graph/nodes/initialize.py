"""``initialize`` node: evaluate the initial program and seed the population (once per run).

Idempotent: the evaluation is cached in the program store and the population add is skipped
when the initial program is already there, so a run killed inside this node, or a finished run
extended with more iterations, never evaluates it again. Source: OpenEvolve's controller adds
the evaluated initial program to the database before the first iteration.

A task folder without an initial program (SkyDiscover allows it) is seeded with an empty
program recorded as invalid without evaluation; ``generate`` sees an empty parent and asks
the model for a first complete program from the instruction (SkyDiscover's start from
scratch), and the first valid child becomes the best.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.errors import RunError
from evoduet_graph.evaluation import EvaluationOutcome
from evoduet_graph.nodes._common import context_of, emit_progress
from evoduet_graph.nodes.grounding import ground
from evoduet_graph.nodes.stop_rules import budget_stop, target_reached
from evoduet_graph.population import ProgramEntry
from evoduet_graph.rundir.best import write_best
from evoduet_graph.rundir.store import ProgramRow
from evoduet_graph.state import OuterState, graph_max_iterations

INITIAL_ID = "initial"
NO_INITIAL_PROGRAM = "no initial program: the first iteration asks the model to write one"


def _seed_population(ctx: Context) -> ProgramRow:
    code = ctx.task.initial_program
    if ctx.store.has_program(INITIAL_ID):
        row = ctx.store.get_program(INITIAL_ID)
    else:
        outcome = ctx.store.cached_evaluation(code)
        if outcome is None and not ctx.task.has_initial_program:
            outcome = EvaluationOutcome(error=NO_INITIAL_PROGRAM)  # nothing to evaluate
        elif outcome is None:
            outcome = ctx.evaluator.evaluate(code, program_id=INITIAL_ID)
            ctx.store.put_evaluation(code, outcome)
        row = ProgramRow(
            id=INITIAL_ID,
            code=code,
            parent_id=None,
            iteration=0,
            kind="initial",
            status="evaluated",
            score=outcome.score,
            valid=outcome.valid,
            metrics=outcome.metrics,
            artifacts=outcome.artifacts,
            error=outcome.error,
        )
        ctx.store.put_program(row)
        if not outcome.valid and ctx.task.has_initial_program:
            ctx.events.emit(
                "warning",
                node="initialize",
                message=f"the initial program fails its evaluator: {outcome.error}",
            )
    if INITIAL_ID not in ctx.population:
        ctx.population.add(
            ProgramEntry(
                id=INITIAL_ID,
                score=row.score or 0.0,
                metrics=row.metrics,
                iteration=0,
                parent_id=None,
                generation=0,
                code_length=len(code),
                island=None,
            ),
            code,
            iteration=0,
        )
        ctx.store.save_population(0, ctx.population.to_dict())
    return row


def initialize(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Seed the run.

    Returns:
        ``max_iterations`` (input or config), the ``run_dir`` (when the run has one) and a
        cleared ``stop_reason`` (a stopped run that is resumed starts counting failures
        again), or the budget's stop reason when the run has already reached a ``budget:``
        limit or its best program meets ``stop_at_score``; on a new thread also ``iteration=0``,
        ``best_id``/``best_score``/``initial_score`` of the initial program and zeroed counters.
    """
    ctx = context_of(runtime)
    update: dict[str, Any] = {
        "max_iterations": graph_max_iterations(state, ctx.config.iterations),
        "stop_reason": None,
        "consecutive_failures": 0,
        "model_failures": 0,
        "model_answered": False,
    }
    if state.get("best_id") is None and any(r.iteration > 0 for r in ctx.store.all_programs()):
        # a new thread on a store that already holds iterations would reuse their candidate ids
        raise RunError(
            f"the run directory {ctx.run_dir} already holds the iterations of another run (or "
            "of an earlier invocation without a thread); a new run there would overwrite its "
            "candidates: continue that run on its own thread, or choose a new run directory"
        )
    if ctx.run_dir is not None:  # where the run writes (a graph-input run's default is new)
        update["run_dir"] = str(ctx.run_dir)
    row = _seed_population(ctx)
    reason = budget_stop(ctx, state.get("iteration", 0), report=False)  # a resumed run that
    if reason:  # already spent its budget stops at once
        update["stop_reason"] = reason
    best_id = state.get("best_id")
    if best_id is not None:
        # a resumed run whose best already meets the target
        if ctx.config.stop_at_score is not None and not update.get("stop_reason"):
            reason = target_reached(ctx, ctx.store.get_program(best_id).metrics)
            if reason:
                update["stop_reason"] = reason
        return update
    ground(ctx)  # retrieval.grounding: seed D_search before iteration 1
    write_best(ctx.run_dir, ctx.store, ctx.task, INITIAL_ID)
    metric_value = ctx.task.metric_value(row.metrics)
    emit_progress(
        runtime,
        "new_best",
        iteration=0,
        id=INITIAL_ID,
        score=row.score,
        metric_value=metric_value,
        ndg=ctx.task.ndg(metric_value) if metric_value is not None else None,
    )
    if not update.get("stop_reason"):
        reason = target_reached(ctx, row.metrics)  # the initial program already meets it
        if reason:
            update["stop_reason"] = reason
    update.update(
        iteration=0,
        best_id=INITIAL_ID,
        best_score=row.score,
        initial_score=row.score,
        last_improvement_iteration=0,
        knowledge_state=None,
        documents=[],
    )
    return update

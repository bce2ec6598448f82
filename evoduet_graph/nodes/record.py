"""``record`` node: end an iteration.

Adds the best valid candidate of the N to the population (idempotent: a resumed run that
re-enters ``record`` does not add it twice), saves the population snapshot, updates the global
best (``best_program.py`` / ``best_program.json`` in the run directory), credits the
realised Δ to the search-database records whose evidence fed the iteration, and the failure counter
that stops a run whose every iteration fails (``max_consecutive_failures``). An iteration whose
candidates were all rejected as duplicates before evaluation
(`evoduet_graph.candidates.novelty`) leaves that counter as it was: nothing failed (the same
children, evaluated, would have been valid copies and reset it), but nothing new was found
either. A second counter stops a run whose
model endpoint does not answer (``max_consecutive_model_failures``). The stop rules themselves
live in `evoduet_graph.nodes.stop_rules`, shared with ``initialize``.
"""

from __future__ import annotations

from typing import Any, cast

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import context_of, emit_progress
from evoduet_graph.nodes.stop_rules import budget_stop, failure_stop, model_health, target_reached
from evoduet_graph.population import ProgramEntry, add_op, apply_op, next_island_op
from evoduet_graph.rundir.best import write_best
from evoduet_graph.search.database import Impact
from evoduet_graph.state import CandidateRecord, OuterState


def measured_impact(iteration: int, parent_score: float, child: float) -> Impact:
    """The realised outcome of a valid child: Δ = child − parent and its sign (D_search)."""
    delta = child - parent_score
    outcome = "improved" if delta > 0 else "decreased" if delta < 0 else "unchanged"
    return Impact(
        iteration=iteration,
        parent_score=parent_score,
        child_score=child,
        delta=delta,
        outcome=outcome,
    )


def credit_evidence(ctx: Context, state: OuterState, valid: list[CandidateRecord]) -> None:
    """Credit the realised Δ to the search-database entries that fed this iteration.

    Write the realised Δ = best valid child score − parent score onto the search-database
    record that fed this iteration and, for a look-up, onto the earlier records that found the
    reused documents (`SearchDatabase.sources_of`; the world-knowledge design credits "the
    entry that fed the step"), so Δ-based selection rewards the queries behind a useful
    look-up. Idempotent per (record, iteration): a resumed run credits nothing twice.
    """
    record_id = state.get("evidence_record_id")
    if not record_id or ctx.search_db is None:
        return
    if not ctx.config.retrieval.use_search_database:
        return  # stateless retrieval (ablation): nothing is credited
    iteration = state["iteration"]
    parent_score = ctx.store.get_program(state["parent_id"] or "").score
    parent_score = float(parent_score or 0.0)
    if valid:
        impact = measured_impact(iteration, parent_score, max(c["score"] or 0.0 for c in valid))
    else:
        evaluated = any(c["status"] == "evaluated" for c in state.get("candidates", []))
        impact = Impact(
            iteration=iteration,
            parent_score=parent_score,
            child_score=None,
            delta=None,
            outcome="invalid" if evaluated else "not_evaluated",
        )
    fed = ctx.search_db.get_record(record_id)
    sources = (
        ctx.search_db.sources_of(fed.final_doc_ids, before=iteration)
        if fed is not None and fed.decision == "look-up"
        else []
    )
    added = ctx.search_db.add_impact(record_id, impact)
    for source in sources:  # each once per iteration, also when a resumed run re-enters here
        ctx.search_db.add_impact(source, impact)
    if not added:
        return  # already credited by the run this one resumes
    if ctx.memory is not None:  # long-term memory across runs (`evoduet_graph.search.memory`)
        for credited in (record_id, *sources):
            ctx.memory.remember(ctx.search_db, credited, impact)
    ctx.events.emit(
        "impact",
        iteration=iteration,
        record_id=record_id,
        sources=sources,
        delta=impact.delta,
        outcome=impact.outcome,
        doc_ids=[d["id"] for d in state.get("documents", [])],
        predicted=[d.get("predicted_score") for d in state.get("documents", [])],
        realised=impact.child_score,
    )


def credit_joint_searches(ctx: Context, state: OuterState) -> None:
    """Joint-level in-loop search (`evoduet_graph.nodes.joint_search`).

    Credit each candidate's own joint-search record (``jnt_<iteration>_c<index>``) with that
    candidate's realised Δ, as the method's records are credited with the iteration's.
    """
    if ctx.search_db is None or not ctx.config.joint_search.enabled:
        return
    iteration = state["iteration"]
    parent_score = float(ctx.store.get_program(state["parent_id"] or "").score or 0.0)
    for cand in state.get("candidates", []):
        record_id = f"jnt_{iteration:06d}_c{cand['index']}"
        if ctx.search_db.get_record(record_id) is None:
            continue
        if cand["status"] == "evaluated" and cand["valid"]:
            impact = measured_impact(iteration, parent_score, float(cand["score"] or 0.0))
        else:
            impact = Impact(
                iteration=iteration,
                parent_score=parent_score,
                outcome="invalid" if cand["status"] == "evaluated" else "not_evaluated",
            )
        ctx.search_db.add_impact(record_id, impact)


def record(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Commit the iteration's outcome.

    Returns:
        ``best_id``, ``best_score``, ``last_improvement_iteration``, ``consecutive_failures``
        and ``stop_reason`` (set when ``max_consecutive_failures``,
        ``max_consecutive_model_failures`` or a ``budget:`` limit is reached; the run then ends
        after this iteration, resumably), with ``model_failures`` / ``model_answered``.
    """
    ctx = context_of(runtime)
    iteration = state["iteration"]
    valid = [c for c in state.get("candidates", []) if c["status"] == "evaluated" and c["valid"]]
    update: dict[str, Any] = {}
    op: dict[str, Any]
    if ctx.max_iterations is not None:
        update["max_iterations"] = ctx.max_iterations
    if valid:
        best = max(valid, key=lambda c: (c["score"], -c["index"]))
        row = ctx.store.get_program(best["id"])
        op = add_op(
            ProgramEntry(
                id=row.id,
                score=row.score if row.score is not None else 0.0,
                metrics=row.metrics,
                iteration=iteration,
                parent_id=row.parent_id,
                generation=row.generation,
                code_length=len(row.code or ""),
                island=state.get("island"),
            ),
            state.get("island"),
        )
        update["consecutive_failures"] = 0
        best_score = state["best_score"]
        # an evaluated, valid candidate always carries its score
        if best_score is None or cast(float, best["score"]) > best_score:
            update.update(
                best_id=best["id"],
                best_score=best["score"],
                last_improvement_iteration=iteration,
            )
            write_best(ctx.run_dir, ctx.store, ctx.task, best["id"])
            target = target_reached(ctx, row.metrics)
            if target:
                update["stop_reason"] = target
            metric_value = ctx.task.metric_value(row.metrics)
            emit_progress(
                runtime,
                "new_best",
                iteration=iteration,
                id=best["id"],
                score=best["score"],
                metric_value=metric_value,
                ndg=ctx.task.ndg(metric_value) if metric_value is not None else None,
            )
    else:
        op = next_island_op()  # OpenEvolve moves to the next island every iteration
        update.update(failure_stop(ctx, state))
    update.update(model_health(ctx, state, update))
    if not update.get("stop_reason"):
        reason = budget_stop(ctx, iteration)
        if reason and iteration < state["max_iterations"]:
            update["stop_reason"] = reason
    credit_evidence(ctx, state, valid)
    credit_joint_searches(ctx, state)
    commit_population(ctx, iteration, op)
    return update


def commit_population(ctx: Context, iteration: int, op: dict[str, Any]) -> None:
    """Apply the iteration's population operation and persist it.

    Journal it, and every ``population.snapshot_interval`` iterations snapshot the whole population
    (which drops the journal). An iteration therefore writes O(1) bytes whatever the population's
    size; see `evoduet_graph.population.restore_population` for the read side.
    """
    apply_op(ctx.population, op, iteration, ctx.store.get_code)
    ctx.store.log_population_op(iteration, op)
    if iteration % ctx.config.population.snapshot_interval == 0:
        ctx.store.save_population(iteration, ctx.population.to_dict())

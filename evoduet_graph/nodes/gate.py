"""``gate`` node: the retrieval gate (paper §3.2, docs/design.md §1).

Decides each iteration whether the model goes on with its own knowledge (``no-op``), reuses
stored documents (``look-up``) or runs the inner query-evolution loop (``retrieve``).

Rule-based ablation modes live here: ``never`` (always no-op), ``always`` (always retrieve),
``heuristic`` (retrieve with probability ``gate.retrieve_probability``, seeded per iteration)
and ``stagnation`` (retrieve after ``gate.stagnation_patience`` iterations without a new best).
The ``llm`` mode is the method: one structured call (prompt ``gate.md``) sees the context c_t
(task, parent, top programs and inspirations, recent attempts), a selection of the search
database (``retrieval.select_policy`` / ``select_num``) and the most recently stored documents
with short excerpts, and returns the knowledge state and the decision. Look-up ids that are not
in the database are dropped; a look-up left without ids falls back to no-op (event
``gate_lookup_fallback``); unusable model output falls back to no-op (event ``gate_fallback``).

Two ablation rows branch off here: ``gate.mode: oracle`` (`evoduet_graph.nodes.oracle`: no
decision, fixed documents) and ``retrieval.use_search_database: false``
(`evoduet_graph.nodes.gate_stateless`: the gate may only choose no-op or retrieve).
"""

from __future__ import annotations

import random
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import ask_gate, context_of, gate_update
from evoduet_graph.nodes.gate_stateless import stateless_decision
from evoduet_graph.nodes.oracle import oracle_update
from evoduet_graph.nodes.review import review_gate
from evoduet_graph.prompts.descriptor import (
    context_text,
    database_text,
    iteration_messages,
    recent_documents_text,
)
from evoduet_graph.prompts.knowledge import GateOutput, knowledge_text
from evoduet_graph.prompts.render import render
from evoduet_graph.state import GateDecision, OuterState


def rule_decision(state: OuterState, ctx: Context) -> tuple[GateDecision, str]:
    """Decision of the rule-based gate modes.

    Raises:
        ValueError: for ``gate.mode == "llm"``, which is not rule-based.
    """
    gate = ctx.config.gate
    iteration = state.get("iteration", 0)
    if gate.mode == "never":
        return "no-op", "gate mode never"
    if gate.mode == "always":
        return "retrieve", "gate mode always"
    if gate.mode == "heuristic":
        draw = random.Random(f"{ctx.config.seed}:gate:{iteration}").random()
        decision: GateDecision = "retrieve" if draw < gate.retrieve_probability else "no-op"
        return decision, f"heuristic draw {draw:.3f} vs p={gate.retrieve_probability}"
    if gate.mode == "stagnation":
        stale = iteration - 1 - state.get("last_improvement_iteration", 0)
        if stale >= gate.stagnation_patience:
            return "retrieve", f"{stale} iterations without improvement"
        return "no-op", f"{stale} iterations without improvement"
    raise ValueError(f"gate mode {gate.mode!r} is not rule-based")


def gate_prompt(state: OuterState, ctx: Context) -> str:
    """The gate's user message for this iteration (paper §3.2).

    It follows the run's system message, which holds the task
    (`evoduet_graph.prompts.descriptor.iteration_messages`). The rest of the context c_t
    (`evoduet_graph.prompts.descriptor.context_text`: parent program and metrics, top programs
    and inspirations, recent attempts) comes first, as the stable prefix shared with the inner
    loop's and the mutation's prompts; then
    ``prompts/gate.md``'s own part: the D_search selection with realised Δ
    (``retrieval.select_policy`` / ``select_num``), the most recently stored documents with
    short excerpts (bounded: `evoduet_graph.prompts.descriptor.RECENT_DOCUMENTS_MAX_CHARS`) and
    the knowledge state.
    """
    parent_id = state["parent_id"] or ""
    knowledge = state.get("knowledge_state")
    unresolved = knowledge.get("unresolved") if knowledge else None
    return render(
        "gate",
        context=context_text(
            ctx, parent_id, state.get("iteration", 0), state.get("inspiration_ids")
        ),
        database=database_text(ctx, unresolved),
        recent_documents=recent_documents_text(ctx, parent_id),
        knowledge=knowledge_text(state.get("knowledge_state")),
    )


def llm_decision(state: OuterState, ctx: Context) -> dict[str, Any]:
    """Run the knowledge-gap gate (``gate.mode == "llm"``) and validate its look-up ids."""
    iteration = state.get("iteration", 0)
    result, failed = ask_gate(
        state, ctx, iteration_messages(ctx, gate_prompt(state, ctx)), GateOutput
    )
    if failed is not None:
        return failed
    out = result.value
    decision: GateDecision = out.decision
    ids: list[str] = []
    if decision == "look-up":
        known = ctx.search_db
        ids = [
            i
            for i in dict.fromkeys(out.document_ids)
            if known is not None and known.has_document(i)
        ]
        dropped = [i for i in out.document_ids if i not in ids]
        if not ids:
            decision = "no-op"
        if dropped or not ids:
            ctx.events.emit(
                "gate_lookup_fallback" if not ids else "gate_invalid_ids",
                iteration=iteration,
                dropped_ids=dropped,
            )
    return gate_update(ctx, iteration, result, decision, ids)


def gate(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Decide this iteration's knowledge action.

    With ``gate.review`` the decision is shown to a person first (LangGraph ``interrupt``,
    `evoduet_graph.nodes.review.review_gate`), who may keep or change it; this covers the rule-based
    modes, the ``llm`` gate and its stateless variant (``retrieval.use_search_database:
    false``, where a reviewer's ``look-up`` is refused: there is no search database). The
    ``oracle`` mode is never reviewed: it makes no decision (every iteration is a no-op with
    the fixed oracle documents), so there is nothing to approve.

    Returns:
        ``gate_decision`` and ``gate_reason``; in ``llm`` mode also ``knowledge_state`` and
        ``gate_document_ids``.

    Raises:
        LLMCallError: the model endpoint failed (transport), not for bad output.
    """
    ctx = context_of(runtime)
    if ctx.config.gate.mode == "oracle":
        return oracle_update(state, ctx)  # no decision to review: fixed documents, no-op

    def decide() -> dict[str, Any]:
        if ctx.config.gate.mode == "llm":
            if not ctx.config.retrieval.use_search_database:
                return stateless_decision(state, ctx)
            return llm_decision(state, ctx)
        decision, reason = rule_decision(state, ctx)
        return {"gate_decision": decision, "gate_reason": reason}

    return review_gate(ctx, dict(state), decide)

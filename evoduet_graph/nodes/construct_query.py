"""``construct_query`` node (inner loop, paper §3.3): write Q queries for the open knowledge gap.

Every round sees the context c_t (task, parent program and metrics, top programs and
inspirations, recent attempts: the same stable prefix as the gate's prompt), the knowledge
state, the population-state descriptor and the D_search selection with realised Δ
(``retrieval.select_policy`` / ``select_num``: highest and lowest Δ under the default ``delta``
policy), so stored outcomes steer the searches; later rounds also see the documents retained in
this loop with their predicted child scores and a bounded excerpt of each one's text (the
paper conditions the next queries on the retained documents). Every round sees the queries
already issued in this loop.

Repeated queries: queries are stripped, capped at ``retrieval.max_query_chars`` and
de-duplicated case- and whitespace-insensitively, within the round (the paper: a query is not
searched twice in one round) *and* against the earlier rounds of the same loop. A repeat across
rounds is dropped rather than searched again because its documents are already in this loop's
pool and already scored for this parent (§3.4: scores are reused within the loop): searching
it again would return the same documents (the offline backend is deterministic) or spend a web
search credit on nearly the same list, and add nothing the next round could use. A new inner
loop (a later iteration, possibly another parent) may issue the same query again: its
documents are then scored afresh for that loop's parent. If the model gives nothing new, the
unresolved gap itself becomes the query (event ``query_fallback``). A list entry that is no
string (``123``, ``null``) is dropped, never searched as ``"123"`` / ``"None"``; the
``query_fallback`` event names it (``dropped``) also when other queries remain.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.llm import LLMCallError, structured_call
from evoduet_graph.nodes._common import context_of, emit_progress, inner_llm_config
from evoduet_graph.prompts.descriptor import (
    context_text,
    database_text,
    iteration_messages,
    population_descriptor,
)
from evoduet_graph.prompts.knowledge import knowledge_text, query_plan_schema, retained_text
from evoduet_graph.prompts.render import render
from evoduet_graph.state import DocumentRef, InnerState


def clean_queries(raw: list[str], issued: list[str], limit: int, max_chars: int) -> list[str]:
    """Strip, cap, drop empties and duplicates (case-insensitive), keep at most ``limit``."""
    seen = {q.lower() for q in issued}
    out: list[str] = []
    for query in raw:
        q = " ".join(query.split())[:max_chars].strip()
        if q and q.lower() not in seen:
            seen.add(q.lower())
            out.append(q)
    return out[:limit]


def fallback_query(state: InnerState, ctx: Context) -> str:
    """A query from the unresolved gap, else from the task instruction's first line."""
    knowledge = state["knowledge_state"]
    gap = (knowledge.get("unresolved") if knowledge else None) or ""
    text = gap or next((ln for ln in ctx.task.instruction.splitlines() if ln.strip()), "")
    return " ".join(text.split())[: ctx.config.retrieval.max_query_chars] or ctx.task.name


def _texts(ctx: Context, docs: list[DocumentRef]) -> dict[str, str]:
    """The stored text of each document (none for a document the database does not hold)."""
    db = ctx.search_db
    stored = [db.get_document(d["id"]) for d in docs] if db is not None else []
    return {doc.doc_id: doc.content for doc in stored if doc is not None}


def query_prompt(state: InnerState, ctx: Context) -> str:
    """The query constructor's user message for this round (paper §3.3, query evolution).

    The context c_t first (`evoduet_graph.prompts.descriptor.context_text`, the prefix shared
    with the gate's and the mutation's prompts), then ``prompts/construct_query.md``'s own
    part: the knowledge state, the population descriptor, the D_search selection, the
    documents retained so far (bounded excerpts; none in round 0) and the queries issued.
    """
    issued = list(state["query_history"])
    knowledge = state["knowledge_state"]
    return render(
        "construct_query",
        context=context_text(
            ctx, state["parent_id"], state["iteration"], state.get("inspiration_ids")
        ),
        knowledge=knowledge_text(knowledge),
        descriptor=population_descriptor(ctx, dict(state)),
        database=database_text(ctx, knowledge.get("unresolved") if knowledge else None),
        retained=(
            retained_text(state["retained"], _texts(ctx, state["retained"]))
            if state["round"]
            else "(none yet)"
        ),
        previous_queries="\n".join(f"- {q}" for q in issued) or "(none)",
        num_queries=ctx.config.retrieval.queries_per_round,
    )


def construct_query(state: InnerState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Returns ``{"queries": [...]}`` (1..Q distinct, non-empty strings)."""
    ctx = context_of(runtime)
    retrieval = ctx.config.retrieval
    issued = list(state["query_history"])
    prompt = iteration_messages(ctx, query_prompt(state, ctx))
    raw: list[str] = []
    dropped: list[str] = []
    schema = query_plan_schema(retrieval.queries_per_round)
    try:
        result = structured_call(
            ctx.model_for("construct_query"),
            prompt,
            schema,
            default=schema,
            config=inner_llm_config(ctx, "construct_query", state),
            retry=ctx.llm_retry("construct_query"),
        )
        raw = result.value.queries
        dropped = result.value.dropped
    except LLMCallError as exc:
        ctx.events.emit("query_error", iteration=state["iteration"], error=str(exc)[:500])
    queries = clean_queries(raw, issued, retrieval.queries_per_round, retrieval.max_query_chars)
    if not queries:
        queries = clean_queries(
            [
                fallback_query(state, ctx),
                f"{fallback_query(state, ctx)} round {state['round']}",
            ],
            issued,
            1,
            retrieval.max_query_chars,
        )
        ctx.events.emit(
            "query_fallback", iteration=state["iteration"], queries=queries, dropped=dropped
        )
    elif dropped:  # the usable queries are searched; the rest of the reply was no query
        ctx.events.emit(
            "query_fallback", iteration=state["iteration"], queries=queries, dropped=dropped
        )
    emit_progress(
        runtime,
        "queries",
        iteration=state["iteration"],
        round=state["round"],
        queries=queries,
    )
    return {"queries": queries, "query_history": issued + queries}

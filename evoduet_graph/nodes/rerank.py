"""``rerank`` node (inner loop).

LLM listwise reranking, the alternative to hypothetical scoring (``retrieval.ranking:
listwise_rerank``).

The world-knowledge scaffold's "no query evolution" row (its ``query_evolution_steps: 1``):
one query, one search, then **one call** that rates every document of the pool by actionable
relevance and marginal novelty (0..1 each, prompt ``rerank.md``); a document's rank score is
``rerank_relevance_weight · relevance + rerank_novelty_weight · novelty`` and
``update_knowledge`` keeps the top K by it. The ratings are stored with the round's results in
D_search (`evoduet_graph.search.database.RoundResult`), where the relevance/novelty selection
policy reads them. Each document is shown with at most ``rerank_max_document_chars``
characters. A document the reply leaves out, or an unusable reply, rates 0/0 (event
``rerank_fallback``). Not the paper's R=1 loop (``query_evolution_steps: 1``,
configs/no_query_evolution.yaml), which scores documents hypothetically.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.llm import LLMCallError, structured_call
from evoduet_graph.nodes._common import context_of, inner_llm_config
from evoduet_graph.prompts.knowledge import documents_text, knowledge_text, ratings_schema
from evoduet_graph.prompts.render import render
from evoduet_graph.state import DocumentRef, InnerState


def rank_score(relevance: float, novelty: float, ctx: Context) -> float:
    """The weighted rank score of one rating (`retrieval.rerank_*_weight`)."""
    retrieval = ctx.config.retrieval
    return retrieval.rerank_relevance_weight * relevance + retrieval.rerank_novelty_weight * novelty


def rerank(state: InnerState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Rerank the pool by relevance and novelty.

    Returns the ``pool`` with ``relevance``, ``novelty`` and ``rerank_score`` on every
    document, and ``pending_knowledge``. No call when the pool is empty.
    """
    ctx = context_of(runtime)
    pool = list(state["pool"])
    if not pool:
        return {"pending_knowledge": None}
    parent = ctx.store.get_program(state["parent_id"])
    retrieval = ctx.config.retrieval
    prompt = render(
        "rerank",
        instruction=ctx.task.instruction[:1500],
        parent_score=parent.score,
        parent_code=(parent.code or "")[: ctx.config.prompt.max_program_chars // 2],
        knowledge=knowledge_text(state["knowledge_state"]),
        documents=documents_text(
            pool,
            {d["id"]: ctx.require_search_db().document_text(d["id"]) for d in pool},
            retrieval.rerank_max_document_chars,
        ),
    )
    rated: dict[str, Any] = {}
    pending = None
    schema = ratings_schema([d["id"] for d in pool])
    try:
        result = structured_call(
            ctx.model_for("rerank"),  # llm.roles: the rerank role's model
            prompt,
            schema,
            default=lambda: schema(ratings={}),
            config=inner_llm_config(ctx, "rerank", state),
            retry=ctx.llm_retry("rerank"),
        )
        rated = result.value.rated()
        if not result.used_default:
            pending = result.value.as_state()
    except LLMCallError as exc:
        ctx.events.emit("rerank_error", iteration=state["iteration"], error=str(exc)[:500])
    missing = [d["id"] for d in pool if d["id"] not in rated]
    if missing:
        ctx.events.emit("rerank_fallback", iteration=state["iteration"], doc_ids=missing)
    out: list[DocumentRef] = []
    for doc in pool:
        rating = rated.get(doc["id"])
        relevance = rating.relevance if rating is not None else 0.0
        novelty = rating.novelty if rating is not None else 0.0
        out.append(
            DocumentRef(
                **{
                    **doc,
                    "relevance": relevance,
                    "novelty": novelty,
                    "rerank_score": rank_score(relevance, novelty, ctx),
                }
            )
        )
    ctx.events.emit(
        "rerank",
        iteration=state["iteration"],
        round=state["round"],
        ratings={d["id"]: {"relevance": d["relevance"], "novelty": d["novelty"]} for d in out},
    )
    return {"pool": out, "pending_knowledge": pending}

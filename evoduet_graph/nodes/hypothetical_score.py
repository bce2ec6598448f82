"""``hypothetical_score`` node (inner loop, paper §3.3): hypothetical evidence scoring.

One structured call predicts, for every *unscored* document of the pool, the evaluator score
of a child that improves the parent using that document alone (absolute, on the task's
higher-is-better scale), and returns the updated knowledge state. Scores are never recomputed:
a document scored once (in this or an earlier retrieval) keeps its score. When no document
needs scoring, the call is skipped. Documents the model does not score, or an unusable reply,
get the parent's score (a neutral "no change" prediction; event ``score_fallback``).
"""

from __future__ import annotations

import math
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.knowledge import documents_text, knowledge_text, render, scores_schema
from evoduet_graph.llm import LLMCallError, structured_call
from evoduet_graph.nodes._common import context_of
from evoduet_graph.state import DocumentRef, InnerState


def hypothetical_score(state: InnerState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Returns the ``pool`` with every document scored and ``pending_knowledge``."""
    ctx = context_of(runtime)
    pool = list(state.get("pool", []))
    unscored = [d for d in pool if d.get("predicted_score") is None]
    if not unscored:
        return {"pending_knowledge": None}
    parent = ctx.store.get_program(state["parent_id"])
    prompt = render(
        "hypothetical_score",
        instruction=ctx.task.instruction[:1500],
        parent_score=parent.score,
        best_score=state.get("best_score"),
        parent_code=(parent.code or "")[: ctx.config.prompt.max_program_chars // 2],
        fence=ctx.task.lang.fence,
        knowledge=knowledge_text(state.get("knowledge_state")),
        documents=documents_text(
            unscored,
            {d["id"]: ctx.search_db.document_text(d["id"]) for d in unscored},
            ctx.config.prompt.max_document_chars // 2,
        ),
    )
    predicted: dict[str, float] = {}
    pending = None
    try:
        schema = scores_schema([d["id"] for d in unscored])
        result = structured_call(
            ctx.model_for("hypothetical_score"),
            prompt,
            schema,
            default=lambda: schema(scores={}),
            config=ctx.llm_config(
                "hypothetical_score",
                iteration=state.get("iteration"),
                round=state.get("round", 0),
                decision="retrieve",
            ),
            retry=ctx.llm_retry("hypothetical_score"),
        )
        predicted = {
            k: v for k, v in result.value.predicted().items() if math.isfinite(v)
        }
        if not result.used_default:
            pending = result.value.as_state()
    except LLMCallError as exc:
        ctx.events.emit("score_error", iteration=state.get("iteration"), error=str(exc)[:500])
    neutral = float(parent.score or 0.0)
    missing = [d["id"] for d in unscored if d["id"] not in predicted]
    if missing:
        ctx.events.emit("score_fallback", iteration=state.get("iteration"), doc_ids=missing)
    scored: list[DocumentRef] = []
    for doc in pool:
        if doc.get("predicted_score") is None:
            score = predicted.get(doc["id"], neutral)
            ctx.search_db.set_predicted_score(doc["id"], score)
            stored = ctx.search_db.get_document(doc["id"]).predicted_score
            doc = DocumentRef(**{**doc, "predicted_score": stored})
        scored.append(doc)
    ctx.events.emit(
        "hypothetical_scores",
        iteration=state.get("iteration"),
        round=state.get("round", 0),
        scores={d["id"]: d["predicted_score"] for d in scored},
    )
    return {"pool": scored, "pending_knowledge": pending}

"""``hypothetical_score`` node (inner loop, paper §3.4): hypothetical evidence scoring.

One structured call predicts, for every document of the pool *not yet scored in this inner
loop*, the evaluator score of a child that improves **this loop's parent** using that document
alone (absolute, on the task's higher-is-better scale), and returns the updated knowledge
state. Every inner loop starts with no scores: a document found again by a later loop (another
iteration, possibly another parent) is scored again. Within the loop a score is reused in later
rounds, never recomputed. Each prediction is stored in D_search with its loop's record id,
round, parent id and parent score (`evoduet_graph.search.database.Prediction`); a resumed loop
reuses the predictions its interrupted run already stored.

When no document needs scoring, the call is skipped and the knowledge state stays as it is;
every round that scores something updates it (``pending_knowledge``, applied by
``update_knowledge``). A failed call (event ``score_error``), an unusable reply or documents
the reply leaves out (event ``score_fallback``, with their ids) leave those documents unscored
for now: no prediction is stored, they rank last when the top-K is kept, and a later round of
the same loop scores them again if they are still in the pool or returned again.
"""

from __future__ import annotations

import math
from typing import Any, cast

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.llm import LLMCallError, structured_call
from evoduet_graph.nodes._common import context_of, inner_llm_config
from evoduet_graph.prompts.descriptor import context_text, iteration_messages
from evoduet_graph.prompts.knowledge import documents_text, knowledge_text, scores_schema
from evoduet_graph.prompts.render import render
from evoduet_graph.search.database import Prediction, SearchDatabase
from evoduet_graph.state import DocumentRef, InnerState, KnowledgeState


def loop_record_id(state: InnerState) -> str:
    """The D_search record id of the inner loop (``ret_<iteration>``) that owns its predictions."""
    return state.get("record_id") or SearchDatabase.record_id_for(int(state["iteration"]))


def _stored_knowledge(ctx: Context, record_id: str, round_: int) -> KnowledgeState | None:
    """The knowledge state stored with this loop round's predictions, else None.

    The knowledge state stored with this loop round's predictions (a re-run after a kill
    continues from the state the killed run's reply gave), else None.
    """
    for prediction in reversed(ctx.require_search_db().predictions(record_id=record_id)):
        if prediction.round == round_ and prediction.knowledge_state:
            return cast(KnowledgeState, dict(prediction.knowledge_state))
    return None


def hypothetical_score(state: InnerState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Score the pool's documents by hypothetical evidence scoring.

    Returns the ``pool`` with this round's predictions and ``pending_knowledge`` (the
    reply's knowledge state when it scored something, else None).
    """
    ctx = context_of(runtime)
    iteration = int(state["iteration"])
    round_ = int(state["round"])
    record_id = loop_record_id(state)
    stored = ctx.require_search_db().loop_scores(record_id)  # a resumed loop keeps what it scored
    pool = [
        DocumentRef(**{**d, "predicted_score": stored.get(d["id"], d.get("predicted_score"))})
        for d in state["pool"]
    ]
    unscored = [d for d in pool if d.get("predicted_score") is None]
    if not unscored:  # a re-run after a kill: this round's reply is already stored
        return {"pool": pool, "pending_knowledge": _stored_knowledge(ctx, record_id, round_)}
    parent = ctx.store.get_program(state["parent_id"])
    parent_score = float(state["parent_score"])
    prompt = iteration_messages(
        ctx,
        render(
            "hypothetical_score",
            context=context_text(ctx, parent.id, iteration, state.get("inspiration_ids")),
            parent_score=parent.score,
            best_score=state["best_score"],
            knowledge=knowledge_text(state["knowledge_state"]),
            documents=documents_text(
                unscored,
                {d["id"]: ctx.require_search_db().document_text(d["id"]) for d in unscored},
                ctx.config.prompt.max_document_chars // 2,
            ),
        ),
    )
    ids = [d["id"] for d in unscored]
    predicted: dict[str, float] = {}
    pending = None
    try:
        schema = scores_schema(ids)
        result = structured_call(
            ctx.model_for("hypothetical_score"),
            prompt,
            schema,
            default=lambda: schema(scores={}),
            config=inner_llm_config(ctx, "hypothetical_score", state),
            retry=ctx.llm_retry("hypothetical_score"),
        )
        predicted = {
            k: v for k, v in result.value.predicted().items() if k in ids and math.isfinite(v)
        }
        if predicted and not result.used_default:
            pending = result.value.as_state()
    except LLMCallError as exc:
        ctx.events.emit(
            "score_error", iteration=iteration, round=round_, doc_ids=ids, error=str(exc)[:500]
        )
    else:
        missing = [i for i in ids if i not in predicted]
        if missing:
            ctx.events.emit("score_fallback", iteration=iteration, round=round_, doc_ids=missing)
    scored: list[DocumentRef] = []
    for doc in pool:
        score = predicted.get(doc["id"])
        if doc.get("predicted_score") is None and score is not None:
            ctx.require_search_db().add_prediction(
                Prediction(
                    record_id=record_id,
                    doc_id=doc["id"],
                    iteration=iteration,
                    round=round_,
                    parent_id=parent.id,
                    parent_score=parent_score,
                    predicted_score=score,
                    knowledge_state=dict(pending) if pending else None,
                )
            )
            doc = DocumentRef(**{**doc, "predicted_score": score})
        scored.append(doc)
    ctx.events.emit(
        "hypothetical_scores",
        iteration=iteration,
        round=round_,
        record_id=record_id,
        parent_id=parent.id,
        scores={d["id"]: d["predicted_score"] for d in scored},
        unscored=[d["id"] for d in scored if d["predicted_score"] is None],
    )
    return {"pool": scored, "pending_knowledge": pending}

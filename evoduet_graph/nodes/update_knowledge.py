"""``update_knowledge`` node (inner loop): apply the new knowledge state, keep the top-K.

Keeps the K (``retrieval.top_k``) documents of the pool with the highest predicted child score
(ties: earlier document id first), logs the round for the search database and advances the
round counter. The round's logged ``results`` are the documents the backend returned in it
(``returned``, with their predicted scores), not the documents carried over from the previous
round, so D_search's URL novelty counts only what was actually returned again.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import context_of
from evoduet_graph.state import InnerRoundLog, InnerState


def top_k_documents(pool: list[Any], k: int) -> list[Any]:
    """The ``k`` best-ranked documents.

    The ``k`` documents with the highest ``rerank_score`` when the listwise reranker rated
    them, else the highest ``predicted_score`` (None ranks last).
    """

    def key(doc: Any) -> tuple[float, str]:
        score = doc.get("rerank_score")
        if score is None:
            score = doc.get("predicted_score")
        return (-(score if score is not None else float("-inf")), doc["id"])

    return sorted(pool, key=key)[:k]


def update_knowledge(state: InnerState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Update the knowledge state and retain the best documents.

    Returns ``knowledge_state``, ``retained``, ``pool`` (= retained), ``round`` + 1 and the
    appended ``round_logs``.
    """
    ctx = context_of(runtime)
    pool = list(state["pool"])
    retained = top_k_documents(pool, ctx.config.retrieval.top_k)
    returned = state.get("returned")
    by_id = {d["id"]: d for d in pool}
    results = pool if returned is None else [by_id[i] for i in returned if i in by_id]
    log = InnerRoundLog(
        round=state["round"],
        queries=list(state["queries"]),
        results=results,
        retained=[d["id"] for d in retained],
        errors=list(state["errors"]),
    )
    return {
        "knowledge_state": state["pending_knowledge"] or state["knowledge_state"],
        "pending_knowledge": None,
        "retained": retained,
        "pool": retained,
        "returned": None,
        "round": state["round"] + 1,
        "round_logs": [*state["round_logs"], log],
        "errors": [],
    }

"""``search`` node (inner loop): run each distinct query once on the configured backend.

Results are stored in the search database (documents get stable ids; the same normalised URL
always maps to the same id), de-duplicated, and merged with the retained pool. A document
enters the pool with the score *this inner loop* predicted for it, if any (paper §3.4: a
prediction made by an earlier loop, for another parent, is not carried over). A query already
answered by the same backend in this run (or, with ``retrieval.cache_dir``, in an earlier one)
is answered from the search cache (`evoduet_graph.search.cache`); the ``search`` event then
says ``cached: true`` with the original retrieval time ``fetched_at``. With
``retrieval.review_queries`` the node first pauses for a person to approve or edit the
queries (`evoduet_graph.nodes.review.review_queries`); the edited ones are searched and recorded.
A backend error
or timeout (after the retries of ``robust_search``) leaves that query without results; the
event ``search_error`` records it and the retrieval goes on.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import context_of, emit, search_query
from evoduet_graph.nodes.hypothetical_score import loop_record_id
from evoduet_graph.nodes.review import review_queries
from evoduet_graph.state import DocumentRef, InnerState


def search(state: InnerState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Search the round's queries and add the hits to the pool.

    Returns ``pool`` (retained + new documents), ``returned`` (ids of this round's hits)
    and accumulated ``errors``.
    """
    ctx = context_of(runtime)
    pool = {d["id"]: d for d in state["pool"]}
    errors = list(state["errors"])
    if ctx.searcher is None:
        message = (
            "no search backend in the runtime context (the run was built for gate.mode=never); "
            "configure gate.mode and retrieval.backend so the backend is preflighted"
        )
        ctx.events.emit("search_error", iteration=state["iteration"], error=message)
        return {"pool": list(pool.values()), "errors": [*errors, message], "returned": []}
    proposed = list(dict.fromkeys(state["queries"]))
    queries = review_queries(ctx, dict(state), proposed)
    reviewed: dict[str, Any] = {}
    if queries != proposed:  # the reviewer's queries replace the proposal in the chain
        history = [q for q in state["query_history"] if q not in proposed]
        reviewed = {"queries": queries, "query_history": history + queries}
    returned: dict[str, None] = {}
    scored = ctx.require_search_db().loop_scores(loop_record_id(state))
    for query in queries:
        outcome = search_query(ctx, query)
        docs, error = outcome.documents, outcome.error
        if error:
            errors.append(f"{query!r}: {error}")
            ctx.events.emit(
                "search_error", iteration=state["iteration"], query=query, error=error[:500]
            )
        stored = ctx.require_search_db().add_documents(docs, state["iteration"])
        emit(
            ctx,
            runtime,
            "search",
            iteration=state["iteration"],
            round=state["round"],
            query=query,
            results=len(stored),
            error=error[:300] if error else None,
            urls=[d.url for d in stored],
            doc_ids=[d.doc_id for d in stored],
            cached=outcome.cached,
            fetched_at=round(outcome.fetched_at, 3),
        )
        for doc in stored:
            returned.setdefault(doc.doc_id)
            pool.setdefault(
                doc.doc_id,
                DocumentRef(
                    id=doc.doc_id,
                    url=doc.url,
                    title=doc.title,
                    predicted_score=scored.get(doc.doc_id),
                ),
            )
    return {
        "pool": list(pool.values()),
        "returned": list(returned),
        "errors": errors,
        **reviewed,
    }

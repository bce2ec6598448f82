"""``look_up`` node (outer loop): reuse documents already in the search database.

Loads the documents the gate named (``gate_document_ids``, validated by the gate) into this
iteration's evidence without searching, and writes a ``look-up`` record (id ``lku_<iteration>``)
so the realised Δ is credited to those documents too. A document carries a predicted child
score only when an inner loop made one for *this* parent (the latest such prediction);
predictions made for other parents are not reused (paper §3.4).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import context_of
from evoduet_graph.nodes.retrieve import add_evidence_record
from evoduet_graph.search.database import SearchDatabase
from evoduet_graph.state import DocumentRef, OuterState


def look_up(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Returns ``documents`` and ``evidence_record_id``."""
    ctx = context_of(runtime)
    iteration = state["iteration"]
    parent = ctx.store.get_program(state["parent_id"] or "")
    db = ctx.require_search_db()
    docs = []
    for doc_id in state.get("gate_document_ids", []):
        stored = db.get_document(doc_id)
        if stored is None:  # not in the database
            continue
        prediction = db.prediction_for(doc_id, parent.id)
        docs.append(
            DocumentRef(
                id=stored.doc_id,
                url=stored.url,
                title=stored.title,
                predicted_score=prediction.predicted_score if prediction is not None else None,
            )
        )
    record_id = SearchDatabase.record_id_for(iteration, "lku")
    add_evidence_record(
        ctx,
        decision="look-up",
        docs=docs,
        rounds=[],
        record_id=record_id,
        parent=parent,
        iteration=iteration,
        knowledge_state=state.get("knowledge_state"),
    )
    return {"documents": docs, "evidence_record_id": record_id}

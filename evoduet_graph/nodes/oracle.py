"""Oracle-documents baseline (paper §2.2): the same fixed documents in every mutation prompt.

``gate.mode: oracle`` — no gate decision and no search: the ``gate`` node hands this module's
documents to the ``no-op`` edge every iteration, so each ``generate`` prompt carries them as its
evidence block. The documents come from ``retrieval.oracle_documents`` (a folder or a JSONL
file; default the task's ``oracle/`` folder, `evoduet_graph.search.fixed`) and are stored in
D_search as documents (stable ids, so the prompt renders them like retrieved evidence), never
as a retrieval record: they count in no query or URL statistic.
"""

from __future__ import annotations

from typing import Any

from evoduet_graph.context import Context
from evoduet_graph.search.fixed import load_documents, oracle_source
from evoduet_graph.state import DocumentRef, OuterState


def load_oracle_documents(ctx: Context) -> list[Any]:
    """The run's oracle documents, read from their source.

    Raises:
        DocumentSetError: the source is missing, empty or malformed.
    """
    path = oracle_source(ctx.config.retrieval.oracle_documents, ctx.task.path)
    return load_documents(path, source="oracle")


def oracle_update(state: OuterState, ctx: Context) -> dict[str, Any]:
    """The gate's update in oracle mode: decision ``no-op`` with the oracle documents.

    Returns:
        ``gate_decision`` (``no-op``), ``gate_reason`` and ``documents`` (every oracle
        document, in source order).
    """
    stored = ctx.require_search_db().add_documents(
        load_oracle_documents(ctx), state.get("iteration", 0)
    )
    docs = [
        DocumentRef(id=d.doc_id, url=d.url, title=d.title, predicted_score=None) for d in stored
    ]
    return {
        "gate_decision": "no-op",
        "gate_reason": f"gate mode oracle: {len(docs)} fixed document(s)",
        "documents": docs,
    }

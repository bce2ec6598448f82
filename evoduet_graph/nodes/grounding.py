"""Grounding: seed D_search before the first iteration (``retrieval.grounding``).

Called by ``initialize`` on a new run, before iteration 1, so the gate's D_search selection
lists the seeded documents and ``look-up`` can name them from the first iteration:

* ``offline`` — the documents of ``retrieval.grounding_documents`` (a JSONL file or a folder;
  default the task's ``docs/`` folder; `evoduet_graph.search.fixed`);
* ``online`` — one search on the task instruction's first line with the run's backend
  (``Context.searcher``, behind the search cache when ``retrieval.cache``).

At most ``retrieval.grounding_max_documents`` documents are seeded, as one D_search record
``grd_000000`` (decision ``grounding``; an online grounding logs its query and results as
round 0, so its URLs count in the run's URL statistics, an offline one has no round).
Idempotent: a resumed run finds the record and does nothing.
"""

from __future__ import annotations

from evoduet_graph.context import Context
from evoduet_graph.search.base import Document
from evoduet_graph.search.cache import cached_search
from evoduet_graph.search.database import RoundLog, RoundResult, SearchRecord
from evoduet_graph.search.fixed import grounding_source, load_documents

GROUNDING_RECORD = "grd_000000"


def grounding_query(ctx: Context) -> str:
    """The online grounding's query: the task instruction's first non-empty line, capped."""
    line = next((ln for ln in ctx.task.instruction.splitlines() if ln.strip()), ctx.task.name)
    return " ".join(line.split())[: ctx.config.retrieval.max_query_chars]


def ground(ctx: Context) -> str | None:
    """Seed D_search as ``retrieval.grounding`` says.

    Returns:
        The grounding record's id, or None when grounding is off.

    Raises:
        DocumentSetError: offline grounding documents are missing or malformed.
    """
    retrieval = ctx.config.retrieval
    if retrieval.grounding == "none" or ctx.search_db is None:
        return None
    db = ctx.search_db
    if db.get_record(GROUNDING_RECORD) is not None:
        return GROUNDING_RECORD
    rounds: list[RoundLog] = []
    limit = retrieval.grounding_max_documents
    if retrieval.grounding == "offline":
        path = grounding_source(retrieval.grounding_documents, ctx.task.path)
        stored = db.add_documents(load_documents(path, source="grounding")[:limit], 0)
    else:
        query = grounding_query(ctx)
        docs: list[Document] = []
        error: str | None = "no search backend in the runtime context"
        if ctx.searcher is not None:
            outcome = cached_search(
                ctx.searcher,
                ctx.search_cache if retrieval.cache else None,
                query,
                limit,
                retries=retrieval.search_retries,
                timeout_s=retrieval.search_timeout_s,
            )
            docs, error = outcome.documents, outcome.error
        if error:
            ctx.events.emit("search_error", iteration=0, query=query, error=error[:500])
        stored = db.add_documents(docs[:limit], 0)
        ctx.events.emit(
            "search",
            iteration=0,
            round=0,
            query=query,
            urls=[d.url for d in stored],
            doc_ids=[d.doc_id for d in stored],
            cached=outcome.cached,
            fetched_at=round(outcome.fetched_at, 3),
        )
        rounds.append(
            RoundLog(
                round=0,
                queries=[query],
                results=[RoundResult(doc_id=d.doc_id, url=d.url, title=d.title) for d in stored],
                retained=[d.doc_id for d in stored],
            )
        )
    initial = ctx.store.get_program("initial")
    db.add_record(
        SearchRecord(
            record_id=GROUNDING_RECORD,
            iteration=0,
            parent_id=initial.id,
            parent_score=float(initial.score or 0.0),
            rounds=rounds,
            final_doc_ids=[d.doc_id for d in stored],
            decision="grounding",
        )
    )
    ctx.events.emit(
        "grounding",
        mode=retrieval.grounding,
        record_id=GROUNDING_RECORD,
        doc_ids=[d.doc_id for d in stored],
    )
    return GROUNDING_RECORD

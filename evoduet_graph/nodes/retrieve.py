"""``retrieve`` node (outer loop): run the inner query-evolution subgraph and keep its top-K.

Invokes the compiled inner graph (its own state schema; checkpointed under this node's
namespace) with no scores: every inner loop scores its documents afresh for its parent (paper
§3.4), and its predictions are stored under the record id the loop is given. Then it writes
one retrieval record to the search database — the full query chain,
every round's results with predicted scores, the final documents — with the deterministic id
``ret_<iteration>`` so a resumed run that re-enters this node does not record it twice.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import context_of
from evoduet_graph.rundir.store import ProgramRow
from evoduet_graph.search.database import RoundLog as SearchRoundLog
from evoduet_graph.search.database import RoundResult, SearchDatabase, SearchRecord
from evoduet_graph.state import (
    DocumentRef,
    InnerRoundLog,
    InnerState,
    KnowledgeState,
    OuterState,
)


def inner_rounds(ctx: Context) -> int:
    """R: ``query_evolution_steps`` when set, else ``inner_rounds``."""
    retrieval = ctx.config.retrieval
    return retrieval.query_evolution_steps or retrieval.inner_rounds


def add_evidence_record(
    ctx: Context,
    *,
    decision: Literal["retrieve", "look-up"],
    docs: list[DocumentRef],
    rounds: list[SearchRoundLog],
    record_id: str,
    parent: ProgramRow,
    iteration: int,
    knowledge_state: KnowledgeState | None,
) -> None:
    """Write the search-database record of one retrieval or look-up (one home for both nodes).

    Args:
        ctx: the run's context (its ``search_db`` receives the record).
        decision: ``retrieve`` or ``look-up``.
        docs: the documents handed to the outer loop.
        rounds: the inner-loop rounds (empty for a look-up).
        record_id: the deterministic id (`SearchDatabase.record_id_for`).
        parent: the iteration's parent program.
        iteration: the outer iteration.
        knowledge_state: the final knowledge state (None: empty).
    """
    ctx.require_search_db().add_record(
        SearchRecord(
            record_id=record_id,
            iteration=iteration,
            parent_id=parent.id,
            parent_score=float(parent.score or 0.0),
            knowledge_state=dict(knowledge_state or {}),
            rounds=rounds,
            final_doc_ids=[d["id"] for d in docs],
            decision=decision,
            impacts=[],
        )
    )


def round_log(log: InnerRoundLog) -> SearchRoundLog:
    """The inner loop's round log in the search database's schema (errors go to events)."""
    return SearchRoundLog(
        round=log["round"],
        queries=list(log["queries"]),
        results=[
            RoundResult(
                doc_id=d["id"],
                url=d["url"],
                title=d["title"],
                predicted_score=d["predicted_score"],
                relevance=d.get("relevance"),
                novelty=d.get("novelty"),
            )
            for d in log["results"]
        ],
        retained=list(log["retained"]),
    )


def make_retrieve(inner: CompiledStateGraph[InnerState, Context, InnerState, InnerState]) -> Any:
    """Build the ``retrieve`` node around a compiled inner graph."""

    def retrieve(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
        """Returns ``documents`` (top-K refs), ``knowledge_state`` and ``evidence_record_id``."""
        ctx = context_of(runtime)
        iteration = state["iteration"]
        parent = ctx.store.get_program(state["parent_id"] or "")
        record_id = SearchDatabase.record_id_for(iteration)
        inner_input = InnerState(
            iteration=iteration,
            record_id=record_id,
            parent_id=parent.id,
            inspiration_ids=list(state.get("inspiration_ids") or []),
            parent_score=float(parent.score or 0.0),
            best_score=state.get("best_score"),
            last_improvement_iteration=state.get("last_improvement_iteration", 0),
            rounds=inner_rounds(ctx),
            round=0,
            knowledge_state=state.get("knowledge_state"),
            pending_knowledge=None,
            queries=[],
            query_history=[],
            pool=[],
            retained=[],
            round_logs=[],
            errors=[],
        )
        out = inner.invoke(inner_input, context=ctx)
        retained = list(out.get("retained", []))
        add_evidence_record(
            ctx,
            decision="retrieve",
            docs=retained,
            rounds=[round_log(log) for log in out.get("round_logs", [])],
            record_id=record_id,
            parent=parent,
            iteration=iteration,
            knowledge_state=out.get("knowledge_state"),
        )
        if not retained:
            errors = [e for log in out.get("round_logs", []) for e in log.get("errors", [])]
            ctx.events.emit("retrieve_empty", iteration=iteration, errors=errors)
        return {
            "documents": retained,
            "knowledge_state": out.get("knowledge_state") or state.get("knowledge_state"),
            "evidence_record_id": record_id,
        }

    retrieve.__name__ = "query_evolution"
    return retrieve

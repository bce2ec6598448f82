"""Graph state schemas of the outer loop (DESIGN.md §3).

State holds only small, typed, serialisable values: ids, scores, the gate decision, the current
knowledge state and documents, this iteration's candidates and counters. Program source lives
in the program store (`evoduet_graph.store`); a checkpoint written at iteration 1000 has the
same size as one written at iteration 10.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

GateDecision = Literal["no-op", "look-up", "retrieve"]
"""Gate decision (paper §3.2): use own knowledge, reuse stored documents, or search."""

CandidateStatus = Literal["generated", "invalid", "failed", "evaluated"]


class CandidateRecord(TypedDict):
    """One child program of this iteration (the code itself is in the program store).

    Attributes:
        id: candidate id, ``"it{iteration:05d}-c{index}"``.
        index: position in the fan-out, 0..N-1.
        status: ``generated`` (code ready), ``invalid`` (no usable code: the reason is in
            ``error``), ``failed`` (the LLM call failed), ``evaluated`` (metrics known).
        score: fitness on the internal higher-is-better scale, or None before evaluation.
        valid: the evaluator accepted the program.
        error: why the candidate is invalid / failed, shown to the next prompt.
    """

    id: str
    index: int
    status: CandidateStatus
    score: float | None
    valid: bool
    error: str | None


def merge_candidates(
    current: list[CandidateRecord] | None, update: list[CandidateRecord] | None
) -> list[CandidateRecord]:
    """Reducer of the ``candidates`` channel: ``None`` resets it (new iteration); otherwise
    records are merged by id (an update replaces the record with the same id, new ids append,
    order by ``index``)."""
    if update is None:
        return []
    merged = {c["id"]: c for c in (current or [])}
    for cand in update:
        merged[cand["id"]] = cand
    return sorted(merged.values(), key=lambda c: c["index"])


class DocumentRef(TypedDict):
    """A retained evidence document (full text lives in the search database)."""

    id: str
    url: str
    title: str
    predicted_score: float | None


class KnowledgeState(TypedDict):
    """What the model knows about the task (paper §3.2): the gate's and inner loop's output."""

    known: str
    established: str
    unresolved: str


class OuterState(TypedDict, total=False):
    """State of the outer (solution) loop.

    Attributes:
        max_iterations: iterations to run (input).
        iteration: the iteration in progress, 1-based; 0 before the first.
        parent_id: program id selected as parent this iteration.
        inspiration_ids: program ids shown as inspirations.
        island: island of the parent (MAP-Elites populations), else None.
        gate_decision: this iteration's decision.
        gate_reason: the gate's one-line reasoning.
        knowledge_state: the current knowledge state, or None before any gate call.
        gate_document_ids: stored document ids named by a ``look-up`` decision.
        evidence_record_id: the D_search record that fed this iteration (for Δ credit).
        documents: evidence retained for this iteration's prompt.
        candidates: this iteration's children (reducer: reset by ``select``).
        best_id: best program so far; best_score: its fitness.
        initial_score: fitness of the initial program.
        last_improvement_iteration: iteration of the last new best.
        consecutive_failures: iterations in a row without a valid candidate.
        stop_reason: why the run stopped, when it stopped before ``max_iterations``.
    """

    max_iterations: int
    iteration: int
    parent_id: str | None
    inspiration_ids: list[str]
    island: int | None
    gate_decision: GateDecision | None
    gate_reason: str
    knowledge_state: KnowledgeState | None
    gate_document_ids: list[str]
    evidence_record_id: str | None
    documents: list[DocumentRef]
    candidates: Annotated[list[CandidateRecord], merge_candidates]
    best_id: str | None
    best_score: float | None
    initial_score: float | None
    last_improvement_iteration: int
    consecutive_failures: int
    stop_reason: str | None


class OuterInput(TypedDict, total=False):
    """Input of ``graph.invoke``: how many iterations to run (default: the config's)."""

    max_iterations: int


class GenerateInput(TypedDict):
    """Payload of one ``Send("generate", ...)``: which candidate slot to fill."""

    iteration: int
    index: int
    parent_id: str
    inspiration_ids: list[str]
    documents: list[DocumentRef]


class RoundLog(TypedDict):
    """One inner round as logged in the search database."""

    round: int
    queries: list[str]
    results: list[DocumentRef]
    retained: list[str]
    errors: list[str]


class InnerState(TypedDict, total=False):
    """State of the inner (query-evolution) subgraph; shares no reducer key with the outer one.

    Attributes:
        iteration / parent_id / parent_score: the outer iteration this retrieval serves.
        rounds: R, the number of rounds to run; round: the round in progress (0-based).
        knowledge_state: the current knowledge state (updated by ``update_knowledge``).
        pending_knowledge: the knowledge state returned by ``hypothetical_score``.
        queries: this round's queries; query_history: every query issued so far.
        pool: retained documents plus this round's new ones (deduplicated by id).
        returned: ids of the documents the backend returned this round (deduplicated, in
            order; set by ``search``, cleared by ``update_knowledge``); None: not known.
        retained: the top-K documents by predicted child score.
        round_logs: per-round log for the search database.
        errors: search errors seen (the retrieval goes on without those results).
    """

    iteration: int
    parent_id: str
    parent_score: float
    best_score: float | None
    last_improvement_iteration: int
    rounds: int
    round: int
    knowledge_state: KnowledgeState | None
    pending_knowledge: KnowledgeState | None
    queries: list[str]
    query_history: list[str]
    pool: list[DocumentRef]
    returned: list[str] | None
    retained: list[DocumentRef]
    round_logs: list[RoundLog]
    errors: list[str]

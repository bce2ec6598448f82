"""Graph state schemas of the outer loop (docs/design.md §3).

State holds only small, typed, serialisable values: ids, scores, the gate decision, the current
knowledge state and documents, this iteration's candidates and counters. Program source lives
in the program store (`evoduet_graph.rundir.store`); a checkpoint written at iteration 1000 has the
same size as one written at iteration 10.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict

from pydantic import BaseModel, NonNegativeInt, ValidationError

from evoduet_graph.errors import UserError

GateDecision = Literal["no-op", "look-up", "retrieve"]
"""Gate decision (paper §3.2): use own knowledge, reuse stored documents, or search."""

CandidateStatus = Literal["generated", "invalid", "failed", "duplicate", "evaluated"]


class CandidateRecord(TypedDict):
    """One child program of this iteration (the code itself is in the program store).

    Attributes:
        id: candidate id, ``"it{iteration:05d}-c{index}"``.
        index: position in the fan-out, 0..N-1.
        status: ``generated`` (code ready), ``invalid`` (no usable code: the reason is in
            ``error``), ``failed`` (the LLM call failed), ``duplicate`` (rejected before
            evaluation as a near-duplicate of its parent or a population program; the reason
            is in ``error``: `evoduet_graph.candidates.novelty`), ``evaluated`` (metrics known).
        score: fitness on the internal higher-is-better scale, or None before evaluation.
        valid: the evaluator accepted the program.
        error: why the candidate is invalid / failed / a duplicate (in the next prompt with
            ``prompt.failed_attempts: details``, and for a duplicate always).
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
    """Reducer of the ``candidates`` channel: ``None`` resets it (new iteration).

    Otherwise records are merged by id (an update replaces the record with the same id, new ids
    append, order by ``index``).
    """
    if update is None:
        return []
    merged = {c["id"]: c for c in (current or [])}
    for cand in update:
        merged[cand["id"]] = cand
    return sorted(merged.values(), key=lambda c: c["index"])


class DocumentRef(TypedDict):
    """A retained evidence document (full text lives in the search database).

    ``predicted_score`` is the child score predicted for the current parent (by this
    iteration's inner loop, or for a look-up an earlier loop's prediction for the same parent),
    None when there is none.
    ``relevance`` / ``novelty`` (0..1) and ``rerank_score`` (their weighted sum) are set by
    the listwise ``rerank`` node (``retrieval.ranking: listwise_rerank``) only.
    """

    id: str
    url: str
    title: str
    predicted_score: float | None
    relevance: NotRequired[float | None]
    novelty: NotRequired[float | None]
    rerank_score: NotRequired[float | None]


class KnowledgeState(TypedDict):
    """What the model knows about the task (paper §3.2): the gate's and inner loop's output."""

    known: str
    established: str
    unresolved: str


class SearchStrategy(TypedDict):
    """The active EvoX search strategy (``scaffold: evox``) and its effect so far.

    Attributes:
        id: 0 for the initial strategy, then 1, 2, ... per successful revision.
        parent_rule: how parents are chosen: ``best``, ``top_k_uniform``, ``diverse_island``
            or ``recent_improver`` (`evoduet_graph.scaffolds.evox`).
        instruction: text added to every mutation prompt while the strategy is active
            (``""``: none).
        rationale: why the model chose it (``"initial strategy"`` for id 0).
        started_iteration: first iteration it was active.
        window_start: first iteration of its stagnation window (its start, moved on by a
            failed revision so a failing model is not asked every iteration).
        start_best_score: best score when it started (internal higher-is-better scale).
        new_bests: iterations under it that produced a new best.
    """

    id: int
    parent_rule: str
    instruction: str
    rationale: str
    started_iteration: int
    window_start: int
    start_best_score: float | None
    new_bests: int


class StrategyOutcome(TypedDict):
    """A replaced EvoX strategy and its measured effect (kept for the revision prompt).

    Attributes:
        id / parent_rule / instruction: as in `SearchStrategy`.
        first_iteration / last_iteration: the iterations it was active.
        best_delta: best score at its end minus best score at its start (>= 0).
        new_bests: iterations under it that produced a new best.
    """

    id: int
    parent_rule: str
    instruction: str
    first_iteration: int
    last_iteration: int
    best_delta: float | None
    new_bests: int


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
        model_failures: iterations in a row in which every ``generate`` call failed.
        model_answered: a ``generate`` call returned a completion since the run (re)started.
        stop_reason: why the run stopped, when it stopped before ``max_iterations``.
        mutation_instruction: text the scaffold adds to this iteration's mutation prompt
            (``""``: none; set by ``select``).
        strategy: the active EvoX strategy (``scaffold: evox`` only).
        strategy_history: the last ``evox.history`` replaced strategies with their effect.
        strategy_revision: iterations without a new best when ``select`` found the EvoX
            strategy stagnated (the ``revise_strategy`` node then revises it); None: no
            revision due.
        task_dir / config: the run settings of a graph input (`OuterInput`), kept so a
            continued thread rebuilds the same context.
        run_dir: the run directory (written by ``initialize``; a graph input may set it).
        in_flight: iterations started and not yet collected (``max_iterations_in_flight`` >
            1 only; `evoduet_graph.inflight`). With k > 1 the per-iteration keys above
            (``iteration``, ``parent_id``, ``gate_decision``, ``documents``, ``candidates``,
            ...) hold the iteration ``collect`` just took, for ``record``; each in-flight
            iteration keeps its own copy in its own run of the iteration graph.
        issued: the highest iteration number started (k > 1).
        reissue: iteration numbers lost in flight (a kill) and not restarted yet (k > 1).
        collected: the iteration ``collect`` took in this step, None when it took none.
        iterations_done: iterations recorded (k > 1: they finish out of order, so
            ``iteration`` is not their count).

    The keys marked ``Required`` exist in every state after ``initialize`` (it writes them on
    a new thread; a resumed thread has them in its checkpoint), so the nodes after it read
    them as ``state[key]``, never with a default of their own.
    """

    max_iterations: Required[int]
    task_dir: str
    run_dir: str
    config: dict[str, object]
    iteration: Required[int]
    parent_id: str | None
    inspiration_ids: list[str]
    island: int | None
    gate_decision: GateDecision | None
    gate_reason: str
    knowledge_state: Required[KnowledgeState | None]
    gate_document_ids: list[str]
    evidence_record_id: str | None
    documents: Required[list[DocumentRef]]
    candidates: Annotated[list[CandidateRecord], merge_candidates]
    best_id: Required[str | None]
    best_score: Required[float | None]
    initial_score: Required[float | None]
    last_improvement_iteration: Required[int]
    consecutive_failures: Required[int]
    model_failures: Required[int]
    model_answered: Required[bool]
    stop_reason: Required[str | None]
    mutation_instruction: str
    strategy: SearchStrategy | None
    strategy_history: list[StrategyOutcome]
    in_flight: list[int]
    issued: int
    reissue: list[int]
    collected: int | None
    iterations_done: int
    strategy_revision: int | None


class OuterInput(TypedDict, total=False):
    """Input of ``graph.invoke``.

    Input of ``graph.invoke``: how many iterations to run (default: the config's) and,
    for a graph invoked without a hand-built context (``evoduet_graph.graph``, Studio), the
    run itself: ``{"task_dir": "tasks/x", "max_iterations": 3}``.

    Attributes:
        max_iterations: total iterations of the thread.
        task_dir: the task folder (relative paths: to the working directory).
        run_dir: the run directory; default a new folder under
            `evoduet_graph.graphs.studio_context.runs_root` (per thread when there is one).
        config: config overrides as nested keys (``{"gate": {"mode": "never"}}``), laid over
            the defaults (or the context's ``config_file`` / ``$EVODUET_CONFIG``).
    """

    max_iterations: int
    task_dir: str
    run_dir: str
    config: dict[str, object]


class GraphInputError(UserError, ValueError):
    """A value of the graph input is unusable (a ``max_iterations`` that is no whole number)."""


class _IterationsInput(BaseModel):
    """The graph input's ``max_iterations``, validated like ``--iterations``."""

    max_iterations: NonNegativeInt


def graph_max_iterations(state: Any, default: int) -> int:
    """The run's total iterations.

    The run's total iterations: the graph input's ``max_iterations`` (a whole number ≥ 0;
    a JSON client's ``"3"`` is taken as 3), else ``default``.

    Raises:
        GraphInputError: ``max_iterations`` is not a whole number ≥ 0.
    """
    value = state.get("max_iterations") if isinstance(state, Mapping) else None
    if value is None:
        return default
    try:
        return _IterationsInput(max_iterations=value).max_iterations
    except ValidationError:
        raise GraphInputError(
            "graph input 'max_iterations' must be a whole number ≥ 0 (the run's total "
            f"iterations), got {value!r}"
        ) from None


class GenerateInput(TypedDict):
    """Payload of one ``Send("generate", ...)``.

    Which candidate slot to fill, the scaffold's ``mutation_instruction`` for the prompt (absent or
    ``""``: none), and the graph input's run settings when the run was started from them
    (``task_dir``, ``run_dir``, ``config``).
    """

    iteration: int
    index: int
    parent_id: str
    inspiration_ids: list[str]
    documents: list[DocumentRef]
    mutation_instruction: NotRequired[str]
    task_dir: NotRequired[str]
    run_dir: NotRequired[str]
    config: NotRequired[dict[str, object]]


class InnerRoundLog(TypedDict):
    """One inner round as the inner graph's state carries it (checkpoint-safe).

    The search database stores it as `evoduet_graph.search.database.RoundLog` (converted by
    `evoduet_graph.nodes.retrieve.round_log`; the errors go to the events instead).
    """

    round: int
    queries: list[str]
    results: list[DocumentRef]
    retained: list[str]
    errors: list[str]


class InnerState(TypedDict, total=False):
    """State of the inner (query-evolution) subgraph; shares no reducer key with the outer one.

    Attributes:
        iteration / parent_id / parent_score: the outer iteration this retrieval serves.
        inspiration_ids: that iteration's inspirations (part of the context c_t the inner
            loop's prompts start with; absent: none).
        record_id: the D_search record id of this inner loop (``ret_<iteration>``); its
            predictions are stored under it (absent: derived from ``iteration``).
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

    The keys marked ``Required`` are in the input ``retrieve`` builds (`make_retrieve`), so
    they exist from the loop's first node on and the nodes read them as ``state[key]``;
    ``record_id`` (derived from ``iteration`` when absent) and ``returned`` (set by
    ``search``) may be missing.
    """

    iteration: Required[int]
    record_id: str
    parent_id: Required[str]
    inspiration_ids: list[str]
    parent_score: Required[float]
    best_score: Required[float | None]
    last_improvement_iteration: Required[int]
    rounds: Required[int]
    round: Required[int]
    knowledge_state: Required[KnowledgeState | None]
    pending_knowledge: Required[KnowledgeState | None]
    queries: Required[list[str]]
    query_history: Required[list[str]]
    pool: Required[list[DocumentRef]]
    returned: list[str] | None
    retained: Required[list[DocumentRef]]
    round_logs: Required[list[InnerRoundLog]]
    errors: Required[list[str]]

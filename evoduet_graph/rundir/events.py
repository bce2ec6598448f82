"""Run events: the catalogue (`EVENTS`) and the log.

Run events: the catalogue of every event (`EVENTS`) and the log, one JSON object per line
in ``<run_dir>/events.jsonl`` (docs/design.md §6).

Every node execution appends one event with its wall time and LLM usage; nodes add their own
fields (gate decision, candidate scores, ...). The file is append-only; a last line torn by a
killed process is cut when the log is opened again (a complete JSON object that only lacks its
newline is kept), and `read_events` skips any line that is not a JSON object.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import (
    Any,
    NotRequired,
    Required,
    TextIO,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from evoduet_graph.rundir.read import iter_jsonl


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


# ------------------------------------------------------------------------------------------
# payloads: one TypedDict per event (the fields besides ``event`` and ``time``)
# ------------------------------------------------------------------------------------------
# ``Required`` fields every such event carries (checked by `check_event`); ``NotRequired``
# fields are what the package writes when it has them (checked when present). A payload may
# carry further fields the package adds from a dict it builds elsewhere (a node's update
# summary, a model call's figures, usage totals): those are open, written as they come.

Iteration = int | None
"""An iteration number; None where a node ran outside an iteration (a test, Studio)."""


class RunStartPayload(TypedDict):
    """``run_start``: a session of the run starts."""

    task: NotRequired[str]
    iterations: NotRequired[int | None]
    model: NotRequired[str | None]
    resumed: NotRequired[bool]
    studio: NotRequired[bool]
    roles: NotRequired[dict[str, Any]]


class RunEndPayload(TypedDict):
    """``run_end``: a session ends (stopped, finished or waiting for a review)."""

    iterations: NotRequired[int]
    best_score: NotRequired[float | None]
    stop_reason: NotRequired[str | None]
    waiting_for_review: NotRequired[Any]


class MessagePayload(TypedDict):
    """``config_change``: a resume applied a changed setting."""

    message: NotRequired[str]


class TaskSettingsPayload(TypedDict):
    """``task_settings``: what the task config's own settings changed."""

    language: NotRequired[str]
    program: NotRequired[str | None]
    layout: NotRequired[str]
    evaluator: NotRequired[str]
    used: NotRequired[Any]
    ignored: NotRequired[Any]


class SandboxPayload(TypedDict):
    """``sandbox``: the isolation the evaluation sandbox enforces (its ``as_dict``) and more."""

    task_sha256: NotRequired[str | None]
    network_isolated: NotRequired[bool]
    process_limit: NotRequired[str]
    filesystem_protection: NotRequired[str]


class WarningPayload(TypedDict):
    """``warning``: a startup warning."""

    message: Required[str]
    node: NotRequired[str]


class MemoryPayload(TypedDict):
    """``memory``: long-term memory recalled into D_search."""

    path: NotRequired[Any]
    records: NotRequired[int]
    documents: NotRequired[int]


class BudgetPayload(TypedDict):
    """``budget``: usage against the ``budget:`` limits (`UsageTotals.as_dict`) and the stop."""

    iteration: NotRequired[Iteration]
    stop_reason: NotRequired[str | None]
    llm_calls: NotRequired[int]
    input_tokens: NotRequired[int]
    output_tokens: NotRequired[int]
    tokens: NotRequired[int]
    wall_s: NotRequired[float]
    cost_usd: NotRequired[float]


class LlmCallPayload(TypedDict):
    """``llm_call``: one model call's figures (`evoduet_graph.llm.usage.CallStats.as_dict`)."""

    from_node: Required[str]
    iteration: NotRequired[Iteration]


class NodeStartPayload(TypedDict):
    """``node_start``: a node starts (live stream only)."""

    node: Required[str]
    iteration: NotRequired[Iteration]


class NodePayload(TypedDict):
    """``node``: a node finished or raised; its update summary and LLM usage ride along."""

    node: Required[str]
    iteration: NotRequired[Iteration]
    elapsed_s: NotRequired[float]
    error: NotRequired[str]
    knowledge_gap: NotRequired[str]


class NewBestPayload(TypedDict):
    """``new_best``: a new best program (live stream only)."""

    iteration: Required[int]
    id: Required[str]
    score: NotRequired[float | None]
    metric_value: NotRequired[float | None]
    ndg: NotRequired[float | None]


class GateDecisionPayload(TypedDict):
    """``gate_decision``: the gate's decision and reason."""

    iteration: Required[Iteration]
    decision: NotRequired[str]
    reasoning: NotRequired[str]
    knowledge_state: NotRequired[dict[str, Any]]
    document_ids: NotRequired[list[Any]]
    method: NotRequired[Any]


class GateFallbackPayload(TypedDict):
    """``gate_fallback``: the gate's reply was unusable (the fallbacks it took)."""

    iteration: NotRequired[Iteration]
    fallbacks: NotRequired[Any]


class IterationErrorPayload(TypedDict):
    """A model call that failed: ``gate_error``, ``query_error``, ``rerank_error``."""

    iteration: NotRequired[Iteration]
    error: NotRequired[str]


class DroppedIdsPayload(TypedDict):
    """``gate_lookup_fallback`` / ``gate_invalid_ids``: document ids a look-up named, dropped."""

    iteration: NotRequired[Iteration]
    dropped_ids: NotRequired[list[Any]]


class QueriesPayload(TypedDict):
    """``queries``: the queries of an inner round (live stream only)."""

    queries: Required[list[Any]]
    iteration: NotRequired[Iteration]
    round: NotRequired[int]


class QueryFallbackPayload(TypedDict):
    """``query_fallback``: unusable query-construction output."""

    iteration: NotRequired[Iteration]
    queries: NotRequired[list[Any]]
    dropped: NotRequired[Any]


class SearchPayload(TypedDict):
    """``search``: one search, its results and whether the cache answered."""

    query: Required[str]
    iteration: NotRequired[Iteration]
    round: NotRequired[int]
    results: NotRequired[int]
    error: NotRequired[str | None]
    urls: NotRequired[list[Any]]
    doc_ids: NotRequired[list[Any]]
    cached: NotRequired[bool]
    fetched_at: NotRequired[float]
    joint: NotRequired[bool]


class SearchErrorPayload(TypedDict):
    """``search_error``: a search failed (the round goes on)."""

    error: Required[str]
    iteration: NotRequired[Iteration]
    query: NotRequired[str]


class HypotheticalScoresPayload(TypedDict):
    """``hypothetical_scores``: predicted child scores of the round's documents."""

    iteration: NotRequired[Iteration]
    round: NotRequired[int]
    record_id: NotRequired[str]
    parent_id: NotRequired[str]
    scores: NotRequired[dict[str, Any]]
    unscored: NotRequired[list[Any]]


class RoundDocsPayload(TypedDict):
    """``score_fallback`` / ``score_error``: the round's documents left unscored (and why)."""

    iteration: NotRequired[Iteration]
    round: NotRequired[int]
    doc_ids: NotRequired[list[Any]]
    error: NotRequired[str]


class RerankPayload(TypedDict):
    """``rerank``: the listwise rerank's ratings of the round's documents."""

    iteration: NotRequired[Iteration]
    round: NotRequired[int]
    ratings: NotRequired[dict[str, Any]]


class DocIdsPayload(TypedDict):
    """``rerank_fallback``: documents the rerank output left out."""

    iteration: NotRequired[Iteration]
    doc_ids: NotRequired[list[Any]]


class RetrieveEmptyPayload(TypedDict):
    """``retrieve_empty``: the inner loop retained no document."""

    iteration: NotRequired[Iteration]
    errors: NotRequired[list[Any]]


class GroundingPayload(TypedDict):
    """``grounding``: D_search seeded before iteration 1."""

    mode: NotRequired[str]
    record_id: NotRequired[str]
    doc_ids: NotRequired[list[Any]]


class JointSearchPayload(TypedDict):
    """``joint_search``: the searches the generating model made itself."""

    iteration: NotRequired[Iteration]
    candidate_index: NotRequired[int]
    protocol: NotRequired[str]
    searches: NotRequired[int]
    queries: NotRequired[list[Any]]
    doc_ids: NotRequired[list[Any]]
    errors: NotRequired[list[Any]]


class ImpactPayload(TypedDict):
    """``impact``: a realised Δ credited to a D_search record."""

    iteration: NotRequired[Iteration]
    record_id: NotRequired[str]
    sources: NotRequired[list[str]]  # a look-up's: the records that found its documents
    delta: NotRequired[float | None]
    outcome: NotRequired[str]
    doc_ids: NotRequired[list[Any]]
    predicted: NotRequired[list[Any]]
    realised: NotRequired[float | None]


class InflightLostPayload(TypedDict):
    """``inflight_lost``: iterations in flight at a kill, started again."""

    iterations: Required[list[Any]]


class NoveltyRejectedPayload(TypedDict):
    """``novelty_rejected``: a child rejected as a near-copy before evaluation."""

    candidate_id: Required[str]


class NoveltyErrorPayload(TypedDict):
    """``novelty_error``: the novelty check failed (the child is evaluated)."""

    iteration: NotRequired[Iteration]
    candidate_id: NotRequired[str]
    error: NotRequired[str]


class EvaluationSkippedPayload(TypedDict):
    """``evaluation_skipped``: a program that killed its evaluations is not run again."""

    program_id: NotRequired[str]
    attempts: NotRequired[int]


class TamperingPayload(TypedDict):
    """``tampering``: a candidate tried to write outside its sandbox."""

    program_id: NotRequired[str]
    what: NotRequired[str]


class StrategyPayload(TypedDict):
    """``strategy``: an EvoX strategy (initial, revised, failed or error)."""

    status: Required[str]
    strategy: Required[dict[str, Any]]
    iteration: NotRequired[Iteration]
    strategy_id: NotRequired[Any]
    parent_rule: NotRequired[str]
    instruction: NotRequired[str]
    rationale: NotRequired[str]
    previous: NotRequired[dict[str, Any] | None]


class ReviewPayload(TypedDict):
    """``review_pending`` / ``review`` / ``review_refused``: a human review step."""

    kind: NotRequired[str]
    iteration: NotRequired[Iteration]
    round: NotRequired[int | None]
    proposal: NotRequired[Any]
    answer: NotRequired[Any]
    edited: NotRequired[bool]
    attempt: NotRequired[int]
    error: NotRequired[str]


# ------------------------------------------------------------------------------------------
# the catalogue
# ------------------------------------------------------------------------------------------

FieldType = type | tuple[type, ...]
"""What a payload field is checked against with ``isinstance``."""


def _runtime_type(annotation: Any) -> FieldType | None:
    """The ``isinstance`` check of a payload annotation; None: not checked (``Any``).

    ``float`` accepts an ``int`` (as a type checker does); ``list[str]`` is checked as
    ``list``; a union as the tuple of its members.
    """
    if annotation is Any:
        return None
    if annotation is float:
        return (float, int)
    origin = get_origin(annotation)
    if origin is Union or origin is UnionType:
        kinds: list[type] = []
        for member in get_args(annotation):
            kind = _runtime_type(member)
            if kind is None:
                return None
            kinds.extend(kind if isinstance(kind, tuple) else (kind,))
        return tuple(kinds)
    if origin is not None:
        return origin if isinstance(origin, type) else None
    return annotation if isinstance(annotation, type) else None


@dataclass(frozen=True)
class EventSpec:
    """One kind of event in the catalogue.

    Attributes:
        doc: what it records.
        payload: the event's payload `TypedDict` (the fields besides ``event`` and ``time``):
            the one source of `fields` and `optional`.
        log: written to ``events.jsonl``.
        stream: written to the live stream (LangGraph's custom stream: the CLI display,
            ``--json``, Studio); an event written to both carries the same fields in both.
    """

    doc: str
    payload: type
    log: bool = True
    stream: bool = False

    @functools.cached_property
    def _checks(self) -> tuple[dict[str, FieldType | None], dict[str, FieldType | None]]:
        """(required, optional) fields of `payload`, name → checked type; computed once.

        Read from the annotations themselves (``Required`` / ``NotRequired``, else the
        TypedDict's totality): under ``from __future__ import annotations`` Python 3.11's
        ``__required_keys__`` cannot see them.
        """
        required: dict[str, FieldType | None] = {}
        optional: dict[str, FieldType | None] = {}
        total = getattr(self.payload, "__total__", True)
        for name, hint in get_type_hints(self.payload, include_extras=True).items():
            origin = get_origin(hint)
            inner = get_args(hint)[0] if origin in (Required, NotRequired) else hint
            is_required = origin is Required or (origin is not NotRequired and total)
            (required if is_required else optional)[name] = _runtime_type(inner)
        return required, optional

    @property
    def fields(self) -> Mapping[str, FieldType | None]:
        """The required fields (the payload's ``Required`` keys), name → checked type."""
        return self._checks[0]

    @property
    def optional(self) -> Mapping[str, FieldType | None]:
        """The optional fields the package writes (``NotRequired`` keys), name → checked type."""
        return self._checks[1]


EVENTS: dict[str, EventSpec] = {
    # the run
    "run_start": EventSpec("a session of the run starts (``resumed``: a resume)", RunStartPayload),
    "run_end": EventSpec("a session ends (``stop_reason``)", RunEndPayload),
    "config_change": EventSpec("a resume applied a changed setting", MessagePayload),
    "task_settings": EventSpec("what the task config's own settings changed", TaskSettingsPayload),
    "sandbox": EventSpec("what the evaluation sandbox enforces on this machine", SandboxPayload),
    "warning": EventSpec("a startup warning (``node``, ``message``)", WarningPayload),
    "memory": EventSpec("long-term memory recalled into D_search", MemoryPayload),
    "budget": EventSpec("usage against the ``budget:`` limits after an iteration", BudgetPayload),
    # every node
    "llm_call": EventSpec(
        "one model call's figures (``from_node``, prompt / cached / output tokens, prompt-eval,"
        " decode and lock-wait seconds, finish reason)",
        LlmCallPayload,
    ),
    "node_start": EventSpec("a node starts", NodeStartPayload, log=False, stream=True),
    "node": EventSpec(
        "a node finished (wall time, LLM usage, a summary of its update) or raised (``error``)",
        NodePayload,
        stream=True,
    ),
    "new_best": EventSpec("a new best program", NewBestPayload, log=False, stream=True),
    # gate and knowledge layer
    "gate_decision": EventSpec("the gate's decision and reason", GateDecisionPayload),
    "gate_fallback": EventSpec("the gate's reply was unusable: no-op", GateFallbackPayload),
    "gate_error": EventSpec("the gate call failed: no-op", IterationErrorPayload),
    "gate_lookup_fallback": EventSpec("a look-up named no document: no-op", DroppedIdsPayload),
    "gate_invalid_ids": EventSpec(
        "a look-up named unknown document ids (dropped)", DroppedIdsPayload
    ),
    "queries": EventSpec("the queries of an inner round", QueriesPayload, log=False, stream=True),
    "query_fallback": EventSpec(
        "unusable query-construction output (fallback queries)", QueryFallbackPayload
    ),
    "query_error": EventSpec("the query-construction call failed", IterationErrorPayload),
    "search": EventSpec("one search: query, results, cache hit", SearchPayload, stream=True),
    "search_error": EventSpec("a search failed (the round goes on)", SearchErrorPayload),
    "hypothetical_scores": EventSpec(
        "predicted child scores of the round's documents", HypotheticalScoresPayload
    ),
    "score_fallback": EventSpec(
        "unusable scoring output (documents scored by default)", RoundDocsPayload
    ),
    "score_error": EventSpec("the scoring call failed", RoundDocsPayload),
    "rerank": EventSpec("the listwise rerank of the round's documents", RerankPayload),
    "rerank_fallback": EventSpec("unusable rerank output", DocIdsPayload),
    "rerank_error": EventSpec("the rerank call failed", IterationErrorPayload),
    "retrieve_empty": EventSpec("the inner loop retained no document", RetrieveEmptyPayload),
    "grounding": EventSpec("D_search seeded before iteration 1", GroundingPayload),
    "joint_search": EventSpec("searches the generating model made itself", JointSearchPayload),
    "impact": EventSpec("a realised Δ credited to a D_search record", ImpactPayload),
    "inflight_lost": EventSpec(
        "iterations in flight at a kill, started again (``iterations``)", InflightLostPayload
    ),
    # candidates and evaluation
    "novelty_rejected": EventSpec(
        "a child rejected as a near-copy before evaluation", NoveltyRejectedPayload, stream=True
    ),
    "novelty_error": EventSpec(
        "the novelty check failed (the child is evaluated)", NoveltyErrorPayload
    ),
    "evaluation_skipped": EventSpec(
        "a program that killed its evaluations is not run again", EvaluationSkippedPayload
    ),
    "tampering": EventSpec("a candidate tried to write outside its sandbox", TamperingPayload),
    # scaffolds and review
    "strategy": EventSpec("an EvoX strategy: initial, revised, failed or error", StrategyPayload),
    "review_pending": EventSpec("a proposal waits for human review", ReviewPayload),
    "review": EventSpec("the reviewer's answer", ReviewPayload),
    "review_refused": EventSpec("a review answer that does not parse", ReviewPayload),
}
"""The event catalogue: every event the package writes, by name, with its payload type
(`EventLog.emit` and `evoduet_graph.nodes._common.emit_progress` refuse another name, a
missing required field and a field of the wrong type)."""


def check_event(event: str, fields: Mapping[str, Any]) -> EventSpec:
    """The catalogue entry of ``event``, after checking its payload.

    Raises:
        ValueError: ``event`` is not in `EVENTS`, a required field is missing, or a field of
            its payload type (required, or optional and present) has the wrong type.
    """
    spec = EVENTS.get(event)
    if spec is None:
        raise ValueError(f"unknown event {event!r}: add it to the catalogue (rundir/events.py)")
    for name, kind in spec.fields.items():
        if name not in fields or (kind is not None and not isinstance(fields[name], kind)):
            raise ValueError(f"event {event!r}: field {name!r} must be {kind}")
    for name, kind in spec.optional.items():
        if name in fields and kind is not None and not isinstance(fields[name], kind):
            raise ValueError(f"event {event!r}: field {name!r} must be {kind}")
    return spec


class EventLog:
    """Thread-safe append-only JSONL event log.

    A file-backed log keeps nothing in memory (a long run's events live in the file only);
    `memory` reads back this session's part of the file. Consumers that need every new event
    (the budget's running totals) `subscribe` to it instead of re-reading.

    Args:
        path: the ``events.jsonl`` file, or None to keep events in memory only (tests).
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._memory: list[dict[str, Any]] = []
        self._subscribers: list[Callable[[dict[str, Any]], None]] = []
        self._fh: TextIO | None = None
        self._session_offset = 0
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _repair_torn_tail(self.path)
            self._session_offset = self.path.stat().st_size if self.path.exists() else 0

    def subscribe(self, callback: Callable[[dict[str, Any]], None]) -> None:
        """Call ``callback(record)`` with every event emitted from now on.

        Call ``callback(record)`` with every event emitted from now on (under the log's
        lock, in emission order; it must be quick and must not emit).
        """
        with self._lock:
            self._subscribers.append(callback)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event ``{"event": event, "time": unix_s, **fields}`` and return it.

        Raises:
            ValueError: ``event`` is not in the catalogue `EVENTS` (or lacks a listed field).
        """
        check_event(event, fields)
        record: dict[str, Any] = _jsonable(
            {"event": event, "time": round(time.time(), 3), **fields}
        )
        line = json.dumps(record, default=str)
        with self._lock:
            if self.path is None:
                self._memory.append(record)
            else:
                if self._fh is None or self._fh.closed:
                    # kept open: one write(2) per event (line buffered), no open/close per event
                    self._fh = self.path.open("a", encoding="utf-8", buffering=1)
                self._fh.write(line + "\n")
            for callback in self._subscribers:
                callback(record)
        return record

    def close(self) -> None:
        """Close the file (idempotent; a later `emit` reopens it)."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __del__(self) -> None:
        fh = getattr(self, "_fh", None)
        if fh is not None:
            fh.close()

    @property
    def memory(self) -> list[dict[str, Any]]:
        """Events emitted through this log (a copy; for a file, read back from it)."""
        with self._lock:
            if self.path is None:
                return list(self._memory)
            if self._fh is not None and not self._fh.closed:
                self._fh.flush()
        return _read_from(self.path, self._session_offset)


def _repair_torn_tail(path: Path) -> None:
    """Repair a last line left without a newline by a killed writer.

    Terminate it when it is a complete JSON object, else cut it (a half-written event is dropped,
    never kept as garbage that later appends would follow).
    """
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as fh:
        size = fh.seek(0, 2)
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        start = max(0, size - (1 << 16))
        while True:  # find the start of the last line
            fh.seek(start)
            chunk = fh.read(size - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0 or start == 0:
                break
            start = max(0, start - (1 << 16))
        last = chunk[newline + 1 :]
        try:
            complete = isinstance(json.loads(last.decode("utf-8")), dict)
        except (UnicodeDecodeError, ValueError):
            complete = False
        if complete:
            fh.seek(0, 2)
            fh.write(b"\n")
        else:
            fh.truncate(start + newline + 1)


def _read_from(path: Path, offset: int) -> list[dict[str, Any]]:
    """The complete JSON objects of ``path`` after byte ``offset``."""
    if not path.exists():
        return []
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read()
    out = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the events of a log, skipping incomplete lines.

    Yield the events of a log, skipping lines that are not complete JSON objects
    (`evoduet_graph.rundir.read.iter_jsonl`).
    """
    return iter_jsonl(path)

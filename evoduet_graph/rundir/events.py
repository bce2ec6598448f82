"""Run events: the catalogue (`EVENTS`) and the log.

Run events: the catalogue of every event (`EVENTS`) and the log, one JSON object per line
in ``<run_dir>/events.jsonl`` (DESIGN.md §6).

Every node execution appends one event with its wall time and LLM usage; nodes add their own
fields (gate decision, candidate scores, ...). The file is append-only; a last line torn by a
killed process is cut when the log is opened again (a complete JSON object that only lacks its
newline is kept), and `read_events` skips any line that is not a JSON object.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from evoduet_graph.rundir.read import iter_jsonl


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class EventSpec:
    """One kind of event in the catalogue.

    Attributes:
        doc: what it records.
        fields: the payload fields every such event carries (besides ``event`` and ``time``),
            name → type; other fields are optional and event-specific.
        log: written to ``events.jsonl``.
        stream: written to the live stream (LangGraph's custom stream: the CLI display,
            ``--json``, Studio); an event written to both carries the same fields in both.
    """

    doc: str
    fields: Mapping[str, type | tuple[type, ...]] = field(default_factory=dict)
    log: bool = True
    stream: bool = False


EVENTS: dict[str, EventSpec] = {
    # the run
    "run_start": EventSpec("a session of the run starts (``resumed``: a resume)"),
    "run_end": EventSpec("a session ends (``stop_reason``)"),
    "config_change": EventSpec("a resume applied a changed setting"),
    "task_settings": EventSpec("what the task config's own settings changed"),
    "sandbox": EventSpec("what the evaluation sandbox enforces on this machine"),
    "warning": EventSpec("a startup warning (``node``, ``message``)", {"message": str}),
    "memory": EventSpec("long-term memory recalled into D_search"),
    "budget": EventSpec("usage against the ``budget:`` limits after an iteration"),
    # every node
    "llm_call": EventSpec(
        "one model call's figures (``from_node``, prompt / cached / output tokens, prompt-eval,"
        " decode and lock-wait seconds, finish reason)",
        {"from_node": str},
    ),
    "node_start": EventSpec("a node starts", {"node": str}, log=False, stream=True),
    "node": EventSpec(
        "a node finished (wall time, LLM usage, a summary of its update) or raised (``error``)",
        {"node": str},
        stream=True,
    ),
    "new_best": EventSpec(
        "a new best program", {"iteration": int, "id": str}, log=False, stream=True
    ),
    # gate and knowledge layer
    "gate_decision": EventSpec("the gate's decision and reason", {"iteration": (int, type(None))}),
    "gate_fallback": EventSpec("the gate's reply was unusable: no-op"),
    "gate_error": EventSpec("the gate call failed: no-op"),
    "gate_lookup_fallback": EventSpec("a look-up named no document: no-op"),
    "gate_invalid_ids": EventSpec("a look-up named unknown document ids (dropped)"),
    "queries": EventSpec(
        "the queries of an inner round", {"queries": list}, log=False, stream=True
    ),
    "query_fallback": EventSpec("unusable query-construction output (fallback queries)"),
    "query_error": EventSpec("the query-construction call failed"),
    "search": EventSpec("one search: query, results, cache hit", {"query": str}, stream=True),
    "search_error": EventSpec("a search failed (the round goes on)", {"error": str}),
    "hypothetical_scores": EventSpec("predicted child scores of the round's documents"),
    "score_fallback": EventSpec("unusable scoring output (documents scored by default)"),
    "score_error": EventSpec("the scoring call failed"),
    "rerank": EventSpec("the listwise rerank of the round's documents"),
    "rerank_fallback": EventSpec("unusable rerank output"),
    "rerank_error": EventSpec("the rerank call failed"),
    "retrieve_empty": EventSpec("the inner loop retained no document"),
    "grounding": EventSpec("D_search seeded before iteration 1"),
    "joint_search": EventSpec("searches the generating model made itself"),
    "impact": EventSpec("a realised Δ credited to a D_search record"),
    "inflight_lost": EventSpec(
        "iterations in flight at a kill, started again (``iterations``)", {"iterations": list}
    ),
    # candidates and evaluation
    "novelty_rejected": EventSpec(
        "a child rejected as a near-copy before evaluation", {"candidate_id": str}, stream=True
    ),
    "novelty_error": EventSpec("the novelty check failed (the child is evaluated)"),
    "evaluation_skipped": EventSpec("a program that killed its evaluations is not run again"),
    "tampering": EventSpec("a candidate tried to write outside its sandbox"),
    # scaffolds and review
    "strategy": EventSpec(
        "an EvoX strategy: initial, revised, failed or error", {"status": str, "strategy": dict}
    ),
    "review_pending": EventSpec("a proposal waits for human review"),
    "review": EventSpec("the reviewer's answer"),
    "review_refused": EventSpec("a review answer that does not parse"),
}
"""The event catalogue: every event the package writes, by name (`EventLog.emit` and
`evoduet_graph.nodes._common.emit_progress` refuse another name, and a listed field of the
wrong type)."""


def check_event(event: str, fields: Mapping[str, Any]) -> EventSpec:
    """The catalogue entry of ``event``, after checking its listed fields.

    Raises:
        ValueError: ``event`` is not in `EVENTS`, or a listed field is missing or of the
            wrong type.
    """
    spec = EVENTS.get(event)
    if spec is None:
        raise ValueError(f"unknown event {event!r}: add it to the catalogue (rundir/events.py)")
    for name, kind in spec.fields.items():
        if name not in fields or not isinstance(fields[name], kind):
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

"""Run events: one JSON object per line in ``<run_dir>/events.jsonl`` (DESIGN.md §6).

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
from collections.abc import Callable, Iterator
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
        """Call ``callback(record)`` with every event emitted from now on (under the log's
        lock, in emission order; it must be quick and must not emit)."""
        with self._lock:
            self._subscribers.append(callback)

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event ``{"event": event, "time": unix_s, **fields}`` and return it."""
        record = _jsonable({"event": event, "time": round(time.time(), 3), **fields})
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
    """Repair a last line left without a newline by a killed writer: terminate it when it is a
    complete JSON object, else cut it (a half-written event is dropped, never kept as garbage
    that later appends would follow)."""
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
    """Yield the events of a log, skipping lines that are not complete JSON objects
    (`evoduet_graph.rundir.read.iter_jsonl`)."""
    return iter_jsonl(path)

"""The prompt log: the messages and the reply of every ``generate`` model call.

One JSON object per line in ``<run_dir>/prompts.jsonl``, written by the ``generate`` node
(`evoduet_graph.nodes.generate.draft`) after each model call, so every program in the store can
be shown with the prompt and the reply that produced it (OpenEvolve keeps the same pair per
program with ``log_prompts``; ``evoduet view`` shows it). A line:

``{"time", "iteration", "candidate", "parent", "attempt", "messages": [{"role", "content"}],
"reply", "error"}`` — ``attempt`` is 0, or 1 for the novelty resample (`draft`); ``reply`` is
None and ``error`` the reason when the call failed.

Append-only like the event log: a ``generate`` node replayed after a resume appends its calls
again, and readers keep the last record per candidate and attempt (the replay's, whose child
is the one in the program store). As with the event log, a last line torn by a kill is repaired
when the log is opened again (`evoduet_graph.rundir.events`), and readers skip any line that is
not a JSON object (`evoduet_graph.rundir.read.iter_jsonl`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from evoduet_graph.rundir.events import _repair_torn_tail
from evoduet_graph.rundir.read import iter_jsonl

_ROLES = {"human": "user", "ai": "assistant"}


def message_dicts(messages: Sequence[Any]) -> list[dict[str, str]]:
    """LangChain messages (or ``(role, text)`` pairs, or dicts) as ``{"role", "content"}``.

    Roles are OpenAI's (``system``, ``user``, ``assistant``); a content made of parts keeps
    their text.
    """
    out = []
    for msg in messages:
        if isinstance(msg, dict):
            role, content = str(msg.get("role", "user")), msg.get("content", "")
        elif isinstance(msg, tuple) and len(msg) == 2:
            role, content = str(msg[0]), msg[1]
        else:
            kind = str(getattr(msg, "type", "user"))
            role, content = _ROLES.get(kind, kind), getattr(msg, "content", "")
        if isinstance(content, list):
            content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        out.append({"role": role, "content": str(content)})
    return out


class PromptLog:
    """Thread-safe append-only JSONL log of the ``generate`` calls.

    Args:
        path: the ``prompts.jsonl`` file, or None to keep the records in memory (tests,
            in-memory runs).
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._memory: list[dict[str, Any]] = []
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _repair_torn_tail(self.path)

    def write(
        self,
        *,
        iteration: int,
        candidate: str,
        parent: str | None,
        attempt: int,
        messages: Sequence[Any],
        reply: str | None,
        error: str | None = None,
    ) -> dict[str, Any]:
        """Append the record of one model call and return it."""
        record = {
            "time": round(time.time(), 3),
            "iteration": iteration,
            "candidate": candidate,
            "parent": parent,
            "attempt": attempt,
            "messages": message_dicts(messages),
            "reply": reply,
            "error": error,
        }
        line = json.dumps(record, ensure_ascii=False)
        with self._lock:
            if self.path is None:
                self._memory.append(record)
            else:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
        return record

    def records(self) -> list[dict[str, Any]]:
        """Every record written so far (read back from the file when there is one)."""
        with self._lock:
            if self.path is None:
                return list(self._memory)
        return list(read_prompts(self.path))


def read_prompts(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of a ``prompts.jsonl`` file, skipping lines that are not a JSON object."""
    return iter_jsonl(path)

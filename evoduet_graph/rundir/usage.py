"""LLM usage, sessions (wall time) and completed iterations of a run, computed once from its
events: the budget, the report, the live progress, the bench and the API use these.
"""

from __future__ import annotations

from typing import Any

INCLUSIVE_NODES = frozenset({"retrieve"})
"""Nodes whose wall time and LLM usage include other nodes' (the inner loop runs inside
``retrieve``); they are listed per node but left out of the totals."""


def session_figures(events: list[dict[str, Any]]) -> tuple[int, int, float]:
    """``(sessions, resumed sessions, wall seconds)`` from run_start / run_end and the last
    event of a session that was killed."""
    sessions = resumed = 0
    wall = 0.0
    start: float | None = None
    last: float | None = None
    for ev in events:
        t = ev.get("time")
        if not isinstance(t, int | float):
            continue
        if ev.get("event") == "run_start":
            if start is not None and last is not None:
                wall += max(0.0, last - start)
            sessions += 1
            resumed += bool(ev.get("resumed"))
            start = last = float(t)
            continue
        last = float(t)
        if ev.get("event") == "run_end" and start is not None:
            wall += max(0.0, last - start)
            start = None
    if start is not None and last is not None:
        wall += max(0.0, last - start)
    return sessions, resumed, wall

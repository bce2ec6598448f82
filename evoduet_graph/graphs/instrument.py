"""Node instrumentation: one ``node`` event per execution with wall time and LLM usage.

`instrument` wraps a node function without changing its signature contract
``(state, runtime) -> dict | Command``; the event carries a compact summary of the update
(gate decision, candidates' status and scores, best score) so ``events.jsonl`` tells the story
of a run without the program text (DESIGN.md §6).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.llm.usage import track_node

_SUMMARY_KEYS = (
    "iteration",
    "parent_id",
    "island",
    "gate_decision",
    "gate_reason",
    "best_id",
    "best_score",
    "consecutive_failures",
    "stop_reason",
)


def summarize_update(update: Any) -> dict[str, Any]:
    """The loggable part of a node's return value (ids, scores, decisions; no code)."""
    if not isinstance(update, dict):
        return {}
    summary = {k: update[k] for k in _SUMMARY_KEYS if k in update}
    if update.get("candidates"):
        summary["candidates"] = [
            {k: c.get(k) for k in ("id", "status", "score", "valid", "error")}
            for c in update["candidates"]
        ]
    if update.get("documents"):
        summary["documents"] = [d.get("id") for d in update["documents"]]
    return summary


def instrument(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap node ``fn`` so each call emits ``{"event": "node", "node": name, ...}``.

    The event has ``elapsed_s`` (wall seconds), ``llm_calls``, ``input_tokens``,
    ``output_tokens``, ``llm_latency_s`` and, on failure, ``error`` (the exception is re-raised
    so LangGraph keeps the checkpoint before the failing step).
    """

    @functools.wraps(fn)
    def wrapped(state: Any, runtime: Runtime[Context]) -> Any:
        ctx = runtime.context
        start = time.perf_counter()
        iteration = state.get("iteration") if isinstance(state, dict) else None
        with track_node(name) as usage:
            try:
                update = fn(state, runtime)
            except Exception as exc:
                if ctx is not None:
                    ctx.events.emit(
                        "node",
                        node=name,
                        iteration=iteration,
                        elapsed_s=round(time.perf_counter() - start, 4),
                        error=f"{type(exc).__name__}: {exc}"[:1000],
                    )
                raise
        if ctx is not None:
            summary = summarize_update(update)
            summary.setdefault("iteration", iteration)
            ctx.events.emit(
                "node",
                node=name,
                elapsed_s=round(time.perf_counter() - start, 4),
                llm_calls=usage.calls,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                llm_latency_s=round(usage.latency_s, 3),
                **summary,
            )
        return update

    return wrapped

"""Node instrumentation: one ``node`` event per execution with wall time and LLM usage.

`instrument` wraps a node function without changing its signature contract
``(state, runtime) -> dict | Command``; the event carries a compact summary of the update
(gate decision, candidates' status and scores, best score) so ``events.jsonl`` tells the story
of a run without the program text (docs/design.md §6).

Live progress goes through LangGraph's custom stream (``runtime.stream_writer``; visible with
``graph.stream(..., stream_mode="custom")``, a no-op otherwise): the wrapper writes a
``node_start`` event before each node and, after it, the ``node`` record through the one
`emit` of both sinks: ``events.jsonl`` and the stream get the same fields (with the open
knowledge gap, ``knowledge_gap``, when the node updated the knowledge state, and an inner
node's ``round`` / ``rounds``). Nodes add their own catalogue events
(`evoduet_graph.rundir.events.EVENTS`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.llm.usage import NodeUsage, track_node
from evoduet_graph.nodes._common import emit, emit_progress
from evoduet_graph.prompts import using_templates

__all__ = ["emit_progress", "instrument", "summarize_update"]

_SUMMARY_KEYS = (
    "iteration",
    "parent_id",
    "island",
    "gate_decision",
    "gate_reason",
    "best_id",
    "best_score",
    "consecutive_failures",
    "model_failures",
    "stop_reason",
    "in_flight",
    "iterations_done",
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


def _gap(update: Any) -> str | None:
    """The unresolved knowledge gap of an update that sets ``knowledge_state``."""
    if not isinstance(update, dict) or not isinstance(update.get("knowledge_state"), dict):
        return None
    gap = " ".join(str(update["knowledge_state"].get("unresolved") or "").split())
    return gap[:300] or None


def _emit_calls(ctx: Context, name: str, iteration: Any, usage: NodeUsage) -> None:
    """One ``llm_call`` event per model call node ``name`` made itself.

    One ``llm_call`` event per model call node ``name`` made itself (a nested node's calls,
    e.g. the inner loop's inside ``query_evolution``, are that node's events).
    """
    for call in usage.call_log or ():
        if call.node == name:
            fields = call.as_dict()
            # ``from_node``, not ``node``: readers select node events by their ``node`` field
            fields["from_node"] = fields.pop("node")
            ctx.events.emit("llm_call", iteration=iteration, **fields)


def instrument(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap node ``fn`` so each call emits ``{"event": "node", "node": name, ...}``.

    The event has ``elapsed_s`` (wall seconds), ``llm_calls``, ``input_tokens``,
    ``output_tokens``, ``llm_latency_s``, the `NodeUsage.timing_fields` the model reported
    (``cached_input_tokens``, ``prompt_eval_s``, ``decode_s``, ``lock_wait_s``,
    ``finish_reasons``; each only when non-zero), ``llm_by_model`` (per model name: ``calls``,
    ``input_tokens``, ``output_tokens``; when the node called a model) and, on failure,
    ``error`` (the exception is re-raised
    so LangGraph keeps the checkpoint before the failing step). Before it, one ``llm_call``
    event per model call the node made itself (`evoduet_graph.llm.usage.CallStats`, the node
    named ``from_node``: model, tokens, cached prompt tokens, prompt-evaluation / decode /
    lock-wait seconds, finish reason, latency), so ``events.jsonl`` keeps every call's figures.
    The node ``node_start`` and ``node`` events are also written to the custom
    stream (see the module docstring).
    """

    @functools.wraps(fn)
    def wrapped(state: Any, runtime: Runtime[Context]) -> Any:
        ctx = runtime.context if isinstance(runtime.context, Context) else None
        start = time.perf_counter()
        iteration = state.get("iteration") if isinstance(state, dict) else None
        where: dict[str, Any] = {}
        if isinstance(state, dict) and "rounds" in state:  # an inner-loop node
            where = {"round": state.get("round", 0), "rounds": state.get("rounds")}
        emit_progress(runtime, "node_start", node=name, iteration=iteration, **where)
        templates = ctx.config.prompt.template_dir if ctx is not None else None
        with track_node(name) as usage, using_templates(templates):
            try:
                update = fn(state, runtime)
            except GraphBubbleUp:
                raise  # a pause for human review (interrupt), not a failure of the node
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:1000]
                elapsed = round(time.perf_counter() - start, 4)
                if ctx is not None:
                    _emit_calls(ctx, name, iteration, usage)
                emit(
                    ctx,
                    runtime,
                    "node",
                    node=name,
                    iteration=iteration,
                    elapsed_s=elapsed,
                    error=error,
                    **where,
                )
                raise
        summary = summarize_update(update)
        summary.setdefault("iteration", iteration)
        if ctx is not None:
            _emit_calls(ctx, name, iteration, usage)
        gap = _gap(update)
        usage_fields = usage.event_fields() if ctx is not None else {}
        emit(
            ctx,
            runtime,
            "node",
            node=name,
            elapsed_s=round(time.perf_counter() - start, 4),
            **usage_fields,
            **summary,
            **({"knowledge_gap": gap} if gap else {}),
            **where,
        )
        return update

    return wrapped

"""Helpers shared by the node modules (not nodes themselves)."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.llm import LLMCallError, structured_call
from evoduet_graph.rundir.events import check_event
from evoduet_graph.search.cache import SearchOutcome, cached_search
from evoduet_graph.state import GateDecision, InnerState


def context_of(runtime: Runtime[Context]) -> Context:
    """The run's `Context`, ``runtime.context``.

    The outer graph's nodes see it resolved (`evoduet_graph.graphs.studio_context.bind_context`),
    the inner loop and the in-flight iterations are invoked with it.

    Raises:
        RuntimeError: the graph was invoked without ``context=Context(...)``.
    """
    ctx = runtime.context
    if not isinstance(ctx, Context):
        raise RuntimeError(
            "this graph needs a runtime context: call graph.invoke(..., context=Context(...)) "
            "or use evoduet_graph.run(), which builds it"
        )
    return ctx


def emit_progress(runtime: Any, event: str, **fields: Any) -> None:
    """Write a progress event to LangGraph's custom stream only.

    Write ``{"event": event, "time": unix_s, **fields}`` to LangGraph's custom stream only
    (catalogue events with ``log=False``: ``node_start``, ``queries``, ``new_best``).

    Live progress for ``graph.stream(..., stream_mode="custom")`` (the CLI display, ``--json``);
    a no-op when the graph is not streamed that way or ``runtime`` has no stream writer (a node
    called directly in a test).

    Raises:
        ValueError: ``event`` is not in the catalogue (`evoduet_graph.rundir.events.EVENTS`).
    """
    check_event(event, fields)
    _to_stream(runtime, {"event": event, "time": round(time.time(), 3), **fields})


def _to_stream(runtime: Any, record: dict[str, Any]) -> None:
    writer = getattr(runtime, "stream_writer", None)
    if writer is not None:
        writer(record)


def emit(ctx: Context | None, runtime: Any, event: str, **fields: Any) -> dict[str, Any]:
    """The one emit of an event that goes to both sinks.

    The record ``events.jsonl`` gets is written to the live stream unchanged (same fields, same
    ``time``).

    Args:
        ctx: the run context (None: no log, e.g. a graph without context).
        runtime: the node's runtime (its stream writer, if any).
        event: a catalogue name (`evoduet_graph.rundir.events.EVENTS`).
        **fields: the payload.

    Returns:
        The record written.

    Raises:
        ValueError: ``event`` is not in the catalogue.
    """
    if ctx is not None:
        record = ctx.events.emit(event, **fields)
    else:
        check_event(event, fields)
        record = {"event": event, "time": round(time.time(), 3), **fields}
    _to_stream(runtime, record)
    return record


def ask_gate(
    state: Any, ctx: Context, prompt: str | list[BaseMessage], schema: type[Any]
) -> tuple[Any, dict[str, Any] | None]:
    """One structured gate call on the ``gate`` role's model.

    One structured gate call on the ``gate`` role's model, shared by the knowledge-gap
    gate and the stateless gate (paper §3.2).

    Returns:
        ``(result, None)``: the structured-call result (when the reply was unusable, its
        value is a ``schema`` reply that keeps the default no-op, with a ``gate_fallback``
        event); or ``(None, update)`` when the call failed (``gate_error`` event): the no-op
        state update the node returns as is.
    """
    iteration = state.get("iteration", 0)
    try:
        result = structured_call(
            ctx.model_for("gate"),  # llm.roles: the gate role's model
            prompt,
            schema,
            default=lambda: schema(reasoning="fallback: the gate's reply was unusable"),
            config=ctx.llm_config("gate", iteration=iteration, parent=state.get("parent_id")),
            retry=ctx.llm_retry("gate"),
        )
    except LLMCallError as exc:
        ctx.events.emit("gate_error", iteration=iteration, error=str(exc)[:500])
        return None, {"gate_decision": "no-op", "gate_reason": f"gate call failed: {exc}"[:300]}
    if result.used_default:
        ctx.events.emit("gate_fallback", iteration=iteration, fallbacks=result.fallbacks)
    return result, None


def gate_update(
    ctx: Context, iteration: int, result: Any, decision: GateDecision, document_ids: list[str]
) -> dict[str, Any]:
    """Record a model gate's decision and return its state update.

    The one tail of the knowledge-gap gate and the stateless gate (paper §3.2): the
    ``gate_decision`` event and the update with the decision, the reasoning, the knowledge
    state and the look-up ids (always empty for the stateless gate).

    Args:
        ctx: the run's context (its event log).
        iteration: the outer iteration.
        result: the structured-call result of `ask_gate`; its value is the gate's reply.
        decision: the decision kept (the look-up fallback may have turned it into no-op).
        document_ids: the valid look-up ids (empty unless ``decision == "look-up"``).

    Returns:
        ``gate_decision``, ``gate_reason``, ``knowledge_state`` and ``gate_document_ids``.
    """
    out = result.value
    knowledge = out.as_state()
    ctx.events.emit(
        "gate_decision",
        iteration=iteration,
        decision=decision,
        reasoning=out.reasoning,
        knowledge_state=dict(knowledge),
        document_ids=document_ids,
        method=result.method,
    )
    return {
        "gate_decision": decision,
        "gate_reason": out.reasoning,
        "knowledge_state": knowledge,
        "gate_document_ids": document_ids,
    }


def search_query(ctx: Context, query: str) -> SearchOutcome:
    """One search with the run's retrieval settings behind the run's search cache.

    One search with the run's retrieval settings (results per query, retries, timeout)
    behind the run's search cache (``retrieval.cache``): the one call the ``search``,
    ``joint_search`` and grounding paths share.

    Raises:
        RuntimeError: the context has no search backend (callers check ``ctx.searcher``).
    """
    if ctx.searcher is None:
        raise RuntimeError("no search backend in the runtime context")
    retrieval = ctx.config.retrieval
    return cached_search(
        ctx.searcher,
        ctx.search_cache if retrieval.cache else None,
        query,
        retrieval.results_per_query,
        retries=retrieval.search_retries,
        timeout_s=retrieval.search_timeout_s,
    )


def inner_llm_config(ctx: Context, node: str, state: InnerState) -> RunnableConfig:
    """`Context.llm_config` for the LLM call of an inner-loop node.

    Args:
        ctx: the run's context.
        node: the node (and role) making the call.
        state: the inner loop's state (its ``iteration`` and ``round`` go to the metadata).

    Returns:
        The call's config, with ``decision="retrieve"`` in its metadata.
    """
    return ctx.llm_config(
        node,
        iteration=state["iteration"],
        round=state["round"],
        decision="retrieve",
    )

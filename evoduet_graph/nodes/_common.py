"""Helpers shared by the node modules (not nodes themselves)."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context, resolve_context


def context_of(runtime: Runtime[Context]) -> Context:
    """The run's `Context` (a lazy Studio context is resolved; see `resolve_context`).

    Raises:
        RuntimeError: the graph was invoked without ``context=Context(...)``.
    """
    ctx = resolve_context(runtime.context)
    if ctx is None:
        raise RuntimeError(
            "this graph needs a runtime context: call graph.invoke(..., context=Context(...)) "
            "or use evoduet_graph.run(), which builds it"
        )
    return ctx


def emit_progress(runtime: Any, event: str, **fields: Any) -> None:
    """Write ``{"event": event, "time": unix_s, **fields}`` to LangGraph's custom stream.

    Live progress for ``graph.stream(..., stream_mode="custom")`` (the CLI display, ``--json``);
    a no-op when the graph is not streamed that way or ``runtime`` has no stream writer (a node
    called directly in a test).
    """
    writer = getattr(runtime, "stream_writer", None)
    if writer is not None:
        writer({"event": event, "time": round(time.time(), 3), **fields})

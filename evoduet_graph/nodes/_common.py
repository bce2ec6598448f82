"""Helpers shared by the node modules (not nodes themselves)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from evoduet_graph.context import Context


def context_of(runtime: Runtime[Context]) -> Context:
    """The run's `Context`.

    Raises:
        RuntimeError: the graph was invoked without ``context=Context(...)``.
    """
    ctx = runtime.context
    if ctx is None:
        raise RuntimeError(
            "this graph needs a runtime context: call graph.invoke(..., context=Context(...)) "
            "or use evoduet_graph.run(), which builds it"
        )
    return ctx

"""Graph entry for ``langgraph dev`` / LangGraph Studio (``langgraph.json``).

The server supplies its own checkpointer, so the graph is compiled without one. A run started
from Studio (or any LangGraph SDK client) sends its context as JSON, so this graph's
``context_schema`` is `StudioContext`: JSON fields only (task folder, run directory, config
overrides, model). On the first node call it builds the real `evoduet_graph.context.Context`
— model, sandboxed evaluator, program store, population, search backend — with
`evoduet_graph.api.build_context`, and caches it for the thread (nodes resolve it through
`evoduet_graph.context.resolve_context`, so they keep reading ``runtime.context``).

Example context (the Studio "Context" panel or ``client.runs.wait(..., context=...)``)::

    {"task_dir": "tasks/circle_packing_26",
     "config_file": "configs/evoduet.yaml",
     "config": {"candidates": 2, "retrieval": {"inner_rounds": 2}},
     "model": "openai:gpt-4o-mini"}

The graph input is ``{"max_iterations": N}``.
"""

from evoduet_graph.graphs.outer import build_outer_graph
from evoduet_graph.graphs.studio_context import (
    StudioContext,
    StudioContextError,
    load_model_spec,
)

__all__ = ["StudioContext", "StudioContextError", "build_outer_graph", "graph", "load_model_spec"]

graph = build_outer_graph(context_schema=StudioContext).compile(name="evoduet")

"""The package's default compiled graph.

``evoduet_graph.graph`` and the graph ``langgraph.json`` serves to ``langgraph dev`` / LangGraph
Studio.

It is compiled without a checkpointer (the server supplies its own; in-process, pass one to
``graph.with_config`` / compile your own with `evoduet_graph.build_graph`), and it needs no
hand-built context: the task goes in the input, and the dependencies — model, sandboxed
evaluator, program store, population, search backend — are built from it on the first node
(`evoduet_graph.graphs.studio_context`), on the defaults (the EvoDuet method, the embedded
model, the offline search backend)::

    from evoduet_graph import graph
    state = graph.invoke({"task_dir": "tasks/circle_packing_26", "max_iterations": 3})
    print(state["best_score"], state["run_dir"])

The input may add ``config`` (overrides as nested keys) and ``run_dir``. A run started from
Studio (or any LangGraph SDK client) may instead, or also, send a JSON context
(`StudioContext`: task folder, run directory, config file and overrides, model); the input's
settings win over the context's. Example context (the Studio "Context" panel or
``client.runs.wait(..., context=...)``)::

    {"task_dir": "tasks/circle_packing_26",
     "config_file": "configs/openevolve_mode.yaml",
     "config": {"candidates": 2, "retrieval": {"inner_rounds": 2}},
     "model": "openai:gpt-4o-mini"}

Such runs write their run directory outside the project by default
(`evoduet_graph.graphs.studio_context.runs_root`), where the dev server's file watcher does
not look; the state's ``run_dir`` names it.
"""

from evoduet_graph.graphs.outer import build_outer_graph
from evoduet_graph.graphs.studio_context import (
    StudioContext,
    StudioContextError,
    load_model_spec,
    runs_root,
)

__all__ = [
    "StudioContext",
    "StudioContextError",
    "build_outer_graph",
    "graph",
    "load_model_spec",
    "runs_root",
]

graph = build_outer_graph(context_schema=StudioContext).compile(name="evoduet")

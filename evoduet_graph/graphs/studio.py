"""Graph entry for ``langgraph dev`` / LangGraph Studio (``langgraph.json``).

The server supplies its own checkpointer, so the graph is compiled without one. Runs started
from Studio need a `Context` (model, evaluator, stores); see the README section on Studio.
"""

from __future__ import annotations

from evoduet_graph.graphs.outer import build_outer_graph

graph = build_outer_graph().compile(name="evoduet")

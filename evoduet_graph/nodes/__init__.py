"""Graph nodes, one module per node: ``(state, runtime) -> dict``; dependencies come from
``runtime.context`` (`evoduet_graph.context.Context`)."""

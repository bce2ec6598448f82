"""Graph nodes, one module per node: ``(state, runtime) -> dict``.

Dependencies come from ``runtime.context`` (`evoduet_graph.context.Context`).
"""

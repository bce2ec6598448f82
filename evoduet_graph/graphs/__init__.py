"""Graph builders: the outer solution loop (and the node registry used for ablations)."""

from evoduet_graph.graphs.outer import build_outer_graph, default_nodes

__all__ = ["build_outer_graph", "default_nodes"]

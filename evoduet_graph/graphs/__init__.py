"""Graph builders: the outer loop, the inner loop and their node registry.

Graph builders: the outer solution loop, the inner query loop, and the one node registry
of both (used for ablations).
"""

from evoduet_graph.graphs.outer import GATE_EDGES, build_outer_graph, default_nodes
from evoduet_graph.graphs.registry import (
    INNER_NODES,
    OUTER_NODES,
    UnknownNodeError,
    split_nodes,
)

__all__ = [
    "GATE_EDGES",
    "INNER_NODES",
    "OUTER_NODES",
    "UnknownNodeError",
    "build_outer_graph",
    "default_nodes",
    "split_nodes",
]

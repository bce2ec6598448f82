"""The node registry of both loops.

Every node of the outer (solution) and inner (query) loop by name, so an ablation swaps any of them
with one mapping (docs/design.md §2).

``build_graph(nodes={"gate": my_gate, "search": my_search})`` replaces the outer loop's gate
and the inner loop's search; `split_nodes` checks the names and says which loop each belongs to.
Replacing ``query_evolution`` replaces the whole inner loop (its nodes are then unused).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from evoduet_graph.errors import UserError

END_NODE: Literal["__end__"] = "__end__"
"""LangGraph's ``END``, as the literal a router's return type names (LangGraph types ``END``
as plain ``str``)."""

NodeFn = Callable[..., Any]
"""A node: ``(state, runtime) -> dict | Command`` reading its dependencies from
``runtime.context``."""

OUTER_NODES = (
    "initialize",
    "select",
    "revise_strategy",
    "gate",
    "look_up",
    "query_evolution",
    "generate",
    "evaluate",
    "record",
)
"""Nodes of the outer (solution) loop, in graph order."""

INNER_NODES = ("construct_query", "search", "hypothetical_score", "rerank", "update_knowledge")
"""Nodes of the inner (query-evolution) loop, in round order (`rerank` replaces
`hypothetical_score` with `retrieval.ranking: listwise_rerank`)."""


class UnknownNodeError(UserError, KeyError, ValueError):
    """A node replacement names no node of the graph; the message lists the known names."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


def known_nodes_text() -> str:
    """``outer loop: ...; inner loop: ...`` for error messages."""
    return f"outer loop: {', '.join(OUTER_NODES)}; inner loop: {', '.join(INNER_NODES)}"


def split_nodes(
    nodes: Mapping[str, NodeFn] | None,
) -> tuple[dict[str, NodeFn], dict[str, NodeFn]]:
    """Split node replacements into ``(outer, inner)`` by the loop each name belongs to.

    Raises:
        UnknownNodeError: a name is not a node of either loop (the message lists them).
        TypeError: a replacement is not callable.
    """
    outer: dict[str, NodeFn] = {}
    inner: dict[str, NodeFn] = {}
    for name, fn in (nodes or {}).items():
        if name in OUTER_NODES:
            outer[name] = fn
        elif name in INNER_NODES:
            inner[name] = fn
        else:
            raise UnknownNodeError(f"unknown node {name!r}; known nodes: {known_nodes_text()}")
        if not callable(fn):
            raise TypeError(
                f"node {name!r} must be a function (state, runtime) -> dict, got "
                f"{type(fn).__name__}"
            )
    return outer, inner

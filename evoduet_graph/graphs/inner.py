"""The inner (query-evolution) loop as a LangGraph ``StateGraph`` (docs/design.md §1, paper §3.3).

::

    START → construct_query → search ─┬─ hypothetical_score ─┬─ update_knowledge
                  ↑                    └─ rerank ─────────────┘        │
                  └──────────── round < R ─────────────────────────────┘ → END

R is ``retrieval.inner_rounds`` (``retrieval.query_evolution_steps`` overrides it: 1 = one
round of the same loop). ``retrieval.ranking`` chooses how a round's documents are ranked:
``hypothetical`` (the paper's hypothetical evidence scoring) or ``listwise_rerank`` (the
scaffold's one-call listwise reranker, `evoduet_graph.nodes.rerank`). No candidate is
generated or evaluated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.graphs.instrument import instrument
from evoduet_graph.graphs.registry import (
    END_NODE,
    INNER_NODES,
    NodeFn,
    UnknownNodeError,
    known_nodes_text,
)
from evoduet_graph.nodes.construct_query import construct_query
from evoduet_graph.nodes.hypothetical_score import hypothetical_score
from evoduet_graph.nodes.rerank import rerank
from evoduet_graph.nodes.search import search
from evoduet_graph.nodes.update_knowledge import update_knowledge
from evoduet_graph.state import InnerState

__all__ = ["INNER_NODES", "build_inner_graph", "default_inner_nodes", "route_after_round"]


def default_inner_nodes() -> dict[str, NodeFn]:
    """The inner node registry: name → node function."""
    return {
        "construct_query": construct_query,
        "search": search,
        "hypothetical_score": hypothetical_score,
        "rerank": rerank,
        "update_knowledge": update_knowledge,
    }


def route_after_round(state: InnerState) -> Literal["construct_query", "__end__"]:
    """Another round while ``round < rounds``."""
    return "construct_query" if state["round"] < state["rounds"] else END_NODE


def route_after_search(
    state: InnerState, runtime: Runtime[Context]
) -> Literal["rerank", "hypothetical_score"]:
    """``rerank`` when ``retrieval.ranking`` is ``listwise_rerank``, else ``hypothetical_score``."""
    ctx = runtime.context
    if isinstance(ctx, Context) and ctx.config.retrieval.ranking == "listwise_rerank":
        return "rerank"
    return "hypothetical_score"


def build_inner_graph(
    nodes: Mapping[str, NodeFn] | None = None, *, instrumented: bool = True
) -> StateGraph[InnerState, Context, InnerState, InnerState]:
    """Build the uncompiled inner graph over `InnerState` with ``context_schema=Context``.

    Args:
        nodes: replacements of inner-loop nodes by name (`INNER_NODES`); to swap nodes of both
            loops at once use `evoduet_graph.build_graph` (one registry).
        instrumented: wrap each node so it writes a ``node`` event.

    Raises:
        UnknownNodeError: a replacement names no node of the inner loop (the message lists
            the nodes of both loops).
    """
    registry = default_inner_nodes()
    for name, fn in (nodes or {}).items():
        if name not in registry:
            raise UnknownNodeError(
                f"unknown node {name!r} for the inner loop; known nodes: {known_nodes_text()}"
            )
        registry[name] = fn
    graph = StateGraph(InnerState, context_schema=Context)
    for name, fn in registry.items():
        graph.add_node(name, instrument(name, fn) if instrumented else fn)
    graph.add_edge(START, "construct_query")
    graph.add_edge("construct_query", "search")
    graph.add_conditional_edges("search", route_after_search, ["hypothetical_score", "rerank"])
    graph.add_edge("hypothetical_score", "update_knowledge")
    graph.add_edge("rerank", "update_knowledge")
    graph.add_conditional_edges("update_knowledge", route_after_round, ["construct_query", END])
    return graph

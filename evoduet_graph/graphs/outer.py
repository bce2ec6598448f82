"""The outer (solution) loop as a LangGraph ``StateGraph`` (DESIGN.md §1).

::

    START → initialize → select → gate ─┬─ no-op ────────────────┬─→ generate ×N (Send)
                                         ├─ look-up → look_up ────┤        ↓
                                         └─ retrieve → retrieve ──┘     evaluate → record
                                                                            ↓
                                              (iteration < max and no stop) ? select : END

Every node is looked up in a registry so ablations swap any of them:
``build_outer_graph(nodes={"gate": my_gate})``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from evoduet_graph.context import Context, resolve_context
from evoduet_graph.graphs.inner import build_inner_graph
from evoduet_graph.graphs.instrument import instrument
from evoduet_graph.nodes.evaluate import evaluate
from evoduet_graph.nodes.gate import gate
from evoduet_graph.nodes.generate import generate
from evoduet_graph.nodes.initialize import initialize
from evoduet_graph.nodes.look_up import look_up
from evoduet_graph.nodes.record import record
from evoduet_graph.nodes.retrieve import make_retrieve
from evoduet_graph.nodes.select import select
from evoduet_graph.state import GenerateInput, OuterInput, OuterState

NodeFn = Callable[..., Any]


def default_nodes(inner_nodes: Mapping[str, NodeFn] | None = None) -> dict[str, NodeFn]:
    """The node registry: name → node function. Copy and edit it to build an ablation.

    Args:
        inner_nodes: replacements for the inner loop's nodes (see `build_inner_graph`).
    """
    inner = build_inner_graph(inner_nodes).compile(name="query_evolution")
    return {
        "initialize": initialize,
        "select": select,
        "gate": gate,
        "look_up": look_up,
        "retrieve": make_retrieve(inner),
        "generate": generate,
        "evaluate": evaluate,
        "record": record,
    }


def fan_out(state: OuterState, runtime: Runtime[Context]) -> list[Send]:
    """One ``Send("generate", GenerateInput)`` per candidate slot; each carries the parent,
    inspirations, evidence and the scaffold's ``mutation_instruction``.

    N is ``config.candidates``, or ``config.candidates_after_retrieval`` (when set) after a
    ``retrieve`` / ``look-up`` decision (DESIGN.md §1 parallel mode).
    """
    ctx = resolve_context(runtime.context)
    n = ctx.config.candidates if ctx is not None else 1
    after = ctx.config.candidates_after_retrieval if ctx is not None else None
    if after is not None and state.get("gate_decision") in ("retrieve", "look-up"):
        n = after
    return [
        Send(
            "generate",
            GenerateInput(
                iteration=state["iteration"],
                index=i,
                parent_id=state["parent_id"] or "",
                inspiration_ids=list(state.get("inspiration_ids", [])),
                documents=list(state.get("documents", [])),
                mutation_instruction=state.get("mutation_instruction") or "",
            ),
        )
        for i in range(n)
    ]


def route_after_gate(state: OuterState, runtime: Runtime[Context]) -> Any:
    """``look-up`` → look_up, ``retrieve`` → retrieve, ``no-op`` → the generate fan-out."""
    decision = state.get("gate_decision")
    if decision == "look-up":
        return "look_up"
    if decision == "retrieve":
        return "retrieve"
    return fan_out(state, runtime)


def route_after_record(state: OuterState) -> str:
    """Continue with ``select`` until ``max_iterations`` or a ``stop_reason``."""
    if state.get("stop_reason"):
        return END
    if state.get("iteration", 0) >= state.get("max_iterations", 0):
        return END
    return "select"


def route_after_initialize(state: OuterState) -> str:
    """Skip the loop when nothing is left to do (e.g. ``iterations: 0``)."""
    return route_after_record(state)


def build_outer_graph(
    nodes: Mapping[str, NodeFn] | None = None,
    *,
    inner_nodes: Mapping[str, NodeFn] | None = None,
    instrumented: bool = True,
    context_schema: type[Any] = Context,
) -> StateGraph:
    """Build the uncompiled outer graph.

    Args:
        nodes: replacements for registry entries (unknown names raise ``KeyError``).
        inner_nodes: replacements for the inner query-evolution nodes.
        instrumented: wrap each node so it writes a ``node`` event (wall time, LLM usage).
        context_schema: the type of ``runtime.context``: `Context`, or a lazy factory such as
            `evoduet_graph.graphs.studio.StudioContext` (JSON fields; see `resolve_context`).

    Returns:
        A `StateGraph` over `OuterState` with ``context_schema=Context``; compile it with any
        checkpointer and call ``graph.invoke({"max_iterations": n}, context=ctx)``.

    Raises:
        KeyError: a replacement names a node that does not exist.
    """
    registry = default_nodes(inner_nodes)
    for name, fn in (nodes or {}).items():
        if name not in registry:
            raise KeyError(f"unknown node {name!r}; known nodes: {sorted(registry)}")
        registry[name] = fn
    wrap = instrument if instrumented else (lambda _name, fn: fn)
    graph = StateGraph(OuterState, context_schema=context_schema, input_schema=OuterInput)
    for name, fn in registry.items():
        graph.add_node(name, wrap(name, fn))
    graph.add_edge(START, "initialize")
    graph.add_conditional_edges("initialize", route_after_initialize, ["select", END])
    graph.add_edge("select", "gate")
    graph.add_conditional_edges("gate", route_after_gate, ["look_up", "retrieve", "generate"])
    graph.add_conditional_edges("look_up", fan_out, ["generate"])
    graph.add_conditional_edges("retrieve", fan_out, ["generate"])
    graph.add_edge("generate", "evaluate")
    graph.add_edge("evaluate", "record")
    graph.add_conditional_edges("record", route_after_record, ["select", END])
    return graph

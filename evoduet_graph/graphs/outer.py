"""The outer (solution) loop as a LangGraph ``StateGraph`` (docs/design.md §1).

::

    START → initialize → select → gate ─┬─ no-op ───────────────────────┬─→ generate ×N (Send)
                   (evox) ↓         ↑    ├─ look-up → look_up ───────────┤        ↓
                      revise_strategy    └─ retrieve → query_evolution ──┘     evaluate → record
                                                                            ↓
                                              (iteration < max and no stop) ? select : END

With ``max_iterations_in_flight`` = k > 1, ``initialize`` and ``record`` lead to ``dispatch``
instead of ``select``: ``dispatch`` runs ``select`` for up to k iterations and starts each one's
gate → … → evaluate (the *iteration graph*, `build_iteration_graph`, made of the same nodes) in
the background; ``collect`` takes the first that finishes and ``record`` commits it
(`evoduet_graph.inflight` says why this shape).

``revise_strategy`` runs only when the EvoX scaffold's strategy has stagnated
(`route_after_select`); every LLM call is a node.

The gate's three conditional edges carry the paper's decision names (§3.2) as labels through
a path map (`GATE_EDGES`), so Studio and ``evoduet graph`` draw them; the ``retrieve`` decision
leads to the ``query_evolution`` node, which runs the inner loop. Every node of both
loops is looked up in one registry (`evoduet_graph.graphs.registry`) so ablations swap any of
them by name: ``build_outer_graph(nodes={"gate": my_gate, "search": my_search})``.

Every node and every router that reads the context is wrapped by `bind_context`, so all of them
read the run's `Context` from ``runtime.context``: a graph invoked with a task in its input
(``{"task_dir": ..., "max_iterations": 3}``) and no context builds its dependencies from it,
once per run.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from evoduet_graph.context import Context
from evoduet_graph.graphs.inner import build_inner_graph
from evoduet_graph.graphs.instrument import instrument
from evoduet_graph.graphs.registry import END_NODE, NodeFn, split_nodes
from evoduet_graph.graphs.studio_context import bind_context, input_settings
from evoduet_graph.nodes.collect import collect
from evoduet_graph.nodes.dispatch import make_dispatch
from evoduet_graph.nodes.evaluate import evaluate
from evoduet_graph.nodes.gate import gate
from evoduet_graph.nodes.generate import generate
from evoduet_graph.nodes.initialize import initialize
from evoduet_graph.nodes.look_up import look_up
from evoduet_graph.nodes.record import record
from evoduet_graph.nodes.retrieve import make_retrieve
from evoduet_graph.nodes.revise_strategy import revise_strategy
from evoduet_graph.nodes.select import select
from evoduet_graph.state import GateDecision, GenerateInput, OuterInput, OuterState

__all__ = [
    "GATE_EDGES",
    "NodeFn",
    "OuterStateGraph",
    "build_iteration_graph",
    "build_outer_graph",
    "default_nodes",
    "fan_out",
    "route_after_gate",
    "route_after_select",
]

GATE_EDGES: dict[GateDecision, str] = {
    "no-op": "generate",
    "look-up": "look_up",
    "retrieve": "query_evolution",
}
"""The gate's conditional edges: decision (the edge's label) → the node it leads to.

Each node is named differently from the decision that leads to it: LangGraph's drawing leaves
out a path-map label equal to its target's name, so a node called ``retrieve`` would leave the
``retrieve`` edge unlabelled in Studio and ``evoduet graph``."""


class OuterStateGraph(StateGraph[OuterState, Any, OuterInput, OuterState]):
    """`StateGraph` of the outer loop (a named type for the builders' signatures)."""


def default_nodes(inner_nodes: Mapping[str, NodeFn] | None = None) -> dict[str, NodeFn]:
    """The outer loop's nodes by name; ``query_evolution`` wraps the compiled inner loop.

    Copy and edit it to build an ablation, or pass replacements of either loop to
    `build_outer_graph`.

    Args:
        inner_nodes: replacements for the inner loop's nodes (see `build_inner_graph`).
    """
    inner = build_inner_graph(inner_nodes).compile(name="query_evolution")
    return {
        "initialize": initialize,
        "select": select,
        "revise_strategy": revise_strategy,
        "gate": gate,
        "look_up": look_up,
        "query_evolution": make_retrieve(inner),
        "generate": generate,
        "evaluate": evaluate,
        "record": record,
    }


def fan_out(state: OuterState, runtime: Runtime[Context]) -> list[Send]:
    """One ``Send("generate", GenerateInput)`` per candidate slot.

    Each carries the parent, inspirations, evidence and the scaffold's ``mutation_instruction``.

    N is ``config.candidates``, or ``config.candidates_after_retrieval`` (when set) after a
    ``retrieve`` / ``look-up`` decision (docs/design.md §1: "N may be larger after a retrieve or
    look-up"). The run settings of a graph input (``task_dir``, ``run_dir``, ``config``) travel
    with each payload, so the ``generate`` nodes resolve the same context.
    """
    ctx = runtime.context
    resolved = isinstance(ctx, Context)
    n = ctx.config.candidates if resolved else 1
    after = ctx.config.candidates_after_retrieval if resolved else None
    if after is not None and state.get("gate_decision") in ("retrieve", "look-up"):
        n = after
    settings = input_settings(state)
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
                **settings,  # type: ignore[typeddict-item]
            ),
        )
        for i in range(n)
    ]


def route_after_gate(
    state: OuterState, runtime: Runtime[Context]
) -> Literal["look-up", "retrieve"] | list[Send]:
    """The gate's decision as the label of the edge taken (`GATE_EDGES`).

    ``look-up`` → look_up, ``retrieve`` → query_evolution, ``no-op`` → the ``generate`` fan-out
    (its Sends go straight to ``generate``, the node the ``no-op`` edge leads to).
    """
    decision = state.get("gate_decision")
    if decision in ("look-up", "retrieve"):
        return decision
    return fan_out(state, runtime)


def route_after_select(state: OuterState) -> Literal["revise_strategy", "gate"]:
    """Through ``revise_strategy`` when ``select`` found the EvoX strategy stagnated."""
    return "revise_strategy" if state.get("strategy_revision") is not None else "gate"


def in_flight_limit(state: OuterState, runtime: Runtime[Context] | None) -> int:
    """k, the run's ``max_iterations_in_flight`` (1 without a context)."""
    ctx = runtime.context if runtime is not None else None
    return ctx.config.max_iterations_in_flight if isinstance(ctx, Context) else 1


def route_after_record(
    state: OuterState, runtime: Runtime[Context] | None = None
) -> Literal["select", "dispatch", "__end__"]:
    """Continue with ``select`` until ``max_iterations`` or a ``stop_reason``.

    With ``max_iterations_in_flight`` > 1 always ``dispatch`` (which ends the run when nothing is
    left in flight or to start).
    """
    if in_flight_limit(state, runtime) > 1:
        return "dispatch"
    if state.get("stop_reason"):
        return END_NODE
    if state["iteration"] >= state["max_iterations"]:
        return END_NODE
    return "select"


def route_after_initialize(
    state: OuterState, runtime: Runtime[Context] | None = None
) -> Literal["select", "dispatch", "__end__"]:
    """Skip the loop when nothing is left to do (e.g. ``iterations: 0``)."""
    return route_after_record(state, runtime)


def route_after_dispatch(state: OuterState) -> Literal["collect", "__end__"]:
    """``collect`` while an iteration is in flight, else the run ends."""
    return "collect" if state.get("in_flight") else END_NODE


def route_after_collect(state: OuterState) -> Literal["record", "dispatch"]:
    """``record`` the iteration ``collect`` took.

    None (a resumed run whose iterations in flight were lost): back to ``dispatch``, which starts
    them again.
    """
    return "record" if state.get("collected") is not None else "dispatch"


def _add_iteration_edges(graph: OuterStateGraph) -> None:
    """Gate → look_up | query_evolution | generate ×N → evaluate: the body both graphs share."""
    path_map: dict[Hashable, str] = {decision: node for decision, node in GATE_EDGES.items()}
    graph.add_conditional_edges("gate", bind_context(route_after_gate), path_map)
    graph.add_conditional_edges("look_up", bind_context(fan_out), ["generate"])
    graph.add_conditional_edges("query_evolution", bind_context(fan_out), ["generate"])
    graph.add_edge("generate", "evaluate")


def build_iteration_graph(
    nodes: Mapping[str, NodeFn], *, context_schema: type[Any] = Context
) -> OuterStateGraph:
    """The body of one iteration after ``select``.

    Gate → look_up | query_evolution → generate ×N → evaluate → END, over `OuterState`; what
    each in-flight iteration runs when ``max_iterations_in_flight`` > 1.

    Args:
        nodes: the outer graph's nodes as it runs them (wrapped), by name.
        context_schema: as in `build_outer_graph`.
    """
    graph = OuterStateGraph(OuterState, context_schema=context_schema)
    for name in ("gate", "look_up", "query_evolution", "generate", "evaluate"):
        graph.add_node(name, nodes[name])
    graph.add_edge(START, "gate")
    _add_iteration_edges(graph)
    graph.add_edge("evaluate", END)
    return graph


def build_outer_graph(
    nodes: Mapping[str, NodeFn] | None = None,
    *,
    instrumented: bool = True,
    context_schema: type[Any] = Context,
) -> OuterStateGraph:
    """Build the uncompiled outer graph.

    Args:
        nodes: replacements of nodes of either loop by name (`OUTER_NODES` and
            `INNER_NODES` of `evoduet_graph.graphs.registry`).
        instrumented: wrap each node so it writes a ``node`` event (wall time, LLM usage).
        context_schema: the type of ``runtime.context``: `Context`, or a lazy factory such as
            `evoduet_graph.graphs.studio.StudioContext` (JSON fields; see
            `evoduet_graph.graphs.studio_context.context_for`).

    Returns:
        A `StateGraph` over `OuterState`; compile it with any checkpointer and call
        ``graph.invoke({"max_iterations": n}, context=ctx)``, or name the task in the input
        (``{"task_dir": ..., "max_iterations": n}``) and pass no context.

    Raises:
        UnknownNodeError: a replacement names no node of either loop (the message lists them).
    """
    outer, inner = split_nodes(nodes)
    registry = default_nodes(inner)
    registry.update(outer)
    wrap = instrument if instrumented else (lambda _name, fn: fn)
    graph = OuterStateGraph(OuterState, context_schema=context_schema, input_schema=OuterInput)
    wrapped = {name: bind_context(wrap(name, fn)) for name, fn in registry.items()}
    # checkpointer=False: an in-flight iteration keeps no checkpoint of its own (a kill
    # restarts it) and LangGraph does not take it for a subgraph of ``dispatch``
    iteration = build_iteration_graph(wrapped, context_schema=context_schema).compile(
        checkpointer=False, name="iteration"
    )
    dispatch = make_dispatch(iteration, wrapped["select"], wrapped.get("revise_strategy"))
    wrapped["dispatch"] = bind_context(wrap("dispatch", dispatch))
    wrapped["collect"] = bind_context(wrap("collect", collect))
    for name, fn in wrapped.items():
        graph.add_node(name, fn)
    graph.add_edge(START, "initialize")
    graph.add_conditional_edges(
        "initialize", bind_context(route_after_initialize), ["select", "dispatch", END]
    )
    graph.add_conditional_edges("select", route_after_select, ["revise_strategy", "gate"])
    graph.add_edge("revise_strategy", "gate")
    _add_iteration_edges(graph)
    graph.add_edge("evaluate", "record")
    graph.add_conditional_edges(
        "record", bind_context(route_after_record), ["select", "dispatch", END]
    )
    graph.add_conditional_edges("dispatch", route_after_dispatch, ["collect", END])
    graph.add_conditional_edges("collect", route_after_collect, ["record", "dispatch"])
    return graph

"""``dispatch`` node (``max_iterations_in_flight`` = k > 1): keep k iterations in flight.

Each new iteration gets its number, its parent from ``select`` (run here, on the graph's own
thread, against the population as recorded so far) and starts in the background
(`evoduet_graph.inflight.IterationPool`) with the iteration graph gate → look_up |
retrieve → generate → evaluate. Iterations the state lists as in flight but no worker runs (a
kill) are started again first, under the same numbers, so the recorded iterations stay
1..``max_iterations`` with none lost or doubled. A ``stop_reason`` stops dispatching; the
iterations in flight still finish and are recorded. Source: OpenEvolve's
``ProcessParallelController`` (``_submit_iteration``: the controller samples parent and
inspirations and submits the iteration with a database snapshot; a new one is submitted
after each completion).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.config import graph_concurrency
from evoduet_graph.context import Context
from evoduet_graph.inflight import ITERATION_DEFAULTS, IterationPool, iteration_payload
from evoduet_graph.nodes._common import context_of
from evoduet_graph.population import Population
from evoduet_graph.state import OuterState


def iteration_run_config(ctx: Context) -> dict[str, Any]:
    """LangGraph run config of one in-flight iteration (its N ``generate`` nodes' threads)."""
    return {"max_concurrency": graph_concurrency(ctx.config), "recursion_limit": 100}


def pool_for(ctx: Context, iteration_graph: Any) -> IterationPool:
    """The run's `IterationPool`, made on first use and kept on ``ctx.inflight``."""
    if ctx.inflight is None:
        ctx.inflight = IterationPool(
            iteration_graph, ctx.config.max_iterations_in_flight, iteration_run_config(ctx)
        )
    pool: IterationPool = ctx.inflight
    return pool


def snapshot_population(ctx: Context) -> Population:
    """A private copy of the run's population for one in-flight iteration.

    The copy shares the program store (its code getter is a bound method of the store), so
    only the population's own tables are duplicated: a few KB per program id.
    """
    memo: dict[int, Any] = {id(ctx.store): ctx.store, id(ctx.events): ctx.events}
    return copy.deepcopy(ctx.population, memo)


def iteration_context(ctx: Context) -> Context:
    """The context one in-flight iteration runs with: the run's, on a population snapshot."""
    return dataclasses.replace(ctx, population=snapshot_population(ctx))


def make_dispatch(
    iteration_graph: Any,
    select: Callable[..., Any],
    revise_strategy: Callable[..., Any] | None = None,
) -> Callable[..., Any]:
    """Build the ``dispatch`` node.

    Args:
        iteration_graph: the compiled iteration graph (no checkpointer).
        select: the registry's ``select`` node as the outer graph runs it (instrumented).
        revise_strategy: the registry's ``revise_strategy`` node (instrumented), run on the
            graph thread right after ``select`` when ``select`` found the EvoX strategy
            stagnated, as the sequential loop's ``select`` → ``revise_strategy`` edge does.
    """

    def dispatch(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
        """Top the iterations in flight up to k.

        Returns:
            ``in_flight`` (numbers started and not collected), ``issued`` (highest number
            started), ``reissue`` (numbers lost in flight and not restarted: a run that
            stopped keeps them for its continuation), the scaffold's state keys ``select``
            wrote (EvoX strategy), and resets of ``candidates`` / ``collected``.
        """
        ctx = context_of(runtime)
        pool = pool_for(ctx, iteration_graph)
        total = (
            ctx.max_iterations if ctx.max_iterations is not None else state.get("max_iterations", 0)
        )
        running = pool.pending()
        in_flight = [i for i in state.get("in_flight", []) if i in running]
        lost = [i for i in state.get("in_flight", []) if i not in running]
        reissue = sorted({*state.get("reissue", []), *lost})
        issued = state.get("issued", state.get("iteration", 0))
        if lost:
            ctx.events.emit("inflight_lost", iterations=lost)
        update: dict[str, Any] = {"candidates": None, "collected": None}
        current: dict[str, Any] = dict(state)
        while not state.get("stop_reason") and len(in_flight) < pool.workers:
            if reissue and reissue[0] <= total:
                number = reissue.pop(0)
            elif issued < total:
                issued += 1
                number = issued
            else:
                break
            selected = select({**current, "iteration": number - 1}, runtime)
            if revise_strategy is not None and selected.get("strategy_revision") is not None:
                revised = revise_strategy({**current, **selected, "iteration": number}, runtime)
                selected = {**selected, **(revised or {})}
            scaffold = {k: v for k, v in selected.items() if k not in ITERATION_DEFAULTS}
            current.update(scaffold)  # EvoX: the next select sees the strategy it left
            update.update(scaffold)
            pool.submit(number, iteration_payload(current, selected), iteration_context(ctx))
            in_flight.append(number)
        update.update(in_flight=in_flight, issued=issued, reissue=reissue)
        return update

    dispatch.__name__ = "dispatch"
    return dispatch

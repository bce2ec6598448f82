"""``collect`` node (``max_iterations_in_flight`` = k > 1): take the next finished iteration.

Waits for the first of the iterations in flight to finish (forwarding their live progress to
the run's custom stream meanwhile) and puts its per-iteration values (parent, gate decision,
knowledge state, documents, evidence record, candidates) into the graph state, where the
unchanged ``record`` node commits it. The checkpoint written after this step holds the
finished iteration, so a kill after it loses nothing of it. See
`evoduet_graph.inflight`.
"""

from __future__ import annotations

import copy
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.inflight import ITERATION_DEFAULTS
from evoduet_graph.nodes._common import context_of
from evoduet_graph.state import OuterState


def collect(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Take the next finished iteration.

    Returns:
        The finished iteration's per-iteration keys, ``in_flight`` without it, ``collected``
        (its number) and ``iterations_done`` + 1; or ``{"collected": None}`` when none of the
        iterations in flight runs here (a resumed run: ``dispatch`` starts them again).

    Raises:
        Exception: what the finished iteration raised (the run stops, resumably).
    """
    ctx = context_of(runtime)
    pool = ctx.inflight
    wanted = list(state.get("in_flight", []))
    if pool is None or not set(wanted) & pool.pending():
        return {"collected": None}
    number, values = pool.next_result(wanted, getattr(runtime, "stream_writer", None))
    update: dict[str, Any] = {
        key: values.get(key, copy.copy(default)) for key, default in ITERATION_DEFAULTS.items()
    }
    update.update(
        iteration=number,
        in_flight=[i for i in wanted if i != number],
        collected=number,
        iterations_done=state.get("iterations_done", 0) + 1,
    )
    return update

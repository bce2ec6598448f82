"""A replacement node: a gate that retrieves on odd iterations and goes on without on even ones.

Pass it to `evoduet_graph.run` (or `build_graph`) under the name of the node it replaces:
``run(task, config, nodes={"gate": alternating_gate})``.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.state import OuterState


def alternating_gate(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Decide ``retrieve`` on odd iterations and ``no-op`` on even ones.

    Args:
        state: the outer state; ``iteration`` is the iteration this decision is for.
        runtime: the run's runtime; ``runtime.context`` holds every dependency (config, model,
            search database, event log), as for the built-in nodes.

    Returns:
        The gate's channels: ``gate_decision`` (read by the edge after the gate) and
        ``gate_reason`` (kept in the checkpoint and the report).
    """
    iteration = state["iteration"]
    decision = "retrieve" if iteration % 2 else "no-op"
    return {"gate_decision": decision, "gate_reason": f"iteration {iteration}: {decision}"}

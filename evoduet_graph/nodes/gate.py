"""``gate`` node: the retrieval gate (paper §3.2, DESIGN.md §1).

Decides each iteration whether the model goes on with its own knowledge (``no-op``), reuses
stored documents (``look-up``) or runs the inner query-evolution loop (``retrieve``).

Rule-based ablation modes live here: ``never`` (always no-op), ``always`` (always retrieve),
``heuristic`` (retrieve with probability ``gate.retrieve_probability``, seeded per iteration)
and ``stagnation`` (retrieve after ``gate.stagnation_patience`` iterations without a new best).
The ``llm`` mode (knowledge-state gate) is provided by the world-knowledge layer.
"""

from __future__ import annotations

import random
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import context_of
from evoduet_graph.state import GateDecision, OuterState


def rule_decision(state: OuterState, ctx: Context) -> tuple[GateDecision, str]:
    """Decision of the rule-based gate modes.

    Raises:
        ValueError: for ``gate.mode == "llm"``, which is not rule-based.
    """
    gate = ctx.config.gate
    iteration = state.get("iteration", 0)
    if gate.mode == "never":
        return "no-op", "gate mode never"
    if gate.mode == "always":
        return "retrieve", "gate mode always"
    if gate.mode == "heuristic":
        draw = random.Random(f"{ctx.config.seed}:gate:{iteration}").random()
        decision: GateDecision = "retrieve" if draw < gate.retrieve_probability else "no-op"
        return decision, f"heuristic draw {draw:.3f} vs p={gate.retrieve_probability}"
    if gate.mode == "stagnation":
        stale = iteration - 1 - state.get("last_improvement_iteration", 0)
        if stale >= gate.stagnation_patience:
            return "retrieve", f"{stale} iterations without improvement"
        return "no-op", f"{stale} iterations without improvement"
    raise ValueError(f"gate mode {gate.mode!r} is not rule-based")


def gate(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Decide this iteration's knowledge action.

    Returns:
        ``gate_decision`` and ``gate_reason``.
    """
    ctx = context_of(runtime)
    decision, reason = rule_decision(state, ctx)
    return {"gate_decision": decision, "gate_reason": reason}

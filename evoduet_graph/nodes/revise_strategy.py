"""``revise_strategy`` node: the EvoX strategy revision, between ``select`` and ``gate``.

With ``scaffold: evox`` the ``select`` node marks a revision as due (``strategy_revision``:
the number of iterations without a new best) once the active strategy has stagnated for
``evox.strategy_patience`` iterations; the graph then routes through this node, which makes
the one structured LLM call (`evoduet_graph.scaffolds.evox.revise`, prompt
``evox_strategy.md``) and applies the new strategy's parent rule to this iteration with the
same random generator ``select`` used, so the iteration chooses exactly what a revision inside
``select`` would have. Other scaffolds never route here.

Being a node, the call is visible in Studio and replay-safe through the checkpoint: once the
node has finished its answer is in the checkpoint, and a resumed run does not ask again.
"""

from __future__ import annotations

import random
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import context_of
from evoduet_graph.scaffolds.evox import StrategyRevision, revise, select_by_rule
from evoduet_graph.state import OuterState


def revise_strategy(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Revise the stagnated EvoX strategy and re-select this iteration's parent by its rule.

    Returns:
        ``strategy``, ``strategy_history``, ``strategy_revision`` (cleared) and, from the
        strategy in force after the call, ``parent_id``, ``inspiration_ids``, ``island`` and
        ``mutation_instruction``; nothing when no revision is due.

    Raises:
        EmptyPopulationError: the population holds no program.
    """
    stale = state.get("strategy_revision")
    current = state.get("strategy")
    if stale is None or current is None:
        return {}
    ctx = context_of(runtime)
    iteration = state["iteration"]
    history = list(state.get("strategy_history") or [])
    strategy, history = revise(state, ctx, StrategyRevision(iteration, current, history, stale))
    rng = random.Random(f"{ctx.config.seed}:select:{iteration}")  # select's generator
    chosen = select_by_rule(strategy["parent_rule"], ctx, rng)
    code_id = ctx.population.code_id
    return {
        "strategy": strategy,
        "strategy_history": history,
        "strategy_revision": None,
        "parent_id": code_id(chosen.parent_id),
        "inspiration_ids": list(dict.fromkeys(code_id(i) for i in chosen.inspiration_ids)),
        "island": chosen.island,
        "mutation_instruction": strategy["instruction"],
    }

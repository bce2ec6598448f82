"""``select`` node: choose the parent, inspirations and prompt of an iteration.

``select`` node: start an iteration by choosing a parent, inspirations and what the
mutation prompt asks for.

The choice is the scaffold's (``config.scaffold``, `evoduet_graph.scaffolds`): OpenEvolve's
MAP-Elites island sampling (default), uniform top-k, best-of-N, or the EvoX strategy loop.
The random generator is derived from ``(seed, iteration)`` and any scaffold state (the EvoX
strategy) lives in the checkpointed graph state, so a resumed run selects exactly what the
uninterrupted run would have. This is the only node that differs between scaffolds.
"""

from __future__ import annotations

import random
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import context_of
from evoduet_graph.scaffolds import scaffold_for
from evoduet_graph.state import OuterState


def select(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Begin iteration ``state["iteration"] + 1``.

    Ids are program-store ids: a migrant copy on another island (``p@i2``) is mapped to the
    program it copies (`Population.code_id`).

    Returns:
        ``iteration``, ``parent_id``, ``inspiration_ids``, ``island``,
        ``mutation_instruction`` (the scaffold's text for the mutation prompt, ``""`` for
        none), the scaffold's own state keys (EvoX: ``strategy``, ``strategy_history``), and
        resets of the per-iteration channels (``candidates``, ``documents``,
        ``gate_decision``).

    Raises:
        EmptyPopulationError: the population holds no program (``initialize`` did not run).
    """
    ctx = context_of(runtime)
    iteration = state.get("iteration", 0) + 1  # 0: before initialize (a test, an ablation)
    rng = random.Random(f"{ctx.config.seed}:select:{iteration}")
    choice = scaffold_for(ctx).select(state, ctx, rng, iteration)
    code_id = ctx.population.code_id
    return {
        "iteration": iteration,
        "parent_id": code_id(choice.parent_id),
        "inspiration_ids": list(dict.fromkeys(code_id(i) for i in choice.inspiration_ids)),
        "island": choice.island,
        "mutation_instruction": choice.instruction,
        **choice.update,
        "candidates": None,
        "documents": [],
        "gate_document_ids": [],
        "evidence_record_id": None,
        "gate_decision": None,
        "gate_reason": "",
    }

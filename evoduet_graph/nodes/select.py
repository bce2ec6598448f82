"""``select`` node: start an iteration by sampling a parent and inspirations.

Parent selection follows the population's policy (OpenEvolve MAP-Elites islands: exploration /
exploitation / weighted; or top-k). The random generator is derived from ``(seed, iteration)``
so a resumed run selects exactly what the uninterrupted run would have.
"""

from __future__ import annotations

import random
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import context_of
from evoduet_graph.state import OuterState


def select(state: OuterState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Begin iteration ``state["iteration"] + 1``.

    Ids are program-store ids: a migrant copy on another island (``p@i2``) is mapped to the
    program it copies (`Population.code_id`).

    Returns:
        ``iteration``, ``parent_id``, ``inspiration_ids``, ``island``, and resets of the
        per-iteration channels (``candidates``, ``documents``, ``gate_decision``).
    """
    ctx = context_of(runtime)
    iteration = state.get("iteration", 0) + 1
    rng = random.Random(f"{ctx.config.seed}:select:{iteration}")
    sample = ctx.population.sample(rng, num_inspirations=ctx.config.prompt.num_inspirations)
    code_id = ctx.population.code_id
    return {
        "iteration": iteration,
        "parent_id": code_id(sample.parent_id),
        "inspiration_ids": list(dict.fromkeys(code_id(i) for i in sample.inspiration_ids)),
        "island": sample.island,
        "candidates": None,
        "documents": [],
        "gate_document_ids": [],
        "evidence_record_id": None,
        "gate_decision": None,
        "gate_reason": "",
    }

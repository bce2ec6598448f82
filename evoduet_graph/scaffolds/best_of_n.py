"""``scaffold: best_of_n``: always mutate the best program so far.

``scaffold: best_of_n``: every iteration mutates the best program so far, N =
``candidates`` times in parallel, and keeps the best valid child (greedy best-of-N hill
climbing). Inspirations are the next best programs. No randomness, no prompt instruction.
Runs over a `TopKPopulation` (``population.top_k`` programs).
"""

from __future__ import annotations

import random

from evoduet_graph.context import Context
from evoduet_graph.population import Population
from evoduet_graph.scaffolds.base import ScaffoldBase, Selection, ranked_programs
from evoduet_graph.state import OuterState


def select_best(population: Population, num_inspirations: int) -> Selection:
    """The best program as parent; the next ``num_inspirations`` best as inspirations.

    Returns:
        A `Selection` with mode ``best`` and island None.

    Raises:
        EmptyPopulationError: the population holds no program.
        ValueError: ``num_inspirations < 0``.
    """
    if num_inspirations < 0:
        raise ValueError(f"num_inspirations must be >= 0, got {num_inspirations}")
    ranked = ranked_programs(population, num_inspirations + 1)
    best = population.best_id
    parent = population.code_id(best) if best is not None else ranked[0]
    others = [p for p in ranked if p != parent][:num_inspirations]
    return Selection(parent_id=parent, inspiration_ids=others, island=None, mode="best")


class BestOfNScaffold(ScaffoldBase, name="best_of_n", populations=("top_k",)):
    """Always the best program (module docstring)."""

    def select(
        self, state: OuterState, ctx: Context, rng: random.Random, iteration: int
    ) -> Selection:
        """`select_best` with ``prompt.num_inspirations`` (``rng`` is not used)."""
        return select_best(ctx.population, ctx.config.prompt.num_inspirations)

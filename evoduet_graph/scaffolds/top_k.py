"""``scaffold: top_k``: the parent is drawn uniformly from the k best programs.

``scaffold: top_k``: the parent is drawn uniformly from the k best programs
(k = ``population.top_k``); the inspirations are a uniform sample of the rest of those k,
shown best first. Runs over a `TopKPopulation` of the same k. No prompt instruction.
"""

from __future__ import annotations

import random

from evoduet_graph.context import Context
from evoduet_graph.population import Population
from evoduet_graph.scaffolds.base import ScaffoldBase, Selection, ranked_programs
from evoduet_graph.state import OuterState


def select_top_k(
    population: Population, rng: random.Random, k: int, num_inspirations: int
) -> Selection:
    """Parent uniform among the ``k`` best; inspirations uniform among the other ones.

    Args:
        population: any population (copies count as their original).
        rng: the iteration's generator (one ``choice`` and one ``sample`` call).
        k: how many of the best programs are eligible (>= 1).
        num_inspirations: inspirations wanted (fewer when fewer than k+1 programs exist).

    Returns:
        A `Selection` with mode ``top_k`` and island None.

    Raises:
        EmptyPopulationError: the population holds no program.
        ValueError: ``k < 1`` or ``num_inspirations < 0``.
    """
    if k < 1 or num_inspirations < 0:
        raise ValueError(f"need k >= 1 and num_inspirations >= 0, got {k} and {num_inspirations}")
    ranked = ranked_programs(population, k)
    parent = rng.choice(ranked)
    others = [p for p in ranked if p != parent]
    picked = set(rng.sample(others, min(num_inspirations, len(others))))
    return Selection(
        parent_id=parent,
        inspiration_ids=[p for p in others if p in picked],
        island=None,
        mode="top_k",
    )


class TopKScaffold(ScaffoldBase, name="top_k", populations=("top_k",)):
    """Uniform top-k parent selection (module docstring)."""

    def select(
        self, state: OuterState, ctx: Context, rng: random.Random, iteration: int
    ) -> Selection:
        """`select_top_k` with ``population.top_k`` and ``prompt.num_inspirations``."""
        cfg = ctx.config
        return select_top_k(ctx.population, rng, cfg.population.top_k, cfg.prompt.num_inspirations)

"""``scaffold: openevolve`` (the default): OpenEvolve's own sampling on the population.

Over MAP-Elites islands: on the current island, with probability ``exploration_ratio`` a
uniform parent, with ``exploitation_ratio`` one from the elite archive, else fitness-weighted;
inspirations from the island's best, its top programs and nearby feature cells
(`IslandPopulation.sample`). Over a top-k population (``population.kind: top_k``, the
``configs/top_k.yaml`` ablation): `TopKPopulation.sample`. No prompt instruction.
"""

from __future__ import annotations

import random

from evoduet_graph.context import Context
from evoduet_graph.population import Population
from evoduet_graph.scaffolds.base import ScaffoldBase, Selection
from evoduet_graph.state import OuterState


def sample_population(
    population: Population, rng: random.Random, num_inspirations: int
) -> Selection:
    """The population's own ``sample`` as a `Selection` (parent, inspirations, island, mode).

    Raises:
        EmptyPopulationError: the population holds no program.
    """
    sample = population.sample(rng, num_inspirations=num_inspirations)
    return Selection(
        parent_id=sample.parent_id,
        inspiration_ids=list(sample.inspiration_ids),
        island=sample.island,
        mode=sample.mode,
    )


class OpenEvolveScaffold(ScaffoldBase, name="openevolve", populations=("islands", "top_k")):
    """OpenEvolve sampling (module docstring)."""

    def select(
        self, state: OuterState, ctx: Context, rng: random.Random, iteration: int
    ) -> Selection:
        """`sample_population` with ``prompt.num_inspirations``."""
        return sample_population(ctx.population, rng, ctx.config.prompt.num_inspirations)

"""A new scaffold: round-robin parent selection over the best programs.

Each iteration takes the next of the ``population.top_k`` best programs as parent (iteration
1 the best, iteration 2 the second best, ...), shows the others as inspirations and asks the
mutation prompt for small changes. Inject it as the run's policy (``ctx.scaffold``), or
register it as a built-in (docs/extending.md).
"""

from __future__ import annotations

import random

from evoduet_graph.context import Context
from evoduet_graph.scaffolds.base import ScaffoldBase, Selection, ranked_programs
from evoduet_graph.state import OuterState

INSTRUCTION = "Make one small, local change to the parent."


class RoundRobinScaffold(ScaffoldBase, name="round_robin", populations=("top_k",)):
    """Parents in turn from the k best (module docstring)."""

    def select(
        self, state: OuterState, ctx: Context, rng: random.Random, iteration: int
    ) -> Selection:
        """The ``(iteration - 1) mod k``-th best program as parent (``rng`` is not used)."""
        ranked = ranked_programs(ctx.population, ctx.config.population.top_k)
        parent = ranked[(iteration - 1) % len(ranked)]
        others = [p for p in ranked if p != parent][: ctx.config.prompt.num_inspirations]
        return Selection(
            parent_id=parent,
            inspiration_ids=others,
            island=None,
            mode=self.name,
            instruction=INSTRUCTION,
        )

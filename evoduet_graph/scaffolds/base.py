"""Shared types of the scaffolds: the `Selection` a policy returns and the `Scaffold` protocol.

A scaffold is a population kind (``config.population.kind``, chosen by ``config.scaffold``
when left out), a parent-selection policy and what the mutation prompt asks for (the
`Selection.instruction`). Only the ``select`` node calls it; every other node of the graph is
the same object for every scaffold.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from evoduet_graph.context import Context
from evoduet_graph.population import EmptyPopulationError, Population
from evoduet_graph.state import OuterState


@dataclass(frozen=True)
class Selection:
    """What a scaffold chose for one iteration.

    Attributes:
        parent_id: the program to mutate (a population id; the ``select`` node maps a migrant
            copy to the program it copies).
        inspiration_ids: other programs shown in the prompt, most relevant first.
        island: island the child joins (`IslandPopulation`), or None: the parent's island
            (islands) / no islands (top-k).
        mode: how the parent was chosen (``exploration``, ``exploitation``, ``weighted``,
            ``best``, ``top_k``, ``recent_improver``), for events and tests.
        instruction: text added to this iteration's mutation prompt (``""``: none).
        update: extra state keys the scaffold keeps in the checkpoint (EvoX: ``strategy``,
            ``strategy_history``).
    """

    parent_id: str
    inspiration_ids: list[str]
    island: int | None
    mode: str
    instruction: str = ""
    update: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Scaffold(Protocol):
    """A parent-selection policy (plus context builder) of the ``select`` node.

    ``select`` must take all its randomness from ``rng`` (seeded from ``(seed, iteration)``)
    and everything else from ``state`` and ``ctx``, so a resumed run selects exactly what the
    uninterrupted run would have.
    """

    name: str
    populations: ClassVar[tuple[str, ...]]

    def select(
        self, state: OuterState, ctx: Context, rng: random.Random, iteration: int
    ) -> Selection:
        """Choose parent, inspirations and prompt instruction for ``iteration``."""
        ...


class ScaffoldBase:
    """Base of the built-in scaffolds: ``name`` and ``populations`` as class keywords.

    ``class TopKScaffold(ScaffoldBase, name="top_k", populations=("top_k",))`` declares the
    members the `Scaffold` protocol requires besides ``select`` in the class header, checked
    once here.

    Attributes:
        name: the scaffold's name (``config.scaffold``).
        populations: population kinds it runs over; the first is its choice when none is
            configured.
    """

    name: str
    populations: ClassVar[tuple[str, ...]]

    def __init_subclass__(cls, *, name: str, populations: tuple[str, ...], **kwargs: Any) -> None:
        """Set ``name`` and ``populations`` of the subclass.

        Raises:
            ValueError: ``populations`` is empty.
        """
        super().__init_subclass__(**kwargs)
        if not populations:
            raise ValueError(f"scaffold {name!r} must run over at least one population kind")
        cls.name = name
        cls.populations = tuple(populations)


def ranked_programs(population: Population, n: int) -> list[str]:
    """Program-store ids of the ``n`` best programs, best first (ties: earlier added first).

    A migrant copy counts as the program it copies, so no program appears twice.

    Raises:
        EmptyPopulationError: the population holds no program.
    """
    if len(population) == 0:
        raise EmptyPopulationError("cannot select from an empty population")
    if n <= 0:
        return []
    ranked = dict.fromkeys(population.code_id(p) for p in population.top(len(population)))
    return list(ranked)[:n]

"""Scaffolds: population + parent-selection policy + what the mutation prompt asks for.

``config.scaffold`` picks one by its name in `SCAFFOLDS`, the one registry of scaffolds
(checked when a run starts: `check_scaffold`, which also lets the scaffold choose
``population.kind``); the ``select`` node applies it (`scaffold_for`), and nothing else in the
graph changes (the gate, inner loop, generate and evaluate nodes are the same objects for
every scaffold):

=============  ===================  ======================================================
scaffold       population           parent / inspirations / prompt
=============  ===================  ======================================================
openevolve     MAP-Elites islands   OpenEvolve sampling on the current island (default)
top_k          top-k                uniform among the k best / rest of the k best
best_of_n      top-k                always the best, N = ``candidates`` children / next best
evox           MAP-Elites islands   the active strategy's rule; its instruction is added to
                                    the mutation prompt; revised by the LLM on stagnation
=============  ===================  ======================================================

Each policy draws its randomness from the select node's ``rng``, seeded from
``(seed, iteration)``, and keeps any state of its own (the EvoX strategy) in the checkpointed
graph state, so a resumed run selects exactly what the uninterrupted run would have.
"""

from __future__ import annotations

from evoduet_graph.config import ConfigError, EvoDuetConfig
from evoduet_graph.context import Context
from evoduet_graph.scaffolds.base import Scaffold, Selection, ranked_programs
from evoduet_graph.scaffolds.best_of_n import BestOfNScaffold, select_best
from evoduet_graph.scaffolds.evox import EvoXScaffold
from evoduet_graph.scaffolds.openevolve import OpenEvolveScaffold, sample_population
from evoduet_graph.scaffolds.top_k import TopKScaffold, select_top_k

__all__ = [
    "SCAFFOLDS",
    "BestOfNScaffold",
    "EvoXScaffold",
    "OpenEvolveScaffold",
    "Scaffold",
    "Selection",
    "TopKScaffold",
    "check_scaffold",
    "make_scaffold",
    "ranked_programs",
    "sample_population",
    "scaffold_for",
    "select_best",
    "select_top_k",
]

SCAFFOLDS: dict[str, type[Scaffold]] = {
    cls.name: cls for cls in (OpenEvolveScaffold, TopKScaffold, BestOfNScaffold, EvoXScaffold)
}
"""Scaffold name (``config.scaffold``, each class's ``name``) → policy class."""


def make_scaffold(name: str) -> Scaffold:
    """The policy of scaffold ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    try:
        return SCAFFOLDS[name]()
    except KeyError:
        raise ValueError(f"unknown scaffold {name!r}; known: {', '.join(SCAFFOLDS)}") from None


def check_scaffold(config: EvoDuetConfig) -> EvoDuetConfig:
    """``config`` with its scaffold checked and its population kind settled, when a run starts.

    Returns:
        ``config`` itself, or a copy whose ``population.kind`` is the scaffold's own choice
        (the first of its ``populations``) where the configuration left it out.

    Raises:
        ConfigError: ``scaffold`` names no registered scaffold (the message lists them), or
            ``population.kind`` is a kind the scaffold does not run over.
    """
    cls = SCAFFOLDS.get(config.scaffold)
    if cls is None:
        raise ConfigError(
            f"scaffold: unknown scaffold {config.scaffold!r}; known: {', '.join(SCAFFOLDS)}"
        )
    kind = config.population.kind
    if kind is None:
        population = config.population.model_copy(update={"kind": cls.populations[0]})
        return config.model_copy(update={"population": population}, deep=True)
    if kind not in cls.populations:
        raise ConfigError(
            f"scaffold {config.scaffold!r} runs over population.kind "
            f"{' or '.join(repr(k) for k in cls.populations)}, not {kind!r}; "
            "leave population.kind out to let the scaffold choose"
        )
    return config


def scaffold_for(ctx: Context) -> Scaffold:
    """The policy the ``select`` node applies.

    ``ctx.scaffold`` when one was injected, else the one ``ctx.config.scaffold`` names.
    """
    if ctx.scaffold is not None:
        return ctx.scaffold
    return make_scaffold(ctx.config.scaffold)

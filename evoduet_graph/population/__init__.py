"""Program populations: OpenEvolve MAP-Elites islands and a top-k baseline, one protocol.

Use `make_population` for a fresh run and `population_from_dict` to resume one. Both kinds
keep metadata only; program source stays in the run's program store and is reached through
``get_code(code_id)``.
"""

from __future__ import annotations

from typing import Any

from evoduet_graph.config import PopulationConfig
from evoduet_graph.population.base import (
    EmptyPopulationError,
    GetCode,
    Population,
    ProgramEntry,
    Sample,
)
from evoduet_graph.population.islands import IslandPopulation, effective_feature_bins
from evoduet_graph.population.top_k import TopKPopulation
from evoduet_graph.rundir.store import ProgramStore

__all__ = [
    "EmptyPopulationError",
    "GetCode",
    "IslandPopulation",
    "Population",
    "ProgramEntry",
    "Sample",
    "TopKPopulation",
    "add_op",
    "apply_op",
    "effective_feature_bins",
    "make_population",
    "next_island_op",
    "population_from_dict",
    "restore_population",
]

_KINDS: dict[str, type[IslandPopulation | TopKPopulation]] = {
    "islands": IslandPopulation,
    "top_k": TopKPopulation,
}


def make_population(cfg: PopulationConfig, *, seed: int, get_code: GetCode) -> Population:
    """An empty population of the kind ``cfg.kind`` (``islands`` or ``top_k``).

    Raises:
        ValueError: unknown ``cfg.kind``, or none: a run's scaffold chooses it at setup
            (`evoduet_graph.startup.checked_config`).
    """
    if cfg.kind is None:
        raise ValueError(
            "population.kind is not chosen yet: the scaffold chooses it when the run starts "
            "(evoduet_graph.checked_config); set it to build a population directly"
        )
    try:
        cls = _KINDS[cfg.kind]
    except KeyError:
        raise ValueError(f"unknown population kind {cfg.kind!r}") from None
    return cls(cfg, seed=seed, get_code=get_code)


def population_from_dict(
    data: dict[str, Any], cfg: PopulationConfig, get_code: GetCode
) -> Population:
    """Restore a population written by ``to_dict``, dispatching on ``data["kind"]``.

    Raises:
        ValueError: unknown kind, a kind different from ``cfg.kind``, or the errors of the
            class's ``from_dict``.
    """
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind not in _KINDS:
        raise ValueError(f"unknown population kind {kind!r}")
    if kind != cfg.kind:
        raise ValueError(f"population data is {kind!r} but the config asks for {cfg.kind!r}")
    return _KINDS[kind].from_dict(data, cfg, get_code)


# -- journal operations ----------------------------------------------------------------------
# The record node changes the population by exactly one operation per iteration; the program
# store journals it (`ProgramStore.log_population_op`) and snapshots the whole population only
# every `PopulationConfig.snapshot_interval` iterations, so an iteration costs O(1) bytes and
# time however large the population grows.


def add_op(entry: ProgramEntry, island: int | None) -> dict[str, Any]:
    """The journal operation "add this program (to ``island``)"."""
    return {"add": entry.model_dump(), "island": island}


def next_island_op() -> dict[str, Any]:
    """The journal operation of an iteration that added no program.

    The journal operation of an iteration that added no program (OpenEvolve still moves
    to the next island).
    """
    return {"next_island": True}


def apply_op(population: Population, op: dict[str, Any], iteration: int, get_code: GetCode) -> None:
    """Apply one journal operation, once.

    Apply one journal operation; a no-op when it is already applied (an added id is
    present; ``next_island`` remembers the last iteration that advanced).

    Raises:
        ValueError: an operation that is neither ``add`` nor ``next_island``.
    """
    if "add" in op:
        entry = ProgramEntry.model_validate(op["add"])
        if entry.id not in population:
            population.add(entry, get_code(entry.id), iteration=iteration, island=op.get("island"))
    elif op.get("next_island"):
        advance = getattr(population, "next_island", None)
        if advance is not None:
            advance(iteration=iteration)
    else:
        raise ValueError(f"unknown population journal operation {sorted(op)}")


def restore_population(
    store: ProgramStore, cfg: PopulationConfig, *, seed: int
) -> tuple[Population, int]:
    """The population of a run directory: its last snapshot plus the journal replayed.

    Returns:
        ``(population, iteration)``: the population and the last iteration it reflects
        (0 and an empty population when nothing was saved yet).

    Raises:
        ValueError: as `population_from_dict` (snapshot of another kind or configuration).
    """
    snapshot = store.load_population()
    if snapshot is None:
        population = make_population(cfg, seed=seed, get_code=store.get_code)
        start = 0
    else:
        start, data = snapshot
        population = population_from_dict(data, cfg, store.get_code)
    last = start
    for iteration, op in store.population_ops(after=start):
        apply_op(population, op, iteration, store.get_code)
        last = iteration
    return population, last

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

__all__ = [
    "EmptyPopulationError",
    "GetCode",
    "IslandPopulation",
    "Population",
    "ProgramEntry",
    "Sample",
    "TopKPopulation",
    "effective_feature_bins",
    "make_population",
    "population_from_dict",
]

_KINDS: dict[str, type[IslandPopulation | TopKPopulation]] = {
    "islands": IslandPopulation,
    "top_k": TopKPopulation,
}


def make_population(cfg: PopulationConfig, *, seed: int, get_code: GetCode) -> Population:
    """An empty population of the kind ``cfg.kind`` (``islands`` or ``top_k``).

    Raises:
        ValueError: unknown ``cfg.kind``.
    """
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

"""The simplest population: keep the k fittest programs (an ablation baseline to islands)."""

from __future__ import annotations

import random
from typing import Any

from evoduet_graph.config import PopulationConfig
from evoduet_graph.population.base import (
    GetCode,
    ProgramEntry,
    Sample,
    check_kind,
    score_summary,
)
from evoduet_graph.population.index import EntryIndex


class TopKPopulation(EntryIndex):
    """Keeps the ``cfg.top_k`` fittest programs; no islands, no feature map.

    * `add`: a program joins while fewer than k are kept, else only if strictly fitter than
      the least fit one, which it evicts (ties: the earliest-added least fit one). The best
      program is therefore never evicted.
    * `sample`: with probability ``cfg.elite_selection_ratio`` the parent is the best
      (mode ``best``), otherwise uniform among the kept programs (mode ``top_k``);
      inspirations are a uniform sample of the other kept programs, fittest first.
    * No randomness outside `sample`'s ``rng``; ``seed`` and ``get_code`` are accepted for a
      uniform constructor (the seed is persisted).

    Args:
        cfg: Population settings (``top_k``, ``elite_selection_ratio`` are used).
        seed: Run seed (persisted only).
        get_code: Unused (this population needs no source code).
    """

    kind = "top_k"

    def __init__(self, cfg: PopulationConfig, *, seed: int, get_code: GetCode) -> None:
        self._cfg = cfg
        self._seed = int(seed)
        self._get_code = get_code
        self._entries: dict[str, ProgramEntry] = {}
        self._best: str | None = None

    def code_id(self, id: str) -> str:
        """``id`` itself (no copies here). Raises KeyError when ``id`` is not kept."""
        return self._entries[id].id

    def add(
        self, entry: ProgramEntry, code: str, *, iteration: int, island: int | None = None
    ) -> bool:
        """Keep the program if it is among the k fittest.

        Args:
            entry: The program (stored with ``iteration`` and ``island=None``).
            code: Its source (unused).
            iteration: Outer-loop iteration (stored in the entry).
            island: Ignored (no islands).

        Returns:
            ``True`` if the program is now kept; ``False`` if its id was already kept or it
            is not fitter than the least fit of k kept programs (nothing changes then).

        Raises:
            ValueError: NaN score or ``entry.migrant_of`` set.
        """
        if not self._is_new(entry):
            return False
        if len(self._entries) >= self._cfg.top_k:
            worst = min(self._entries, key=self._score)
            if entry.score <= self._entries[worst].score:
                return False
            del self._entries[worst]
        self._entries[entry.id] = entry.model_copy(update={"iteration": iteration, "island": None})
        if (
            self._best is None
            or self._best not in self._entries
            or (entry.score > self._entries[self._best].score)
        ):
            self._best = entry.id
        return True

    def sample(self, rng: random.Random, *, num_inspirations: int) -> Sample:
        """Parent: the best with probability ``elite_selection_ratio``, else uniform.

        Raises:
            EmptyPopulationError: nothing kept yet.
            ValueError: ``num_inspirations < 0``.
        """
        self._check_sample(num_inspirations)
        ranked = self.top(len(self._entries))
        if rng.random() < self._cfg.elite_selection_ratio:
            parent, mode = ranked[0], "best"
        else:
            parent, mode = rng.choice(ranked), "top_k"
        others = [p for p in ranked if p != parent]
        picked = set(rng.sample(others, min(num_inspirations, len(others))))
        inspirations = [p for p in others if p in picked]
        return Sample(parent_id=parent, inspiration_ids=inspirations, island=None, mode=mode)

    def top(self, n: int, island: int | None = None) -> list[str]:
        """Ids of the ``n`` fittest kept programs, best first (ties: earlier first).

        Raises:
            ValueError: ``island`` is not ``None``.
        """
        if island is not None:
            raise ValueError("a top_k population has no islands")
        if n <= 0:
            return []
        return sorted(self._entries, key=self._score, reverse=True)[:n]

    def stats(self) -> dict[str, Any]:
        """Size, capacity, best and mean/quantiles of the kept scores."""
        best = self._entries[self._best].score if self._best is not None else None
        return {
            "kind": self.kind,
            "size": len(self._entries),
            "capacity": self._cfg.top_k,
            "island_sizes": [],
            "occupied_cells": 0,
            "archive_size": 0,
            "best_id": self._best,
            "best_score": best,
            **score_summary(e.score for e in self._entries.values()),
        }

    def to_dict(self) -> dict[str, Any]:
        """Complete JSON-serialisable state: the kept entries in insertion order."""
        return {
            "kind": self.kind,
            "version": 1,
            "seed": self._seed,
            "top_k": self._cfg.top_k,
            "best_id": self._best,
            "entries": [e.model_dump() for e in self._entries.values()],
        }

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], cfg: PopulationConfig, get_code: GetCode
    ) -> TopKPopulation:
        """Rebuild from `to_dict` output.

        Raises:
            ValueError: wrong payload kind/version or ``cfg.top_k`` differs from the data's.
        """
        check_kind(data, cls.kind)
        if data["top_k"] != cfg.top_k:
            raise ValueError(
                f"population data has top_k={data['top_k']} but the config gives {cfg.top_k}"
            )
        pop = cls(cfg, seed=data["seed"], get_code=get_code)
        for raw in data["entries"]:
            entry = ProgramEntry.model_validate(raw)
            pop._entries[entry.id] = entry
        pop._best = data["best_id"]
        return pop

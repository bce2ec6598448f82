"""MAP-Elites islands with ring migration: OpenEvolve's program database, metadata only.

This re-implements the semantics of OpenEvolve's ``openevolve/database.py``
(``ProgramDatabase``) and of the island bookkeeping its controller does after each child
(``increment_island_generation`` → ``should_migrate`` → ``migrate_programs``), with the
configuration names of OpenEvolve's ``database:`` section (`PopulationConfig`).

What is kept per program is a `ProgramEntry` plus a 16-hex content hash, the raw feature
values and the MAP-Elites cell coordinates. Source code is never kept, except the token
lists of the bounded diversity reference set (at most `DIVERSITY_REFERENCE_SIZE` programs).

Every structure is insertion-ordered (``dict``/``list``, never ``set`` iteration), so the
state, and therefore every sample, is identical across processes and hash seeds, and
``from_dict(to_dict())`` continues exactly where the original would have.
"""

from __future__ import annotations

import heapq
import math
import random
import re
from collections import OrderedDict
from typing import Any

from rapidfuzz.distance import Indel

from evoduet_graph.config import PopulationConfig
from evoduet_graph.population.base import (
    GetCode,
    ProgramEntry,
    Sample,
    check_kind,
    code_hash,
    score_summary,
)
from evoduet_graph.population.index import EntryIndex

DIVERSITY_REFERENCE_SIZE = 20
"""Programs in the diversity reference set (OpenEvolve ``diversity_reference_size``)."""

DIVERSITY_MAX_TOKENS = 4096
"""Tokens of a program compared for diversity (longer programs: their first tokens)."""

DIVERSITY_CACHE_SIZE = 1024
"""LRU entries of the code-hash → diversity cache (OpenEvolve: 1000)."""

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_MIN_WEIGHT = 0.001  # OpenEvolve's floor for fitness-proportional weights
_MAX_WEIGHT = 1e300  # keeps random.choices' total finite for +inf scores

Raw = tuple[float | None, ...]


def effective_feature_bins(cfg: PopulationConfig) -> int:
    """Bins per feature dimension, as OpenEvolve derives them.

    OpenEvolve raises ``feature_bins`` so that the grid has at least ``archive_size`` cells:
    ``max(feature_bins, int(archive_size ** (1 / len(dims)) + 0.99))``; e.g. the defaults
    (10 bins, archive 100, 2 dims) give 10, a single dimension with archive 100 gives 100.
    """
    ndims = len(cfg.feature_dimensions)
    if ndims == 0:
        return cfg.feature_bins
    return max(cfg.feature_bins, int(cfg.archive_size ** (1.0 / ndims) + 0.99))


def tokenize(code: str) -> list[str]:
    """Split source into identifier/number and punctuation tokens (layout is ignored).

    Returns at most `DIVERSITY_MAX_TOKENS` tokens, which bounds the cost of one edit
    distance (rapidfuzz's bit-parallel Indel is O(n·m/64)).
    """
    tokens = _TOKEN_RE.findall(code)
    return tokens[:DIVERSITY_MAX_TOKENS]


class IslandPopulation(EntryIndex):
    """OpenEvolve's island-model MAP-Elites program database.

    Behaviour (OpenEvolve ``ProgramDatabase`` unless marked *deviation*):

    * **Islands.** ``cfg.num_islands`` sub-populations. A child goes to the ``island`` passed
      to `add` (normally ``Sample.island``), else to its parent's island, else to the current
      island. Programs never move; migration makes copies.
    * **Feature coordinates.** One per name in ``cfg.feature_dimensions``: a metric of that
      name if the evaluator returned one (takes priority, as in OpenEvolve), else the built-ins
      ``complexity`` = ``len(code)`` in characters, ``diversity`` = mean normalised edit
      distance to the diversity reference set, ``score`` = ``entry.score``. Any other name
      missing from the metrics raises ValueError. Values are min-max scaled with running
      global min/max per dimension (a value equal to both maps to 0.5) and binned into
      `effective_feature_bins` bins. Coordinates are computed once, when a program is added
      (*deviation*: OpenEvolve recomputes them while choosing inspirations, which also
      shifts the min/max statistics). A ``diversity`` with nothing to compare to (first
      program) gets bin 0 without touching the statistics, as in OpenEvolve; non-finite
      feature values get bin 0 (NaN, -inf) or the last bin (+inf), statistics untouched.
    * **Diversity** (*deviation in the distance*): rapidfuzz ``Indel.normalized_distance``
      (in [0, 1]) between token sequences (`tokenize`), not OpenEvolve's length/line/charset
      heuristic; programs with equal code are not compared. The reference set is the first
      `DIVERSITY_REFERENCE_SIZE` programs with distinct code (*deviation*: OpenEvolve
      rebuilds it greedily from a random start while it is not full, which is not
      reproducible); it is then frozen, so values are cached by code hash (LRU).
    * **Per-island MAP-Elites map.** A program takes its cell when the cell is empty or it
      is strictly fitter than the owner; the displaced owner leaves the island and the
      population (unless it is the global best) and hands its archive seat to the newcomer.
      A program that does not win its cell still joins the island (as a cell-less member).
    * **Archive** of at most ``cfg.archive_size`` elites: a program enters while there is
      room, else replaces the worst member if strictly fitter.
    * **Population limit** ``cfg.population_size`` (migrant copies count): after each
      insertion the least fit cell-less programs are removed first, then the least fit cell
      owners; the global best and the program just added are never removed (so the limit
      can be exceeded by one when ``population_size`` is 1).
    * **Best tracking.** ``best_id`` is the first program with the highest score ever added
      (ties keep the earlier one, so a migrant copy never displaces its original), and it is
      never evicted. Each island also tracks its best (used for inspirations).
    * **Parent sampling** (`sample`, OpenEvolve ``sample_from_island`` on the current
      island): with probability ``exploration_ratio`` uniform from the island
      (``exploration``); with ``exploitation_ratio`` uniform from archive members on the
      island, else from the whole archive (``exploitation``); otherwise fitness-weighted on
      the island with weights ``max(score, 0.001)`` (``weighted``). An empty island yields
      the global best, with the global top programs as inspirations (``best``; *deviation*:
      OpenEvolve inserts a uuid-named copy of the best into the empty island, which makes
      sampling mutate the population).
    * **Inspirations**: the island's best, then its top ``max(1, int(n *
      elite_selection_ratio))`` programs, then (island larger than n) programs owning cells
      near the parent's (each coordinate moved by a uniform integer in [-2, 2], 3 tries per
      missing slot), then uniform random island members (*deviation*: OpenEvolve fills with
      random members only when the island holds more than n programs). Parent excluded.
    * **Round-robin and migration.** Each new (non-migrant) program increments its island's
      generation counter; when ``max(generations) - last_migration_generation >=
      migration_interval``, every island sends its top ``max(1, int(size * migration_rate))``
      programs (migrant copies are never re-migrated) to both ring neighbours ``(i+1) % n``
      and ``(i-1) % n``, skipping a neighbour that already holds identical code (by content
      hash). The copies have the deterministic id ``f"{id}@i{target}"``, ``parent_id`` and
      ``migrant_of`` = the original id, and go through the same insertion as any program.
      Then the current island advances by one — once per distinct, increasing ``iteration``
      of `add` (so adding several programs in one iteration, or replaying an add, advances it
      once). Call ``next_island(iteration)`` for an iteration that added nothing.
    * **Randomness.** `add` and migration use none; `sample` uses only the ``rng`` given.
      ``seed`` is stored and persisted for the interface's sake.

    Args:
        cfg: Population settings (OpenEvolve ``database:`` names).
        seed: Run seed (persisted; no randomness of this class depends on it today).
        get_code: ``get_code(program_id) -> source`` for ids of programs added here,
            including ones evicted since; used to load the diversity reference set after
            `from_dict`.
    """

    kind = "islands"

    def __init__(self, cfg: PopulationConfig, *, seed: int, get_code: GetCode) -> None:
        self._cfg = cfg
        self._seed = int(seed)
        self._get_code = get_code
        self._dims: list[str] = list(cfg.feature_dimensions)
        self._bins = effective_feature_bins(cfg)
        n = cfg.num_islands
        self._entries: dict[str, ProgramEntry] = {}
        self._hash: dict[str, str] = {}
        self._coords: dict[str, tuple[int, ...]] = {}
        self._raw: dict[str, Raw] = {}
        self._islands: list[dict[str, None]] = [{} for _ in range(n)]
        self._maps: list[dict[str, str]] = [{} for _ in range(n)]  # cell key -> owner id
        self._cell_of: dict[str, str] = {}  # owner id -> its cell key (on entry.island)
        self._archive: dict[str, None] = {}
        self._best: str | None = None
        self._island_best: list[str | None] = [None] * n
        self._current = 0
        self._generations = [0] * n
        self._last_migration_generation = 0
        self._last_iteration = 0
        self._last_advance_iteration: int | None = None
        self._feature_stats: dict[str, list[float]] = {}  # dim -> [min, max]
        self._ref_ids: list[str] = []
        self._ref_hashes: list[str] = []
        self._ref_tokens: list[list[str]] | None = []  # None: not loaded yet (after from_dict)
        self._div_cache: OrderedDict[str, float | None] = OrderedDict()

    # ------------------------------------------------------------------ read access

    @property
    def current_island(self) -> int:
        """Island `sample` draws from."""
        return self._current

    @property
    def num_islands(self) -> int:
        """Number of islands."""
        return len(self._islands)

    @property
    def feature_bins(self) -> int:
        """Bins per feature dimension (`effective_feature_bins`)."""
        return self._bins

    @property
    def island_generations(self) -> list[int]:
        """Programs added per island (migrant copies excluded)."""
        return list(self._generations)

    def code_id(self, id: str) -> str:
        """Id whose code the program store holds: the original for a migrant copy.

        Raises:
            KeyError: ``id`` is not in the population.
        """
        entry = self._entries[id]
        return entry.migrant_of or entry.id

    def cell(self, id: str) -> tuple[int, ...]:
        """MAP-Elites coordinates (one bin index per feature dimension) of a program."""
        return self._coords[id]

    def island_ids(self, island: int) -> list[str]:
        """Members of an island in insertion order."""
        return list(self._islands[self._check_island(island)])

    def archive_ids(self) -> list[str]:
        """Elite archive members in insertion order."""
        return list(self._archive)

    def top(self, n: int, island: int | None = None) -> list[str]:
        """Ids of the ``n`` fittest programs, best first (ties: earlier first).

        Args:
            n: How many; ``n <= 0`` gives ``[]``.
            island: Restrict to one island; ``None``: the whole population, where each
                original and its migrant copies count once (the earliest survivor).

        Raises:
            ValueError: ``island`` is out of range.
        """
        if n <= 0:
            return []
        if island is None:
            return self._top_global(n)
        members = self._islands[self._check_island(island)]
        return heapq.nlargest(n, members, key=self._score)

    def stats(self) -> dict[str, Any]:
        """Summary: sizes, cells, archive, best, mean/quantiles of distinct programs' scores."""
        originals = [e.score for e in self._entries.values() if e.migrant_of is None]
        best = self._entries[self._best].score if self._best is not None else None
        return {
            "kind": self.kind,
            "size": len(self._entries),
            "migrants": len(self._entries) - len(originals),
            "island_sizes": [len(m) for m in self._islands],
            "occupied_cells": sum(len(m) for m in self._maps),
            "occupied_cells_per_island": [len(m) for m in self._maps],
            "cells_per_island": self._bins ** len(self._dims),
            "archive_size": len(self._archive),
            "best_id": self._best,
            "best_score": best,
            "current_island": self._current,
            "island_generations": list(self._generations),
            "last_migration_generation": self._last_migration_generation,
            **score_summary(originals),
        }

    # ------------------------------------------------------------------ sampling

    def sample(
        self, rng: random.Random, *, num_inspirations: int, island: int | None = None
    ) -> Sample:
        """Choose a parent and inspirations on the current island (OpenEvolve semantics).

        Does not change the population; all randomness comes from ``rng``.

        Args:
            rng: Source of randomness (seed it per iteration for reproducible runs).
            num_inspirations: Inspirations wanted (fewer when the island is small).
            island: Sample this island instead of `current_island` (does not move it).

        Returns:
            The parent, inspirations, the island the child belongs to, and the mode.

        Raises:
            EmptyPopulationError: nothing has been added yet.
            ValueError: ``num_inspirations < 0`` or ``island`` out of range.
        """
        self._check_sample(num_inspirations)
        isl = self._current if island is None else self._check_island(island)
        members = list(self._islands[isl])
        if not members:
            parent = self._best
            assert parent is not None
            top = self._top_global(num_inspirations + 1)
            inspirations = [p for p in top if p != parent][:num_inspirations]
            return Sample(parent_id=parent, inspiration_ids=inspirations, island=isl, mode="best")

        cfg = self._cfg
        r = rng.random()
        if r < cfg.exploration_ratio:
            parent, mode = rng.choice(members), "exploration"
        elif r < cfg.exploration_ratio + cfg.exploitation_ratio:
            parent, mode = self._archive_parent(rng, isl, members), "exploitation"
        else:
            parent, mode = self._weighted_parent(rng, members), "weighted"
        inspirations = self._inspirations(rng, parent, isl, members, num_inspirations)
        return Sample(parent_id=parent, inspiration_ids=inspirations, island=isl, mode=mode)

    def _archive_parent(self, rng: random.Random, isl: int, members: list[str]) -> str:
        on_island = [a for a in self._archive if self._entries[a].island == isl]
        pool = on_island or list(self._archive)
        if not pool:  # unreachable while non-empty (every first program enters), kept safe
            return self._weighted_parent(rng, members)
        return rng.choice(pool)

    def _weighted_parent(self, rng: random.Random, members: list[str]) -> str:
        if len(members) == 1:
            return members[0]
        weights = [min(max(self._entries[m].score, _MIN_WEIGHT), _MAX_WEIGHT) for m in members]
        return rng.choices(members, weights=weights, k=1)[0]

    def _inspirations(
        self, rng: random.Random, parent: str, isl: int, members: list[str], n: int
    ) -> list[str]:
        if n == 0:
            return []
        chosen: list[str] = []
        island_best = self._island_best[isl]
        if island_best is not None and island_best != parent:
            chosen.append(island_best)
        top_n = max(1, int(n * self._cfg.elite_selection_ratio))
        for pid in heapq.nlargest(top_n, members, key=self._score):
            if pid != parent and pid not in chosen:
                chosen.append(pid)

        if len(chosen) < n and len(members) > n and self._dims:
            remaining = n - len(chosen)
            fmap = self._maps[isl]
            base = self._coords[parent]
            last = self._bins - 1
            nearby: list[str] = []
            for _ in range(remaining * 3):
                moved = [min(last, max(0, c + rng.randint(-2, 2))) for c in base]
                owner = fmap.get(_cell_key(moved))
                if owner is not None and owner not in (parent, *chosen, *nearby):
                    nearby.append(owner)
                    if len(nearby) >= remaining:
                        break
            chosen.extend(nearby)

        if len(chosen) < n:
            excluded = {parent, *chosen}
            available = [m for m in members if m not in excluded]
            if available:
                chosen.extend(rng.sample(available, min(n - len(chosen), len(available))))
        return chosen[:n]

    # ------------------------------------------------------------------ islands

    def next_island(self, iteration: int | None = None) -> int:
        """Advance the current island round-robin and return it (OpenEvolve ``next_island``).

        Args:
            iteration: When given, advance only if it is greater than the last iteration that
                advanced the island (by `add` or here), which makes a replayed call a no-op;
                call it so for an iteration that added no program, to keep one island per
                iteration as OpenEvolve's parallel controller does.
        """
        if iteration is not None:
            last = self._last_advance_iteration
            if last is not None and iteration <= last:
                return self._current
            self._last_advance_iteration = iteration
        self._current = (self._current + 1) % len(self._islands)
        return self._current

    def set_current_island(self, island: int) -> None:
        """Make ``island`` the current island.

        Raises:
            ValueError: ``island`` is out of range.
        """
        self._current = self._check_island(island)

    # ------------------------------------------------------------------ adding

    def add(
        self, entry: ProgramEntry, code: str, *, iteration: int, island: int | None = None
    ) -> bool:
        """Insert a program; may trigger a migration; advances the current island.

        Steps: place it on its island's MAP-Elites map, update the archive, enforce the
        population limit, update the global and island bests, count an island generation,
        migrate when due, advance the round-robin island (once per new iteration). See the
        class docstring for each rule.

        Args:
            entry: The program's metadata. ``entry.island``/``entry.iteration`` are ignored
                and replaced in the stored copy; ``entry.migrant_of`` must be ``None``.
            code: Its source (used for the complexity and diversity features and the content
                hash; not retained).
            iteration: Outer-loop iteration of the add (stored in the entry).
            island: Target island, normally ``Sample.island``; ``None``: the parent's island
                if the parent is present, else the current island.

        Returns:
            ``True`` if added; ``False`` (nothing changed) if the id is already present.

        Raises:
            ValueError: NaN score, ``migrant_of`` set, ``island`` out of range, or a feature
                dimension that is neither built-in nor among ``entry.metrics``. Nothing is
                changed when it raises.
        """
        if not self._is_new(entry):
            return False
        if island is not None:
            target = self._check_island(island)
        elif entry.parent_id is not None and entry.parent_id in self._entries:
            parent_island = self._entries[entry.parent_id].island
            target = self._current if parent_island is None else parent_island
        else:
            target = self._current

        h = code_hash(code)
        raw, tokens = self._raw_features(entry, code, h)
        stored = entry.model_copy(update={"iteration": iteration, "island": target})
        self._place(stored, h, raw)
        joins_reference = len(self._ref_ids) < DIVERSITY_REFERENCE_SIZE
        if tokens is not None and joins_reference and h not in self._ref_hashes:
            self._reference_tokens().append(tokens)
            self._ref_ids.append(entry.id)
            self._ref_hashes.append(h)

        self._last_iteration = max(self._last_iteration, iteration)
        self._generations[target] += 1
        if max(self._generations) - self._last_migration_generation >= (
            self._cfg.migration_interval
        ):
            self._migrate(iteration)
        self.next_island(iteration)
        return True

    def _place(self, stored: ProgramEntry, h: str, raw: Raw) -> None:
        """Insert into map/island/archive, enforce the limit, update bests (OpenEvolve add)."""
        pid = stored.id
        isl = stored.island
        assert isl is not None
        coords = self._bin(raw)
        key = _cell_key(coords)
        fmap = self._maps[isl]
        owner = fmap.get(key)
        displaced: str | None = None
        if owner is None or stored.score > self._entries[owner].score:
            if owner is not None:
                if owner in self._archive:  # the newcomer inherits the archive seat
                    del self._archive[owner]
                    self._archive[pid] = None
                del self._islands[isl][owner]
                del self._cell_of[owner]
                displaced = owner
            fmap[key] = pid
            self._cell_of[pid] = key

        self._entries[pid] = stored
        self._hash[pid] = h
        self._coords[pid] = coords
        self._raw[pid] = raw
        self._islands[isl][pid] = None
        self._update_archive(pid)
        self._enforce_population_limit(protect=pid)
        if self._best is None or stored.score > self._entries[self._best].score:
            self._best = pid
        island_best = self._island_best[isl]
        if island_best is None or stored.score > self._entries[island_best].score:
            self._island_best[isl] = pid
        if displaced is not None and displaced != self._best and displaced in self._entries:
            self._remove(displaced)

    def _update_archive(self, pid: str) -> None:
        if pid in self._archive:
            return
        if len(self._archive) < self._cfg.archive_size:
            self._archive[pid] = None
            return
        worst = min(self._archive, key=self._score)
        if self._entries[pid].score > self._entries[worst].score:
            del self._archive[worst]
            self._archive[pid] = None

    def _enforce_population_limit(self, protect: str) -> None:
        excess = len(self._entries) - self._cfg.population_size
        if excess <= 0:
            return
        protected = {protect, self._best}
        cell_less = [i for i in self._entries if i not in self._cell_of and i not in protected]
        victims = heapq.nsmallest(excess, cell_less, key=self._score)
        if len(victims) < excess:
            owners = [i for i in self._entries if i in self._cell_of and i not in protected]
            victims += heapq.nsmallest(excess - len(victims), owners, key=self._score)
        for victim in victims:
            self._remove(victim)

    def _remove(self, pid: str) -> None:
        entry = self._entries.pop(pid)
        del self._hash[pid], self._coords[pid], self._raw[pid]
        isl = entry.island
        assert isl is not None
        self._islands[isl].pop(pid, None)
        key = self._cell_of.pop(pid, None)
        if key is not None:
            del self._maps[isl][key]
        self._archive.pop(pid, None)
        if self._island_best[isl] == pid:
            members = self._islands[isl]
            self._island_best[isl] = max(members, key=self._score) if members else None

    def _migrate(self, iteration: int) -> None:
        """Ring migration of each island's top programs (OpenEvolve ``migrate_programs``)."""
        n = len(self._islands)
        if n > 1:
            for i in range(n):
                members = list(self._islands[i])
                if not members:
                    continue
                ranked = sorted(members, key=self._score, reverse=True)
                count = max(1, int(len(ranked) * self._cfg.migration_rate))
                targets = [t for t in dict.fromkeys(((i + 1) % n, (i - 1) % n)) if t != i]
                for mid in ranked[:count]:
                    source = self._entries.get(mid)
                    if source is None or source.migrant_of is not None:
                        continue
                    h, raw = self._hash[mid], self._raw[mid]
                    for t in targets:
                        copy_id = f"{mid}@i{t}"
                        if copy_id in self._entries:
                            continue
                        if any(self._hash[p] == h for p in self._islands[t]):
                            continue
                        copy = source.model_copy(
                            update={
                                "id": copy_id,
                                "parent_id": mid,
                                "island": t,
                                "iteration": iteration,
                                "migrant_of": mid,
                            }
                        )
                        self._place(copy, h, raw)
        self._last_migration_generation = max(self._generations)

    # ------------------------------------------------------------------ features

    def _raw_features(self, entry: ProgramEntry, code: str, h: str) -> tuple[Raw, list[str] | None]:
        values: list[float | None] = []
        tokens: list[str] | None = None
        for dim in self._dims:
            if dim in entry.metrics:
                values.append(float(entry.metrics[dim]))
            elif dim == "complexity":
                values.append(float(len(code)))
            elif dim == "diversity":
                value, tokens = self._diversity(code, h)
                values.append(value)
            elif dim == "score":
                values.append(float(entry.score))
            else:
                raise ValueError(
                    f"feature dimension {dim!r} is not a metric of program {entry.id!r} "
                    f"(metrics: {sorted(entry.metrics)}); built-ins: complexity, diversity, "
                    "score"
                )
        return tuple(values), tokens

    def _reference_tokens(self) -> list[list[str]]:
        if self._ref_tokens is None:
            self._ref_tokens = [tokenize(self._get_code(rid)) for rid in self._ref_ids]
        return self._ref_tokens

    def _diversity(self, code: str, h: str) -> tuple[float | None, list[str] | None]:
        """Mean normalised token edit distance to the reference set, and the code's tokens.

        The value is ``None`` when there is nothing else to compare to; the tokens are
        ``None`` on a cache hit (the reference set is then full and needs none).
        """
        frozen = len(self._ref_ids) >= DIVERSITY_REFERENCE_SIZE
        if frozen and h in self._div_cache:
            self._div_cache.move_to_end(h)
            return self._div_cache[h], None
        tokens = tokenize(code)
        refs = self._reference_tokens()
        distances = [
            Indel.normalized_distance(tokens, ref)
            for ref_hash, ref in zip(self._ref_hashes, refs, strict=True)
            if ref_hash != h
        ]
        value = sum(distances) / len(distances) if distances else None
        if frozen:  # a pure function of the code from now on: safe to cache
            self._div_cache[h] = value
            if len(self._div_cache) > DIVERSITY_CACHE_SIZE:
                self._div_cache.popitem(last=False)
        return value, tokens

    def _bin(self, raw: Raw) -> tuple[int, ...]:
        """Update min/max statistics and map raw values to bin indices (OpenEvolve minmax)."""
        last = self._bins - 1
        coords: list[int] = []
        for dim, value in zip(self._dims, raw, strict=True):
            if value is None or math.isnan(value) or value == -math.inf:
                coords.append(0)
                continue
            if value == math.inf:
                coords.append(last)
                continue
            stats = self._feature_stats.get(dim)
            if stats is None:
                stats = self._feature_stats[dim] = [value, value]
            else:
                stats[0] = min(stats[0], value)
                stats[1] = max(stats[1], value)
            lo, hi = stats
            scaled = 0.5 if hi == lo else min(1.0, max(0.0, (value - lo) / (hi - lo)))
            coords.append(min(last, max(0, int(scaled * self._bins))))
        return tuple(coords)

    # ------------------------------------------------------------------ helpers

    def _check_island(self, island: int) -> int:
        if not 0 <= island < len(self._islands):
            raise ValueError(f"island {island} out of range 0..{len(self._islands) - 1}")
        return island

    def _top_global(self, n: int) -> list[str]:
        # heapq.nlargest ranks like sorted(..., reverse=True) (ties keep insertion order) in
        # O(P log k) instead of a full sort per call; k grows only when migrant copies of the
        # same program fill the first k places
        k = n
        while True:
            if 4 * k >= len(self._entries):  # most of the population: one full sort
                ranked = sorted(self._entries, key=self._score, reverse=True)
                k = len(self._entries)
            else:
                ranked = heapq.nlargest(k, self._entries, key=self._score)
            out: list[str] = []
            seen: set[str] = set()
            for pid in ranked:
                origin = self._entries[pid].migrant_of or pid
                if origin in seen:
                    continue
                seen.add(origin)
                out.append(pid)
                if len(out) >= n:
                    return out
            if k >= len(self._entries):
                return out
            k *= 2

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """Complete state as JSON-serialisable data (no source code).

        Holds every program's entry, content hash, cell and raw features, islands, maps,
        archive, bests, round-robin and migration counters, feature min/max and the ids of
        the diversity reference set (their code is re-read with ``get_code`` when needed).
        Non-finite scores are written as floats (``json.dumps`` emits ``Infinity``).
        """
        return {
            "kind": self.kind,
            "version": 1,
            "seed": self._seed,
            "config": {
                "num_islands": len(self._islands),
                "feature_dimensions": list(self._dims),
                "feature_bins": self._bins,
            },
            "programs": [
                {
                    "entry": entry.model_dump(),
                    "code_hash": self._hash[pid],
                    "cell": list(self._coords[pid]),
                    "features": list(self._raw[pid]),
                }
                for pid, entry in self._entries.items()
            ],
            "islands": [list(members) for members in self._islands],
            "feature_maps": [dict(fmap) for fmap in self._maps],
            "archive": list(self._archive),
            "best_id": self._best,
            "island_best": list(self._island_best),
            "current_island": self._current,
            "island_generations": list(self._generations),
            "last_migration_generation": self._last_migration_generation,
            "last_iteration": self._last_iteration,
            "last_advance_iteration": self._last_advance_iteration,
            "feature_stats": {dim: list(v) for dim, v in self._feature_stats.items()},
            "diversity_reference": [
                [rid, rh] for rid, rh in zip(self._ref_ids, self._ref_hashes, strict=True)
            ],
        }

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], cfg: PopulationConfig, get_code: GetCode
    ) -> IslandPopulation:
        """Rebuild a population from `to_dict` output (also after a JSON round trip).

        Args:
            data: What `to_dict` returned.
            cfg: The run's population settings (the same as when the data was written).
            get_code: As for the constructor; called lazily for the reference set.

        Raises:
            ValueError: wrong payload kind/version, or ``cfg`` disagrees with the data on
                ``num_islands``, ``feature_dimensions`` or the effective bin count.
        """
        check_kind(data, cls.kind)
        pop = cls(cfg, seed=data["seed"], get_code=get_code)
        saved = data["config"]
        expected = {
            "num_islands": cfg.num_islands,
            "feature_dimensions": list(cfg.feature_dimensions),
            "feature_bins": pop._bins,
        }
        for key, value in expected.items():
            if saved.get(key) != value:
                raise ValueError(
                    f"population data has {key}={saved.get(key)!r} but the config gives "
                    f"{value!r}; resume with the run's original population settings"
                )
        for rec in data["programs"]:
            entry = ProgramEntry.model_validate(rec["entry"])
            pid = entry.id
            pop._entries[pid] = entry
            pop._hash[pid] = rec["code_hash"]
            pop._coords[pid] = tuple(rec["cell"])
            pop._raw[pid] = tuple(None if v is None else float(v) for v in rec["features"])
        pop._islands = [dict.fromkeys(members) for members in data["islands"]]
        pop._maps = [dict(fmap) for fmap in data["feature_maps"]]
        pop._cell_of = {pid: key for fmap in pop._maps for key, pid in fmap.items()}
        pop._archive = dict.fromkeys(data["archive"])
        pop._best = data["best_id"]
        pop._island_best = list(data["island_best"])
        pop._current = int(data["current_island"])
        pop._generations = [int(g) for g in data["island_generations"]]
        pop._last_migration_generation = int(data["last_migration_generation"])
        pop._last_iteration = int(data["last_iteration"])
        pop._last_advance_iteration = data["last_advance_iteration"]
        pop._feature_stats = {
            dim: [float(lo), float(hi)] for dim, (lo, hi) in data["feature_stats"].items()
        }
        pop._ref_ids = [rid for rid, _ in data["diversity_reference"]]
        pop._ref_hashes = [rh for _, rh in data["diversity_reference"]]
        pop._ref_tokens = None
        return pop


def _cell_key(coords: tuple[int, ...] | list[int]) -> str:
    """String key of a cell, e.g. ``(3, 7)`` → ``"3-7"`` (OpenEvolve's format)."""
    return "-".join(str(c) for c in coords)

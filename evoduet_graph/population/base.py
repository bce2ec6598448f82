"""Shared types of the program population: entries, samples and the `Population` protocol.

A population stores *metadata only* (ids, scores, metrics, lineage). Program source lives in
the run's program store (docs/design.md §3); populations that need code (the diversity feature of
`IslandPopulation`) fetch it through the ``get_code(id)`` callable they are given.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evoduet_graph.config import PopulationConfig
from evoduet_graph.errors import EvoDuetError

GetCode = Callable[[str], str]
"""``get_code(program_id) -> source``; must answer for every id ever added (not migrant ids)."""


class EmptyPopulationError(EvoDuetError, LookupError):
    """`sample` was called on a population that holds no program yet."""


class ProgramEntry(BaseModel):
    """One program as the population sees it (no source code; JSON-serialisable).

    Attributes:
        id: Unique program id (the key of the program store).
        score: Fitness, higher is better (the task's ``combined_score`` or metric mean).
        metrics: Numeric metrics returned by the evaluator; any of them may serve as a
            MAP-Elites feature dimension.
        iteration: Outer-loop iteration that produced the program (set by ``add``).
        parent_id: Id of the parent program, ``None`` for the initial program.
        generation: Number of ancestors (initial program: 0).
        code_length: Length of the source in characters (informational; the complexity
            feature is computed from the ``code`` passed to ``add``).
        island: Island the program lives on (set by the population; ``None`` for `top_k`).
        migrant_of: For a migrant copy made by island migration, the id of the original
            program whose code it shares; ``None`` for every other program. Set only by the
            population. Use ``Population.code_id`` to find the id to fetch code for.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    score: float
    metrics: dict[str, float] = Field(default_factory=dict)
    iteration: int = 0
    parent_id: str | None = None
    generation: int = 0
    code_length: int = 0
    island: int | None = None
    migrant_of: str | None = None


class Sample(BaseModel):
    """What `Population.sample` returns: the parent and the inspirations of one iteration.

    Attributes:
        parent_id: Program to mutate.
        inspiration_ids: Other programs to show in the prompt, most relevant first.
        island: Island the child should be added to (pass it to ``add(island=...)``);
            ``None`` for populations without islands.
        mode: How the parent was chosen: ``exploration`` (uniform on the island),
            ``exploitation`` (from the elite archive), ``weighted`` (fitness-weighted on the
            island), ``best`` (the global best: empty island, or `top_k` elite pick),
            ``top_k`` (uniform among the `top_k` programs).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    parent_id: str
    inspiration_ids: list[str]
    island: int | None
    mode: str


@runtime_checkable
class Population(Protocol):
    """The program database the outer loop selects parents from and adds children to.

    Implementations: `IslandPopulation` (OpenEvolve MAP-Elites islands) and `TopKPopulation`.
    All methods are deterministic: the same sequence of calls (with equally seeded ``rng``)
    yields the same results, also after ``to_dict`` → ``from_dict`` in another process.
    """

    def add(
        self, entry: ProgramEntry, code: str, *, iteration: int, island: int | None = None
    ) -> bool:
        """Add a program; ``False`` (and no change) if its id is already present."""
        ...

    def sample(self, rng: random.Random, *, num_inspirations: int) -> Sample:
        """Choose a parent and up to ``num_inspirations`` inspirations."""
        ...

    def top(self, n: int, island: int | None = None) -> list[str]:
        """Ids of the ``n`` best programs, best first."""
        ...

    @property
    def best_id(self) -> str | None:
        """Id of the best program ever added (never evicted); ``None`` when empty."""
        ...

    def get(self, id: str) -> ProgramEntry:
        """The entry of a present program. Raises KeyError when absent."""
        ...

    def code_id(self, id: str) -> str:
        """Id under which the program's code is stored (the original of a migrant copy)."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, id: object) -> bool: ...

    def ids(self) -> list[str]:
        """Ids of all present programs, in insertion order."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """Complete JSON-serialisable state (restoring reproduces identical behaviour)."""
        ...

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], cfg: PopulationConfig, get_code: GetCode
    ) -> Population:
        """Rebuild a population written by ``to_dict``."""
        ...

    def stats(self) -> dict[str, Any]:
        """Summary numbers for reports and logs."""
        ...


def code_hash(code: str) -> str:
    """Short stable content hash of a program source (16 hex chars, blake2b-64)."""
    return hashlib.blake2b(code.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def check_score(entry: ProgramEntry) -> None:
    """Reject entries whose score cannot be ordered.

    Raises:
        ValueError: ``entry.score`` is NaN.
    """
    if math.isnan(entry.score):
        raise ValueError(f"program {entry.id!r} has a NaN score; cannot rank it")


def score_summary(scores: Iterable[float]) -> dict[str, Any]:
    """Mean and quantiles (0, 25, 50, 75, 100 %) of scores; ``None`` values when empty."""
    arr = np.asarray(list(scores), dtype=float)
    keys = ("p0", "p25", "p50", "p75", "p100")
    if arr.size == 0:
        return {"mean_score": None, "score_quantiles": dict.fromkeys(keys)}
    q = np.quantile(arr, [0.0, 0.25, 0.5, 0.75, 1.0])
    return {
        "mean_score": float(arr.mean()),
        "score_quantiles": {k: float(v) for k, v in zip(keys, q, strict=True)},
    }


def check_kind(data: dict[str, Any], kind: str) -> None:
    """Validate the header of a ``to_dict`` payload.

    Raises:
        ValueError: the payload is not a mapping written by the population ``kind``
            (format version 1).
    """
    if not isinstance(data, dict) or data.get("kind") != kind:
        found = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"expected a {kind!r} population payload, got {found!r}")
    if data.get("version") != 1:
        raise ValueError(f"unsupported {kind} population format version {data.get('version')!r}")

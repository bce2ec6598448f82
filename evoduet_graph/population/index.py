"""The read access every population shares (`EntryIndex`): entries by id, best id, seed."""

from __future__ import annotations

from evoduet_graph.population.base import EmptyPopulationError, ProgramEntry, check_score


class EntryIndex:
    """Read access that every population shares: entries by id, the best id and the seed.

    Subclasses fill ``_entries`` (id → entry, in insertion order), ``_best`` and ``_seed``
    in their ``__init__`` / ``from_dict``; the rules for adding and sampling stay theirs, after
    the checks every population makes first (`_is_new`, `_check_sample`).
    """

    _entries: dict[str, ProgramEntry]
    _best: str | None
    _seed: int

    @property
    def best_id(self) -> str | None:
        """Id of the best program (earliest among equals, never a copy); None when empty."""
        return self._best

    @property
    def seed(self) -> int:
        """The seed given at construction."""
        return self._seed

    def get(self, id: str) -> ProgramEntry:
        """The stored entry.

        Raises:
            KeyError: ``id`` is not in the population.
        """
        return self._entries[id]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, id: object) -> bool:
        return id in self._entries

    def ids(self) -> list[str]:
        """All present ids (migrant copies included), in insertion order."""
        return list(self._entries)

    def _score(self, pid: str) -> float:
        return self._entries[pid].score

    def _is_new(self, entry: ProgramEntry) -> bool:
        """The checks at the start of every ``add``: ``False`` when ``entry.id`` is present.

        Raises:
            ValueError: NaN score or ``entry.migrant_of`` set (migrant copies are made by the
                population only).
        """
        if entry.id in self._entries:
            return False
        check_score(entry)
        if entry.migrant_of is not None:
            raise ValueError(f"program {entry.id!r}: migrant_of is set by the population only")
        return True

    def _check_sample(self, num_inspirations: int) -> None:
        """The checks at the start of every ``sample``.

        Raises:
            ValueError: ``num_inspirations < 0``.
            EmptyPopulationError: nothing has been added yet.
        """
        if num_inspirations < 0:
            raise ValueError(f"num_inspirations must be >= 0, got {num_inspirations}")
        if not self._entries:
            raise EmptyPopulationError("cannot sample from an empty population")

"""The read access every population shares (`EntryIndex`): entries by id, best id, seed."""

from __future__ import annotations

from evoduet_graph.population.base import ProgramEntry


class EntryIndex:
    """Read access that every population shares: entries by id, the best id and the seed.

    Subclasses fill ``_entries`` (id → entry, in insertion order), ``_best`` and ``_seed``
    in their ``__init__`` / ``from_dict``; the rules for adding and sampling stay theirs.
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

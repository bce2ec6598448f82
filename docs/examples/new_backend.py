"""A new search backend: a small fixed glossary, ranked by the words it shares with the query.

`register` adds it to the backend registry (`evoduet_graph.search.registry`), after which
``retrieval.backend: glossary`` is a valid configuration value, appears in the CLI help and the
config schema, and `make_searcher` builds it like any built-in backend.
"""

from __future__ import annotations

import re
from pathlib import Path

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search.base import Document, SearchUnavailableError
from evoduet_graph.search.registry import BackendSpec, register_backend

GLOSSARY = {
    "convex hull": "The smallest convex polygon that contains every point of a set.",
    "shoelace formula": "The area of a simple polygon from the coordinates of its vertices.",
    "regular polygon": "Equal sides and angles; of all n-gons in a circle it has the most area.",
}


def words(text: str) -> set[str]:
    """The lower-case words of ``text``."""
    return set(re.findall(r"[a-z]+", text.lower()))


class GlossarySearcher:
    """A `Searcher` over a fixed glossary (term → definition)."""

    name = "glossary"

    def __init__(self, entries: dict[str, str]) -> None:
        self.entries = entries

    def search(self, query: str, max_results: int) -> list[Document]:
        """Every entry, scored by the query words in its term and definition, best first."""
        asked = words(query)
        hits = [
            Document(
                url=f"glossary:{term.replace(' ', '-')}",
                title=term,
                content=text,
                score=float(len(asked & words(f"{term} {text}"))),
                source=self.name,
            )
            for term, text in self.entries.items()
        ]
        hits.sort(key=lambda doc: -doc.score)
        return hits[:max_results]

    def preflight(self) -> None:
        """Refuse an empty glossary at startup (a run that retrieves would find nothing)."""
        if not self.entries:
            raise SearchUnavailableError("the glossary backend has no entries")


def build_glossary(cfg: RetrievalConfig, task_dir: Path | None) -> GlossarySearcher:
    """The registry's builder: ``(retrieval config, task folder) -> Searcher``."""
    return GlossarySearcher(GLOSSARY)


def register() -> None:
    """Make ``retrieval.backend: glossary`` available."""
    register_backend(
        BackendSpec(
            name="glossary",
            build=build_glossary,
            extra=None,  # no pyproject extra: nothing to install
            key_env=None,  # no API key
            good_for="definitions of the geometry terms of the smoke task",
        )
    )

"""Search backends of a user's own, loaded by ``retrieval.backend: langchain:<module>:<factory>``.

`make_retriever` is what a user with a paper collection writes: a LangChain `BaseRetriever`
(here keyword overlap over three local notes; a vector store's ``as_retriever()`` is the same
protocol). The other attributes exercise the loader's error paths and the tool path.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import tool

NOTES = [
    Document(
        page_content="A regular polygon inscribed in the unit circle has the largest area.",
        metadata={"source": "papers/polygons.md", "title": "Regular polygons"},
    ),
    Document(
        page_content="Spread the points over the full turn, 2 pi, not half of it.",
        metadata={"source": "papers/angles.md", "title": "Angles"},
    ),
    Document(page_content="An unrelated note about cooking pasta.", metadata={}),
]


class NotesRetriever(BaseRetriever):
    """Keyword overlap over `NOTES`, best first (no hits without overlap)."""

    k: int = 2

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = set(query.lower().split())
        scored = [(len(words & set(d.page_content.lower().split())), d) for d in NOTES]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: -s[0])
        return [d for _, d in ranked[: self.k]]


def make_retriever() -> NotesRetriever:
    return NotesRetriever()


notes_retriever = NotesRetriever(k=3)


@tool
def notes_tool(query: str) -> str:
    """Search the notes; answers a JSON list of {link, title, snippet}."""
    hits = NotesRetriever(k=3).invoke(query)
    return json.dumps(
        [
            {
                "link": f"https://notes.example/{i}",
                "title": d.metadata.get("title", ""),
                "snippet": d.page_content,
            }
            for i, d in enumerate(hits)
        ]
    )


def not_a_retriever() -> Any:
    return {"not": "a retriever"}


def broken_factory() -> Any:
    raise RuntimeError("index file missing")

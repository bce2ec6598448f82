"""Wikipedia through langchain-community's ``WikipediaRetriever`` (extra ``wikipedia``; no key).

Each hit is one article: content = its text, url = ``source`` (the page URL), title =
``title``; ``retrieval.wikipedia_lang`` picks the language edition. Good for definitions.
"""

from __future__ import annotations

from typing import Any

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search.backends.langchain import LangChainSearcher, community_retriever
from evoduet_graph.search.base import MAX_CONTENT_CHARS


def make_wikipedia(cfg: RetrievalConfig, *, client: Any | None = None) -> LangChainSearcher:
    """The ``wikipedia`` backend; ``client`` replaces the retriever (tests)."""
    lang = cfg.wikipedia_lang
    return community_retriever(
        "wikipedia",
        "WikipediaRetriever",
        lambda n: {"top_k_results": n, "lang": lang, "doc_content_chars_max": MAX_CONTENT_CHARS},
        client=client,
        url=f"https://{lang}.wikipedia.org/w/api.php",
        options={"lang": lang},
    )

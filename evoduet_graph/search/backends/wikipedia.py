"""Wikipedia through langchain-community's ``WikipediaRetriever`` (extra ``wikipedia``; no key).

Each hit is one article: content = its text, url = ``source`` (the page URL), title =
``title``; ``retrieval.wikipedia_lang`` picks the language edition. Good for definitions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evoduet_graph.search.backends.langchain import LangChainSearcher
from evoduet_graph.search.base import MAX_CONTENT_CHARS
from evoduet_graph.search.preflight import backend_checks

if TYPE_CHECKING:
    from evoduet_graph.config import RetrievalConfig


def make_wikipedia(cfg: RetrievalConfig, *, client: Any | None = None) -> LangChainSearcher:
    """The ``wikipedia`` backend; ``client`` replaces the retriever (tests)."""
    lang = cfg.wikipedia_lang

    def build(n: int) -> Any:
        from langchain_community.retrievers import WikipediaRetriever

        # wiki_client is filled in by the retriever's own validator
        return WikipediaRetriever(  # type: ignore[call-arg]
            top_k_results=n, lang=lang, doc_content_chars_max=MAX_CONTENT_CHARS
        )

    return LangChainSearcher(
        "wikipedia",
        client=client,
        build=build,
        checks=backend_checks(
            "wikipedia", package="wikipedia", url=f"https://{lang}.wikipedia.org/w/api.php"
        ),
        options={"lang": lang},
    )

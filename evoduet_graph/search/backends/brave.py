"""Brave web search (the ``brave`` backend).

Brave web search through langchain-community's ``BraveSearchWrapper`` (extra ``brave``;
key ``BRAVE_SEARCH_API_KEY``).

``download_documents(query)`` gives LangChain documents: content = description and extra
snippets, url = ``link``, title = ``title``. Good for an independent web index with a free tier.
"""

from __future__ import annotations

from typing import Any

from langchain_community.utilities import BraveSearchWrapper

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search.backends.langchain import LangChainSearcher
from evoduet_graph.search.preflight import backend_checks, require_key

KEY_ENV = "BRAVE_SEARCH_API_KEY"
PROBE_URL = "https://api.search.brave.com"
MAX_COUNT = 20  # Brave's web search returns at most 20 results a request


def make_brave(cfg: RetrievalConfig, *, client: Any | None = None) -> LangChainSearcher:
    """The ``brave`` backend; ``client`` replaces the wrapper (tests)."""
    wrappers: dict[int, Any] = {}

    def build(n: int) -> Any:
        if client is not None:
            wrapper = client
        elif n not in wrappers:
            wrapper = wrappers[n] = BraveSearchWrapper(
                api_key=require_key(KEY_ENV, backend="brave"),
                search_kwargs={"count": max(1, min(n, MAX_COUNT))},
            )
        else:
            wrapper = wrappers[n]
        return lambda query, _n: wrapper.download_documents(query)

    return LangChainSearcher(
        "brave",
        build=build,
        checks=[]
        if client is not None
        else backend_checks("brave", package="requests", url=PROBE_URL, key_env=KEY_ENV),
    )

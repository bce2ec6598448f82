"""DuckDuckGo web search (the ``duckduckgo`` backend).

DuckDuckGo web search through langchain-community's ``DuckDuckGoSearchAPIWrapper``
(extra ``duckduckgo``, the ``ddgs`` package; no key).

``results(query, max_results)`` gives ``{snippet, title, link}`` dicts: content = snippet.
Good for code and general web pages without an account.
"""

from __future__ import annotations

from typing import Any

from langchain_community.utilities import DuckDuckGoSearchAPIWrapper

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search.backends.langchain import LangChainSearcher
from evoduet_graph.search.preflight import backend_checks

PROBE_URL = "https://duckduckgo.com"


def make_duckduckgo(cfg: RetrievalConfig, *, client: Any | None = None) -> LangChainSearcher:
    """The ``duckduckgo`` backend; ``client`` replaces the API wrapper (tests)."""
    wrapper: list[Any] = [client] if client is not None else []

    def build(_n: int) -> Any:
        if not wrapper:
            wrapper.append(DuckDuckGoSearchAPIWrapper())
        return lambda query, n: wrapper[0].results(query, n)

    return LangChainSearcher(
        "duckduckgo",
        build=build,
        checks=[]
        if client is not None
        else backend_checks("duckduckgo", package="ddgs", url=PROBE_URL),
    )

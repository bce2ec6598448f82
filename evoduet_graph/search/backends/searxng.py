"""A self-hosted SearXNG instance (the ``searxng`` backend).

A self-hosted SearXNG instance through langchain-community's ``SearxSearchWrapper``
(extra ``searxng``; no key, the instance URL in ``retrieval.searxng_url`` or ``$SEARX_HOST``).

``results(query, num_results)`` gives ``{snippet, title, link, engines}`` dicts: content =
snippet. The instance must allow the JSON output format (``search.formats: [html, json]`` in
its settings.yml). Good for a private meta-search over engines you choose.
"""

from __future__ import annotations

import os
from typing import Any

from langchain_community.utilities import SearxSearchWrapper

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search.backends.langchain import LangChainSearcher
from evoduet_graph.search.base import SearchUnavailableError
from evoduet_graph.search.preflight import require_package, require_reachable

URL_ENV = "SEARX_HOST"


def searxng_url(cfg: RetrievalConfig) -> str | None:
    """``retrieval.searxng_url``, else ``$SEARX_HOST``, else None."""
    return cfg.searxng_url or os.environ.get(URL_ENV) or None


def make_searxng(cfg: RetrievalConfig, *, client: Any | None = None) -> LangChainSearcher:
    """The ``searxng`` backend; ``client`` replaces the wrapper (tests)."""
    url = searxng_url(cfg)
    wrapper: list[Any] = [client] if client is not None else []

    def need_url() -> str:
        if not url:
            raise SearchUnavailableError(
                "backend 'searxng' needs the instance URL: set retrieval.searxng_url or "
                f"{URL_ENV} (e.g. http://localhost:8888)"
            )
        return url

    def build(_n: int) -> Any:
        if not wrapper:
            wrapper.append(SearxSearchWrapper(searx_host=need_url()))
        return lambda query, n: wrapper[0].results(query, num_results=n)

    return LangChainSearcher(
        "searxng",
        build=build,
        checks=[]
        if client is not None
        else [
            need_url,
            lambda: require_package("aiohttp", backend="searxng", extra="searxng"),
            lambda: require_reachable(need_url(), backend="searxng"),
        ],
        options={"url": url},
    )

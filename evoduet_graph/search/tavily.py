"""Tavily web search backend (docs/design.md §4; the paper's default web search).

Wraps ``tavily.TavilyClient.search``, whose response is a dict with a ``results`` list; each
result carries ``url``, ``title``, ``content`` (a query-focused snippet), ``score`` (Tavily's
relevance in [0, 1]) and, when ``include_raw_content`` is requested, ``raw_content`` (the
cleaned page text, possibly null).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Literal

from tavily import TavilyClient

from evoduet_graph.config import RetrievalConfig, config_options
from evoduet_graph.search.base import Document, SearchUnavailableError

_KEY_ENV = "TAVILY_API_KEY"
_MAX_RESULTS_LIMIT = 20  # the API accepts 0..20 results per query

# Tavily error classes that retrying cannot fix (bad or missing key, exhausted plan).
_FATAL_ERRORS = (
    "InvalidAPIKeyError",
    "MissingAPIKeyError",
    "ForbiddenError",
    "UsageLimitExceededError",
    "TavilyKeylessLimitError",
)


_CONFIG_KEYS = {
    "search_depth": "tavily_search_depth",
    "include_raw_content": "tavily_include_raw_content",
    "timeout_s": "search_timeout_s",
    "topic": "tavily_topic",
    "time_range": "tavily_time_range",
    "include_domains": "tavily_include_domains",
    "exclude_domains": "exclude_domains",
}
"""`TavilySearcher` argument → the ``retrieval`` key it comes from (`from_config`)."""


class TavilySearcher:
    """Web search through Tavily.

    Args:
        api_key: Tavily key; default ``$TAVILY_API_KEY`` (read at construction).
        search_depth: ``basic`` (1 credit) or ``advanced`` (2 credits, better snippets).
        include_raw_content: ask for the full page text and use it as the document content
            (falls back to the snippet when a page has none).
        client: an object with a ``search(query=..., **kwargs) -> dict`` method, used instead of
            ``tavily.TavilyClient`` (tests inject a fake).
        timeout_s: HTTP timeout passed to the client, seconds.
        topic: ``general``, ``news`` or ``finance`` (Tavily's search category).
        time_range: ``day``, ``week``, ``month`` or ``year`` (only pages published in it);
            None: any time.
        include_domains: only these domains (empty: all).
        exclude_domains: never these domains (``retrieval.exclude_domains``).
    """

    name = "tavily"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        search_depth: Literal["basic", "advanced"] = "basic",
        include_raw_content: bool = False,
        client: Any | None = None,
        timeout_s: float = 30,
        topic: Literal["general", "news", "finance"] = "general",
        time_range: Literal["day", "week", "month", "year"] | None = None,
        include_domains: Sequence[str] = (),
        exclude_domains: Sequence[str] = (),
    ) -> None:
        self._api_key = api_key or os.environ.get(_KEY_ENV) or None
        self.search_depth = search_depth
        self.include_raw_content = include_raw_content
        self.timeout_s = timeout_s
        self.topic = topic
        self.time_range = time_range
        self.include_domains = list(include_domains)
        self.exclude_domains = list(exclude_domains)
        self._client = client

    @classmethod
    def from_config(cls, cfg: RetrievalConfig, *, client: Any | None = None) -> TavilySearcher:
        """The searcher ``retrieval.tavily_*`` and ``retrieval.exclude_domains`` describe."""
        return cls(client=client, **config_options(cfg, _CONFIG_KEYS))

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "search_depth": self.search_depth,
            "include_raw_content": self.include_raw_content,
            "topic": self.topic,
        }
        if self.time_range:
            options["time_range"] = self.time_range
        if self.include_domains:
            options["include_domains"] = self.include_domains
        if self.exclude_domains:
            options["exclude_domains"] = self.exclude_domains
        return options

    @property
    def cache_key(self) -> str:
        """Backend and every option that changes the results."""
        return json.dumps({"backend": self.name, **self._options()}, sort_keys=True)

    def preflight(self) -> None:
        """Fail fast when no key (and no injected client) is available.

        Raises:
            SearchUnavailableError: ``TAVILY_API_KEY`` is unset, or tavily-python is missing.
        """
        if self._client is not None:
            return
        if not self._api_key:
            raise SearchUnavailableError(
                f"retrieval.backend=tavily but {_KEY_ENV} is not set: set {_KEY_ENV} or use "
                "retrieval.backend=offline"
            )
        self._get_client()

    def _get_client(self) -> Any:
        if self._client is None:
            if not self._api_key:
                raise SearchUnavailableError(
                    f"{_KEY_ENV} is not set: set {_KEY_ENV} or use retrieval.backend=offline"
                )
            self._client = TavilyClient(api_key=self._api_key)
        return self._client

    def search(self, query: str, max_results: int) -> list[Document]:
        """Run one Tavily search and map its results to `Document`s, best first.

        Args:
            query: the query text.
            max_results: wanted hits; clamped to Tavily's 1..20.

        Returns:
            At most ``max_results`` documents (source ``tavily``).

        Raises:
            SearchUnavailableError: missing/invalid key or exhausted quota (not retryable).
            Exception: network and server faults from the client (retryable).
        """
        client = self._get_client()
        n = max(1, min(int(max_results), _MAX_RESULTS_LIMIT))
        try:
            response = client.search(
                query=query, max_results=n, timeout=self.timeout_s, **self._options()
            )
        except Exception as exc:
            if type(exc).__name__ in _FATAL_ERRORS:
                raise SearchUnavailableError(
                    f"tavily refused the request ({type(exc).__name__}: {exc}); check "
                    f"{_KEY_ENV} and your plan, or use retrieval.backend=offline"
                ) from exc
            raise
        results = (response or {}).get("results") or []
        docs: list[Document] = []
        for item in results:
            if not isinstance(item, dict) or not item.get("url"):
                continue
            content = item.get("content") or ""
            if self.include_raw_content and item.get("raw_content"):
                content = item["raw_content"]
            docs.append(
                Document(
                    url=item["url"],
                    title=item.get("title") or item["url"],
                    content=content,
                    score=item.get("score") or 0.0,
                    source=self.name,
                )
            )
        return docs[:n]

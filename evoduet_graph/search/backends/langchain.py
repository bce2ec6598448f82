"""Any LangChain retriever or search tool as a search backend (docs/design.md §4).

`LangChainSearcher` calls a ``BaseRetriever`` (``invoke(query) -> list[Document]``), a search
tool or any runnable (``invoke(query)``), or a plain callable ``(query, max_results)``, and maps
whatever comes back to the one `evoduet_graph.search.Document` shape:

* LangChain ``Document``: content = ``page_content``; url from the metadata keys ``url``,
  ``link``, ``source``, ``Entry ID`` (arXiv), ``href``, ``id``; title from ``title`` /
  ``Title``; score from ``score`` / ``relevance_score``;
* dicts (what the web-search wrappers return): url = ``url`` / ``link`` / ``href``, content =
  ``content`` / ``snippet`` / ``body`` / ``page_content``, a dict holding a ``results`` list is
  unwrapped;
* a string: parsed as JSON when it is JSON, else one document.

A hit without a URL (a chunk of a local vector store, say) gets a stable id
``<backend>:<sha1 of its text>`` so de-duplication and look-up still work.

``langchain:<module>:<factory>`` (`load_user_searcher`) loads a user's retriever or tool.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool

from evoduet_graph.plugins import PluginError, build_plugin, import_attribute
from evoduet_graph.search.base import Document, SearchUnavailableError
from evoduet_graph.search.preflight import backend_checks

_URL_KEYS = ("url", "link", "source", "Entry ID", "entry_id", "href", "id")
_TITLE_KEYS = ("title", "Title", "name")
_CONTENT_KEYS = ("content", "snippet", "body", "page_content", "text", "summary")
_SCORE_KEYS = ("score", "relevance_score", "similarity")

PREFIX = "langchain:"


def _first(data: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for key in keys:
        value = data.get(key)
        if value not in (None, ""):
            return value
    return None


def _fallback_url(source: str, content: str) -> str:
    return f"{source}:{hashlib.sha1(content.encode('utf-8', 'replace')).hexdigest()[:16]}"


def to_documents(raw: Any, source: str) -> list[Document]:
    """Map a retriever's or tool's output to `Document`s (see the module docstring).

    Args:
        raw: list of LangChain documents or dicts, a dict with ``results``, a JSON string, or
            text.
        source: the backend name written into ``Document.source``.

    Returns:
        The documents in the order given; items without text are dropped.
    """
    if raw is None:
        return []
    if isinstance(raw, str):
        text = raw.strip()
        if text[:1] in "[{":
            try:
                return to_documents(json.loads(text), source)
            except ValueError:
                pass
        return [Document(url=_fallback_url(source, text), title="", content=text, source=source)]
    if isinstance(raw, Mapping):
        if isinstance(raw.get("results"), list):
            return to_documents(raw["results"], source)
        raw = [raw]
    docs: list[Document] = []
    for item in raw if isinstance(raw, Iterable) else [raw]:
        doc = _one(item, source)
        if doc is not None:
            docs.append(doc)
    return docs


def _one(item: Any, source: str) -> Document | None:
    page_content = getattr(item, "page_content", None)
    if isinstance(page_content, str):  # a LangChain Document
        meta = dict(getattr(item, "metadata", None) or {})
        content = page_content
    elif isinstance(item, Mapping):
        meta = dict(item)
        content = _first(meta, _CONTENT_KEYS) or ""
    elif isinstance(item, str):
        meta, content = {}, item
    else:
        return None
    content = str(content).strip()
    if not content:
        return None
    url = _first(meta, _URL_KEYS)
    return Document(
        url=str(url) if url is not None else _fallback_url(source, content),
        title=str(_first(meta, _TITLE_KEYS) or ""),
        content=content,
        score=_first(meta, _SCORE_KEYS) or 0.0,
        source=source,
    )


class LangChainSearcher:
    """A `Searcher` over a LangChain retriever, tool, runnable or callable.

    Args:
        name: the backend name (``Document.source``, events, cache key).
        client: the retriever / tool / runnable, or a callable ``(query, max_results)``
            returning raw results; tests pass a fake here.
        build: builds the client on first use (``max_results`` → client) when ``client`` is
            None; a backend whose client needs a per-call result count rebuilds per count.
        checks: preflight checks (package, key, reachable URL), each raising
            `SearchUnavailableError`; skipped when ``client`` was given.
        options: backend settings that change results (part of the cache key).
    """

    def __init__(
        self,
        name: str,
        *,
        client: Any | None = None,
        build: Callable[[int], Any] | None = None,
        checks: Iterable[Callable[[], Any]] = (),
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if client is None and build is None:
            raise ValueError("LangChainSearcher needs a client or a build function")
        self.name = name
        self._client = client
        self._build = build
        self._built: dict[int, Any] = {}
        self._checks = list(checks)
        self.options = dict(options or {})

    @property
    def cache_key(self) -> str:
        """Name and options: two searchers with the same key return the same results."""
        return json.dumps({"backend": self.name, **self.options}, sort_keys=True, default=str)

    def preflight(self) -> None:
        """Run the package / key / reachability checks (none for an injected client).

        Raises:
            SearchUnavailableError: the first failed check's one-line message.
        """
        if self._client is not None:
            return
        for check in self._checks:
            check()

    def _client_for(self, max_results: int) -> Any:
        if self._client is not None:
            return self._client
        assert self._build is not None
        if max_results not in self._built:
            try:
                self._built[max_results] = self._build(max_results)
            except ImportError as exc:
                raise SearchUnavailableError(f"backend {self.name!r}: {exc}") from exc
        return self._built[max_results]

    def search(self, query: str, max_results: int) -> list[Document]:
        """One call of the client, mapped to documents (at most ``max_results``)."""
        client = self._client_for(max_results)
        raw = client.invoke(query) if hasattr(client, "invoke") else client(query, max_results)
        return to_documents(raw, self.name)[: max(0, max_results)]


def community_retriever(
    name: str,
    retriever: str,
    settings: Callable[[int], dict[str, Any]],
    *,
    client: Any | None,
    url: str,
    options: Mapping[str, Any] | None = None,
) -> LangChainSearcher:
    """A keyless backend over one of langchain-community's retrievers.

    Args:
        name: the backend name; its extra and the package it imports have the same name.
        retriever: the class in ``langchain_community.retrievers`` (``ArxivRetriever``, ...);
            its client fields (``arxiv_search``, ``wiki_client``) are filled in by its own
            validator.
        settings: the retriever's keyword arguments for a result count.
        client: replaces the retriever (tests).
        url: what the preflight's reachability probe asks.
        options: backend settings that change results (part of the cache key).

    Returns:
        The searcher, built per result count on first use.
    """

    def build(n: int) -> Any:
        # optional for most runs: only the community retriever backends need it, and
        # importing langchain_community warns that it is being sunset
        from langchain_community import retrievers

        return getattr(retrievers, retriever)(**settings(n))

    return LangChainSearcher(
        name,
        client=client,
        build=build,
        checks=backend_checks(name, package=name, url=url),
        options=options,
    )


def load_user_searcher(spec: str) -> LangChainSearcher:
    """The backend ``langchain:<module>:<factory>`` names.

    A user's ``BaseRetriever`` or ``BaseTool`` (or a factory with no arguments returning one),
    imported by its preflight (or its first search), once.

    The preflight raises `SearchUnavailableError` (one line) for a malformed spec, an import
    failure, a failing factory, or an object that is not a retriever or tool.
    """
    target_spec = spec.removeprefix(PREFIX)
    loaded: list[Any] = []

    def load() -> Any:
        if not loaded:
            try:
                target = import_attribute(
                    target_spec,
                    what="retrieval.backend",
                    example="langchain:my_papers:make_retriever",
                )
                loaded.append(
                    build_plugin(
                        target, kinds=(BaseRetriever, BaseTool), what="retrieval.backend", spec=spec
                    )
                )
            except PluginError as exc:
                raise SearchUnavailableError(str(exc)) from None
        return loaded[0]

    return LangChainSearcher(spec, build=lambda _n: load(), checks=[load], options={"spec": spec})

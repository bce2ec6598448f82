"""Search backends combined: several at once, and domains kept out of the evidence.

`MultiSearcher` runs every configured backend for a query (``backend: [offline, arxiv]``: a
local-first run with a web fallback) and merges the hits, de-duplicated by normalised URL, in
round-robin order so that each backend's best hits come first. A backend that fails is
reported by `MultiSearcher.pop_errors` while the others' hits are still returned; only when
every backend fails does the search fail.

`ExcludeDomains` drops hits whose host is one of ``retrieval.exclude_domains`` or a
subdomain of one, after the fact, for every backend (Tavily and Exa also get the list
natively). It is how a run keeps a task's published answer out of its evidence (the
reward-hacking risk the task seeds name).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from evoduet_graph.search.base import Document, Searcher, SearchUnavailableError


def cache_key_of(searcher: Searcher) -> str:
    """What identifies a backend's results: its ``cache_key`` when it has one, else its name."""
    key = getattr(searcher, "cache_key", None)
    return str(key) if key else str(getattr(searcher, "name", type(searcher).__name__))


class MultiSearcher:
    """Several backends as one (see the module docstring).

    Args:
        searchers: the backends, in priority order (their hits interleave in this order).
    """

    def __init__(self, searchers: Sequence[Searcher]) -> None:
        if len(searchers) < 2:
            raise ValueError("MultiSearcher needs at least two backends")
        self.searchers = list(searchers)
        self.name = "+".join(s.name for s in self.searchers)
        self.fan_out = sum(getattr(s, "fan_out", 1) for s in self.searchers)
        self._errors: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    @property
    def cache_key(self) -> str:
        """The cache keys of every backend, in order."""
        return json.dumps([cache_key_of(s) for s in self.searchers])

    def pop_errors(self, query: str) -> list[str]:
        """Faults of the backends that failed in the last `search` of ``query``.

        Faults of the backends that failed in the last `search` of ``query`` (forgotten
        once read; `search` runs in a worker thread, the caller reads them afterwards).
        """
        with self._lock:
            return self._errors.pop(query, [])

    def preflight(self) -> None:
        """Preflight every backend; the first unusable one stops the run."""
        for searcher in self.searchers:
            searcher.preflight()

    def search(self, query: str, max_results: int) -> list[Document]:
        """Each backend once, ``max_results`` hits each, merged round-robin and de-duplicated.

        Returns:
            At most ``max_results`` documents per backend (``fan_out`` × ``max_results``).

        Raises:
            SearchUnavailableError: every backend is unusable.
            Exception: every backend failed (the last fault; retried by `robust_search`).
        """
        results: list[list[Document]] = []
        errors: list[str] = []
        last: Exception | None = None
        for searcher in self.searchers:
            try:
                results.append(list(searcher.search(query, max_results)))
            except Exception as exc:  # noqa: BLE001 - one backend down is not the search down
                errors.append(f"{searcher.name}: {type(exc).__name__}: {exc}"[:300])
                last = exc
        with self._lock:
            self._errors[query] = errors
        if not results and last is not None:
            raise last
        return merge(results)


def merge(lists: Iterable[Sequence[Document]]) -> list[Document]:
    """Interleave ranked lists, keeping the first copy of each URL.

    Interleave ranked lists (first of each, then second of each, ...), keeping the first
    document of each normalised URL.
    """
    lists = [list(x) for x in lists]
    out: list[Document] = []
    seen: set[str] = set()
    for rank in range(max((len(x) for x in lists), default=0)):
        for docs in lists:
            if rank < len(docs) and docs[rank].normalized_url not in seen:
                seen.add(docs[rank].normalized_url)
                out.append(docs[rank])
    return out


def normalize_domain(domain: str) -> str:
    """``Example.com``, ``https://www.example.com/x`` → ``example.com``."""
    text = domain.strip().lower()
    if "//" in text:
        text = urlsplit(text).hostname or ""
    return text.split("/")[0].removeprefix("www.").strip(".")


def excluded(url: str, domains: Iterable[str]) -> bool:
    """True when ``url``'s host is one of ``domains`` or a subdomain of one.

    True when ``url``'s host is one of ``domains`` or a subdomain of one (offline ids such
    as ``pydoc:...`` have no host and are never excluded).
    """
    try:
        host = (urlsplit(url).hostname or "").lower().removeprefix("www.")
    except ValueError:
        return False
    return bool(host) and any(host == d or host.endswith("." + d) for d in domains)


class ExcludeDomains:
    """A backend whose hits from excluded domains are dropped (see the module docstring)."""

    def __init__(self, inner: Searcher, domains: Iterable[str]) -> None:
        self.inner = inner
        self.domains = sorted({d for d in map(normalize_domain, domains) if d})
        if not self.domains:
            raise SearchUnavailableError("retrieval.exclude_domains holds no domain")
        self.name = inner.name
        self.fan_out = getattr(inner, "fan_out", 1)

    @property
    def cache_key(self) -> str:
        """The inner backend's cache key and the excluded domains."""
        return json.dumps({"inner": cache_key_of(self.inner), "exclude": self.domains})

    def pop_errors(self, query: str) -> list[str]:
        """The inner backend's faults in the last `search` of ``query`` (if it keeps any)."""
        pop = getattr(self.inner, "pop_errors", None)
        return list(pop(query)) if callable(pop) else []

    def preflight(self) -> None:
        """Preflight the inner backend."""
        self.inner.preflight()

    def search(self, query: str, max_results: int) -> list[Document]:
        """The inner backend's hits, without those of the excluded domains."""
        return [
            d for d in self.inner.search(query, max_results) if not excluded(d.url, self.domains)
        ]

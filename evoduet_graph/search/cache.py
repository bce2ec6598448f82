"""The search cache: a query already sent to the same backend is not sent again.

Keyed by the backend's identity (`evoduet_graph.search.combine.cache_key_of`: its name and
every option that changes results), the query text and the result count. A hit returns the
documents as first retrieved, with the time they were retrieved (``fetched_at``, Unix seconds),
so a resumed or repeated run pays for no query twice and a bench is reproducible. Only clean
answers are stored: a failed search, or a combined search in which a backend failed, is not.

The cache is one SQLite file: ``<run_dir>/search_cache.sqlite`` (one run, its resumes
included) or ``<retrieval.cache_dir>/search_cache.sqlite`` (shared by every run naming the
folder); in memory for runs without a run directory. Several processes may share the file
(SQLite's own locking; WAL).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from evoduet_graph.search.base import Document, Searcher, clean_text, robust_search
from evoduet_graph.search.combine import cache_key_of

FILE_NAME = "search_cache.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS search_cache (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    query TEXT NOT NULL,
    max_results INTEGER NOT NULL,
    fetched_at REAL NOT NULL,
    documents TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class SearchOutcome:
    """One query's answer.

    Attributes:
        documents: the hits (cleaned, capped; see `robust_search`).
        error: None, or the one-line fault (``documents`` is then what the other backends of
            a combined search returned, possibly nothing).
        cached: the answer came from the cache.
        fetched_at: Unix seconds when the backend produced these documents.
    """

    documents: list[Document]
    error: str | None
    cached: bool
    fetched_at: float


class SearchCache:
    """A persistent map (backend, query, count) → documents + retrieval time.

    Args:
        path: the SQLite file, or ``":memory:"``.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(_SCHEMA)
        self._conn.commit()

    @classmethod
    def for_run(cls, run_dir: Path | None, cache_dir: str | None) -> SearchCache:
        """The cache of a run: in ``cache_dir`` when given, else in ``run_dir``, else in memory."""
        if cache_dir:
            return cls(Path(cache_dir).expanduser() / FILE_NAME)
        return cls(run_dir / FILE_NAME if run_dir is not None else ":memory:")

    @staticmethod
    def key(searcher: Searcher, query: str, max_results: int) -> str:
        """The cache key of one search (sha256 of backend identity, query, count)."""
        data = json.dumps([cache_key_of(searcher), query, int(max_results)])
        return hashlib.sha256(data.encode("utf-8")).hexdigest()

    def get(self, searcher: Searcher, query: str, max_results: int) -> SearchOutcome | None:
        """The stored answer, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT fetched_at, documents FROM search_cache WHERE key = ?",
                (self.key(searcher, query, max_results),),
            ).fetchone()
        if row is None:
            return None
        try:
            docs = [Document.model_validate(d) for d in json.loads(row[1])]
        except ValueError:
            return None  # a damaged entry is a miss
        return SearchOutcome(documents=docs, error=None, cached=True, fetched_at=float(row[0]))

    def put(
        self,
        searcher: Searcher,
        query: str,
        max_results: int,
        documents: list[Document],
        fetched_at: float,
    ) -> None:
        """Store an answer (the first one stored for a key wins)."""
        payload = json.dumps([d.model_dump(exclude={"normalized_url"}) for d in documents])
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO search_cache VALUES (?, ?, ?, ?, ?, ?)",
                (
                    self.key(searcher, query, max_results),
                    getattr(searcher, "name", type(searcher).__name__),
                    query,
                    int(max_results),
                    fetched_at,
                    payload,
                ),
            )
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM search_cache").fetchone()[0])

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()


def cached_search(
    searcher: Searcher,
    cache: SearchCache | None,
    query: str,
    max_results: int,
    *,
    retries: int = 2,
    timeout_s: float = 30.0,
    backoff_initial_s: float = 0.5,
) -> SearchOutcome:
    """`robust_search` behind the cache: a hit is answered locally; a clean miss is stored.

    Args:
        searcher: the backend (a combined one reports per-backend faults with
            ``pop_errors(query)``; such an answer is returned but not stored).
        cache: the run's cache; None searches every time.
        query: the query text.
        max_results: documents wanted (per backend of a combined search).
        retries: as in `robust_search`.
        timeout_s: as in `robust_search`.
        backoff_initial_s: as in `robust_search`.

    Returns:
        The `SearchOutcome`; never raises for backend faults.
    """
    if cache is not None:
        hit = cache.get(searcher, query, max_results)
        if hit is not None:
            return hit
    fetched_at = time.time()
    docs, error = robust_search(
        searcher,
        query,
        max_results,
        retries=retries,
        timeout_s=timeout_s,
        backoff_initial_s=backoff_initial_s,
    )
    pop = getattr(searcher, "pop_errors", None)
    partial = list(pop(clean_text(query).strip())) if callable(pop) else []
    if partial and error is None:
        error = "; ".join(partial)
    if cache is not None and error is None:
        cache.put(searcher, query, max_results, docs, fetched_at)
    return SearchOutcome(documents=docs, error=error, cached=False, fetched_at=fetched_at)

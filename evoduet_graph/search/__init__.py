"""World-knowledge layer: search backends and the search database D_search (docs/design.md §1, §4).

Backends share one `Document` shape and the `Searcher` protocol; `make_searcher` builds the ones a
run configures (from the backend registry, `evoduet_graph.search.registry`), and `robust_search` is
how nodes call it. `SearchDatabase` persists every committed retrieval and its realised impact.
"""

from __future__ import annotations

from evoduet_graph.search.base import (
    MAX_CONTENT_CHARS,
    Document,
    NoneSearcher,
    Searcher,
    SearchError,
    SearchTimeoutError,
    SearchUnavailableError,
    clean_text,
    normalize_url,
    robust_search,
)
from evoduet_graph.search.database import (
    Impact,
    Prediction,
    RoundLog,
    RoundResult,
    SearchDatabase,
    SearchRecord,
    StoredDocument,
)
from evoduet_graph.search.offline import OfflineSearcher, OfflineSources
from evoduet_graph.search.registry import (
    BackendSpec,
    backend_names,
    make_searcher,
    register_backend,
)
from evoduet_graph.search.tavily import TavilySearcher

__all__ = [
    "MAX_CONTENT_CHARS",
    "BackendSpec",
    "Document",
    "Impact",
    "NoneSearcher",
    "OfflineSearcher",
    "OfflineSources",
    "Prediction",
    "RoundLog",
    "RoundResult",
    "SearchDatabase",
    "SearchError",
    "SearchRecord",
    "SearchTimeoutError",
    "SearchUnavailableError",
    "Searcher",
    "StoredDocument",
    "TavilySearcher",
    "backend_names",
    "clean_text",
    "make_searcher",
    "normalize_url",
    "register_backend",
    "robust_search",
]

"""arXiv through langchain-community's ``ArxivRetriever`` (extra ``arxiv``; no key).

Each hit is one paper: content = the abstract, url = its ``Entry ID``
(``http://arxiv.org/abs/<id>``), title = ``Title``. Good for methods and algorithms.
"""

from __future__ import annotations

from typing import Any

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search.backends.langchain import LangChainSearcher, community_retriever

PROBE_URL = "https://export.arxiv.org/api/query"


def make_arxiv(cfg: RetrievalConfig, *, client: Any | None = None) -> LangChainSearcher:
    """The ``arxiv`` backend; ``client`` replaces the retriever (tests)."""
    return community_retriever(
        "arxiv",
        "ArxivRetriever",
        lambda n: {"top_k_results": n, "load_max_docs": n, "get_full_documents": False},
        client=client,
        url=PROBE_URL,
    )

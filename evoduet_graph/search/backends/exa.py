"""Exa neural web search (the ``exa`` backend).

Exa neural web search through the partner package's ``ExaSearchRetriever`` (extra ``exa``;
key ``EXA_API_KEY``).

Each hit: content = the page text (capped), url / title / score from the metadata.
``retrieval.exclude_domains`` is passed to Exa itself. Good for finding papers and blog posts
by meaning rather than keywords.
"""

from __future__ import annotations

from typing import Any

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search.backends.langchain import LangChainSearcher
from evoduet_graph.search.base import MAX_CONTENT_CHARS
from evoduet_graph.search.preflight import backend_checks, require_key

KEY_ENV = "EXA_API_KEY"
PROBE_URL = "https://api.exa.ai"


def make_exa(cfg: RetrievalConfig, *, client: Any | None = None) -> LangChainSearcher:
    """The ``exa`` backend; ``client`` replaces the retriever (tests)."""
    exclude = list(cfg.exclude_domains) or None

    def build(n: int) -> Any:
        from langchain_exa import ExaSearchRetriever  # optional (the `exa` extra)

        return ExaSearchRetriever(
            k=n,
            exclude_domains=exclude,
            text_contents_options={"max_characters": MAX_CONTENT_CHARS},
            exa_api_key=require_key(KEY_ENV, backend="exa"),
        )

    return LangChainSearcher(
        "exa",
        client=client,
        build=build,
        checks=backend_checks("exa", package="langchain_exa", url=PROBE_URL, key_env=KEY_ENV),
        options={"exclude_domains": exclude},
    )

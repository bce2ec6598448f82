"""The one search-backend registry (docs/design.md §2, §4).

Every backend a run can name in ``retrieval.backend`` is a `BackendSpec` here: how to build
it from the run's `RetrievalConfig`, the pyproject extra that installs it, the key it needs
and what it is good for (docs/search.md's table of search sources lists the same). Besides the
registered names, ``langchain:<module>:<factory>`` loads any LangChain retriever or search
tool of the user's (`evoduet_graph.search.backends.langchain.load_user_searcher`).

``retrieval.backend`` may list several names (``[offline, arxiv]``): `make_searcher` then
combines them (`evoduet_graph.search.combine.MultiSearcher`), and ``retrieval.exclude_domains``
wraps the result in `evoduet_graph.search.combine.ExcludeDomains`.

Add a backend with `register_backend` (or a ``langchain:`` spec, no registration needed).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search.backends.langchain import PREFIX as LANGCHAIN_PREFIX
from evoduet_graph.search.backends.langchain import load_user_searcher
from evoduet_graph.search.base import NoneSearcher, Searcher
from evoduet_graph.search.combine import ExcludeDomains, MultiSearcher
from evoduet_graph.search.offline import OfflineSearcher, OfflineSources
from evoduet_graph.search.tavily import TavilySearcher

Builder = Callable[["RetrievalConfig", Path | None], Searcher]
"""``(retrieval config, task folder or None) -> Searcher``; no network work (that is the
preflight's)."""


@dataclass(frozen=True)
class BackendSpec:
    """One registered search backend.

    Attributes:
        name: the value of ``retrieval.backend``.
        build: the `Builder`.
        extra: the pyproject extra that installs its packages (None: installed with the
            package).
        key_env: the environment variable holding its API key (None: no key).
        good_for: one line for the README table and ``--help``.
    """

    name: str
    build: Builder
    extra: str | None
    key_env: str | None
    good_for: str


_REGISTRY: dict[str, BackendSpec] = {}


def register_backend(spec: BackendSpec) -> None:
    """Add (or replace) a backend under ``spec.name``.

    Raises:
        ValueError: the name is empty, has a colon (reserved for ``langchain:``) or a comma.
    """
    if not spec.name or any(c in spec.name for c in ":,") or spec.name != spec.name.strip():
        raise ValueError(f"invalid backend name {spec.name!r}")
    _REGISTRY[spec.name] = spec


def backend_choices() -> str:
    """Every value ``retrieval.backend`` accepts, for the CLI help and the config schema.

    The registered names, then ``langchain:<module>:<factory>``, ``|``-separated.
    """
    names = [n for n in _REGISTRY if n != "none"]
    tail = ["none"] if "none" in _REGISTRY else []
    return "|".join([*names, f"{LANGCHAIN_PREFIX}<module>:<factory>", *tail])


def backend_names() -> list[str]:
    """Registered backend names, in registration order."""
    return list(_REGISTRY)


def backend_spec(name: str) -> BackendSpec:
    """The registered backend ``name``.

    Raises:
        ValueError: an unknown name (the message lists the valid ones).
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown search backend {name!r}; valid: {', '.join(backend_names())}, or "
            f"{LANGCHAIN_PREFIX}<module>:<factory> for a LangChain retriever or tool of yours"
        ) from None


def check_backend_names(names: list[str]) -> None:
    """Validate the names of ``retrieval.backend`` (no import or network work).

    Raises:
        ValueError: an empty list, an unknown or repeated name, or ``none`` beside others.
    """
    if not names:
        raise ValueError("retrieval.backend lists no backend")
    for name in names:
        if not name.startswith(LANGCHAIN_PREFIX):
            backend_spec(name)
    if len(set(names)) != len(names):
        raise ValueError(f"retrieval.backend names a backend twice: {names}")
    if "none" in names and len(names) > 1:
        raise ValueError("retrieval.backend 'none' cannot be combined with other backends")


def build_backend(name: str, cfg: RetrievalConfig, task_dir: Path | None) -> Searcher:
    """One backend by name (registered, or a ``langchain:`` spec)."""
    if name.startswith(LANGCHAIN_PREFIX):
        return load_user_searcher(name)
    return backend_spec(name).build(cfg, task_dir)


def make_searcher(cfg: RetrievalConfig, *, task_dir: Path | None = None) -> Searcher:
    """Build the backend(s) ``cfg.backend`` names (no network or index work happens here).

    Args:
        cfg: the run's retrieval settings.
        task_dir: the task folder; its ``docs/`` joins the offline corpus when present.

    Returns:
        One `Searcher`: the backend itself, a `MultiSearcher` over several, either wrapped in
        `ExcludeDomains` when ``cfg.exclude_domains`` is set. Call ``preflight()`` before a
        run that can retrieve.

    Raises:
        ValueError: an unknown backend name.
    """
    names = cfg.backend_names
    check_backend_names(names)
    searchers = [build_backend(name, cfg, task_dir) for name in names]
    searcher: Searcher = searchers[0] if len(searchers) == 1 else MultiSearcher(searchers)
    if cfg.exclude_domains and names != ["none"]:
        searcher = ExcludeDomains(searcher, cfg.exclude_domains)
    return searcher


# -- the built-in backends -----------------------------------------------------------------


def _none(cfg: RetrievalConfig, task_dir: Path | None) -> Searcher:
    return NoneSearcher()


def _offline(cfg: RetrievalConfig, task_dir: Path | None) -> Searcher:
    return OfflineSearcher(
        OfflineSources.from_config(cfg, task_dir=task_dir), cache_dir=cfg.index_cache_dir
    )


def _tavily(cfg: RetrievalConfig, task_dir: Path | None) -> Searcher:
    return TavilySearcher.from_config(cfg)


def _lazy(module: str, factory: str) -> Builder:
    def build(cfg: RetrievalConfig, task_dir: Path | None) -> Searcher:
        searcher: Searcher = getattr(importlib.import_module(module), factory)(cfg)
        return searcher

    return build


for _spec in (
    BackendSpec(
        "offline",
        _offline,
        None,
        None,
        "local-first: BM25 over the task's docs/, --corpus folders and numpy/scipy API docs",
    ),
    BackendSpec(
        "tavily",
        _tavily,
        None,
        "TAVILY_API_KEY",
        "web search built for LLM agents: snippets or full pages, topic, time range, domains",
    ),
    BackendSpec(
        "arxiv",
        _lazy("evoduet_graph.search.backends.arxiv", "make_arxiv"),
        "arxiv",
        None,
        "methods and algorithms: paper abstracts",
    ),
    BackendSpec(
        "wikipedia",
        _lazy("evoduet_graph.search.backends.wikipedia", "make_wikipedia"),
        "wikipedia",
        None,
        "definitions and background: whole articles",
    ),
    BackendSpec(
        "duckduckgo",
        _lazy("evoduet_graph.search.backends.duckduckgo", "make_duckduckgo"),
        "duckduckgo",
        None,
        "code and general web pages, no account: snippets",
    ),
    BackendSpec(
        "searxng",
        _lazy("evoduet_graph.search.backends.searxng", "make_searxng"),
        "searxng",
        None,
        "a self-hosted meta-search instance (retrieval.searxng_url): snippets",
    ),
    BackendSpec(
        "exa",
        _lazy("evoduet_graph.search.backends.exa", "make_exa"),
        "exa",
        "EXA_API_KEY",
        "papers and posts found by meaning: page text",
    ),
    BackendSpec(
        "brave",
        _lazy("evoduet_graph.search.backends.brave", "make_brave"),
        "brave",
        "BRAVE_SEARCH_API_KEY",
        "an independent web index with a free tier: snippets",
    ),
    BackendSpec("none", _none, None, None, "no search (only with gate.mode: never)"),
):
    register_backend(_spec)

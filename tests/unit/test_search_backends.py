"""The search-backend registry, the LangChain-based backends and the search cache.

The search-backend registry, the LangChain-based backends (each against a fake of its
client), combined backends, ``exclude_domains``, preflight error paths and the search cache.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from evoduet_graph.config import ConfigError, EvoDuetConfig, RetrievalConfig
from evoduet_graph.search import (
    Document,
    SearchUnavailableError,
    TavilySearcher,
    backend_names,
    make_searcher,
)
from evoduet_graph.search.backends.arxiv import make_arxiv
from evoduet_graph.search.backends.brave import make_brave
from evoduet_graph.search.backends.duckduckgo import make_duckduckgo
from evoduet_graph.search.backends.exa import make_exa
from evoduet_graph.search.backends.langchain import LangChainSearcher, to_documents
from evoduet_graph.search.backends.searxng import make_searxng
from evoduet_graph.search.backends.wikipedia import make_wikipedia
from evoduet_graph.search.cache import SearchCache, cached_search
from evoduet_graph.search.combine import ExcludeDomains, MultiSearcher, excluded
from evoduet_graph.search.preflight import require_package, require_reachable
from evoduet_graph.search.registry import (
    BackendSpec,
    backend_choices,
    backend_spec,
    register_backend,
)
from evoduet_graph.startup import checked_config
from tests.fakes import FailingSearcher, FakeSearcher

# ------------------------------------------------------------------------------------------
# fakes of each backend's client, shaped like what the real class returns
# ------------------------------------------------------------------------------------------


class FakeRetriever(BaseRetriever):
    """A retriever that answers canned LangChain documents and records its queries."""

    docs: list[LCDocument]
    queries: list[str] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        self.queries.append(query)
        return list(self.docs)


ARXIV_DOCS = [  # ArxivRetriever.get_summaries_as_docs: abstract + Entry ID/Title/...
    LCDocument(
        page_content="We pack circles in a square with a new bilevel method.",
        metadata={
            "Entry ID": "http://arxiv.org/abs/2401.00001v2",
            "Published": "2024-01-01",
            "Title": "Bilevel circle packing",
            "Authors": "A. Author",
        },
    ),
    LCDocument(
        page_content="A survey of packing problems.",
        metadata={"Entry ID": "http://arxiv.org/abs/2301.00002v1", "Title": "Packing survey"},
    ),
]
WIKI_DOCS = [  # WikipediaRetriever: article text + title/summary/source
    LCDocument(
        page_content="Circle packing is the study of the arrangement of circles.",
        metadata={
            "title": "Circle packing",
            "summary": "arrangement of circles",
            "source": "https://en.wikipedia.org/wiki/Circle_packing",
        },
    )
]
EXA_DOCS = [  # ExaSearchRetriever: page text + title/url/id/score/...
    LCDocument(
        page_content="Page text about packings.",
        metadata={
            "title": "Packings blog",
            "url": "https://blog.example/packings",
            "id": "https://blog.example/packings",
            "score": 0.42,
            "published_date": None,
            "author": None,
        },
    )
]


class FakeDDG:
    """``DuckDuckGoSearchAPIWrapper.results(query, max_results)`` → snippet/title/link."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def results(self, query: str, max_results: int) -> list[dict[str, str]]:
        self.calls.append((query, max_results))
        return [
            {"snippet": f"ddg {i}", "title": f"T{i}", "link": f"https://ddg.example/{i}"}
            for i in range(max_results)
        ]


class FakeSearx:
    """``SearxSearchWrapper.results(query, num_results=...)``."""

    def results(self, query: str, num_results: int) -> list[dict[str, Any]]:
        return [
            {
                "snippet": "searx hit",
                "title": "S",
                "link": "https://searx.example/a",
                "engines": ["x"],
                "category": "general",
            }
        ][:num_results]


class FakeBrave:
    """``BraveSearchWrapper.download_documents(query)`` → documents with title/link."""

    def download_documents(self, query: str) -> list[LCDocument]:
        return [
            LCDocument(
                page_content="brave description extra snippet",
                metadata={"title": "B", "link": "https://brave.example/b"},
            )
        ]


def _cfg(**kw: Any) -> RetrievalConfig:
    return RetrievalConfig(**kw)


@pytest.mark.parametrize(
    ("make", "client", "source", "url", "title", "content"),
    [
        (
            make_arxiv,
            FakeRetriever(docs=ARXIV_DOCS),
            "arxiv",
            "http://arxiv.org/abs/2401.00001v2",
            "Bilevel circle packing",
            "We pack circles",
        ),
        (
            make_wikipedia,
            FakeRetriever(docs=WIKI_DOCS),
            "wikipedia",
            "https://en.wikipedia.org/wiki/Circle_packing",
            "Circle packing",
            "Circle packing is",
        ),
        (
            make_exa,
            FakeRetriever(docs=EXA_DOCS),
            "exa",
            "https://blog.example/packings",
            "Packings blog",
            "Page text",
        ),
        (make_duckduckgo, FakeDDG(), "duckduckgo", "https://ddg.example/0", "T0", "ddg 0"),
        (make_searxng, FakeSearx(), "searxng", "https://searx.example/a", "S", "searx hit"),
        (make_brave, FakeBrave(), "brave", "https://brave.example/b", "B", "brave description"),
    ],
)
def test_each_backend_maps_its_client_to_the_document_shape(
    make, client, source, url, title, content
) -> None:
    searcher = make(_cfg(), client=client)
    searcher.preflight()  # an injected client needs no package, key or network
    docs = searcher.search("circle packing", 2)
    assert docs and all(isinstance(d, Document) for d in docs)
    first = docs[0]
    assert (first.source, first.url, first.title) == (source, url, title)
    assert first.content.startswith(content)
    assert len(docs) <= 2


def test_exa_score_and_duckduckgo_count_are_passed_through() -> None:
    assert make_exa(_cfg(), client=FakeRetriever(docs=EXA_DOCS)).search("q", 3)[0].score == 0.42
    ddg = FakeDDG()
    make_duckduckgo(_cfg(), client=ddg).search("q", 4)
    assert ddg.calls == [("q", 4)]


def test_to_documents_handles_strings_json_and_result_dicts() -> None:
    assert to_documents(None, "x") == []
    [text] = to_documents("plain answer", "tool")
    assert text.content == "plain answer" and text.url.startswith("tool:")
    wrapped = to_documents(
        json.dumps({"results": [{"url": "https://a.example", "body": "b"}]}), "t"
    )
    assert [(d.url, d.content) for d in wrapped] == [("https://a.example", "b")]
    assert to_documents([{"url": "https://a.example"}], "t") == []  # no text: dropped


# ------------------------------------------------------------------------------------------
# registry and config
# ------------------------------------------------------------------------------------------


def test_registry_names_every_builtin_backend() -> None:
    assert set(backend_names()) >= {
        "offline",
        "tavily",
        "arxiv",
        "wikipedia",
        "duckduckgo",
        "searxng",
        "exa",
        "brave",
        "none",
    }


def test_docs_table_lists_every_registered_backend() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "search.md").read_text(encoding="utf-8")
    table = page[page.index("| backend | extra |") :]
    table = table[: table.index("\n\n")]
    builtin = [
        n
        for n in backend_names()
        if backend_spec(n).build.__module__ == "evoduet_graph.search.registry"
    ]
    assert len(builtin) == 9
    for name in builtin:
        assert f"| `{name}`" in table, name


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ("bing", "unknown search backend 'bing'; valid: offline, tavily"),
        (["offline", "offline"], "names a backend twice"),
        (["none", "offline"], "'none' cannot be combined"),
        ([], "lists no backend"),
    ],
)
def test_setup_refuses_bad_backend_lists(backend: Any, message: str) -> None:
    cfg = EvoDuetConfig().with_overrides({"retrieval.backend": backend})  # checked at setup
    with pytest.raises(ConfigError, match=f"retrieval.backend: .*{message}"):
        checked_config(cfg)


def test_the_config_reference_lists_every_builtin_backend() -> None:
    described = RetrievalConfig.model_fields["backend"].description or ""
    choices = described[described.index("URL): ") + len("URL): ") :].split(" ")[0]
    assert choices == backend_choices()


def test_config_accepts_lists_and_langchain_specs() -> None:
    cfg = EvoDuetConfig().with_overrides({"retrieval.backend": ["offline", "arxiv"]})
    assert cfg.retrieval.backend_names == ["offline", "arxiv"]
    one = EvoDuetConfig().with_overrides({"retrieval.backend": ["arxiv"]})
    assert one.retrieval.backend == "arxiv"
    spec = EvoDuetConfig().with_overrides({"retrieval.backend": "langchain:a.b:c"})
    assert spec.retrieval.backend_names == ["langchain:a.b:c"]


def test_make_searcher_builds_a_combined_filtered_backend() -> None:
    searcher = make_searcher(
        _cfg(backend=["arxiv", "wikipedia"], exclude_domains=["wikipedia.org"])
    )
    assert isinstance(searcher, ExcludeDomains) and isinstance(searcher.inner, MultiSearcher)
    assert searcher.name == "arxiv+wikipedia" and searcher.fan_out == 2


def test_register_backend_adds_a_name_and_refuses_bad_ones() -> None:
    register_backend(
        BackendSpec("fake-test", lambda cfg, td: FakeSearcher(name="fake-test"), None, None, "t")
    )
    assert "fake-test" in backend_names()
    assert make_searcher(_cfg(backend="fake-test")).name == "fake-test"
    with pytest.raises(ValueError, match="invalid backend name"):
        register_backend(BackendSpec("a:b", lambda cfg, td: FakeSearcher(), None, None, ""))


# ------------------------------------------------------------------------------------------
# preflight: package, key, reachable URL — one line each
# ------------------------------------------------------------------------------------------


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("name", "module", "extra"),
    [
        ("arxiv", "arxiv", "arxiv"),
        ("wikipedia", "wikipedia", "wikipedia"),
        ("duckduckgo", "ddgs", "duckduckgo"),
        ("exa", "langchain_exa", "exa"),
    ],
)
def test_preflight_names_the_missing_package_and_extra(monkeypatch, name, module, extra) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda m, *a: None if m == module else real(m, *a)
    )
    monkeypatch.setenv("EXA_API_KEY", "k")
    with pytest.raises(SearchUnavailableError) as exc:
        make_searcher(_cfg(backend=name)).preflight()
    assert f"pip install 'evoduet-graph[{extra}]'" in _one_line(exc)


@pytest.mark.parametrize(
    ("name", "env"), [("exa", "EXA_API_KEY"), ("brave", "BRAVE_SEARCH_API_KEY")]
)
def test_preflight_names_the_missing_key(monkeypatch, name, env) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: real(m, *a) or object())
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(SearchUnavailableError) as exc:
        make_searcher(_cfg(backend=name)).preflight()
    assert f"{env} is not set" in _one_line(exc)


def test_searxng_preflight_needs_its_url(monkeypatch) -> None:
    monkeypatch.delenv("SEARX_HOST", raising=False)
    with pytest.raises(SearchUnavailableError) as exc:
        make_searcher(_cfg(backend="searxng")).preflight()
    assert "retrieval.searxng_url" in _one_line(exc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server: a request with ``q=`` answers SearXNG's JSON, anything else 404."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if "q=" not in self.path:
                self.send_error(404)
                return
            body = json.dumps(
                {
                    "query": "q",
                    "results": [
                        {
                            "url": "https://www.site.example/a?utm_source=x",
                            "title": "A",
                            "content": "first hit",
                            "engines": ["e"],
                            "category": "general",
                        },
                        {
                            "url": "https://answers.example/b",
                            "title": "B",
                            "content": "second hit",
                            "engines": ["e"],
                            "category": "general",
                        },
                    ],
                    "answers": [],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_reachability_probe(http_server) -> None:
    url, _ = http_server
    require_reachable(url + "/missing", backend="x")  # a 404 is an answer: reachable
    closed = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(SearchUnavailableError) as exc:
        require_reachable(closed, backend="searxng", timeout_s=2)
    assert f"cannot reach {closed}" in _one_line(exc)
    with pytest.raises(SearchUnavailableError, match="not an http"):
        require_reachable("file:///etc/passwd", backend="x")
    with pytest.raises(SearchUnavailableError, match=r"pip install 'evoduet-graph\[x\]'"):
        require_package("no_such_module_xyz", backend="x", extra="x")


def test_searxng_with_the_real_wrapper_against_a_local_instance(http_server) -> None:
    """langchain-community's SearxSearchWrapper, unmodified, against a loopback SearXNG."""
    url, seen = http_server
    searcher = make_searcher(_cfg(backend="searxng", searxng_url=url))
    searcher.preflight()
    docs = searcher.search("circle packing", 5)
    assert [d.url for d in docs] == [
        "https://www.site.example/a?utm_source=x",
        "https://answers.example/b",
    ]
    assert docs[0].content == "first hit" and docs[0].source == "searxng"
    assert any("q=circle+packing" in p and "format=json" in p for p in seen)


# ------------------------------------------------------------------------------------------
# langchain:<module>:<factory>
# ------------------------------------------------------------------------------------------


def test_user_retriever_from_a_langchain_spec() -> None:
    spec = "langchain:tests.search_plugins:make_retriever"
    searcher = make_searcher(_cfg(backend=spec))
    searcher.preflight()
    docs = searcher.search("regular polygon unit circle area", 5)
    assert docs[0].url == "papers/polygons.md" and docs[0].title == "Regular polygons"
    assert docs[0].source == spec


def test_user_retriever_instance_and_tool() -> None:
    inst = make_searcher(_cfg(backend="langchain:tests.search_plugins:notes_retriever"))
    assert len(inst.search("the points unit circle", 5)) >= 2
    tool = make_searcher(_cfg(backend="langchain:tests.search_plugins:notes_tool"))
    docs = tool.search("full turn points", 5)
    assert docs[0].url == "https://notes.example/0" and "full turn" in docs[0].content


def test_note_without_a_url_gets_a_stable_id() -> None:
    searcher = LangChainSearcher("mine", client=FakeRetriever(docs=[LCDocument(page_content="x")]))
    assert searcher.search("q", 1)[0].url == searcher.search("q", 1)[0].url
    assert searcher.search("q", 1)[0].url.startswith("mine:")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("langchain:nope", "use <module>:<attribute>"),
        ("langchain:tests.no_such_module:x", "does not import: ModuleNotFoundError"),
        ("langchain:tests.search_plugins:missing", "does not import: AttributeError"),
        ("langchain:tests.search_plugins:not_a_retriever", "returned dict, not BaseRetriever"),
        ("langchain:tests.search_plugins:broken_factory", "the factory failed: RuntimeError"),
    ],
)
def test_bad_langchain_specs_fail_the_preflight_in_one_line(spec: str, message: str) -> None:
    searcher = make_searcher(_cfg(backend=spec))
    with pytest.raises(SearchUnavailableError) as exc:
        searcher.preflight()
    assert message in _one_line(exc)


# ------------------------------------------------------------------------------------------
# several backends, exclude_domains
# ------------------------------------------------------------------------------------------


def _doc(url: str, source: str) -> Document:
    return Document(url=url, title=url, content=f"text of {url}", source=source)


def test_multi_searcher_interleaves_and_dedupes_by_normalised_url() -> None:
    a = FakeSearcher(
        lambda q, n: [_doc("https://x.example/1", "a"), _doc("https://a.example", "a")]
    )
    b = FakeSearcher(
        lambda q, n: [_doc("https://www.x.example/1/", "b"), _doc("https://b.example", "b")]
    )
    docs = MultiSearcher([a, b]).search("q", 5)
    assert [d.url for d in docs] == [
        "https://x.example/1",
        "https://a.example",
        "https://b.example",
    ]


def test_multi_searcher_keeps_the_others_when_one_backend_fails() -> None:
    good = FakeSearcher(name="good")
    multi = MultiSearcher([FailingSearcher(), good])
    outcome = cached_search(multi, SearchCache(), "q", 2, retries=0)
    assert [d.source for d in outcome.documents] == ["good", "good"]
    assert outcome.error and "failing: ConnectionError" in outcome.error
    with pytest.raises(ConnectionError):
        MultiSearcher([FailingSearcher(), FailingSearcher(name="f2")]).search("q", 2)


def test_exclude_domains_filters_every_backend_after_the_fact() -> None:
    inner = FakeSearcher(
        lambda q, n: [
            _doc("https://github.com/x/answer", "f"),
            _doc("https://gist.github.com/y", "f"),
            _doc("https://notgithub.com/z", "f"),
            _doc("pydoc:numpy.sum", "f"),
        ]
    )
    searcher = ExcludeDomains(inner, ["https://www.GitHub.com/"])
    assert [d.url for d in searcher.search("q", 5)] == [
        "https://notgithub.com/z",
        "pydoc:numpy.sum",
    ]
    assert excluded("https://sub.a.example/x", ["a.example"])
    assert not excluded("file:docs/x.md#1", ["a.example"])


def test_exclude_domains_reach_tavily_and_exa_natively() -> None:
    class Client:
        def __init__(self) -> None:
            self.calls: list[dict[str, Any]] = []

        def search(self, **kw: Any) -> dict[str, Any]:
            self.calls.append(kw)
            return {
                "results": [
                    {"url": "https://ok.example", "content": "c"},
                    {"url": "https://answer.example/p", "content": "leak"},
                ]
            }

    client = Client()
    cfg = _cfg(
        backend="tavily",
        exclude_domains=["answer.example"],
        tavily_topic="news",
        tavily_time_range="year",
        tavily_include_domains=["ok.example"],
    )
    tavily = TavilySearcher.from_config(cfg, client=client)
    assert len(tavily.search("q", 3)) == 2  # the fake ignores the option: the wrapper filters
    call = client.calls[0]
    assert call["exclude_domains"] == ["answer.example"] and call["topic"] == "news"
    assert call["time_range"] == "year" and call["include_domains"] == ["ok.example"]
    filtered = ExcludeDomains(tavily, cfg.exclude_domains)
    assert [d.url for d in filtered.search("q", 3)] == ["https://ok.example"]
    exa = make_exa(_cfg(exclude_domains=["answer.example"]))
    assert exa.options["exclude_domains"] == ["answer.example"]


# ------------------------------------------------------------------------------------------
# the search cache
# ------------------------------------------------------------------------------------------


def test_cache_answers_a_repeated_query_with_the_original_timestamp(tmp_path: Path) -> None:
    fake = FakeSearcher()
    cache = SearchCache(tmp_path / "c.sqlite")
    first = cached_search(fake, cache, "circle packing", 3)
    time.sleep(0.01)
    second = cached_search(fake, cache, "circle packing", 3)
    assert fake.calls == 1 and not first.cached and second.cached
    assert second.fetched_at == first.fetched_at
    assert [d.url for d in second.documents] == [d.url for d in first.documents]
    cached_search(fake, cache, "circle packing", 4)  # another count: another key
    cached_search(fake, cache, "other", 3)
    assert fake.calls == 3
    cache.close()
    reopened = SearchCache(tmp_path / "c.sqlite")  # across runs
    assert cached_search(fake, reopened, "circle packing", 3).cached and fake.calls == 3


def test_cache_key_includes_backend_options() -> None:
    cache = SearchCache()
    client_calls: list[dict[str, Any]] = []

    class Client:
        def search(self, **kw: Any) -> dict[str, Any]:
            client_calls.append(kw)
            return {"results": [{"url": "https://a.example", "content": "c"}]}

    basic = TavilySearcher(client=Client())
    news = TavilySearcher(client=Client(), topic="news")
    cached_search(basic, cache, "q", 2)
    cached_search(news, cache, "q", 2)
    cached_search(basic, cache, "q", 2)
    assert len(client_calls) == 2


def test_failed_searches_are_not_cached() -> None:
    cache = SearchCache()
    failing = FailingSearcher()
    outcome = cached_search(failing, cache, "q", 2, retries=0)
    assert outcome.error and not outcome.cached and len(cache) == 0

"""Search backends: URL normalisation, robust_search, tavily mapping, offline BM25 index."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search import (
    Document,
    NoneSearcher,
    Searcher,
    SearchUnavailableError,
    make_searcher,
    normalize_url,
    robust_search,
)
from evoduet_graph.search.offline import (
    CHUNK_CHARS,
    OfflineSearcher,
    OfflineSources,
    chunk_text,
)
from evoduet_graph.search.tavily import TavilySearcher
from evoduet_graph.search.text import tokenize

# ------------------------------------------------------------------------------------------
# URL normalisation and the Document shape
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTPS://WWW.Example.COM/Path/", "https://example.com/Path"),
        ("https://example.com/a/b/#section-2", "https://example.com/a/b"),
        (
            "https://example.com/p?utm_source=x&id=3&UTM_medium=y&q=a",
            "https://example.com/p?id=3&q=a",
        ),
        ("http://example.com:80/x", "http://example.com/x"),
        ("https://example.com:8443/x/", "https://example.com:8443/x"),
        ("https://example.com/", "https://example.com"),
        ("  https://example.com/x  ", "https://example.com/x"),
        ("pydoc:numpy.linalg.norm", "pydoc:numpy.linalg.norm"),
        ("file:docs/x.md#chunk3", "file:docs/x.md#chunk3"),
        ("file:docs/x.md#3", "file:docs/x.md#3"),
        ("", ""),
    ],
)
def test_normalize_url(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


def test_document_cleans_bytes_and_scores_and_round_trips() -> None:
    doc = Document(url="https://a.org/x", title=b"T\xff", content=b"ok \xfe\x00bytes", score="nan")
    assert doc.title == "T\ufffd"
    assert doc.content == "ok \ufffdbytes"  # invalid byte replaced, NUL removed
    assert doc.score == 0.0
    surrogate = Document(url="u", content="a\udcffb")  # e.g. surrogateescape-decoded text
    surrogate.content.encode("utf-8")  # must be encodable
    data = json.loads(doc.model_dump_json())
    assert data["normalized_url"] == "https://a.org/x"
    assert Document.model_validate(data) == doc


# ------------------------------------------------------------------------------------------
# robust_search
# ------------------------------------------------------------------------------------------


class ListSearcher:
    name = "fake"

    def __init__(self, docs: list[Any]) -> None:
        self.docs = docs
        self.calls = 0

    def search(self, query: str, max_results: int) -> list[Any]:
        self.calls += 1
        return list(self.docs)

    def preflight(self) -> None:
        return None


class FailingSearcher:
    name = "broken"

    def __init__(self, exc: Exception, succeed_after: int | None = None) -> None:
        self.exc = exc
        self.calls = 0
        self.succeed_after = succeed_after

    def search(self, query: str, max_results: int) -> list[Document]:
        self.calls += 1
        if self.succeed_after is not None and self.calls > self.succeed_after:
            return [Document(url="https://ok.org", title="ok", content="fine")]
        raise self.exc

    def preflight(self) -> None:
        return None


class SlowSearcher:
    name = "slow"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls = 0
        self.release = threading.Event()

    def search(self, query: str, max_results: int) -> list[Document]:
        self.calls += 1
        self.release.wait(self.delay_s)
        return [Document(url="https://late.org", content="late")]

    def preflight(self) -> None:
        return None


def test_searchers_satisfy_protocol() -> None:
    assert isinstance(NoneSearcher(), Searcher)
    assert isinstance(TavilySearcher(api_key="k", client=object()), Searcher)
    assert isinstance(ListSearcher([]), Searcher)


def test_robust_search_dedupes_truncates_and_drops_empty() -> None:
    backend = ListSearcher(
        [
            Document(url="https://www.a.org/page/", title="A", content="x" * 50_000, score=2),
            Document(url="https://a.org/page#frag", title="A again", content="dup"),
            Document(url="https://b.org", title="empty", content="   "),
            {"url": "https://c.org", "title": b"C\xff", "content": b"caf\xc3\xa9 \xff"},
            {"title": "no url"},
            "not a document",
            Document(url="https://d.org", title="D", content="d"),
        ]
    )
    docs, error = robust_search(backend, "q", 5, retries=0, timeout_s=5)
    assert error is None
    assert [d.url for d in docs] == ["https://www.a.org/page/", "https://c.org", "https://d.org"]
    assert len(docs[0].content) == 20_000
    assert docs[1].content == "café \ufffd" and docs[1].title == "C\ufffd"
    assert docs[1].source == "fake"
    docs2, _ = robust_search(backend, "q", 2, retries=0, timeout_s=5, max_content_chars=10)
    assert len(docs2) == 2 and len(docs2[0].content) == 10


def test_robust_search_retries_then_reports_error_without_raising() -> None:
    backend = FailingSearcher(ConnectionError("connection reset by peer"))
    start = time.perf_counter()
    docs, error = robust_search(
        backend, "circle packing", 5, retries=3, timeout_s=5, backoff_initial_s=0.001
    )
    assert docs == []
    assert backend.calls == 4
    assert error is not None and "broken" in error and "4 attempt" in error
    assert "ConnectionError" in error and "connection reset" in error
    assert time.perf_counter() - start < 2


def test_robust_search_recovers_after_a_transient_fault() -> None:
    backend = FailingSearcher(TimeoutError("flaky"), succeed_after=1)
    docs, error = robust_search(backend, "q", 3, retries=2, timeout_s=5, backoff_initial_s=0)
    assert error is None and [d.url for d in docs] == ["https://ok.org"]
    assert backend.calls == 2


def test_robust_search_does_not_retry_unavailable_backend() -> None:
    backend = FailingSearcher(SearchUnavailableError("set TAVILY_API_KEY"))
    docs, error = robust_search(backend, "q", 3, retries=5, timeout_s=5, backoff_initial_s=0)
    assert docs == [] and backend.calls == 1
    assert error is not None and "TAVILY_API_KEY" in error


def test_robust_search_times_out_each_attempt() -> None:
    backend = SlowSearcher(delay_s=10)
    start = time.perf_counter()
    docs, error = robust_search(backend, "q", 3, retries=1, timeout_s=0.2, backoff_initial_s=0)
    elapsed = time.perf_counter() - start
    backend.release.set()
    assert docs == [] and backend.calls == 2
    assert error is not None and "timed out" in error
    assert elapsed < 2


def test_robust_search_blank_query_and_zero_results() -> None:
    backend = ListSearcher([Document(url="https://a.org", content="a")])
    assert robust_search(backend, "   ", 3) == ([], "empty query")
    assert robust_search(backend, "q", 0) == ([], None)
    assert backend.calls == 0


# ------------------------------------------------------------------------------------------
# Tavily
# ------------------------------------------------------------------------------------------


class FakeTavilyClient:
    def __init__(self, response: dict[str, Any] | Exception) -> None:
        self.response = response
        self.calls: list[dict[str, Any]] = []

    def search(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if isinstance(self.response, Exception):
            raise self.response
        return self.response


TAVILY_RESPONSE = {
    "query": "circle packing",
    "results": [
        {
            "url": "https://en.wikipedia.org/wiki/Circle_packing",
            "title": "Circle packing - Wikipedia",
            "content": "In geometry, circle packing is the study of the arrangement of circles.",
            "score": 0.91,
            "raw_content": "Full page text about circle packing.",
        },
        {
            "url": "https://example.org/no-raw",
            "title": "",
            "content": "Snippet only.",
            "score": None,
            "raw_content": None,
        },
        {"title": "no url at all", "content": "ignored"},
    ],
    "response_time": 0.8,
}


def test_tavily_maps_results_and_passes_options() -> None:
    client = FakeTavilyClient(TAVILY_RESPONSE)
    searcher = TavilySearcher(client=client, search_depth="advanced", timeout_s=12)
    searcher.preflight()  # an injected client needs no key
    docs = searcher.search("circle packing", 50)
    assert client.calls == [
        {
            "query": "circle packing",
            "max_results": 20,  # clamped to the API's limit
            "search_depth": "advanced",
            "include_raw_content": False,
            "topic": "general",
            "timeout": 12,
        }
    ]
    assert [d.url for d in docs] == [
        "https://en.wikipedia.org/wiki/Circle_packing",
        "https://example.org/no-raw",
    ]
    assert docs[0].content.startswith("In geometry")
    assert docs[0].score == pytest.approx(0.91) and docs[0].source == "tavily"
    assert docs[1].title == "https://example.org/no-raw" and docs[1].score == 0.0
    assert len(searcher.search("q", 1)) == 1


def test_tavily_raw_content_is_used_when_requested() -> None:
    client = FakeTavilyClient(TAVILY_RESPONSE)
    docs = TavilySearcher(client=client, include_raw_content=True).search("q", 5)
    assert client.calls[0]["include_raw_content"] is True
    assert docs[0].content == "Full page text about circle packing."
    assert docs[1].content == "Snippet only."  # no raw content: falls back to the snippet


def test_tavily_preflight_without_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    searcher = TavilySearcher()
    with pytest.raises(SearchUnavailableError, match="set TAVILY_API_KEY or use retrieval"):
        searcher.preflight()
    docs, error = robust_search(searcher, "q", 3, retries=2, backoff_initial_s=0)
    assert docs == [] and "TAVILY_API_KEY" in (error or "")


def test_tavily_preflight_with_key_builds_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-not-a-real-key")
    searcher = TavilySearcher()
    searcher.preflight()  # no network call: only the client object is built


def test_tavily_invalid_key_is_not_retryable() -> None:
    class InvalidAPIKeyError(Exception):
        pass

    client = FakeTavilyClient(InvalidAPIKeyError("bad key"))
    searcher = TavilySearcher(client=client)
    with pytest.raises(SearchUnavailableError, match="TAVILY_API_KEY"):
        searcher.search("q", 3)
    docs, error = robust_search(searcher, "q", 3, retries=3, backoff_initial_s=0)
    assert docs == [] and error and len(client.calls) == 2  # 1 above + 1 here, no retries


# ------------------------------------------------------------------------------------------
# make_searcher / none
# ------------------------------------------------------------------------------------------


def test_make_searcher_by_backend(tmp_path: Path) -> None:
    none = make_searcher(RetrievalConfig(backend="none"), task_dir=None)
    assert isinstance(none, NoneSearcher) and none.search("q", 3) == []
    with pytest.raises(SearchUnavailableError, match="retrieval.backend is none"):
        none.preflight()
    tav = make_searcher(
        RetrievalConfig(backend="tavily", tavily_search_depth="advanced", search_timeout_s=7),
        task_dir=None,
    )
    assert isinstance(tav, TavilySearcher)
    assert tav.search_depth == "advanced" and tav.timeout_s == 7
    (tmp_path / "task" / "docs").mkdir(parents=True)
    off = make_searcher(
        RetrievalConfig(
            backend="offline",
            corpus=[str(tmp_path / "extra")],
            offline_include_pydoc=[],
            index_cache_dir=str(tmp_path / "cache"),
        ),
        task_dir=tmp_path / "task",
    )
    assert isinstance(off, OfflineSearcher)
    assert off.sources.task_docs == tmp_path / "task" / "docs"
    assert off.sources.folders == (tmp_path / "extra",)
    assert off.cache_dir == tmp_path / "cache"


# ------------------------------------------------------------------------------------------
# Offline corpus
# ------------------------------------------------------------------------------------------


def _minimal_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica (valid xref offsets)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>"
        ),
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    (root / "sub").mkdir(parents=True)
    (root / "packing.md").write_text(
        "# Circle packing heuristics\n\nUse a hexagonal lattice as the starting layout.\n\n"
        "Then run a local optimiser that pushes overlapping circles apart.\n",
        encoding="utf-8",
    )
    (root / "sub" / "annealing.txt").write_text(
        "Simulated annealing accepts worse moves with a temperature-dependent probability.",
        encoding="utf-8",
    )
    (root / "page.html").write_bytes(
        b"<html><head><title>Voronoi notes</title><script>var secretword = 1;</script>"
        b"</head><body><h1>Voronoi</h1><p>A Voronoi diagram partitions the plane by nearest "
        b"<a href='#'>seed</a> point.</p><p>Caf\xe9 latin-1 byte.</p></body></html>"
    )
    (root / "paper.pdf").write_bytes(_minimal_pdf("Lagrangian relaxation bound for bins"))
    (root / ".hidden").mkdir()
    (root / ".hidden" / "skip.md").write_text("hexagonal lattice hidden", encoding="utf-8")
    (root / "image.png").write_bytes(b"\x89PNG")
    return root


def _searcher(sources: OfflineSources, cache: Path) -> OfflineSearcher:
    return OfflineSearcher(sources, cache_dir=cache)


def test_offline_indexes_files_with_stable_chunk_ids(corpus: Path, tmp_path: Path) -> None:
    searcher = _searcher(OfflineSources(folders=(corpus,)), tmp_path / "cache")
    searcher.preflight()
    info = searcher.index_info
    assert info["files"] == 4 and info["cache_hit"] is False and not info["skipped_files"]

    hits = searcher.search("hexagonal lattice layout", 3)
    assert hits[0].url == "file:notes/packing.md#0"
    assert hits[0].title.startswith("notes/packing.md: Circle packing heuristics")
    assert hits[0].source == "offline" and hits[0].score > 0
    assert all("hidden" not in h.url for h in hits)

    assert searcher.search("simulated annealing temperature", 1)[0].url == (
        "file:notes/sub/annealing.txt#0"
    )
    voronoi = searcher.search("voronoi nearest seed", 1)[0]
    assert voronoi.url == "file:notes/page.html#0" and voronoi.title.endswith("Voronoi notes")
    assert "nearest seed point" in voronoi.content and "secretword" not in voronoi.content
    assert searcher.search("secretword", 5) == []  # script text is not indexed
    assert searcher.search("lagrangian relaxation", 1)[0].url == "file:notes/paper.pdf#0"
    assert searcher.search("zzzunknownzzz", 5) == []
    assert searcher.search("the of and", 5) == []  # stopwords only


def test_offline_second_construction_loads_cache(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = _searcher(OfflineSources(folders=(corpus,)), cache)
    first.preflight()
    expected = [d.url for d in first.search("circles optimiser", 3)]

    def no_rebuild(self: OfflineSearcher, inputs: dict[str, Any]) -> None:
        raise AssertionError("index was rebuilt instead of loaded from the cache")

    monkeypatch.setattr(OfflineSearcher, "_build", no_rebuild)
    second = _searcher(OfflineSources(folders=(corpus,)), cache)
    second.preflight()
    assert second.index_info["cache_hit"] is True
    assert [d.url for d in second.search("circles optimiser", 3)] == expected
    monkeypatch.undo()

    # A changed file changes the key: the next construction rebuilds.
    (corpus / "sub" / "annealing.txt").write_text("Tabu search keeps a memory.", encoding="utf-8")
    third = _searcher(OfflineSources(folders=(corpus,)), cache)
    third.preflight()
    assert third.index_info["cache_hit"] is False
    assert third.search("tabu memory", 1)[0].url == "file:notes/sub/annealing.txt#0"


def test_offline_task_docs_ids(tmp_path: Path) -> None:
    docs = tmp_path / "task" / "docs"
    docs.mkdir(parents=True)
    (docs / "x.md").write_text("Known bound on the sum of radii.", encoding="utf-8")
    searcher = make_searcher(
        RetrievalConfig(
            backend="offline", offline_include_pydoc=[], index_cache_dir=str(tmp_path / "c")
        ),
        task_dir=tmp_path / "task",
    )
    searcher.preflight()
    assert searcher.search("radii bound", 2)[0].url == "file:docs/x.md#0"


def test_offline_empty_corpus_preflight_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    searcher = _searcher(
        OfflineSources(folders=(empty,), pydoc_packages=("no_such_package_xyz",)),
        tmp_path / "cache",
    )
    with pytest.raises(SearchUnavailableError, match="offline corpus is empty") as info:
        searcher.preflight()
    assert "no_such_package_xyz" in str(info.value) and "--corpus" in str(info.value)
    docs, error = robust_search(searcher, "q", 3, retries=1, backoff_initial_s=0)
    assert docs == [] and "empty" in (error or "")


def test_offline_corpus_folder_without_documents_warns(
    corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A --corpus folder that adds nothing is named (the rest of the corpus still works)."""
    images = tmp_path / "images"
    images.mkdir()
    (images / "plot.png").write_bytes(b"\x89PNG")
    searcher = _searcher(OfflineSources(folders=(corpus, images)), tmp_path / "cache")
    with caplog.at_level("WARNING", logger="evoduet_graph.search.offline"):
        searcher.preflight()
    warned = [r.getMessage() for r in caplog.records if "adds nothing" in r.getMessage()]
    assert len(warned) == 1 and str(images) in warned[0]


def test_offline_missing_folder_preflight_error(tmp_path: Path) -> None:
    searcher = _searcher(OfflineSources(folders=(tmp_path / "nope",)), tmp_path / "cache")
    with pytest.raises(SearchUnavailableError, match="not found"):
        searcher.preflight()


def test_offline_numpy_pydoc(tmp_path: Path) -> None:
    searcher = _searcher(OfflineSources(pydoc_packages=("numpy",)), tmp_path / "cache")
    searcher.preflight()
    assert searcher.index_info["counts"]["pydoc:numpy"] > 300
    hits = searcher.search("vector norm", 5)
    assert "pydoc:numpy.linalg.norm" in [h.url for h in hits]
    norm = next(h for h in hits if h.url == "pydoc:numpy.linalg.norm")
    assert norm.title.startswith("numpy.linalg.norm(") and "norm" in norm.content.lower()
    assert searcher.search("numpy.linalg.norm", 3)[0].url == "pydoc:numpy.linalg.norm"
    assert not [h for h in searcher.search("random normal", 10) if "._" in h.url]


def test_offline_scipy_pydoc(tmp_path: Path) -> None:
    searcher = _searcher(OfflineSources(pydoc_packages=("scipy",)), tmp_path / "cache")
    searcher.preflight()
    assert searcher.index_info["counts"]["pydoc:scipy"] > 300
    hits = searcher.search("minimize a function of several variables with constraints", 5)
    assert "pydoc:scipy.optimize.minimize" in [h.url for h in hits]
    minimize = next(h for h in hits if h.url == "pydoc:scipy.optimize.minimize")
    assert minimize.title.startswith("scipy.optimize.minimize(fun, x0")
    assert "minimization of scalar function" in minimize.content.lower()
    assert searcher.search("scipy.optimize.minimize", 3)[0].url == "pydoc:scipy.optimize.minimize"
    assert "pydoc:scipy.spatial.ConvexHull" in [h.url for h in searcher.search("convex hull", 5)]
    assert not [h for h in searcher.search("sparse matrix solve", 10) if "._" in h.url]


# ------------------------------------------------------------------------------------------
# Chunking and tokenisation
# ------------------------------------------------------------------------------------------


def test_chunk_text_keeps_paragraphs_and_bounds_size() -> None:
    paras = [f"Paragraph {i} " + "word " * 60 for i in range(20)]
    chunks = chunk_text("\n\n".join(paras))
    assert all(len(c) <= CHUNK_CHARS for c in chunks)
    assert len(chunks) > 1
    assert all(c.startswith("Paragraph") for c in chunks)  # split on paragraph boundaries
    huge = "sentence one is here. " * 400  # one 8,800-char paragraph
    parts = chunk_text(huge)
    assert all(len(c) <= CHUNK_CHARS for c in parts) and len(parts) >= 6
    assert chunk_text("") == [] and chunk_text("short") == ["short"]
    assert chunk_text("x" * 4000) == ["x" * 1500, "x" * 1500, "x" * 1000]


def test_tokenize_splits_identifiers_and_drops_stopwords() -> None:
    tokens = tokenize(
        "How do I call scipy.optimize.minimize with the vector_norm of LinearOperator?"
    )
    for t in (
        "scipy",
        "optimize",
        "minimize",
        "scipy.optimize.minimize",
        "vector",
        "norm",
        "vector_norm",
        "linear",
        "operator",
        "linearoperator",
        "call",
    ):
        assert t in tokens
    assert "the" not in tokens and "how" not in tokens and "do" not in tokens
    assert tokenize("Vectors norms") == ["vector", "norm"]
    assert tokenize("") == []

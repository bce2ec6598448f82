"""Search backends: the uniform document shape, the `Searcher` protocol and a robust caller.

Every backend (tavily, offline BM25, none, test fakes) returns the same `Document` shape
(url, title, content, score, source), so the inner loop never branches on the provider
(docs/design.md §4; the local-deep-researcher pattern of one search-result shape). `robust_search`
is the only way nodes should call a backend: it bounds each call in time, retries with
exponential backoff, cleans and caps the returned text, and never raises for backend faults —
a failed search becomes an error message in the run's events, not a crashed run.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, computed_field, field_validator
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from evoduet_graph.errors import EvoDuetError

logger = logging.getLogger(__name__)

MAX_CONTENT_CHARS = 20_000
"""Hard cap on a document's content (characters) applied by `robust_search`."""

MAX_TITLE_CHARS = 500
"""Hard cap on a document's title (characters)."""

_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class SearchError(EvoDuetError, RuntimeError):
    """A search backend failed (network, quota, malformed response, timeout)."""


class SearchUnavailableError(SearchError):
    """The configured backend cannot be used at all (missing key, empty corpus, …).

    The message says what to do (set a key, add a corpus, pick another backend). Raised by
    `Searcher.preflight` at startup, and by `search` for faults that retrying cannot fix.
    """


class SearchTimeoutError(SearchError):
    """One backend call exceeded its deadline (see `robust_search`)."""


def clean_text(value: Any) -> str:
    """Return ``value`` as a clean, UTF-8-encodable string.

    Bytes are decoded as UTF-8 with invalid sequences replaced (U+FFFD); lone surrogates
    (e.g. from ``surrogateescape`` decoding) are replaced; NUL and other C0 control characters
    except tab/newline/carriage return are removed. ``None`` becomes ``""``.
    """
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray | memoryview):
        text = bytes(value).decode("utf-8", errors="replace")
    else:
        text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", errors="replace").decode("utf-8", errors="replace")
    return _CONTROL_CHARS.sub("", text)


def normalize_url(url: str) -> str:
    """Canonical form of a URL used for de-duplication (docs/design.md §4, "normalised URL").

    For network URLs (``scheme://host/...``): lowercase scheme and host, drop ``www.``, default
    ports (80/443), user info, the fragment, ``utm_*`` query parameters, and trailing slashes of
    the path; other query parameters keep their order. Anything else — offline ids such as
    ``pydoc:numpy.linalg.norm`` or ``file:docs/x.md#3`` — is returned unchanged (stripped of
    surrounding whitespace), so fragments that name a chunk survive.

    Args:
        url: an absolute URL or an offline document id.

    Returns:
        The normalised string; ``""`` for an empty input.
    """
    url = (url or "").strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    host = host.removeprefix("www.")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and not (
        (scheme == "http" and port == 80) or (scheme == "https" and port == 443)
    ):
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    query = urlencode(
        [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if not k.lower().startswith("utm_")
        ]
    )
    return urlunsplit((scheme, host, path, query, ""))


class Document(BaseModel):
    """One search hit, the same shape for every backend (docs/design.md §4).

    Attributes:
        url: the hit's address: a web URL, or an offline id (``pydoc:<qualified name>``,
            ``file:<relative path>#<chunk index>``).
        title: page title / object name and signature.
        content: text of the hit (snippet or full page; `robust_search` caps it at
            `MAX_CONTENT_CHARS` characters).
        score: the backend's own relevance score (scale depends on the backend; higher is more
            relevant). Non-finite values become 0.0.
        source: backend name (``tavily``, ``offline``, ``fake``).
        normalized_url: `normalize_url(url)`, the de-duplication key (computed; included in
            the JSON dump, ignored on load).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    url: str
    title: str = ""
    content: str = ""
    score: float = 0.0
    source: str = ""

    @field_validator("url", "title", "content", "source", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> str:
        return clean_text(value)

    @field_validator("score", mode="before")
    @classmethod
    def _finite(cls, value: Any) -> float:
        try:
            score = float(value) if value is not None else 0.0
        except (TypeError, ValueError):
            return 0.0
        return score if math.isfinite(score) else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def normalized_url(self) -> str:
        """The URL normalised for de-duplication (`normalize_url`)."""
        return normalize_url(self.url)


@runtime_checkable
class Searcher(Protocol):
    """A search backend (docs/design.md §4).

    Attributes:
        name: backend name, also written into `Document.source`.
    """

    name: str

    def search(self, query: str, max_results: int) -> list[Document]:
        """Return at most ``max_results`` documents for ``query``, best first.

        Raises:
            SearchUnavailableError: the backend cannot work (not worth retrying).
            Exception: any other fault; `robust_search` retries it.
        """
        ...

    def preflight(self) -> None:
        """Check the backend is usable; called once at startup by runs that can retrieve.

        Raises:
            SearchUnavailableError: with an actionable message (what to set or change).
        """
        ...


class NoneSearcher:
    """The ``none`` backend: retrieval disabled. `search` returns nothing."""

    name = "none"

    def search(self, query: str, max_results: int) -> list[Document]:
        """Return no documents."""
        return []

    def preflight(self) -> None:
        """Refuse: this backend cannot retrieve."""
        raise SearchUnavailableError(
            "retrieval.backend is none: this run cannot retrieve. Set retrieval.backend to "
            "'offline' (local BM25 corpus), a web source such as 'tavily' or 'arxiv' (see "
            "`evoduet_graph.search.registry`), or use gate.mode=never"
        )


def _call_with_deadline(
    searcher: Searcher, query: str, max_results: int, timeout_s: float
) -> list[Any]:
    """Run one ``searcher.search`` call in a daemon worker thread and wait ``timeout_s``.

    A daemon thread (not a pool) is used so that a backend call that never returns cannot
    block interpreter exit; the abandoned call finishes (or not) in the background and its
    result is discarded.
    """
    future: Future[list[Any]] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(searcher.search(query, max_results))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            future.set_exception(exc)

    thread = threading.Thread(target=work, name=f"search-{searcher.name}", daemon=True)
    thread.start()
    try:
        return future.result(timeout=timeout_s)
    except FutureTimeoutError:
        raise SearchTimeoutError(
            f"{searcher.name} search timed out after {timeout_s:g} s"
        ) from None


def _to_document(item: Any, source: str) -> Document | None:
    if isinstance(item, Document):
        return item
    if isinstance(item, Mapping):
        try:
            data = dict(item)
            data.setdefault("source", source)
            return Document.model_validate(data)
        except Exception:  # noqa: BLE001 - a malformed hit is dropped, not fatal
            return None
    return None


def _postprocess(
    items: Any, source: str, max_results: int, max_content_chars: int
) -> list[Document]:
    docs: list[Document] = []
    seen: set[str] = set()
    for item in list(items or []):
        doc = _to_document(item, source)
        if doc is None or not doc.url.strip():
            continue
        content = doc.content.strip()
        if not content:
            continue
        key = doc.normalized_url
        if key in seen:
            continue
        seen.add(key)
        docs.append(
            doc.model_copy(
                update={
                    "content": content[:max_content_chars],
                    "title": doc.title.strip()[:MAX_TITLE_CHARS],
                    "source": doc.source or source,
                }
            )
        )
        if len(docs) >= max_results:
            break
    return docs


def robust_search(
    searcher: Searcher,
    query: str,
    max_results: int,
    *,
    retries: int = 2,
    timeout_s: float = 30.0,
    backoff_initial_s: float = 0.5,
    backoff_max_s: float = 8.0,
    max_content_chars: int = MAX_CONTENT_CHARS,
) -> tuple[list[Document], str | None]:
    """Call ``searcher.search`` defensively (docs/design.md §1 inner loop, `search`; §4).

    Each attempt runs in a worker thread with a deadline of ``timeout_s`` seconds; failed or
    timed-out attempts are retried up to ``retries`` times with exponential backoff (tenacity:
    ``backoff_initial_s``, doubling, capped at ``backoff_max_s``). `SearchUnavailableError`
    is not retried (a missing key does not come back). Results are cleaned: non-UTF-8 bytes
    replaced, content capped at ``max_content_chars`` characters, empty documents dropped,
    duplicates (same normalised URL) dropped keeping the first, at most ``max_results`` kept.

    Args:
        searcher: the backend.
        query: the query text (blank queries return ``([], "empty query")``).
        max_results: number of documents wanted (≤ 0 returns ``([], None)``).
        retries: extra attempts after the first.
        timeout_s: per-attempt deadline in seconds.
        backoff_initial_s: first backoff wait in seconds (tests pass ~0).
        backoff_max_s: longest backoff wait in seconds.
        max_content_chars: content cap per document.

    Returns:
        ``(documents, error)``: ``error`` is None on success, else a one-line message naming
        the backend, the attempts and the last fault; ``documents`` is then ``[]``.
        Never raises for backend faults.
    """
    query = clean_text(query).strip()
    if max_results <= 0:
        return [], None
    if not query:
        return [], "empty query"
    name = getattr(searcher, "name", type(searcher).__name__)

    def attempt() -> list[Any]:
        return _call_with_deadline(searcher, query, max_results, timeout_s)

    retrying = Retrying(
        stop=stop_after_attempt(max(0, retries) + 1),
        wait=wait_exponential(multiplier=backoff_initial_s, min=0, max=backoff_max_s),
        retry=retry_if_exception(
            lambda exc: isinstance(exc, Exception) and not isinstance(exc, SearchUnavailableError)
        ),
        reraise=True,
    )
    try:
        raw = retrying(attempt)
    except RetryError as exc:  # pragma: no cover - reraise=True makes this unreachable
        return [], f"{name} search failed: {exc}"
    except Exception as exc:  # noqa: BLE001 - backend faults become a message
        attempts = retrying.statistics.get("attempt_number", 1)
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        message = f"{name} search failed after {attempts} attempt(s): {type(exc).__name__}"
        if detail:
            message += f": {detail[:300]}"
        logger.warning("%s (query %r)", message, query[:120])
        return [], message
    try:
        # a combined backend returns up to max_results hits per backend (`fan_out` of them)
        limit = max_results * max(1, int(getattr(searcher, "fan_out", 1) or 1))
        docs = _postprocess(raw, name, limit, max_content_chars)
    except Exception as exc:  # noqa: BLE001 - a malformed response is a backend fault
        return [], f"{name} search returned a malformed response: {type(exc).__name__}: {exc}"
    return docs, None

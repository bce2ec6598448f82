"""Offline search backend: BM25 (bm25s) over local documents (docs/design.md §4).

The corpus joins three sources:

* the task folder's ``docs/`` (if present) and user folders (``retrieval.corpus``) of
  ``.md/.markdown/.txt/.rst/.html/.htm/.pdf`` files — HTML via BeautifulSoup text extraction,
  PDF via pypdf — chunked into passages of about `CHUNK_CHARS` characters on paragraph
  boundaries, with stable ids ``file:<folder name>/<relative path>#<chunk index>``;
* the API documentation of installed packages (``retrieval.offline_include_pydoc``): one
  document per public object, id ``pydoc:<qualified name>``, title = name + signature,
  content = the docstring (trimmed to `PYDOC_MAX_CHARS`). numpy and scipy use the curated
  module lists in `CURATED_MODULES`; other packages a bounded walk (the package and the public
  submodules it exposes, one level deep — never an import of every submodule).

The index is built once and cached under ``cache_dir/<key>/`` where ``key`` hashes every input
(package versions, file paths + mtimes + sizes, chunking and tokeniser parameters); a later
construction with the same inputs loads it instead of rebuilding. Building is lazy: the first
`preflight` or `search` call does it. A long build reports its progress to the callback set
with `index_progress` (the CLI shows it; `evoduet_graph.api.run` forwards it as ``index``
events).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from bs4 import BeautifulSoup

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search.base import Document, SearchUnavailableError, clean_text
from evoduet_graph.search.text import TOKENIZER_VERSION, load_bm25s, tokenize

logger = logging.getLogger(__name__)

IndexProgressFn = Callable[[dict[str, Any]], None]
"""Receives ``{"event": "index", "stage": ..., ...}`` dicts while an index is loaded or built:
``stage`` is ``start`` (``cache_path``), ``files`` (``files`` read so far), ``pydoc``
(``package``, ``module``, ``done`` / ``total`` modules), ``bm25`` (``documents`` to index)
or ``done`` (``documents``, ``seconds``, ``cache_hit``)."""

_PROGRESS: ContextVar[IndexProgressFn | None] = ContextVar("evoduet_index_progress", default=None)


@contextlib.contextmanager
def index_progress(callback: IndexProgressFn | None) -> Iterator[None]:
    """Send the progress of index loads and builds in this context (thread) to ``callback``."""
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def _report(stage: str, **fields: Any) -> None:
    callback = _PROGRESS.get()
    if callback is not None:
        callback({"event": "index", "time": round(time.time(), 3), "stage": stage, **fields})


INDEX_FORMAT = 1
"""Bump when the on-disk layout or the document extraction changes (part of the cache key)."""

CHUNK_CHARS = 1500
"""Target passage length of file chunks, characters."""

PYDOC_MAX_CHARS = 6000
"""Docstrings are trimmed to this many characters."""

MAX_FILE_BYTES = 50 * 1024 * 1024
"""Files larger than this are skipped."""

MAX_CLASS_MEMBERS = 200
MAX_GENERIC_MODULES = 40

FILE_SUFFIXES = (".md", ".markdown", ".txt", ".rst", ".html", ".htm", ".pdf")

CURATED_MODULES: dict[str, tuple[str, ...]] = {
    "numpy": (
        "numpy",
        "numpy.linalg",
        "numpy.fft",
        "numpy.random",
        "numpy.polynomial",
    ),
    "scipy": (
        "scipy.optimize",
        "scipy.spatial",
        "scipy.spatial.distance",
        "scipy.spatial.transform",
        "scipy.linalg",
        "scipy.sparse",
        "scipy.sparse.linalg",
        "scipy.sparse.csgraph",
        "scipy.stats",
        "scipy.special",
        "scipy.integrate",
        "scipy.interpolate",
        "scipy.signal",
        "scipy.fft",
        "scipy.cluster.vq",
        "scipy.cluster.hierarchy",
        "scipy.ndimage",
    ),
}
"""Modules walked for numpy and scipy: the public, commonly used namespaces."""

_SKIP_MODULE_PARTS = {"tests", "test", "testing", "conftest", "setup", "_build_utils"}
# fmt: off
_BLOCK_TAGS = (
    "p", "div", "section", "article", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "pre",
    "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "br", "hr", "header", "footer",
)
# fmt: on


@dataclass(frozen=True)
class OfflineSources:
    """What the offline corpus is made of.

    Attributes:
        task_docs: the task's ``docs/`` folder, or None.
        folders: user corpus folders (or single files).
        pydoc_packages: import names of installed packages whose docstrings are indexed.
    """

    task_docs: Path | None = None
    folders: tuple[Path, ...] = ()
    pydoc_packages: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg: RetrievalConfig, *, task_dir: Path | None = None) -> OfflineSources:
        """The offline sources of a run.

        Sources of a run: ``<task_dir>/docs`` when it exists, ``cfg.corpus`` folders
        (``~`` expanded, relative to the working directory) and ``cfg.offline_include_pydoc``.
        """
        docs = Path(task_dir) / "docs" if task_dir is not None else None
        return cls(
            task_docs=docs if docs is not None and docs.is_dir() else None,
            folders=tuple(Path(p).expanduser() for p in cfg.corpus),
            pydoc_packages=tuple(cfg.offline_include_pydoc),
        )


@dataclass
class _Entry:
    id: str
    title: str
    content: str


@dataclass
class _Index:
    entries: list[_Entry]
    retriever: Any | None
    info: dict[str, Any] = field(default_factory=dict)
    by_name: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, entry in enumerate(self.entries):
            if entry.id.startswith("pydoc:"):
                self.by_name.setdefault(entry.id[len("pydoc:") :].lower(), i)


def default_cache_dir() -> Path:
    """``$EVODUET_CACHE_DIR/index``, else ``~/.cache/evoduet_graph/index``."""
    root = os.environ.get("EVODUET_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "evoduet_graph"
    return base / "index"


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def _split_units(text: str, max_chars: int) -> list[str]:
    """Split an over-long paragraph on lines, then sentences, then words, then hard cuts."""
    for pattern in (r"\n", r"(?<=[.!?])\s+", r"\s+"):
        units = [u for u in re.split(pattern, text) if u.strip()]
        if len(units) > 1:
            out: list[str] = []
            for unit in units:
                out.extend([unit] if len(unit) <= max_chars else _split_units(unit, max_chars))
            return _pack(out, max_chars, joiner=" " if pattern != r"\n" else "\n")
    return [text[i : i + max_chars] for i in range(0, len(text), max_chars)]


def _pack(pieces: Iterable[str], max_chars: int, joiner: str) -> list[str]:
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        if current and len(current) + len(joiner) + len(piece) > max_chars:
            chunks.append(current)
            current = piece
        else:
            current = f"{current}{joiner}{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


def chunk_text(text: str, max_chars: int = CHUNK_CHARS) -> list[str]:
    """Split ``text`` into passages of at most ``max_chars`` characters.

    Paragraphs (separated by blank lines) are packed greedily; a paragraph longer than
    ``max_chars`` is split on line, then sentence, then word boundaries.
    """
    pieces: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        pieces.extend([para] if len(para) <= max_chars else _split_units(para, max_chars))
    return _pack(pieces, max_chars, joiner="\n\n")


def _html_text(raw: str) -> tuple[str, str]:
    soup = BeautifulSoup(raw, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "svg", "nav"]):
        tag.decompose()
    title = ""
    if soup.title and soup.title.get_text(strip=True):
        title = soup.title.get_text(" ", strip=True)
    elif (h1 := soup.find("h1")) is not None:
        title = h1.get_text(" ", strip=True)
    if soup.title:
        soup.title.decompose()
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before("\n\n")
        tag.insert_after("\n\n")
    text = soup.get_text()
    paragraphs = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
    return title, "\n\n".join(p for p in paragraphs if p)


def _pdf_text(path: Path) -> tuple[str, str]:
    from pypdf import PdfReader  # start-up: ~80 ms, paid only when a corpus holds a PDF

    # pypdf logs every recoverable defect of a PDF; a skipped page is reported below instead
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = PdfReader(str(path))
    title = ""
    try:
        if reader.metadata and reader.metadata.title:
            title = str(reader.metadata.title)
    except Exception:  # noqa: BLE001 - broken metadata is not fatal
        title = ""
    pages = []
    for page in reader.pages:
        try:
            pages.append(page.extract_text() or "")
        except Exception as exc:  # noqa: BLE001 - one broken page does not lose the file
            logger.info("offline corpus: %s: unreadable page (%s)", path, exc)
    return title, "\n\n".join(pages)


def _read_file(path: Path) -> tuple[str, str]:
    """Return ``(title, text)`` of a corpus file (title may be empty)."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        title, text = _pdf_text(path)
        return clean_text(title), clean_text(text)
    raw = clean_text(path.read_bytes())
    if suffix in (".html", ".htm"):
        return _html_text(raw)
    title = ""
    for line in raw.splitlines():
        line = line.strip()
        if line:
            if suffix in (".md", ".markdown") and line.startswith("#"):
                title = line.lstrip("#").strip()
            break
    return title, raw


def _iter_files(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_file() and path.suffix.lower() in FILE_SUFFIXES:
            yield path


def _file_roots(sources: OfflineSources) -> list[tuple[str, Path]]:
    """``(id prefix, root)`` pairs; prefixes are folder names made unique."""
    roots: list[tuple[str, Path]] = []
    used: set[str] = set()
    candidates = ([sources.task_docs] if sources.task_docs else []) + list(sources.folders)
    for root in candidates:
        if not root.exists():
            continue
        base = root.name if root.is_dir() else ""
        prefix, n = base, 1
        while prefix in used:
            n += 1
            prefix = f"{base}~{n}"
        used.add(prefix)
        roots.append((prefix, root))
    return roots


def _file_id(prefix: str, root: Path, path: Path) -> str:
    rel = path.name if root.is_file() else path.relative_to(root).as_posix()
    return f"{prefix}/{rel}" if prefix else rel


def _file_entries(sources: OfflineSources, info: dict[str, Any]) -> list[_Entry]:
    entries: list[_Entry] = []
    for prefix, root in _file_roots(sources):
        for path in _iter_files(root):
            rel_id = _file_id(prefix, root, path)
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
                title, text = _read_file(path)
            except Exception as exc:  # noqa: BLE001 - one unreadable file is skipped
                logger.warning("offline corpus: skipping %s: %s", path, exc)
                info["skipped_files"].append(f"{path}: {type(exc).__name__}: {exc}"[:300])
                continue
            chunks = chunk_text(text)
            info["files"] += 1
            _report("files", files=info["files"], path=str(path))
            base_title = f"{rel_id}: {title}" if title else rel_id
            for i, chunk in enumerate(chunks):
                part = f" (part {i + 1}/{len(chunks)})" if len(chunks) > 1 else ""
                entries.append(_Entry(f"file:{rel_id}#{i}", base_title + part, chunk))
    return entries


# --------------------------------------------------------------------------------------------
# Package API documentation
# --------------------------------------------------------------------------------------------


def _package_version(package: str) -> str | None:
    """Installed version of ``package`` without importing it; None when not installed."""
    try:
        if importlib.util.find_spec(package) is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        dists = importlib.metadata.packages_distributions().get(package) or []
        for dist in dists:
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
    return "unknown"


def _is_private_module(name: str) -> bool:
    return any(p.startswith("_") or p in _SKIP_MODULE_PARTS for p in name.split("."))


def _import(name: str) -> Any | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - a broken optional module is skipped
        logger.info("offline corpus: cannot import %s: %s", name, exc)
        return None


def _public_names(module: Any) -> list[str]:
    names = getattr(module, "__all__", None)
    if not isinstance(names, list | tuple):
        names = [n for n in dir(module) if not n.startswith("_")]
    return [n for n in names if isinstance(n, str) and not n.startswith("_")]


def _modules_for(package: str) -> list[str]:
    if package in CURATED_MODULES:
        return list(CURATED_MODULES[package])
    root = _import(package)
    if root is None:
        return []
    modules = [package]
    for name in _public_names(root):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                attr = getattr(root, name, None)
            except Exception:  # noqa: BLE001 - lazy attributes may fail to load
                attr = None
        sub = getattr(attr, "__name__", "")
        if (
            inspect.ismodule(attr)
            and sub.startswith(package + ".")
            and not _is_private_module(sub)
            and sub not in modules
        ):
            modules.append(sub)
        if len(modules) >= MAX_GENERIC_MODULES:
            break
    return modules


def _signature(obj: Any, doc: str) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        pass
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    match = re.match(r"^[\w.]+(\(.*\))\s*$", first)
    return match.group(1) if match else ""


def _trim_doc(doc: str) -> str:
    doc = doc.strip()
    if len(doc) <= PYDOC_MAX_CHARS:
        return doc
    cut = doc.rfind("\n", 0, PYDOC_MAX_CHARS)
    return doc[: cut if cut > PYDOC_MAX_CHARS // 2 else PYDOC_MAX_CHARS].rstrip() + "\n…"


def _object_entry(qualname: str, obj: Any) -> _Entry | None:
    try:
        doc = inspect.getdoc(obj) or ""
    except Exception:  # noqa: BLE001
        return None
    doc = clean_text(doc).strip()
    if not doc:
        return None
    sig = _signature(obj, doc)
    title = clean_text(f"{qualname}{sig}")
    if len(title) > 300:
        title = title[:297] + "..."
    return _Entry(f"pydoc:{qualname}", title, _trim_doc(doc))


def _is_documentable(obj: Any) -> bool:
    if inspect.ismodule(obj):
        return False
    return inspect.isclass(obj) or inspect.isroutine(obj) or callable(obj)


def _pydoc_entries(package: str, info: dict[str, Any]) -> list[_Entry]:
    entries: list[_Entry] = []
    seen_objects: set[int] = set()
    seen_ids: set[str] = set()

    def add(qualname: str, obj: Any) -> None:
        if qualname in seen_ids:
            return
        entry = _object_entry(qualname, obj)
        if entry is not None:
            seen_ids.add(qualname)
            entries.append(entry)

    modules = _modules_for(package)
    for done, mod_name in enumerate(modules):
        _report("pydoc", package=package, module=mod_name, done=done, total=len(modules))
        module = _import(mod_name)
        if module is None:
            info["skipped_modules"].append(mod_name)
            continue
        info["modules"].append(mod_name)
        for name in _public_names(module):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    obj = getattr(module, name)
                except Exception:  # noqa: BLE001 - lazy attributes may fail to load
                    obj = None
            if obj is None or not _is_documentable(obj) or id(obj) in seen_objects:
                continue
            seen_objects.add(id(obj))
            qualname = f"{mod_name}.{name}"
            add(qualname, obj)
            if inspect.isclass(obj):
                members = 0
                for member_name, member in sorted(vars(obj).items()):
                    if member_name.startswith("_") or members >= MAX_CLASS_MEMBERS:
                        continue
                    if not (
                        inspect.isroutine(member)
                        or isinstance(member, property)
                        or inspect.ismethoddescriptor(member)
                    ):
                        continue
                    target = member.fget if isinstance(member, property) else member
                    if isinstance(target, staticmethod | classmethod):
                        target = target.__func__
                    members += 1
                    add(f"{qualname}.{member_name}", target)
    return entries


# --------------------------------------------------------------------------------------------
# Index
# --------------------------------------------------------------------------------------------


def _index_text(entry: _Entry) -> str:
    return f"{entry.title}\n{entry.content}"


def compute_cache_key(sources: OfflineSources) -> tuple[str, dict[str, Any]]:
    """Hash of every input of the index (no package is imported).

    Returns:
        ``(sha256 hex, inputs)`` where ``inputs`` is the JSON-able description hashed.
    """
    files = []
    for prefix, root in _file_roots(sources):
        for path in _iter_files(root):
            try:
                st = path.stat()
            except OSError:
                continue
            files.append(
                [_file_id(prefix, root, path), str(path.resolve()), st.st_mtime_ns, st.st_size]
            )
    inputs = {
        "format": INDEX_FORMAT,
        "tokenizer": TOKENIZER_VERSION,
        "chunk_chars": CHUNK_CHARS,
        "pydoc_max_chars": PYDOC_MAX_CHARS,
        "python": list(sys.version_info[:2]),
        "files": files,
        "missing_folders": sorted(str(f) for f in sources.folders if not f.exists()),
        "packages": {
            pkg: {"version": _package_version(pkg), "modules": list(CURATED_MODULES.get(pkg, ()))}
            for pkg in sources.pydoc_packages
        },
    }
    blob = json.dumps(inputs, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest(), inputs


def _new_retriever(entries: list[_Entry]) -> Any:
    bm25s = load_bm25s()
    retriever = bm25s.BM25()
    retriever.index([tokenize(_index_text(e)) for e in entries], show_progress=False)
    return retriever


class OfflineSearcher:
    """BM25 search over a local corpus (task docs, user folders, package docstrings).

    Args:
        sources: what to index (`OfflineSources.from_config` for a run).
        cache_dir: where built indexes are cached; default `default_cache_dir()`.

    Attributes:
        index_info: after the index is ready: ``n_docs``, ``cache_hit`` (loaded, not built),
            ``seconds`` (build or load time), ``cache_path``, ``files``, ``skipped_files``,
            ``modules``, ``skipped_modules``, ``missing_packages``, ``missing_folders``,
            ``counts`` (documents per source kind).
    """

    name = "offline"

    def __init__(self, sources: OfflineSources, *, cache_dir: str | Path | None = None) -> None:
        self.sources = sources
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self._index: _Index | None = None
        self._lock = threading.Lock()

    @property
    def index_info(self) -> dict[str, Any]:
        """What the loaded index holds (files, modules, skipped ones); empty before it is built."""
        return dict(self._index.info) if self._index is not None else {}

    # -- protocol ------------------------------------------------------------------------

    def preflight(self) -> None:
        """Build or load the index and check it is usable.

        Raises:
            SearchUnavailableError: a configured corpus folder does not exist, or the corpus
                has no documents.
        """
        missing = [str(f) for f in self.sources.folders if not f.exists()]
        if missing:
            raise SearchUnavailableError(
                f"offline corpus folder(s) not found: {', '.join(missing)}; fix "
                "retrieval.corpus / --corpus"
            )
        for folder in self.sources.folders:
            if next(_iter_files(folder), None) is None:
                logger.warning(
                    "offline corpus: %s has no %s file; it adds nothing to the index",
                    folder,
                    "/".join(sorted(FILE_SUFFIXES)),
                )
        index = self.ensure_index()
        if not index.entries:
            raise SearchUnavailableError(self._empty_message(index))

    def search(self, query: str, max_results: int) -> list[Document]:
        """Top ``max_results`` documents by BM25 score (only documents sharing a term).

        A query token that is exactly the qualified name of an indexed object
        (``scipy.optimize.minimize``) puts that object first, whatever its BM25 score.

        Raises:
            SearchUnavailableError: the corpus is empty.
        """
        index = self.ensure_index()
        if not index.entries or index.retriever is None:
            raise SearchUnavailableError(self._empty_message(index))
        all_tokens = tokenize(query)
        tokens = [t for t in all_tokens if t in index.retriever.vocab_dict]
        if not tokens or max_results <= 0:
            return []
        scores = np.asarray(index.retriever.get_scores(tokens), dtype=np.float64)
        k = min(int(max_results), len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        ranked = sorted((int(i) for i in top if scores[i] > 0), key=lambda i: (-scores[i], i))
        exact = [index.by_name[t] for t in dict.fromkeys(all_tokens) if t in index.by_name]
        if exact:
            ranked = (exact + [i for i in ranked if i not in exact])[:k]
        return [
            Document(
                url=index.entries[i].id,
                title=index.entries[i].title,
                content=index.entries[i].content,
                score=float(scores[i]),
                source=self.name,
            )
            for i in ranked
        ]

    # -- index ---------------------------------------------------------------------------

    def _empty_message(self, index: _Index) -> str:
        parts = ["offline corpus is empty"]
        if index.info.get("missing_packages"):
            parts.append(f"(packages not installed: {', '.join(index.info['missing_packages'])})")
        return (
            " ".join(parts) + ": add a docs/ folder to the task, pass corpus folders of "
            ".md/.txt/.html/.pdf files (retrieval.corpus / --corpus), or list installed "
            "packages in retrieval.offline_include_pydoc; or use retrieval.backend=tavily"
        )

    def ensure_index(self) -> _Index:
        """Load the cached index for the current inputs, or build and cache it (once)."""
        with self._lock:
            if self._index is None:
                self._index = self._load_or_build()
            return self._index

    def _load_or_build(self) -> _Index:
        start = time.perf_counter()
        key, inputs = compute_cache_key(self.sources)
        path = self.cache_dir / key[:24]
        _report("start", cache_path=str(path))
        index = self._load(path, key)
        if index is not None:
            index.info.update(cache_hit=True, seconds=time.perf_counter() - start)
            return _report_done(index, start, cache_hit=True)
        index = self._build(inputs)
        if index.entries:
            try:
                self._save(index, path, key)
            except OSError as exc:
                logger.warning("offline index: cannot write cache %s: %s", path, exc)
        index.info.update(
            cache_hit=False,
            seconds=time.perf_counter() - start,
            cache_path=str(path),
        )
        return _report_done(index, start, cache_hit=False)

    def _build(self, inputs: dict[str, Any]) -> _Index:
        info: dict[str, Any] = {
            "files": 0,
            "skipped_files": [],
            "modules": [],
            "skipped_modules": [],
            "missing_packages": [],
            "missing_folders": inputs["missing_folders"],
        }
        entries = _file_entries(self.sources, info)
        counts = {"file": len(entries)}
        for package in self.sources.pydoc_packages:
            if inputs["packages"][package]["version"] is None:
                info["missing_packages"].append(package)
                continue
            found = _pydoc_entries(package, info)
            counts[f"pydoc:{package}"] = len(found)
            entries.extend(found)
        info["counts"] = counts
        info["n_docs"] = len(entries)
        _report("bm25", documents=len(entries))
        retriever = _new_retriever(entries) if entries else None
        return _Index(entries, retriever, info)

    def _save(self, index: _Index, path: Path, key: str) -> None:
        if index.retriever is None:  # no documents: nothing worth caching
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=self.cache_dir))
        try:
            index.retriever.save(str(tmp / "bm25"), show_progress=False)
            with open(tmp / "docs.jsonl", "w", encoding="utf-8") as fh:
                fh.writelines(
                    json.dumps(
                        {"id": e.id, "title": e.title, "content": e.content}, ensure_ascii=False
                    )
                    + "\n"
                    for e in index.entries
                )
            meta = {
                "key": key,
                "n_docs": len(index.entries),
                "created": time.time(),
                "info": index.info,
            }
            (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def _load(self, path: Path, key: str) -> _Index | None:
        meta_path = path / "meta.json"
        if not meta_path.is_file():
            return None
        try:
            bm25s = load_bm25s()
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("key") != key:
                return None
            entries = []
            with open(path / "docs.jsonl", encoding="utf-8") as fh:
                for line in fh:
                    row = json.loads(line)
                    entries.append(_Entry(row["id"], row["title"], row["content"]))
            if len(entries) != meta.get("n_docs"):
                raise ValueError("document count does not match meta.json")
            retriever = bm25s.BM25.load(str(path / "bm25"), show_progress=False)
        except Exception as exc:  # noqa: BLE001 - a damaged cache is rebuilt
            logger.warning("offline index: cache %s unreadable (%s); rebuilding", path, exc)
            return None
        info = dict(meta.get("info") or {})
        info["cache_path"] = str(path)
        return _Index(entries, retriever, info)


def _report_done(index: _Index, start: float, *, cache_hit: bool) -> _Index:
    """Report the end of an index load or build (`_report` ``done``) and return ``index``.

    Args:
        index: the loaded or built index.
        start: `time.perf_counter` at the start.
        cache_hit: whether it came from the cache.

    Returns:
        ``index`` itself.
    """
    _report(
        "done",
        documents=len(index.entries),
        seconds=round(time.perf_counter() - start, 3),
        cache_hit=cache_hit,
    )
    return index

"""Fixed document sets: the oracle baseline's documents and offline grounding seeds.

Two rows of the ablation ladder (README "Baselines and ablations") hand the model documents
that no search produced:

* **oracle documents** (paper §2.2): a fixed set of task-relevant documents goes into every
  mutation prompt (``gate.mode: oracle``; ``retrieval.oracle_documents``, default the task's
  ``oracle/`` folder);
* **offline grounding**: D_search is seeded before the first iteration
  (``retrieval.grounding: offline``; ``retrieval.grounding_documents``, default the task's
  ``docs/`` folder).

Both read the same two formats with `load_documents`: a folder of text files (the offline
backend's file types, read by its reader: a Markdown file's first heading is its title), or a
JSONL file with one ``{"url", "title", "content"}`` object per line. A file document's URL is
``<folder name>/<relative path>`` (an offline id, like the offline backend's), so the same file
always maps to the same D_search document.
"""

from __future__ import annotations

import json
from pathlib import Path

from evoduet_graph.errors import UserError
from evoduet_graph.search.base import Document, clean_text
from evoduet_graph.search.offline import _iter_files, _read_file

__all__ = ["DocumentSetError", "grounding_source", "load_documents", "oracle_source"]


class DocumentSetError(UserError, ValueError):
    """A fixed document set cannot be read; the message names the file (and line)."""


def oracle_source(setting: str | None, task_dir: Path) -> Path:
    """The oracle documents' path.

    The oracle documents' path: ``setting`` (relative to the working directory), else the
    task's ``oracle/`` folder.
    """
    return Path(setting).expanduser() if setting else task_dir / "oracle"


def grounding_source(setting: str | None, task_dir: Path) -> Path:
    """The offline grounding documents' path: ``setting``, else the task's ``docs/`` folder."""
    return Path(setting).expanduser() if setting else task_dir / "docs"


def load_documents(path: Path, *, source: str) -> list[Document]:
    """Read a fixed document set.

    Args:
        path: a folder of ``.md/.markdown/.txt/.rst/.html/.htm/.pdf`` files (sorted by path,
            hidden files skipped) or a ``.jsonl`` file.
        source: the documents' ``source`` field (``oracle`` or ``grounding``).

    Returns:
        The documents in file / line order; empty files and lines are skipped.

    Raises:
        DocumentSetError: the path does not exist, holds no document, a JSONL line is not an
            object with non-empty ``url`` and ``content`` strings, or a file is unreadable.
    """
    if not path.exists():
        raise DocumentSetError(f"document set {path} does not exist")
    docs = _read_jsonl(path, source) if path.is_file() else _read_folder(path, source)
    if not docs:
        raise DocumentSetError(f"document set {path} holds no document")
    return docs


def _read_jsonl(path: Path, source: str) -> list[Document]:
    if path.suffix.lower() != ".jsonl":
        raise DocumentSetError(f"document set {path} is a file but not .jsonl")
    docs: list[Document] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DocumentSetError(f"document set {path} is unreadable: {exc}") from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DocumentSetError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise DocumentSetError(f"{path}:{n}: expected an object with url, title, content")
        url, content = obj.get("url"), obj.get("content")
        if not isinstance(url, str) or not url.strip():
            raise DocumentSetError(f"{path}:{n}: `url` must be a non-empty string")
        if not isinstance(content, str) or not content.strip():
            raise DocumentSetError(f"{path}:{n}: `content` must be a non-empty string")
        docs.append(
            Document(
                url=url.strip(),
                title=clean_text(obj.get("title") or ""),
                content=clean_text(content),
                source=source,
            )
        )
    return docs


def _read_folder(root: Path, source: str) -> list[Document]:
    # the offline backend's reader: one home for turning corpus files into text
    docs: list[Document] = []
    for path in _iter_files(root):
        try:
            title, text = _read_file(path)
        except OSError as exc:
            raise DocumentSetError(f"document {path} is unreadable: {exc}") from None
        if not text.strip():
            continue
        rel = path.relative_to(root).as_posix()
        docs.append(
            Document(
                url=f"{root.name}/{rel}",
                title=title or path.stem,
                content=text,
                source=source,
            )
        )
    return docs

"""A folder-valued program as one text: the bundle (docs/tasks.md, "Folder programs").

OpenEvolve's ``tsp_tour_minimization`` example evolves a folder by packing it into one text
"program" and unpacking it in its evaluator; this module does the same inside the framework, so
that the population, the program store, resume, novelty, the live events and the reports keep
working on text while the evaluator receives a folder. A bundle is the folder's text files, in
path order, each under a header line::

    ### File: driver.py
    <the file's text>
    ### File: heuristics/moves.py
    <the file's text>

Paths are relative, POSIX, inside the folder: an absolute path, a ``..`` component, a
backslash or an empty path is refused (`check_path`), so a bundle can never name a file
outside the folder it is unpacked into. A file's text ends with a newline in a bundle (one is
added when the file on disk has none). A text file may not itself hold a line starting with
``### File: `` (it would split the file): `read_folder` refuses such a file with its name.

Binary files (not UTF-8, or holding a NUL byte) and build outputs (``__pycache__``, object
files, ``build/``) are not in the bundle: they are *carried*, copied from the task's initial
program folder into every candidate folder (`materialise`), and never shown to the model.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from evoduet_graph.candidates.diffs import code_diff_summary, has_evolve_blocks
from evoduet_graph.errors import UserError
from evoduet_graph.tasks.languages import Language, language_for_suffix

__all__ = [
    "FILE_HEADER",
    "BundleError",
    "FolderContents",
    "bundle_diff_summary",
    "changed_files",
    "check_path",
    "evolvable_paths",
    "file_language",
    "materialise",
    "pack",
    "read_folder",
    "unpack",
]

FILE_HEADER = "### File: "
_HEADER_RE = re.compile(r"^### File: (.*)$")

#: Folder and file names that are build outputs or tool state: carried, never shown.
BUILD_DIRS = frozenset({"__pycache__", "build", "dist", ".git", ".hg", ".svn", "node_modules"})
BUILD_SUFFIXES = (".pyc", ".pyo", ".o", ".obj", ".so", ".a", ".dll", ".dylib", ".exe", ".class")
MAX_TEXT_FILE_BYTES = 1_000_000
"""A larger file is carried like a binary one (data, not code the model should read)."""

_DIFF_LINE_CHARS = 160


class BundleError(UserError, ValueError):
    """A bundle or a folder cannot be read as a folder program; the message says why."""


@dataclass(frozen=True)
class FolderContents:
    """What `read_folder` found.

    Attributes:
        files: text files (relative POSIX path → text), in path order.
        carried: relative paths of binary files and build outputs (copied, never shown).
    """

    files: dict[str, str]
    carried: list[str] = field(default_factory=list)


def check_path(path: str) -> str | None:
    r"""Why ``path`` cannot name a file of a folder program, or None when it can.

    Refused: empty, absolute (``/x``, ``C:\\x``), a backslash, a ``..`` component, a ``.``
    only path, a NUL or a line break.
    """
    if not path or not path.strip():
        return "the path is empty"
    if "\x00" in path or "\n" in path or "\r" in path:
        return "the path holds a control character"
    if "\\" in path:
        return f"{path!r} uses a backslash; write paths with / relative to the program folder"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path) or path.startswith("~"):
        return f"{path!r} is an absolute path, outside the program folder"
    parts = PurePosixPath(path).parts
    if any(part == ".." for part in parts):
        return f"{path!r} goes up with '..', outside the program folder"
    if not [p for p in parts if p != "."]:
        return f"{path!r} names the folder itself, not a file in it"
    return None


def normal_path(path: str) -> str:
    """``path`` without ``./`` parts and repeated slashes (checked with `check_path` first)."""
    return PurePosixPath(*[p for p in PurePosixPath(path).parts if p != "."]).as_posix()


def pack(files: Mapping[str, str]) -> str:
    """The bundle of ``files`` (relative path → text), in the mapping's order.

    Raises:
        BundleError: a path is refused by `check_path`, or a text holds a header line.
    """
    parts: list[str] = []
    for path, text in files.items():
        problem = check_path(path)
        if problem is not None:
            raise BundleError(problem)
        if any(line.startswith(FILE_HEADER) for line in text.split("\n")):
            raise BundleError(
                f"{path}: a line starts with {FILE_HEADER.strip()!r}, which separates the "
                "files of a folder program; change that line"
            )
        body = text if not text or text.endswith("\n") else text + "\n"
        parts.append(f"{FILE_HEADER}{normal_path(path)}\n{body}")
    return "".join(parts)


def unpack(bundle: str) -> dict[str, str]:
    """The files of ``bundle`` (relative path → text), in bundle order.

    Raises:
        BundleError: text before the first header, a refused path, or a path twice.
    """
    files: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if current is not None:
            files[current] = "".join(line + "\n" for line in lines)

    body = bundle[:-1] if bundle.endswith("\n") else bundle
    for line in body.split("\n") if body else []:
        match = _HEADER_RE.match(line)
        if match is None:
            if current is None:
                if line.strip():
                    raise BundleError(
                        f"text before the first {FILE_HEADER.strip()} line: {line[:80]!r}"
                    )
                continue
            lines.append(line)
            continue
        flush()
        path = match.group(1).strip()
        problem = check_path(path)
        if problem is not None:
            raise BundleError(problem)
        path = normal_path(path)
        if path in files:
            raise BundleError(f"{path} appears twice in the folder program")
        current, lines = path, []
    flush()
    return files


def file_language(path: str) -> Language:
    """The language of a folder file, from its suffix (``Makefile`` and the like: text)."""
    suffix = PurePosixPath(path).suffix
    return language_for_suffix(suffix or ".txt")


def evolvable_paths(files: Mapping[str, str], *, evolve_all: bool) -> list[str]:
    """The files the model may change: all with ``evolve_all``, else those with EVOLVE-BLOCKs."""
    if evolve_all:
        return list(files)
    return [path for path, text in files.items() if has_evolve_blocks(text)]


def _is_build_output(rel: PurePosixPath) -> bool:
    return any(part in BUILD_DIRS for part in rel.parts[:-1]) or rel.name.endswith(BUILD_SUFFIXES)


def read_folder(folder: Path) -> FolderContents:
    """Read a folder program: its text files in path order, and what is carried.

    Hidden files and folders (``.name``) are skipped, as the task snapshot skips them.

    Raises:
        BundleError: a symbolic link leaves the folder; a text file holds a header line; the
            folder has no text file.
    """
    root = folder.resolve()
    files: dict[str, str] = {}
    carried: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            full = Path(dirpath) / name
            if not full.resolve().is_relative_to(root):
                raise BundleError(f"{full.relative_to(root)} links outside the program folder")
            rel = PurePosixPath(full.relative_to(root).as_posix())
            if _is_build_output(rel) or full.stat().st_size > MAX_TEXT_FILE_BYTES:
                carried.append(rel.as_posix())
                continue
            data = full.read_bytes()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                carried.append(rel.as_posix())
                continue
            if "\x00" in text:
                carried.append(rel.as_posix())
                continue
            files[rel.as_posix()] = text.replace("\r\n", "\n")
    if not files:
        raise BundleError(f"{folder} holds no text file to evolve")
    pack(files)  # refuses a header line inside a file, naming it
    return FolderContents(
        files={p: t if t.endswith("\n") or not t else t + "\n" for p, t in files.items()},
        carried=carried,
    )


def materialise(
    bundle: str, target: Path, *, carried_from: Path | None = None, carried: Iterable[str] = ()
) -> Path:
    """Write the folder program ``bundle`` under ``target`` (created) and return ``target``.

    The carried files (binary files, build outputs) are copied first from ``carried_from``
    (the task's initial program folder), then the bundle's text files are written over them.

    Raises:
        BundleError: the bundle is malformed (`unpack`).
    """
    files = unpack(bundle)
    target.mkdir(parents=True, exist_ok=True)
    root = target.resolve()
    if carried_from is not None:
        for rel in carried:
            source = carried_from / rel
            if check_path(rel) is None and source.is_file():
                dest = root / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)
    for rel, text in files.items():
        dest = (root / rel).resolve()
        if not dest.is_relative_to(root):  # unreachable after check_path; kept as a guard
            raise BundleError(f"{rel} is outside the program folder")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
    return target


def changed_files(parent: str, child: str) -> list[str]:
    """Paths whose text differs between two bundles (added and removed files included)."""
    old, new = unpack(parent), unpack(child)
    return [p for p in dict.fromkeys([*new, *old]) if old.get(p) != new.get(p)]


def bundle_diff_summary(parent: str, child: str, max_lines: int = 40) -> str:
    """A unified diff per changed file (``--- a/path`` / ``+++ b/path`` headers), for prompts.

    Like `evoduet_graph.candidates.diffs.code_diff_summary` (2 context lines, long lines
    clipped, cut after ``max_lines`` diff lines with a note), but file by file, so the reader
    sees which file each hunk belongs to. ``"(no change)"`` when no file changed; a bundle that
    cannot be unpacked falls back to the whole-text diff.
    """
    try:
        old, new = unpack(parent), unpack(child)
    except BundleError:
        return code_diff_summary(parent, child, max_lines)
    lines: list[str] = []
    for path in dict.fromkeys([*old, *new]):
        if old.get(path) == new.get(path):
            continue
        a = (old.get(path) or "").splitlines()
        b = (new.get(path) or "").splitlines()
        body = list(difflib.unified_diff(a, b, lineterm="", n=2))[2:]
        lines.append(f"--- a/{path}" if path in old else "--- /dev/null")
        lines.append(f"+++ b/{path}" if path in new else "+++ /dev/null")
        lines += [
            line if len(line) <= _DIFF_LINE_CHARS else line[: _DIFF_LINE_CHARS - 3] + "..."
            for line in body
        ]
    if not lines:
        return "(no change)"
    shown = lines[: max(1, max_lines)]
    if len(lines) > len(shown):
        shown.append(f"... ({len(lines) - len(shown)} more diff lines)")
    return "\n".join(shown)


def full_diff(parent: str, child: str) -> dict[str, str]:
    """The complete unified diff of every changed file (path → diff text), for reports."""
    old, new = unpack(parent), unpack(child)
    out: dict[str, str] = {}
    for path in dict.fromkeys([*old, *new]):
        if old.get(path) == new.get(path):
            continue
        out[path] = "".join(
            difflib.unified_diff(
                (old.get(path) or "").splitlines(keepends=True),
                (new.get(path) or "").splitlines(keepends=True),
                fromfile=f"a/{path}" if path in old else "/dev/null",
                tofile=f"b/{path}" if path in new else "/dev/null",
            )
        )
    return out


def outline(text: str, language: Language, max_lines: int = 40) -> str:
    """The outline of a file the prompt does not show whole: its top-level definitions.

    Python: ``def`` / ``class`` / ``async def`` lines at any depth (with their indentation)
    and module-level assignments; other languages: unindented lines that open a definition
    (a line ending in ``{`` or ``)``, a ``#include`` / ``#define``, a ``struct`` / ``typedef``).
    At most ``max_lines`` lines, with a note of how many the file has.
    """
    picked: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped:
            continue
        if language.is_python:
            keep = re.match(r"\s*(async\s+def|def|class)\s", line) is not None or (
                not line[:1].isspace() and re.match(r"[A-Z_][A-Z0-9_]*\s*=", line) is not None
            )
        else:
            keep = not line[:1].isspace() and (
                stripped.endswith(("{", ")"))
                or stripped.startswith(("#include", "#define", "struct ", "typedef "))
            )
        if keep:
            picked.append(line.rstrip())
    total = text.count("\n")
    if len(picked) > max_lines:
        picked = picked[:max_lines] + [f"... ({len(picked) - max_lines} more definitions)"]
    picked.append(f"... ({total} lines in all)")
    return "\n".join(picked)


def order_for_prompt(paths: Sequence[str], changed: Sequence[str]) -> list[str]:
    """``paths`` with the ``changed`` ones first (each group in its own order)."""
    first = [p for p in paths if p in changed]
    return first + [p for p in paths if p not in changed]

"""A model answer applied to a folder program: per-file SEARCH/REPLACE blocks or rewrites.

The folder prompt (``prompts/format_folder.md``) asks the model to name each file it changes
with a ``### File: path`` line, followed by SEARCH/REPLACE blocks for that file or the file's
complete new text in one code block. Each file's part is read with the single-file machinery
(`evoduet_graph.candidates.diffs.candidate_from_response`: the same diff matching, the same
rewrite splicing, EVOLVE-BLOCK restriction when the file has markers, the file's own language
from its suffix), so a folder edit is exactly a set of single-file edits.

Rules (docs/tasks.md, "Folder programs"):

- a path outside the folder (absolute, ``..``, a backslash) makes the whole answer invalid,
  with that reason (`evoduet_graph.candidates.bundle.check_path`);
- a file without EVOLVE-BLOCK markers is read-only, unless the task says the whole folder
  evolves (``folder.evolve: all`` in ``task.yaml``); changing it makes the answer invalid;
- a path that is not a file of the folder creates a new file only where the task allows it
  (``folder.new_files: true``); its text is the part's code block, written whole;
- an answer without any ``### File:`` line is applied to the only evolvable file when there is
  exactly one (a small model often forgets the line), else it is invalid;
- every failure names the file; one failing part rejects the whole answer (as a partial diff
  does for a single file); a part that repeats its file unchanged is skipped (a small model
  often copies a file it did not mean to change), and an answer that changes no file is
  invalid.

Deviation from OpenEvolve: it has no folder programs; its ``tsp_tour_minimization`` example
packs a folder into one text and lets the model edit that text as one program, where the file
boundaries and read-only files are not enforced.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from evoduet_graph.candidates.bundle import (
    BundleError,
    check_path,
    file_language,
    normal_path,
    pack,
    unpack,
)
from evoduet_graph.candidates.diffs import (
    UNCHANGED_REASONS,
    candidate_from_response,
    has_evolve_blocks,
)
from evoduet_graph.reply_text import clean_reply, fenced_blocks

__all__ = [
    "NO_FILE_CHANGED",
    "FolderCandidate",
    "FolderPolicy",
    "folder_candidate",
    "python_compile_errors",
]

# "### File: path", "File: `path`", "**File: path**", "// File: path" are all accepted, with or
# without the prompt's label after the path.
_PART_RE = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*|\*\*[ \t]*|//[ \t]*)?(?:File|FILE|file)[ \t]*:[ \t]*"
    r"`?(?P<path>[^`*\s][^`*\n]*?)`?"
    # the prompt labels files "### File: path (evolvable)"; an answer may copy the label
    r"(?:[ \t]+\((?:evolvable|read-only|binary)[^)\n]*\))?[ \t]*(?:\*\*)?[ \t]*$",
    re.MULTILINE,
)


#: A folder answer that changed nothing (`folder_candidate`); a part that leaves its own file
#: as it is (`diffs.UNCHANGED_REASONS`) is skipped and the answer goes on with the others.
NO_FILE_CHANGED = "the answer changed no file of the folder"


@dataclass(frozen=True)
class FolderPolicy:
    """What an answer may change in a folder program.

    Attributes:
        evolve_all: every text file may change (``folder.evolve: all``); else only files with
            EVOLVE-BLOCK markers, and only between them.
        new_files: the answer may create files inside the folder (``folder.new_files``).
    """

    evolve_all: bool = False
    new_files: bool = False

    def evolvable(self, files: dict[str, str]) -> list[str]:
        """The paths of ``files`` the model may change."""
        if self.evolve_all:
            return list(files)
        return [p for p, t in files.items() if has_evolve_blocks(t)]


@dataclass(frozen=True)
class FolderCandidate:
    """The candidate folder extracted from one answer.

    Attributes:
        code: the child's bundle, or None when the answer was rejected.
        kind: ``diff`` when every changed file was edited with SEARCH/REPLACE blocks, else
            ``rewrite`` (``none``: nothing usable).
        error: why the answer was rejected (it names the file), else None.
        changed: the paths the answer changed or created.
    """

    code: str | None
    kind: Literal["diff", "rewrite", "none"]
    error: str | None = None
    changed: list[str] = field(default_factory=list)


def split_parts(text: str) -> list[tuple[str, str]]:
    """``[(path as written, the text of its part), ...]`` in answer order (empty: no header)."""
    matches = list(_PART_RE.finditer(text))
    parts = []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        parts.append((match.group("path").strip(), text[match.end() : end]))
    return parts


def _new_file_text(part: str) -> str | None:
    blocks = fenced_blocks(part)
    if blocks:
        lines = max(blocks, key=lambda b: len(b.lines)).lines
        return "\n".join(lines).rstrip("\n") + "\n"
    stripped = part.strip("\n")
    return stripped + "\n" if stripped.strip() else None


def folder_candidate(
    parent: str, response_text: str, *, diff_based: bool, policy: FolderPolicy
) -> FolderCandidate:
    """Apply one answer to the folder program ``parent`` (a bundle); see the module docstring.

    Args:
        parent: the parent's bundle.
        response_text: the raw model answer.
        diff_based: the prompt asked for SEARCH/REPLACE blocks (else whole files); each part
            falls back to the other form as a single-file answer does.
        policy: what may change.

    Returns:
        A `FolderCandidate`; ``code`` is None and ``error`` names the file when rejected.
    """
    try:
        files = unpack(parent)
    except BundleError as exc:
        return FolderCandidate(None, "none", f"the parent folder program is malformed: {exc}")
    text = clean_reply(response_text)
    evolvable = policy.evolvable(files)
    parts = split_parts(text)
    if not parts:
        if len(evolvable) != 1:
            return FolderCandidate(
                None,
                "none",
                "the answer names no file; put a `### File: path` line before the edits of "
                "each file",
            )
        parts = [(evolvable[0], text)]
    new_files = dict(files)
    kinds: set[str] = set()
    changed: list[str] = []
    for written, part in parts:
        problem = check_path(written)
        if problem is not None:
            return FolderCandidate(
                None, "none", f"{problem}; only files inside the program folder may be changed"
            )
        path = normal_path(written)
        if path not in files:
            if not policy.new_files:
                return FolderCandidate(
                    None,
                    "none",
                    f"{path} is not a file of the program folder and this task does not allow "
                    f"new files; edit one of: {', '.join(evolvable)}",
                )
            content = _new_file_text(part)
            if content is None:
                return FolderCandidate(None, "none", f"{path}: the new file has no text")
            new_files[path] = content
            kinds.add("rewrite")
            changed.append(path)
            continue
        if path not in evolvable:
            return FolderCandidate(
                None,
                "none",
                f"{path} is read-only (it has no EVOLVE-BLOCK markers); edit one of: "
                f"{', '.join(evolvable)}",
            )
        current = new_files[path]
        cand = candidate_from_response(
            current,
            part,
            diff_based=diff_based,
            restrict_to_evolve_blocks=has_evolve_blocks(files[path]),
            language=file_language(path).name,
        )
        if cand.code is None and (cand.error or "").startswith(UNCHANGED_REASONS):
            continue  # the file repeated as it is: no edit of it, not a failure
        if cand.code is None:
            return FolderCandidate(None, cand.kind, f"{path}: {cand.error}")
        new_files[path] = cand.code if cand.code.endswith("\n") else cand.code + "\n"
        kinds.add(cand.kind)
        if path not in changed:
            changed.append(path)
    changed = [p for p in changed if new_files.get(p) != files.get(p)]
    if not changed:
        return FolderCandidate(None, "none", NO_FILE_CHANGED)
    try:
        code = pack(new_files)
    except BundleError as exc:
        return FolderCandidate(None, "none", str(exc))
    kind: Literal["diff", "rewrite"] = "diff" if kinds == {"diff"} else "rewrite"
    return FolderCandidate(code, kind, None, changed)


def python_compile_errors(bundle: str, paths: Sequence[str] | None = None) -> str | None:
    """Why a Python file of the folder does not compile (naming the file), or None.

    The folder form of the single-file compile check (`evoduet_graph.nodes.generate.compile_error`):
    every ``.py`` file among ``paths`` (default: all) is compiled; other languages are left to
    the evaluator, as for a single file.
    """
    files = unpack(bundle)
    for path in paths if paths is not None else list(files):
        if path not in files or not file_language(path).is_python:
            continue
        try:
            compile(files[path], path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            where = f" (line {exc.lineno}" if exc.lineno else ""
            if where and exc.text and exc.text.strip():
                where += f": {exc.text.strip()[:120]}"
            where += ")" if where else ""
            return f"{path} does not compile: {type(exc).__name__}: {exc.msg}{where}"
        except ValueError as exc:
            return f"{path} does not compile: {exc}"
    return None

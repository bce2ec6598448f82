"""The folder form of the mutation prompt: a folder program's tree, files and answer format.

A folder program (`evoduet_graph.task.Task.is_folder`) is shown as its file tree (each file
marked ``evolvable``, ``read-only`` or ``binary, not shown``) followed by its files
(``prompts/folder_view.md``): the evolvable files in full, the files the parent changed
(against its own parent) first, then the read-only files in full while the budget lasts; a
file that no longer fits is shown as its outline (`evoduet_graph.candidates.bundle.outline`:
its definitions). The budget is ``prompt.max_program_chars`` characters of file text, the
same bound a single file's code is cut at. The answer format (``prompts/format_folder.md``)
asks for per-file SEARCH/REPLACE blocks or per-file rewrites under ``### File: path`` lines
(`evoduet_graph.candidates.folder_edits`).

Single-file prompts do not pass through this module: their text is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from evoduet_graph.candidates.bundle import file_language, order_for_prompt, outline, unpack
from evoduet_graph.candidates.diffs import has_evolve_blocks
from evoduet_graph.candidates.folder_edits import FolderPolicy
from evoduet_graph.prompts.render import render

__all__ = ["FOLDER_EDIT_SCOPE", "folder_output_format", "folder_program_text"]

FOLDER_EDIT_SCOPE = (
    "The program is a folder: change only the files marked `evolvable`, and in a file with "
    "EVOLVE-BLOCK markers only the code between them."
)
_DIFF_FORM = (
    "SEARCH/REPLACE blocks that edit that file (preferred), or, when most of a file changes, "
    "its complete new text in one code block."
)
_REWRITE_FORM = (
    "the file's complete new text in one code block of its language (keep its EVOLVE-BLOCK "
    "marker lines and the code outside them unchanged), or SEARCH/REPLACE blocks that edit it."
)
_NEW_FILES = (
    "- You may create a new file inside the folder: a `### File: <new path>` line and the "
    "file's whole text in one code block."
)
_NO_NEW_FILES = "- Do not create new files; this task evolves the files listed only."


def role(path: str, text: str, evolvable: Sequence[str]) -> str:
    """How the prompt marks a file: read-only, evolvable, or evolvable inside its markers."""
    if path not in evolvable:
        return "read-only"
    return "evolvable inside its EVOLVE-BLOCK markers" if has_evolve_blocks(text) else "evolvable"


def _fence(text: str, tag: str) -> str:
    longest = max((len(run) for run in text.split("\n") if set(run.strip()) == {"`"}), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{tag}\n{text.rstrip(chr(10))}\n{ticks}"


def folder_program_text(
    bundle: str,
    *,
    policy: FolderPolicy,
    carried: Sequence[str] = (),
    changed: Sequence[str] = (),
    max_chars: int = 20_000,
) -> str:
    """The current program's section for a folder program (module docstring).

    Args:
        bundle: the program's bundle.
        policy: which files may change.
        carried: binary files and build outputs (listed in the tree, never shown).
        changed: files the program changed against its parent (shown first).
        max_chars: budget of file text shown in full; the rest is shown as outlines.
    """
    files = unpack(bundle)
    evolvable = policy.evolvable(files)
    tree = []
    for path in sorted([*files, *carried]):
        if path in files:
            mark = role(path, files[path], evolvable)
            if path in changed:
                mark += ", changed by this program"
        else:
            mark = "binary, not shown"
        tree.append(f"{path}  ({mark})")
    shown: list[str] = []
    budget = max_chars
    order = order_for_prompt(evolvable, changed) + [p for p in files if p not in evolvable]
    for path in order:
        text, lang = files[path], file_language(path)
        mark = role(path, text, evolvable)
        if len(text) <= budget:
            budget -= len(text)
            shown.append(f"### File: {path} ({mark})\n{_fence(text, lang.fence)}")
        else:
            shown.append(
                f"### File: {path} ({mark}; outline only, the file is too long to show whole)\n"
                + _fence(outline(text, lang), lang.fence)
            )
    return render(
        "folder_view",
        file_count=str(len(files) + len(carried)),
        tree="\n".join(tree),
        files="\n\n".join(shown),
    ).rstrip("\n")


def folder_output_format(*, diff_based: bool, new_files: bool) -> str:
    """``prompts/format_folder.md`` for this task: preferred form, new-file rule."""
    return render(
        "format_folder",
        preferred_form=_DIFF_FORM if diff_based else _REWRITE_FORM,
        new_files_rule=_NEW_FILES if new_files else _NO_NEW_FILES,
        # the example changes what a function does, inside the markers, in the form asked
        # for: a small model copies the example's kind of edit, and an example that nudged a
        # constant drew answers that nudged the only constant in view, in a driver's fixed code
        example=render(
            "format_folder_example_diff" if diff_based else "format_folder_example_rewrite"
        ).rstrip("\n"),
    ).strip()

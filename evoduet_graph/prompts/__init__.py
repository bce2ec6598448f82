"""Prompt templates, stored as Markdown files in this package and loaded by name.

Template syntax: Python `string.Template` (``$name`` / ``${name}``; a literal dollar sign is
``$$``). It was chosen over `str.format` because prompts quote code, JSON and set/dict literals
full of braces, which `str.format` templates would have to double; dollar signs are rare in
prompt text. Substituted values (programs, documents) are never re-parsed, so their braces and
dollars are safe either way. ``format_*.md`` files are inserted verbatim (no placeholders).

Each node's prompt lives in ``<node>.md`` (``system.md``, ``generate_user.md``, …).
"""

from __future__ import annotations

import functools
from importlib import resources

from evoduet_graph.errors import UserError

__all__ = ["UnknownPromptError", "available_prompts", "load_prompt"]

_SUFFIX = ".md"


class UnknownPromptError(UserError, LookupError):
    """No prompt template of that name; the message lists the available names."""


@functools.cache
def available_prompts() -> tuple[str, ...]:
    """Names of the bundled prompt templates (file names without ``.md``), sorted."""
    root = resources.files(__name__)
    return tuple(
        sorted(
            entry.name[: -len(_SUFFIX)]
            for entry in root.iterdir()
            if entry.is_file() and entry.name.endswith(_SUFFIX)
        )
    )


@functools.cache
def load_prompt(name: str) -> str:
    """The text of prompt template ``name`` (cached; read as UTF-8).

    Args:
        name: Template name, e.g. ``"generate_user"`` (a trailing ``.md`` is accepted).

    Returns:
        The template text exactly as stored.

    Raises:
        UnknownPromptError: no such template; the message lists the available ones.
    """
    stem = name.removesuffix(_SUFFIX)
    if stem not in available_prompts():
        raise UnknownPromptError(
            f"unknown prompt template {name!r}; available: {', '.join(available_prompts())}"
        )
    return resources.files(__name__).joinpath(stem + _SUFFIX).read_text(encoding="utf-8")

"""Prompt templates, stored as Markdown files in this package and loaded by name.

Template syntax: Python `string.Template` (``$name`` / ``${name}``; a literal dollar sign is
``$$``). It was chosen over `str.format` because prompts quote code, JSON and set/dict literals
full of braces, which `str.format` templates would have to double; dollar signs are rare in
prompt text. Substituted values (programs, documents) are never re-parsed, so their braces and
dollars are safe either way. ``format_*.md`` files are inserted verbatim (no placeholders).

Each node's prompt lives in ``<node>.md`` (``system.md``, ``generate_user.md``, …).

Users replace a template without editing the package: ``prompt.template_dir`` names a folder
whose ``<name>.md`` files stand in for the bundled templates of the same names (OpenEvolve's
``prompt.template_dir`` does the same for its own templates). `template_overrides` checks each
file at startup: its name must be a bundled template's and it must use exactly the bundled
template's placeholders (a missing one would drop what the node passes; an unknown one would
have no value). While a node runs, `using_templates` makes `load_prompt` read the folder's
version (the node wrapper, `evoduet_graph.graphs.instrument`, sets it from the run's
configuration; a context variable, so concurrent iterations and other runs are unaffected).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from contextvars import ContextVar
from importlib import resources
from pathlib import Path
from string import Template

from evoduet_graph.errors import UserError

__all__ = [
    "PromptOverrideError",
    "UnknownPromptError",
    "available_prompts",
    "load_prompt",
    "template_overrides",
    "using_templates",
]

_SUFFIX = ".md"


class UnknownPromptError(UserError, LookupError):
    """No prompt template of that name; the message lists the available names."""


class PromptOverrideError(UserError, ValueError):
    """A user's template folder that cannot replace the bundled templates (names the file)."""


_OVERRIDES: ContextVar[dict[str, str] | None] = ContextVar("evoduet_prompt_overrides", default=None)


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


def load_prompt(name: str) -> str:
    """The text of prompt template ``name``: the user's (`using_templates`), else the bundled.

    Args:
        name: Template name, e.g. ``"generate_user"`` (a trailing ``.md`` is accepted).

    Returns:
        The template text exactly as stored.

    Raises:
        UnknownPromptError: no such template; the message lists the available ones.
    """
    stem = name.removesuffix(_SUFFIX)
    overrides = _OVERRIDES.get()
    if overrides is not None and stem in overrides:
        return overrides[stem]
    return _bundled(stem, name)


@functools.cache
def _bundled(stem: str, name: str) -> str:
    """The bundled template's text (cached; read as UTF-8)."""
    if stem not in available_prompts():
        raise UnknownPromptError(
            f"unknown prompt template {name!r}; available: {', '.join(available_prompts())}"
        )
    return resources.files(__name__).joinpath(stem + _SUFFIX).read_text(encoding="utf-8")


def _placeholders(text: str) -> set[str]:
    return set(Template(text).get_identifiers())


@functools.cache
def _read_overrides(directory: str) -> dict[str, str]:
    folder = Path(directory).expanduser()
    if not folder.is_dir():
        raise PromptOverrideError(f"prompt.template_dir {directory!r} is not a folder")
    out: dict[str, str] = {}
    for path in sorted(folder.glob(f"*{_SUFFIX}")):
        stem = path.name[: -len(_SUFFIX)]
        where = f"prompt template {path}"
        if stem not in available_prompts():
            raise PromptOverrideError(
                f"{where} replaces no bundled template; the names are: "
                f"{', '.join(available_prompts())}"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PromptOverrideError(f"{where} cannot be read: {exc}") from None
        if not Template(text).is_valid():
            raise PromptOverrideError(f"{where}: an invalid `$` (write `$$` for a dollar sign)")
        needed = _placeholders(_bundled(stem, stem))
        used = _placeholders(text)
        if used != needed:
            missing = ", ".join(f"${n}" for n in sorted(needed - used))
            unknown = ", ".join(f"${n}" for n in sorted(used - needed))
            raise PromptOverrideError(
                f"{where} must use the placeholders of the bundled {stem}{_SUFFIX}"
                + (f"; missing: {missing}" if missing else "")
                + (f"; unknown: {unknown}" if unknown else "")
            )
        out[stem] = text
    return out


def template_overrides(directory: str | Path | None) -> dict[str, str]:
    """The checked templates of a user's folder, name → text (read once per folder).

    Raises:
        PromptOverrideError: the folder is missing; a file names no bundled template, cannot be
            read, or does not use exactly the bundled template's placeholders.
    """
    if directory is None:
        return {}
    return dict(_read_overrides(str(Path(directory).expanduser().resolve())))


@contextlib.contextmanager
def using_templates(directory: str | Path | None) -> Iterator[None]:
    """Within the block, `load_prompt` (and so every render) reads ``directory``'s templates."""
    token = _OVERRIDES.set(template_overrides(directory) if directory else None)
    try:
        yield
    finally:
        _OVERRIDES.reset(token)

"""The one prompt renderer: a template filled strictly, so a misspelt placeholder fails loudly.

Templates use `string.Template` syntax (``$name`` / ``${name}``; ``$$`` is a dollar sign; see
`evoduet_graph.prompts`). `render` raises `PromptRenderError` naming the placeholder when the
template uses one that no value was given for (a misspelt ``$knowlege`` would otherwise stay in
the prompt) and when a value is given that the template does not use (a renamed placeholder).
With ``drop_empty=True`` a Markdown section (a ``#`` heading and what follows) whose
placeholders are all empty is left out, and so is a line that is a lone empty placeholder:
the generate prompt uses this to omit sections that have nothing to say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from string import Template
from typing import Any

from evoduet_graph.errors import EvoDuetError
from evoduet_graph.prompts import load_prompt

__all__ = ["PromptRenderError", "fill", "render"]

_HEADING_SPLIT_RE = re.compile(r"(?m)^(?=#{1,6} )")
_LONE_PLACEHOLDER_RE = re.compile(r"^\$(?:(\w+)|\{(\w+)\})[ \t]*$")


class PromptRenderError(EvoDuetError, KeyError):
    """A template and its values disagree (an unknown or an unused placeholder)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _check(template: Template, values: Mapping[str, str], where: str) -> None:
    if not template.is_valid():
        raise PromptRenderError(f"{where}: invalid `$` in the template (write `$$`)")
    used = set(template.get_identifiers())
    unknown = sorted(used - values.keys())
    if unknown:
        raise PromptRenderError(
            f"{where}: no value for placeholder(s) {', '.join('$' + n for n in unknown)}"
        )
    unused = sorted(values.keys() - used)
    if unused:
        raise PromptRenderError(
            f"{where}: value(s) {', '.join(unused)} given but the template has no such placeholder"
        )


def fill(
    template: str, values: Mapping[str, Any], *, drop_empty: bool = False, where: str = "prompt"
) -> str:
    """Fill ``template`` with ``values`` strictly (see the module docstring).

    Args:
        template: the template text.
        values: placeholder → value (converted with ``str``).
        drop_empty: leave out sections and lines whose placeholders are all empty.
        where: the template's name, for the error message.

    Returns:
        The filled text (stripped when ``drop_empty``).

    Raises:
        PromptRenderError: a placeholder without a value, a value without a placeholder, or
            an invalid ``$``.
    """
    strs = {k: str(v) for k, v in values.items()}
    _check(Template(template), strs, where)
    if not drop_empty:
        return Template(template).substitute(strs)
    kept: list[str] = []
    for section in _HEADING_SPLIT_RE.split(template):
        names = Template(section).get_identifiers()
        if names and all(strs[name] == "" for name in names):
            continue
        lines = []
        for line in section.split("\n"):
            lone = _LONE_PLACEHOLDER_RE.match(line)
            if lone and strs[lone.group(1) or lone.group(2)] == "":
                continue
            lines.append(line)
        kept.append("\n".join(lines))
    return Template("".join(kept)).substitute(strs).strip()


def render(name: str, *, drop_empty: bool = False, **values: Any) -> str:
    """Fill the bundled prompt template ``name`` (``prompts/<name>.md``) strictly.

    Args:
        name: the template name, e.g. ``"gate"``.
        drop_empty: see `fill`.
        **values: placeholder → value.

    Returns:
        The filled prompt.

    Raises:
        PromptRenderError: see `fill`.
        evoduet_graph.prompts.UnknownPromptError: no template of that name.
    """
    return fill(load_prompt(name), values, drop_empty=drop_empty, where=f"prompt {name!r}")

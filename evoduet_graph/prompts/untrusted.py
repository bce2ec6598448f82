"""The one sanitiser for untrusted text placed in a prompt (docs/design.md §4).

Web documents, their titles and URLs, and a scaffold's model-written strategy are data, not
instructions: before they go into a prompt they are made unable to close the section that
holds them. `neutralise` normalises line ends, removes control characters, writes
``<evidence`` / ``</evidence`` and ``<document`` / ``</document`` (any case, inner spaces) as
``&lt;…``, turns runs of three or more backticks or tildes into ``'''`` (no code fence can
open or close) and shortens runs of five or more ``<``, ``=`` or ``>`` to three (no
SEARCH/REPLACE marker line). `one_line` does the same to a single line (titles, URLs).
"""

from __future__ import annotations

import re

__all__ = ["neutralise", "one_line"]

_TAG_RE = re.compile(r"<(\s*/?\s*)(evidence|document)", re.IGNORECASE)
_FENCE_RUN_RE = re.compile(r"`{3,}|~{3,}")
_MARKER_RUN_RE = re.compile(r"([<>=])\1{4,}")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def neutralise(text: str) -> str:
    """Make untrusted ``text`` safe inside a prompt section (see the module docstring).

    Args:
        text: the untrusted text.

    Returns:
        The text with line ends normalised and every section-closing construct made inert.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL_RE.sub("", text)
    text = _TAG_RE.sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)
    text = _FENCE_RUN_RE.sub("'''", text)
    return _MARKER_RUN_RE.sub(lambda m: m.group(1) * 3, text)


def one_line(text: str, limit: int | None = None) -> str:
    """Untrusted ``text`` as one neutralised line (whitespace runs collapsed).

    Args:
        text: the untrusted text (a title, a URL).
        limit: cut to this many characters (None: whole).

    Returns:
        The single neutralised line.
    """
    line = " ".join(neutralise(text).split())
    return line if limit is None else line[:limit]

"""Text helpers for chat-model replies: message text, `<think>` removal, code and JSON extraction.

These are the tolerant parsers behind the structured-output fallback chain (docs/design.md §4:
"strip `<think>`, code fences, outermost `{...}`") and behind code extraction in the generate
node. They never raise on malformed model output; they return ``None`` (or ``""``) instead.
"""

from __future__ import annotations

import json
from typing import Any

import json_repair
from langchain_core.messages import BaseMessage

from evoduet_graph.reply_text import fenced_blocks, has_reasoning, remove_reasoning

__all__ = [
    "extract_code_block",
    "extract_json_object",
    "message_text",
    "strip_think",
]

# Aliases accepted for a fenced block's info string, per requested language.
_LANGUAGE_ALIASES: dict[str, set[str]] = {
    "python": {"python", "py", "python3", "py3"},
    "json": {"json", "jsonc", "json5"},
}

# Upper bound on '{' positions the repair pass starts from.
_MAX_REPAIR_STARTS = 16


def message_text(msg: Any) -> str:
    """Plain text of a chat message, a content list or a string.

    Args:
        msg: a `BaseMessage`, a ``str``, or a content list as LangChain uses it (strings and
            dicts such as ``{"type": "text", "text": ...}``). Non-text parts (images,
            reasoning blocks, tool-use blocks) are skipped.

    Returns:
        The concatenated text parts; ``""`` for ``None`` or content without text.
    """
    content = msg.content if isinstance(msg, BaseMessage) else msg
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, (list, tuple)):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") in ("text", "output_text"):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
        return "".join(parts)
    return str(content)


def strip_think(text: str) -> str:
    """A reply without its reasoning (`evoduet_graph.reply_text.remove_reasoning`), stripped."""
    return remove_reasoning(text).strip()


def extract_code_block(text: str, language: str | None = "python") -> str | None:
    """The code of the best fenced block in a reply.

    ``<think>`` blocks are removed first. Among blocks tagged with ``language`` (or an alias:
    ``py``, ``python3``, ...) the longest wins, the later one on ties; if none is tagged,
    untagged blocks are considered the same way. Blocks tagged with another language are
    ignored. ``language=None`` accepts every block.

    Args:
        text: the raw reply.
        language: the wanted info string, or ``None`` for any.

    Returns:
        The block body without the fences (trailing newline removed), or ``None`` when the
        reply has no suitable block.
    """
    blocks = fenced_blocks(strip_think(text))
    if not blocks:
        return None
    if language is None:
        candidates = [b.body for b in blocks]
    else:
        wanted = _LANGUAGE_ALIASES.get(language.lower(), {language.lower()})
        candidates = [b.body for b in blocks if b.info in wanted]
        if not candidates:
            candidates = [b.body for b in blocks if not b.info]
    candidates = [body for body in candidates if body.strip()]
    if not candidates:
        return None
    best = max(reversed(candidates), key=len)  # reversed: later block wins ties
    return best.rstrip("\n")


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a reply carries, found tolerantly.

    Steps: remove ``<think>`` blocks; look inside fenced blocks (``json``-tagged first, then
    the others), then in the whole text; at every ``{`` try a strict JSON decode and keep the
    longest object found (that is the outermost one; prose before, between and after is
    ignored). If no object decodes, the text from a ``{`` on is repaired by the `json_repair`
    library (trailing commas, Python literals such as single quotes and ``True``/``None``, raw
    newlines in strings, an object cut off at the end of the reply) and a non-empty object it
    yields is taken.

    Args:
        text: the raw reply.

    Returns:
        The decoded object (a ``dict``), or ``None`` when none is found. Arrays and scalars at
        top level are not returned.
    """
    if not text:
        return None
    cleaned = strip_think(text)
    if not cleaned and has_reasoning(text):
        cleaned = text  # all reasoning, nothing else: still better than nothing
    blocks = fenced_blocks(cleaned)
    ordered = [b.body for b in blocks if b.info in _LANGUAGE_ALIASES["json"]]
    ordered += [b.body for b in blocks if b.info not in _LANGUAGE_ALIASES["json"]]
    for source in [*ordered, cleaned]:
        found = _decode_longest_object(source)
        if found is not None:
            return found
    for source in [*ordered, cleaned]:
        found = _repaired_object(source)
        if found is not None:
            return found
    return None


def _decode_longest_object(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder(strict=False)
    best: dict[str, Any] | None = None
    best_len = -1
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict) and end - pos > best_len:
            best, best_len = obj, end - pos
        pos = text.find("{", end)  # skip the decoded object's inner braces
    return best


def _repaired_object(text: str) -> dict[str, Any] | None:
    """The first non-empty object `json_repair` makes of the text from a ``{`` on.

    At most `_MAX_REPAIR_STARTS` ``{`` positions are tried (prose such as ``set {x}`` before
    the object repairs to no object). Of several objects one after the other, the longest.
    """
    pos = text.find("{")
    for _ in range(_MAX_REPAIR_STARTS):
        if pos == -1:
            return None
        try:
            repaired = json_repair.loads(text[pos:])
        except Exception:  # noqa: BLE001 - the library's failure on garbage is "no object"
            repaired = None
        items = repaired if isinstance(repaired, list) else [repaired]
        objects = [o for o in items if isinstance(o, dict) and o]
        if objects:
            return max(objects, key=lambda o: len(json.dumps(o, default=str)))
        pos = text.find("{", pos + 1)
    return None

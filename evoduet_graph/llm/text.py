"""Text helpers for chat-model replies: message text, `<think>` removal, code and JSON extraction.

These are the tolerant parsers behind the structured-output fallback chain (docs/design.md §4:
"strip `<think>`, code fences, outermost `{...}`") and behind code extraction in the generate
node. They never raise on malformed model output; they return ``None`` (or ``""``) instead.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.utils.json import parse_partial_json

__all__ = [
    "extract_code_block",
    "extract_json_object",
    "fenced_blocks",
    "message_text",
    "strip_think",
]

# Reasoning blocks emitted by reasoning models (DeepSeek-R1, Qwen3, QwQ, ...).
_THINK_BLOCK = re.compile(r"<(think|thinking)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<(?:think|thinking)\b[^>]*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)\s*>", re.IGNORECASE)

# Aliases accepted for a fenced block's info string, per requested language.
_LANGUAGE_ALIASES: dict[str, set[str]] = {
    "python": {"python", "py", "python3", "py3"},
    "json": {"json", "jsonc", "json5"},
}

# Upper bound on '{' positions tried by the tolerant (non-JSON) object scan.
_MAX_TOLERANT_STARTS = 64


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
    """Remove reasoning blocks ``<think>...</think>`` (also ``<thinking>``) from a reply.

    Also handled: an unclosed ``<think>`` (the reply was cut off while reasoning; everything
    from the tag on is dropped, so a reply that *starts* unclosed becomes ``""``) and a stray
    leading ``</think>`` without an opening tag (servers whose chat template opens the block in
    the prompt; everything up to it is dropped).

    Args:
        text: the raw reply text.

    Returns:
        The reply without reasoning, stripped of surrounding whitespace.
    """
    if not text:
        return ""
    out = _THINK_BLOCK.sub("", text)
    opening = _THINK_OPEN.search(out)
    closing = _THINK_CLOSE.search(out)
    if closing and (opening is None or closing.start() < opening.start()):
        # Orphan closing tag: the reasoning started in the prompt template.
        out = out[closing.end() :]
        opening = _THINK_OPEN.search(out)
    if opening:
        out = out[: opening.start()]
    return out.strip()


def fenced_blocks(text: str) -> Iterator[tuple[str, str]]:
    """Yield ``(info, body)`` for every fenced block (``` or ~~~) in markdown text.

    The info string is lower-cased and reduced to its first word (```` ```Python title ```` →
    ``"python"``). A block left open at the end of the text (a truncated reply) is yielded with
    everything up to the end.
    """
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        fence = _fence_of(stripped)
        if fence is None:
            i += 1
            continue
        info_words = stripped[len(fence) :].strip().split()
        info = info_words[0].lower() if info_words else ""
        body: list[str] = []
        i += 1
        while i < len(lines):
            candidate = lines[i].strip()
            if candidate.startswith(fence) and set(candidate) == {fence[0]}:
                break
            body.append(lines[i])
            i += 1
        yield info, "\n".join(body)
        i += 1


def _fence_of(stripped_line: str) -> str | None:
    for char in ("`", "~"):
        if stripped_line.startswith(char * 3):
            n = len(stripped_line) - len(stripped_line.lstrip(char))
            fence = char * n
            # A backtick fence's info string may not contain backticks (CommonMark).
            if char == "`" and "`" in stripped_line[n:]:
                return None
            return fence
    return None


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
    blocks = list(fenced_blocks(strip_think(text)))
    if not blocks:
        return None
    if language is None:
        candidates = [body for _, body in blocks]
    else:
        wanted = _LANGUAGE_ALIASES.get(language.lower(), {language.lower()})
        candidates = [body for info, body in blocks if info in wanted]
        if not candidates:
            candidates = [body for info, body in blocks if not info]
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
    ignored). If no object decodes, a tolerant pass accepts trailing commas, Python literals
    (single quotes, ``True``/``None``) and, as a last resort, an object cut off at the end of
    the reply (closed by `langchain_core.utils.json.parse_partial_json`).

    Args:
        text: the raw reply.

    Returns:
        The decoded object (a ``dict``), or ``None`` when none is found. Arrays and scalars at
        top level are not returned.
    """
    if not text:
        return None
    cleaned = strip_think(text)
    if not cleaned and _THINK_OPEN.search(text):
        cleaned = text  # all reasoning, nothing else: still better than nothing
    blocks = list(fenced_blocks(cleaned))
    ordered = [b for info, b in blocks if info in _LANGUAGE_ALIASES["json"]]
    ordered += [b for info, b in blocks if info not in _LANGUAGE_ALIASES["json"]]
    for source in [*ordered, cleaned]:
        found = _decode_longest_object(source)
        if found is not None:
            return found
    for source in [*ordered, cleaned]:
        found = _decode_tolerant(source)
        if found is not None:
            return found
    return _decode_truncated(cleaned)


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


def _balanced_spans(text: str) -> Iterator[tuple[int, int]]:
    """Spans of balanced ``{...}`` starting at each ``{``, aware of quoted strings."""
    starts = [m.start() for m in re.finditer(r"\{", text)][:_MAX_TOLERANT_STARTS]
    for start in starts:
        depth = 0
        quote: str | None = None
        escaped = False
        for i in range(start, len(text)):
            ch = text[i]
            if quote:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    yield start, i + 1
                    break


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _decode_tolerant(text: str) -> dict[str, Any] | None:
    best: dict[str, Any] | None = None
    best_len = -1
    for start, end in _balanced_spans(text):
        if end - start <= best_len:
            continue
        snippet = text[start:end]
        obj = _loads_lenient(snippet)
        if isinstance(obj, dict):
            best, best_len = obj, end - start
    return best


def _loads_lenient(snippet: str) -> Any:
    without_commas = _TRAILING_COMMA.sub(r"\1", snippet)
    try:
        return json.loads(without_commas, strict=False)
    except ValueError:
        pass
    try:
        return ast.literal_eval(without_commas)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _decode_truncated(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    if start == -1:
        return None
    try:
        obj = parse_partial_json(text[start:].strip(), strict=False)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None

"""Reading a model's reply as text: reasoning removal and fenced code blocks.

One parser of each kind for every consumer of a reply: the structured-output chain and the
generate node's code extraction (`evoduet_graph.llm.text`) and the diff / rewrite parser
(`evoduet_graph.candidates.diffs`). Both functions are linear in the reply's length and never
raise on malformed text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FencedBlock", "clean_reply", "fenced_blocks", "has_reasoning", "remove_reasoning"]

# Reasoning blocks emitted by reasoning models (DeepSeek-R1, Qwen3, QwQ, ...).
_THINK_OPEN = re.compile(r"<(?:think|thinking)\b[^>]*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)\s*>", re.IGNORECASE)


def remove_reasoning(text: str) -> str:
    """``text`` without its ``<think>…</think>`` (or ``<thinking>``) reasoning.

    Three shapes are handled: closed blocks are removed; an opening tag left unclosed means the
    reply was cut off while reasoning, so everything from it on is dropped (a reply that starts
    unclosed becomes ``""``); text before an orphan closing tag is reasoning whose opening tag
    the chat template put in the prompt, so everything up to the last orphan is dropped.
    Surrounding whitespace is kept (callers strip it where they want to).
    """
    if not text:
        return ""
    kept: list[str] = []
    pos = 0
    while True:
        opened = _THINK_OPEN.search(text, pos)
        if opened is None:
            kept.append(text[pos:])
            break
        kept.append(text[pos : opened.start()])
        closed = _THINK_CLOSE.search(text, opened.end())
        if closed is None:
            break
        pos = closed.end()
    out = "".join(kept)
    last = None
    for last in _THINK_CLOSE.finditer(out):  # noqa: B007 - the last orphan is wanted
        pass
    return out[last.end() :] if last is not None else out


def clean_reply(text: str) -> str:
    """A reply with LF line ends and without its reasoning (`remove_reasoning`)."""
    return remove_reasoning(text.replace("\r\n", "\n").replace("\r", "\n"))


def has_reasoning(text: str) -> bool:
    """Whether ``text`` opens a reasoning block."""
    return _THINK_OPEN.search(text) is not None


@dataclass(frozen=True)
class FencedBlock:
    """One fenced block (```` ``` ```` or ``~~~``) of a markdown reply.

    Attributes:
        info: the info string's first word, lower-cased (```` ```Python title ```` →
            ``"python"``); ``""`` for an untagged block.
        lines: the lines between the fences.
        closed: False for a block left open at the end of the reply (cut off by the token
            limit); its lines run to the end.
    """

    info: str
    lines: tuple[str, ...]
    closed: bool

    @property
    def body(self) -> str:
        """The block's text (its lines joined by newlines)."""
        return "\n".join(self.lines)


def _fence_of(line: str) -> str | None:
    """The fence a line opens (its run of backticks or tildes), or None."""
    stripped = line.lstrip()
    for char in ("`", "~"):
        if stripped.startswith(char * 3):
            n = len(stripped) - len(stripped.lstrip(char))
            # a backtick fence's info string may not contain backticks (CommonMark)
            if char == "`" and "`" in stripped[n:]:
                return None
            return char * n
    return None


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Every fenced block of ``text``, in order (CommonMark's fences).

    A block opens on a line of three or more backticks or tildes (indentation allowed) and
    closes on a line of the same character at least as long and nothing else. Line ends may be
    LF, CRLF or CR.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    found: list[FencedBlock] = []
    i = 0
    while i < len(lines):
        fence = _fence_of(lines[i])
        if fence is None:
            i += 1
            continue
        words = lines[i].lstrip()[len(fence) :].split()
        info = words[0].lower() if words else ""
        start = i = i + 1
        closed = False
        while i < len(lines):
            candidate = lines[i].strip()
            if candidate.startswith(fence) and set(candidate) == {fence[0]}:
                closed = True
                break
            i += 1
        found.append(FencedBlock(info, tuple(lines[start:i]), closed))
        i += 1
    return found

"""Tokenisation shared by the offline BM25 index and D_search's relevance selection.

Lowercase; identifiers are split into their parts (``scipy.optimize.minimize`` →
``scipy optimize minimize``; ``vector_norm`` → ``vector norm``; ``LinearOperator`` →
``linear operator``) and the whole identifier is kept as one extra token so exact-name queries
still match best; English stopwords (bm25s's NLTK-derived ``STOPWORDS_EN_PLUS``, so question
words such as "how" and "which" go too) and one-letter words are dropped; a light,
deterministic plural folding (``norms`` → ``norm``, ``libraries`` → ``library``) stands in for
a stemmer. The same function tokenises documents and queries.
"""

from __future__ import annotations

import functools
import re
from typing import Any

TOKENIZER_VERSION = 1
"""Bump when `tokenize` changes: it is part of the offline index cache key."""

_IDENT = re.compile(r"\w+(?:\.\w+)*")
_SEP = re.compile(r"[._]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def load_bm25s() -> Any:
    """The ``bm25s`` package (BM25 index and stop words), imported on first use."""
    import bm25s  # start-up: ~85 ms, paid only by the offline backend and query tokenising

    return bm25s


@functools.cache
def _stopwords() -> frozenset[str]:
    return frozenset(load_bm25s().stopwords.STOPWORDS_EN_PLUS)


def _fold(token: str) -> str:
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def _parts(word: str) -> list[str]:
    if any(c.isupper() for c in word) and any(c.islower() for c in word):
        found = _CAMEL.findall(word)
        if found:
            return found
    return [word]


@functools.lru_cache(maxsize=1 << 16)
def _identifier_tokens(raw_ident: str) -> tuple[str, ...]:
    """Tokens of one identifier match (cached).

    Tokens of one identifier match (cached: a corpus repeats few distinct identifiers —
    the numpy+scipy docstrings hold ~860k identifiers, ~27k distinct).
    """
    ident = raw_ident.strip("_.")
    if not ident:
        return ()
    stop = _stopwords()
    out: list[str] = []
    pieces = [p for raw in _SEP.split(ident) if raw for p in _parts(raw)]
    for piece in pieces:
        tok = piece.lower()
        if tok in stop or (len(tok) < 2 and not tok.isdigit()):
            continue
        out.append(_fold(tok))
    if len(pieces) > 1:
        out.append(ident.lower())
    return tuple(out)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into BM25 tokens (see the module docstring for the rules).

    Returns:
        Tokens in text order (duplicates kept: term frequency matters).
    """
    out: list[str] = []
    for ident in _IDENT.findall(text or ""):
        out.extend(_identifier_tokens(ident))
    return out

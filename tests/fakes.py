"""Test fakes: a scripted chat model and a counting evaluator wrapper.

Fakes are for unit and integration tests only; every capability also runs for real.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from evoduet_graph.evaluation import EvaluationOutcome

Response = str | Exception | Callable[[list[BaseMessage]], str]


class ScriptedChatModel(BaseChatModel):
    """Chat model that answers from a script, in call order (thread-safe).

    Each entry is a string (the answer), an exception (raised) or a callable of the messages.
    After the script ends, ``default`` answers (or `IndexError` if None). Every answer carries
    ``usage_metadata`` (characters / 4 as token counts) so usage accounting is testable.
    """

    responses: list[Any]
    default: Any = None
    _index: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        return list(self._prompts)

    @property
    def calls(self) -> int:
        return self._index

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            i = self._index
            self._index += 1
            self._prompts.append(list(messages))
        item = self.responses[i] if i < len(self.responses) else self.default
        if item is None:
            raise IndexError(f"scripted model exhausted after {len(self.responses)} answers")
        if isinstance(item, Exception):
            raise item
        reply = item(messages) if callable(item) else item
        tool_calls = list(reply.tool_calls) if isinstance(reply, AIMessage) else []
        text = str(reply.content) if isinstance(reply, AIMessage) else str(reply)
        prompt_chars = sum(len(str(m.content)) for m in messages)
        usage = {
            "input_tokens": prompt_chars // 4 + 1,
            "output_tokens": len(text) // 4 + 1,
            "total_tokens": prompt_chars // 4 + len(text) // 4 + 2,
        }
        msg = AIMessage(content=text, usage_metadata=usage, tool_calls=tool_calls)
        return ChatResult(generations=[ChatGeneration(message=msg)])


class ToolCallingScriptedChatModel(ScriptedChatModel):
    """`ScriptedChatModel` with native tool calling.

    ``bind_tools`` records the tools and returns the model itself; an answer may be an `AIMessage`
    with ``tool_calls``.
    """

    _tools: list[Any] = PrivateAttr(default_factory=list)

    @property
    def bound_tools(self) -> list[Any]:
        return list(self._tools)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self._tools.extend(tools)
        return self


class CountingEvaluator:
    """Wraps an evaluator; appends one JSON line per evaluated program to ``log_path``."""

    def __init__(self, inner: Any, log_path: str | Path) -> None:
        self.inner = inner
        self.log_path = Path(log_path)
        self._lock = threading.Lock()

    def _log(self, ids: Sequence[str], codes: Sequence[str]) -> None:
        import hashlib

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, self.log_path.open("a", encoding="utf-8") as fh:
            for pid, code in zip(ids, codes, strict=True):
                sha = hashlib.sha256(code.encode()).hexdigest()
                fh.write(json.dumps({"id": pid, "sha": sha}) + "\n")

    def evaluate(self, code: str, program_id: str = "candidate") -> EvaluationOutcome:
        out = self.inner.evaluate(code, program_id)
        self._log([program_id], [code])
        return out

    def evaluate_many(
        self, codes: Sequence[str], ids: Sequence[str] | None = None
    ) -> list[EvaluationOutcome]:
        ids = list(ids) if ids is not None else [f"c{i}" for i in range(len(codes))]
        out = self.inner.evaluate_many(codes, ids)
        self._log(ids, codes)
        return out

    def evaluated(self) -> list[dict[str, str]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]


# --------------------------------------------------------------------------------------------
# World-knowledge layer fakes: search backends and a content-routed scripted answerer
# --------------------------------------------------------------------------------------------

SearchResults = Callable[[str, int], list[Any]]


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "q"


class FakeSearcher:
    """Deterministic search backend (the `evoduet_graph.search.Searcher` protocol).

    Args:
        results: how to answer a query: a callable ``(query, max_results) -> [Document|dict]``,
            a mapping ``query -> [Document|dict]`` (unknown queries return ``[]``), or None for
            the default: ``max_results`` documents whose URLs, titles and contents depend only
            on the query (``https://fake.example/<slug>/<i>``), so a re-run of the same query
            returns the same URLs.
        name: backend name (``Document.source`` of the default documents).

    Attributes:
        queries: every query received, in call order.
        preflights: number of ``preflight`` calls.
    """

    def __init__(
        self,
        results: SearchResults | dict[str, list[Any]] | None = None,
        *,
        name: str = "fake",
    ) -> None:
        self.name = name
        self.results = results
        self.queries: list[str] = []
        self.preflights = 0
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        return len(self.queries)

    def preflight(self) -> None:
        self.preflights += 1

    def search(self, query: str, max_results: int) -> list[Any]:
        from evoduet_graph.search import Document

        with self._lock:
            self.queries.append(query)
        if callable(self.results):
            return list(self.results(query, max_results))
        if isinstance(self.results, dict):
            return list(self.results.get(query, []))
        slug = _slug(query)
        return [
            Document(
                url=f"https://fake.example/{slug}/{i}",
                title=f"Result {i} for {query}",
                content=f"Finding {i} about {query}: put every point on the unit circle.",
                score=1.0 - 0.1 * i,
                source=self.name,
            )
            for i in range(max_results)
        ]


class FailingSearcher:
    """Search backend whose every ``search`` call raises ``exc`` (default ConnectionError).

    Attributes:
        queries: every query received (one entry per attempt, retries included).
    """

    def __init__(self, exc: Exception | None = None, *, name: str = "failing") -> None:
        self.name = name
        self.exc = exc if exc is not None else ConnectionError("search backend is down")
        self.queries: list[str] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        return len(self.queries)

    def preflight(self) -> None:
        return None

    def search(self, query: str, max_results: int) -> list[Any]:
        with self._lock:
            self.queries.append(query)
        raise self.exc


PROMPT_MARKERS = {
    "gate": "You decide whether an evolutionary program search needs outside knowledge",
    "construct_query": "You write web-search queries for an evolutionary program search",
    "hypothetical_score": "You predict how useful each document is",
    "evox_strategy": "You steer an evolutionary program search",
    "rerank": "You rank search results for an evolutionary program search",
}
APPENDED_MARKERS = {
    "joint_search_step": "Before you write the new program you may search",
}


def prompt_kind(messages: Sequence[BaseMessage]) -> str:
    """Which node wrote a prompt.

    Which node wrote a prompt: ``gate``, ``construct_query``, ``hypothetical_score``,
    ``rerank``, ``evox_strategy`` (the EvoX revision in ``select``), ``joint_search_step``
    (a structured turn of joint-level search in ``generate``) or ``generate`` (anything
    else).

    The knowledge-layer prompts start with the shared system message and context prefix (task,
    parent program), so the node's own marker is looked for anywhere in the first message
    after the system message.
    """
    for kind, marker in APPENDED_MARKERS.items():  # a turn appended to a prompt
        if any(str(m.content).startswith(marker) for m in messages[1:] if m.type != "system"):
            return kind
    own = [m for m in messages if m.type != "system"]  # the run's system message is shared
    text = str(own[0].content) if own else ""
    for kind, marker in PROMPT_MARKERS.items():
        if marker in text:
            return kind
    return "generate"


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    """All message contents joined by newlines."""
    return "\n".join(str(m.content) for m in messages)


def scored_documents(text: str) -> list[tuple[str, str, str]]:
    """``(doc_id, title, url)`` of every ``<document id=...>`` block of a scoring prompt."""
    import re

    return re.findall(r'<document id="([^"]+)">\ntitle: (.*)\nurl: (.*)\n', text)


def _title_score(doc_id: str, title: str, url: str) -> float | None:
    import re

    match = re.search(r"score=(-?[0-9.]+)", title)
    return float(match.group(1)) if match else 0.5


class KnowledgeResponder:
    """Answers each prompt of a run by what it is (use as ``ScriptedChatModel(default=...)``).

    Args:
        gate: the gate's answer: a decision string (``"retrieve"``), a list of answers used in
            gate-call order (the last one repeats), or a callable ``(call_index, prompt) ->
            str | dict``; a dict is sent as JSON with the knowledge fields filled in, a string
            that is not a decision is sent verbatim (garbage).
        queries: ``(call_index, prompt) -> list[str]`` for ``construct_query``; default one
            query ``"query <call_index>"``.
        score: ``(doc_id, title, url) -> float | None`` for ``hypothetical_score`` (None:
            the document is left out of the reply); default: the number after ``score=`` in
            the title, else 0.5.
        generate: the generation answer: a string or a callable of the messages.
        strategy: the EvoX strategy revision's answer: a string (sent verbatim) or a callable
            ``(call_index, prompt) -> str | dict`` (a dict is sent as JSON); default: rule
            ``best`` with the instruction ``"strategy <call_index>"``.
        delay_s: seconds to sleep before each answer (slow model for kill tests).
        rate: ``(doc_id, title, url) -> (relevance, novelty) | None`` for ``rerank``
            (None: left out); default: relevance = the ``score=`` number of the title (else
            0.5), novelty 0.5.
        joint: ``(call_index, prompt) -> {"action", "query"}`` for a structured joint-search
            turn; default: answer at once.

    A repair re-prompt (a prompt that echoes an earlier reply) gets the answer of the call it
    repairs, so a garbage answer stays garbage and the caller falls back to its default.

    Attributes:
        log: ``(kind, prompt text)`` per call, in call order (repairs included).
    """

    DECISIONS = ("no-op", "look-up", "retrieve")

    def __init__(
        self,
        *,
        gate: Any = "retrieve",
        queries: Callable[[int, str], list[str]] | None = None,
        score: Callable[[str, str, str], float | None] | None = None,
        generate: str | Callable[[list[BaseMessage]], str] = "no change",
        strategy: str | Callable[[int, str], str | dict[str, Any]] | None = None,
        delay_s: float = 0.0,
        rate: Callable[[str, str, str], tuple[float, float] | None] | None = None,
        joint: Callable[[int, str], dict[str, Any]] | None = None,
    ) -> None:
        self.gate = gate
        self.queries = queries or (lambda n, _text: [f"query {n}"])
        self.score = score or _title_score
        self.generate = generate
        self.strategy = strategy
        self.delay_s = delay_s
        self.rate = rate or (lambda _d, title, _u: (_title_score(_d, title, _u) or 0.0, 0.5))
        self.joint = joint or (lambda _n, _text: {"action": "answer", "query": ""})
        self.log: list[tuple[str, str]] = []
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def prompts(self, kind: str) -> list[str]:
        """Prompt texts of one kind, in call order."""
        with self._lock:
            return [text for k, text in self.log if k == kind]

    def __call__(self, messages: list[BaseMessage]) -> str:
        import time

        kind = prompt_kind(messages)
        text = prompt_text(messages)
        repair = any(isinstance(m, AIMessage) for m in messages)
        with self._lock:
            if repair:  # a re-prompt after an unusable reply: same call index, same answer
                n = max(0, self._counts.get(kind, 1) - 1)
            else:
                n = self._counts.get(kind, 0)
                self._counts[kind] = n + 1
            self.log.append((kind, text))
        if self.delay_s:
            time.sleep(self.delay_s)
        if kind == "gate":
            return self._gate(n, text)
        if kind == "construct_query":
            return json.dumps({"queries": list(self.queries(n, text))})
        if kind == "hypothetical_score":
            scores = []
            for doc_id, title, url in scored_documents(text):
                value = self.score(doc_id, title, url)
                if value is not None:
                    scores.append({"doc_id": doc_id, "predicted_score": value})
            return json.dumps(
                {"scores": scores, "known": "k", "established": "e", "unresolved": "gap"}
            )
        if kind == "rerank":
            ratings = {}
            for doc_id, title, url in scored_documents(text):
                value = self.rate(doc_id, title, url)
                if value is not None:
                    ratings[doc_id] = {"relevance": value[0], "novelty": value[1]}
            return json.dumps(
                {"ratings": ratings, "known": "k", "established": "e", "unresolved": "gap"}
            )
        if kind == "joint_search_step":
            return json.dumps(self.joint(n, text))
        if kind == "evox_strategy":
            return self._strategy(n, text)
        return self.generate(messages) if callable(self.generate) else self.generate

    def _strategy(self, n: int, text: str) -> str:
        if self.strategy is None:
            answer: str | dict[str, Any] = {
                "parent_rule": "best",
                "instruction": f"strategy {n}",
                "rationale": f"scripted strategy {n}",
            }
        elif callable(self.strategy):
            answer = self.strategy(n, text)
        else:
            answer = self.strategy
        return json.dumps(answer) if isinstance(answer, dict) else str(answer)

    def _gate(self, n: int, text: str) -> str:
        if callable(self.gate):
            answer = self.gate(n, text)
        elif isinstance(self.gate, list):
            answer = self.gate[min(n, len(self.gate) - 1)]
        else:
            answer = self.gate
        if isinstance(answer, str) and answer in self.DECISIONS:
            answer = {"decision": answer}
        if isinstance(answer, dict):
            body = {
                "known": "known facts",
                "established": "nothing yet",
                "unresolved": "how to place the points",
                "reasoning": f"scripted gate answer {n}",
                "document_ids": [],
                **answer,
            }
            return json.dumps(body)
        return str(answer)


# --------------------------------------------------------------------------------------------
# Novelty check fakes: a small LangChain Embeddings for code
# --------------------------------------------------------------------------------------------


class CodeEmbeddings(Embeddings):
    """Deterministic bag-of-tokens LangChain `Embeddings` for code (no model, no network).

    Each text's tokens (words and single punctuation characters) are hashed into ``dims``
    buckets with their counts; the vector is L2-normalised, so texts sharing most tokens have a
    cosine near 1. ``window`` keeps only the first ``window`` characters of a text, like a
    real model's input limit (MiniLM reads 256 word pieces).

    Attributes:
        texts: every text embedded, in call order (to count cache misses).
    """

    def __init__(self, dims: int = 256, window: int | None = None) -> None:
        self.dims = dims
        self.window = window
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def _vector(self, text: str) -> list[float]:
        import hashlib
        import math
        import re

        if self.window is not None:
            text = text[: self.window]
        vec = [0.0] * self.dims
        for tok in re.findall(r"\w+|[^\w\s]", text):
            vec[int(hashlib.sha256(tok.encode()).hexdigest()[:8], 16) % self.dims] += 1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.texts.extend(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def code_embeddings() -> CodeEmbeddings:
    """Factory for ``novelty.embeddings: "tests.fakes:code_embeddings"``."""
    return CodeEmbeddings()


def not_embeddings() -> Any:
    """Factory that returns something that is not an `Embeddings` (config error tests)."""
    return object()


class DownEmbeddings(CodeEmbeddings):
    """Embeddings whose service is down: every call raises ``ConnectionError``."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise ConnectionError("embeddings service unreachable")


def down_embeddings() -> DownEmbeddings:
    """Factory for ``novelty.embeddings: "tests.fakes:down_embeddings"``."""
    return DownEmbeddings()

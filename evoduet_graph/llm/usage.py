"""LLM calls, tokens and latency per graph node (docs/design.md §6).

`UsageTracker` is a LangChain callback handler. It builds on langchain-core's
`UsageMetadataCallbackHandler` (so ``tracker.usage_metadata`` still holds the per-*model*
totals that pricing needs) and adds per-*node* buckets of `NodeUsage`: calls, errors, input and
output tokens, wall-clock latency and, where the model reports them (`CallStats`),
prompt tokens reused from a cache, prompt-evaluation and decode seconds, time spent waiting for
the embedded model's lock and the finish reasons. A `track_node` block also keeps one
`CallStats` per call (``NodeUsage.call_log``), which the node instrumentation writes as
``llm_call`` events.

The bucket of a call is chosen when the call *starts*, in this order:

1. the innermost `track_node` block active in the calling context (a ``ContextVar``);
2. LangGraph's ``metadata["langgraph_node"]`` of the run (present when the model is invoked
   inside a graph node with the node's config, which LangGraph propagates automatically);
3. a run tag ``"node:<name>"`` (what ``Context.llm_config(node)`` sets);
4. ``"unknown"``.

Tokens come from ``AIMessage.usage_metadata`` of the generations (ChatOpenAI and the embedded
model set it), else from ``llm_output["token_usage"]`` (``prompt_tokens`` /
``completion_tokens``). Calls without either are counted with zero tokens.

How the lead wires it (either works; doing both does not double count, LangChain de-duplicates
the same handler object):

* attach it to the model: ``make_chat_model(cfg, callbacks=[tracker])`` — every call of that
  model is seen, including calls from worker threads that did not inherit a config;
* or pass it at graph invocation: ``graph.invoke(state, config={"callbacks": [tracker]})`` —
  it is inherited by every node and every model call made with the node's config.

Attribution inside worker threads: ``ThreadPoolExecutor`` does not copy context variables, so a
`track_node` block in the submitting thread is invisible to the workers. Use LangChain's
``langchain_core.runnables.config.ContextThreadPoolExecutor`` (or
``contextvars.copy_context().run``) for the N parallel candidates, or rely on rule 2.

Example::

    tracker = UsageTracker()
    llm = make_chat_model(cfg, callbacks=[tracker])
    with track_node("gate") as usage:
        structured_call(llm, messages, GateDecision, default=...)
    usage.calls, usage.input_tokens, usage.latency_s   # this block only
    tracker.by_node()["gate"]                          # running total for the node
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any
from uuid import UUID

from langchain_core.callbacks import UsageMetadataCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from evoduet_graph.llm.providers import CACHE_READ, cache_read_path
from evoduet_graph.rundir.usage import TokenCounts

__all__ = ["CallStats", "NodeUsage", "UsageTracker", "current_node", "track_node"]

UNKNOWN_NODE = "unknown"
_SECONDS_KEYS = ("prompt_eval_s", "decode_s", "lock_wait_s")
"""The `CallStats` timings the embedded model reports in its response metadata."""


@dataclass(frozen=True)
class CallStats:
    """What one model call reported beyond its token counts (None: the model did not say).

    Attributes:
        model: the model name.
        node: the node the call was attributed to (see the module docstring).
        input_tokens: prompt tokens.
        output_tokens: completion tokens.
        latency_s: wall seconds of the call, as the callback saw it.
        error: the call raised.
        cached_input_tokens: prompt tokens served from a prompt cache:
            ``usage_metadata["input_token_details"]["cache_read"]`` (the embedded model: the
            evaluated prefix llama.cpp reused; OpenAI-compatible endpoints:
            ``prompt_tokens_details.cached_tokens``; Anthropic: ``cache_read_input_tokens``;
            Gemini: ``cachedContentTokenCount``; each integration maps its field there, and
            counts them in ``input_tokens`` too: `evoduet_graph.llm.providers`).
        prompt_eval_s: seconds evaluating the prompt (embedded model).
        decode_s: seconds generating the reply (embedded model).
        lock_wait_s: seconds the call waited for the embedded model's lock.
        finish_reason: ``stop``, ``length``, ...
    """

    model: str
    node: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    error: bool = False
    cached_input_tokens: int | None = None
    prompt_eval_s: float | None = None
    decode_s: float | None = None
    lock_wait_s: float | None = None
    finish_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, None fields left out, seconds rounded to milliseconds."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            if value is None or (key == "error" and not value):
                continue
            out[key] = round(value, 3) if isinstance(value, float) else value
        return out


@dataclass
class NodeUsage(TokenCounts):
    """Accumulated LLM usage of one node (or one `track_node` block).

    The `TokenCounts` (prompt and completion tokens, in total and per model) and:

    Attributes:
        calls: model calls finished (successful or not).
        errors: calls that raised.
        latency_s: wall-clock seconds inside model calls, summed (parallel calls add up).
        cached_input_tokens: prompt tokens served from a prompt cache, summed over the calls
            that report it (`CallStats`).
        prompt_eval_s / decode_s / lock_wait_s: seconds, summed over the calls that report them.
        finish_reasons: finish reason → calls.
        call_log: one `CallStats` per call, only in a `track_node` block's usage.
    """

    calls: int = 0
    errors: int = 0
    latency_s: float = 0.0
    cached_input_tokens: int = 0
    prompt_eval_s: float = 0.0
    decode_s: float = 0.0
    lock_wait_s: float = 0.0
    finish_reasons: dict[str, int] = field(default_factory=dict)
    call_log: list[CallStats] | None = None

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens

    def _add(self, stats: CallStats) -> None:
        self.calls += 1
        self.errors += int(stats.error)
        self.input_tokens += stats.input_tokens
        self.output_tokens += stats.output_tokens
        self.latency_s += stats.latency_s
        self.cached_input_tokens += stats.cached_input_tokens or 0
        self.prompt_eval_s += stats.prompt_eval_s or 0.0
        self.decode_s += stats.decode_s or 0.0
        self.lock_wait_s += stats.lock_wait_s or 0.0
        if stats.finish_reason:
            reasons = self.finish_reasons
            reasons[stats.finish_reason] = reasons.get(stats.finish_reason, 0) + 1
        self.add_model(
            stats.model,
            {
                "calls": 1,
                "input_tokens": stats.input_tokens,
                "cached_input_tokens": stats.cached_input_tokens or 0,
                "output_tokens": stats.output_tokens,
            },
        )
        if self.call_log is not None:
            self.call_log.append(stats)

    def _merge(self, other: NodeUsage) -> None:
        self.calls += other.calls
        self.errors += other.errors
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.latency_s += other.latency_s
        self.cached_input_tokens += other.cached_input_tokens
        self.prompt_eval_s += other.prompt_eval_s
        self.decode_s += other.decode_s
        self.lock_wait_s += other.lock_wait_s
        for reason, n in other.finish_reasons.items():
            self.finish_reasons[reason] = self.finish_reasons.get(reason, 0) + n
        for model, counts in other.by_model.items():
            self.add_model(model, counts)

    def copy(self) -> NodeUsage:
        """An independent copy (snapshots for events)."""
        out = NodeUsage()
        out._merge(self)
        if self.call_log is not None:
            out.call_log = list(self.call_log)
        return out

    def event_fields(self) -> dict[str, Any]:
        """The usage fields of a ``node`` event (what `evoduet_graph.rundir.usage` reads back).

        ``llm_calls``, ``input_tokens``, ``output_tokens``, ``llm_latency_s`` (rounded to
        milliseconds), the `timing_fields` and ``llm_by_model`` (only when a model was called):
        the live accounting as the run directory keeps it, which
        `evoduet_graph.rundir.usage.UsageTotals.add` folds into the run's totals.
        """
        return {
            "llm_calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "llm_latency_s": round(self.latency_s, 3),
            **self.timing_fields(),
            **({"llm_by_model": self.by_model} if self.by_model else {}),
        }

    def timing_fields(self) -> dict[str, Any]:
        """The `CallStats` sums as event fields.

        ``cached_input_tokens``, ``prompt_eval_s``, ``decode_s``, ``lock_wait_s``,
        ``finish_reasons`` (each only when non-zero).
        """
        fields: dict[str, Any] = {
            "cached_input_tokens": self.cached_input_tokens,
            "prompt_eval_s": round(self.prompt_eval_s, 3),
            "decode_s": round(self.decode_s, 3),
            "lock_wait_s": round(self.lock_wait_s, 3),
            "finish_reasons": dict(self.finish_reasons),
        }
        return {k: v for k, v in fields.items() if v}


@dataclass(frozen=True)
class _Scope:
    name: str
    usage: NodeUsage


_SCOPES: ContextVar[tuple[_Scope, ...]] = ContextVar("evoduet_llm_usage_scopes", default=())
# Guards every NodeUsage yielded by track_node (they may be updated from several threads).
_SCOPE_LOCK = threading.Lock()


def current_node() -> str | None:
    """Name of the innermost active `track_node` block in this context, if any."""
    scopes = _SCOPES.get()
    return scopes[-1].name if scopes else None


@contextlib.contextmanager
def track_node(name: str) -> Iterator[NodeUsage]:
    """Attribute the LLM calls started inside this block to node ``name``.

    Nested blocks: calls go to the innermost name; every enclosing block's `NodeUsage` also
    receives them (an outer ``"iteration"`` block sees the whole iteration).

    Args:
        name: the node name (bucket key in `UsageTracker.by_node`).

    Yields:
        A `NodeUsage` for the calls of this block only, updated as they finish (read it after
        the block). Filled by whichever `UsageTracker` sees the calls.
    """
    usage = NodeUsage(call_log=[])
    token = _SCOPES.set((*_SCOPES.get(), _Scope(name=name, usage=usage)))
    try:
        yield usage
    finally:
        _SCOPES.reset(token)


@dataclass
class _Run:
    node: str
    scopes: tuple[_Scope, ...]
    started: float
    model: str | None
    provider: str | None = None


def _model_from_start(serialized: dict[str, Any] | None, kwargs: dict[str, Any]) -> str | None:
    params = kwargs.get("invocation_params") or {}
    for key in ("model_name", "model"):
        value = params.get(key)
        if isinstance(value, str) and value:
            return value
    if serialized:
        kw = serialized.get("kwargs") or {}
        for key in ("model_name", "model"):
            value = kw.get(key)
            if isinstance(value, str) and value:
                return value
    return None


class UsageTracker(UsageMetadataCallbackHandler):
    """Thread-safe per-node LLM usage accounting (see the module docstring for wiring).

    Attributes:
        usage_metadata: per model name, LangChain's summed ``UsageMetadata`` (inherited).
    """

    run_inline = True  # keep the caller's context (track_node) also under async managers

    def __init__(self) -> None:
        super().__init__()
        self._nodes: dict[str, NodeUsage] = {}
        self._runs: dict[UUID, _Run] = {}

    # -- reading ---------------------------------------------------------------------------

    def by_node(self) -> dict[str, NodeUsage]:
        """A snapshot: node name → `NodeUsage` (copies; safe to keep)."""
        with self._lock:
            return {name: usage.copy() for name, usage in self._nodes.items()}

    def total(self) -> NodeUsage:
        """All nodes summed (a copy)."""
        out = NodeUsage()
        with self._lock:
            for usage in self._nodes.values():
                out._merge(usage)
        return out

    def reset(self) -> None:
        """Forget all counts (runs in flight are still counted when they end)."""
        with self._lock:
            self._nodes.clear()
            self.usage_metadata.clear()

    # -- callbacks -------------------------------------------------------------------------

    def _start(
        self,
        serialized: dict[str, Any] | None,
        run_id: UUID,
        metadata: dict[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        scopes = _SCOPES.get()
        node = scopes[-1].name if scopes else _node_from_run(metadata, kwargs.get("tags"))
        provider = (metadata or {}).get("ls_provider")  # LangChain's tracing parameters
        run = _Run(
            node=node,
            scopes=scopes,
            started=time.perf_counter(),
            model=_model_from_start(serialized, kwargs),
            provider=provider if isinstance(provider, str) else None,
        )
        with self._lock:
            self._runs[run_id] = run

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Remember the node, scopes, model and start time of a chat-model run."""
        self._start(serialized, run_id, metadata, kwargs)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Same as `on_chat_model_start`, for completion-style LLMs."""
        self._start(serialized, run_id, metadata, kwargs)

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        """Count one finished call with its tokens and latency."""
        run_id: UUID = kwargs.pop("run_id")  # LangChain always passes it (keyword)
        super().on_llm_end(response, **kwargs)  # per-model totals (LangChain's handler)
        with self._lock:
            run = self._runs.get(run_id)
        path = cache_read_path(run.provider if run is not None else None)
        self._finish(run_id, _usage_of(response, path))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Count one failed call (latency only)."""
        self._finish(run_id, CallStats(model="", error=True))

    def _finish(self, run_id: UUID, reported: CallStats) -> None:
        now = time.perf_counter()
        with self._lock:
            run = self._runs.pop(run_id, None)
            if run is None:  # start not seen (handler attached mid-run)
                scopes = _SCOPES.get()
                run = _Run(
                    node=scopes[-1].name if scopes else UNKNOWN_NODE,
                    scopes=scopes,
                    started=now,
                    model=None,
                )
            stats = replace(
                reported,
                model=reported.model or run.model or "unknown-model",
                node=run.node,
                latency_s=now - run.started,
            )
            self._nodes.setdefault(run.node, NodeUsage())._add(stats)
        with _SCOPE_LOCK:
            for scope in run.scopes:
                scope.usage._add(stats)


def _node_from_run(metadata: dict[str, Any] | None, tags: Any) -> str:
    node = (metadata or {}).get("langgraph_node")
    if isinstance(node, str) and node:
        return node
    for tag in tags or ():
        if isinstance(tag, str) and tag.startswith("node:") and len(tag) > 5:
            return tag[5:]
    return UNKNOWN_NODE


def _seconds(meta: dict[str, Any], key: str) -> float | None:
    value = meta.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _add_opt(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b


def _cached_tokens(usage: Any, path: tuple[str, ...] | None) -> int | None:
    """The cached input tokens at ``path`` of a reply's ``usage_metadata`` (None: not said)."""
    if path is None:
        return None
    value: Any = usage
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _usage_of(response: LLMResult, cache_path: tuple[str, ...] | None = CACHE_READ) -> CallStats:
    """What a finished call's result says: tokens, model name and the other `CallStats` fields.

    ``cache_path`` is where the provider's usage says the cached input tokens
    (`evoduet_graph.llm.providers.cache_read_path`; None: the provider reports none).

    ``model`` is "" when the result names none, ``node`` and ``latency_s`` are left to the
    tracker (`UsageTracker._finish`).
    """
    out: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, "finish_reason": None}
    model: Any = None
    cached_total: int | None = None
    seconds: dict[str, Any] = dict.fromkeys(_SECONDS_KEYS)
    found = False
    for candidates in response.generations:
        for gen in candidates:
            if not isinstance(gen, ChatGeneration) or not isinstance(gen.message, AIMessage):
                continue
            meta = gen.message.response_metadata or {}
            model = model or meta.get("model_name") or meta.get("model")
            usage = gen.message.usage_metadata
            if usage:
                found = True
                out["input_tokens"] += int(usage.get("input_tokens", 0) or 0)
                out["output_tokens"] += int(usage.get("output_tokens", 0) or 0)
                cached = _cached_tokens(usage, cache_path)
                if cached is not None:
                    cached_total = (cached_total or 0) + cached
            for key in _SECONDS_KEYS:
                seconds[key] = _add_opt(seconds[key], _seconds(meta, key))
            reason = meta.get("finish_reason") or (gen.generation_info or {}).get("finish_reason")
            if isinstance(reason, str) and reason and out["finish_reason"] is None:
                out["finish_reason"] = reason
    llm_output = response.llm_output or {}
    model = model or llm_output.get("model_name") or llm_output.get("model")
    if not found:
        token_usage = llm_output.get("token_usage") or llm_output.get("usage") or {}
        if isinstance(token_usage, dict):
            out["input_tokens"] = int(
                token_usage.get("prompt_tokens", token_usage.get("input_tokens", 0)) or 0
            )
            out["output_tokens"] = int(
                token_usage.get("completion_tokens", token_usage.get("output_tokens", 0)) or 0
            )
            details = token_usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            if isinstance(cached, int) and not isinstance(cached, bool):
                cached_total = cached
    return CallStats(
        model=model if isinstance(model, str) else "",
        cached_input_tokens=cached_total,
        **seconds,
        **out,
    )

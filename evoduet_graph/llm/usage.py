"""LLM calls, tokens and latency per graph node (DESIGN.md §6).

`UsageTracker` is a LangChain callback handler. It builds on langchain-core's
`UsageMetadataCallbackHandler` (so ``tracker.usage_metadata`` still holds the per-*model*
totals that pricing needs) and adds per-*node* buckets of `NodeUsage`: calls, errors, input and
output tokens, and wall-clock latency.

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
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import UsageMetadataCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

__all__ = ["NodeUsage", "UsageTracker", "current_node", "track_node"]

UNKNOWN_NODE = "unknown"


@dataclass
class NodeUsage:
    """Accumulated LLM usage of one node (or one `track_node` block).

    Attributes:
        calls: model calls finished (successful or not).
        errors: calls that raised.
        input_tokens: prompt tokens, summed.
        output_tokens: completion tokens, summed.
        latency_s: wall-clock seconds inside model calls, summed (parallel calls add up).
        by_model: per model name: ``{"calls", "input_tokens", "output_tokens"}`` (for cost).
    """

    calls: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    by_model: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens

    def _add(self, model: str, inp: int, out: int, latency: float, error: bool) -> None:
        self.calls += 1
        self.errors += int(error)
        self.input_tokens += inp
        self.output_tokens += out
        self.latency_s += latency
        per_model = self.by_model.setdefault(
            model, {"calls": 0, "input_tokens": 0, "output_tokens": 0}
        )
        per_model["calls"] += 1
        per_model["input_tokens"] += inp
        per_model["output_tokens"] += out

    def copy(self) -> NodeUsage:
        """An independent copy (snapshots for events)."""
        return NodeUsage(
            calls=self.calls,
            errors=self.errors,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            latency_s=self.latency_s,
            by_model={k: dict(v) for k, v in self.by_model.items()},
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (for ``events.jsonl``); latency rounded to milliseconds."""
        return {
            "calls": self.calls,
            "errors": self.errors,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "latency_s": round(self.latency_s, 3),
            "by_model": {k: dict(v) for k, v in self.by_model.items()},
        }


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
    usage = NodeUsage()
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
                out.calls += usage.calls
                out.errors += usage.errors
                out.input_tokens += usage.input_tokens
                out.output_tokens += usage.output_tokens
                out.latency_s += usage.latency_s
                for model, counts in usage.by_model.items():
                    agg = out.by_model.setdefault(
                        model, {"calls": 0, "input_tokens": 0, "output_tokens": 0}
                    )
                    for k, v in counts.items():
                        agg[k] += v
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
        if scopes:
            node = scopes[-1].name
        else:
            node = _node_from_run(metadata, kwargs.get("tags"))
        run = _Run(
            node=node,
            scopes=scopes,
            started=time.perf_counter(),
            model=_model_from_start(serialized, kwargs),
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

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Count one finished call with its tokens and latency."""
        super().on_llm_end(response, **kwargs)  # per-model totals (LangChain's handler)
        inp, out, model = _usage_of(response)
        self._finish(run_id, inp, out, model, error=False)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Count one failed call (latency only)."""
        self._finish(run_id, 0, 0, None, error=True)

    def _finish(self, run_id: UUID, inp: int, out: int, model: str | None, error: bool) -> None:
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
            name = model or run.model or "unknown-model"
            latency = now - run.started
            self._nodes.setdefault(run.node, NodeUsage())._add(name, inp, out, latency, error)
        with _SCOPE_LOCK:
            for scope in run.scopes:
                scope.usage._add(name, inp, out, latency, error)


def _node_from_run(metadata: dict[str, Any] | None, tags: Any) -> str:
    node = (metadata or {}).get("langgraph_node")
    if isinstance(node, str) and node:
        return node
    for tag in tags or ():
        if isinstance(tag, str) and tag.startswith("node:") and len(tag) > 5:
            return tag[5:]
    return UNKNOWN_NODE


def _usage_of(response: LLMResult) -> tuple[int, int, str | None]:
    """(input_tokens, output_tokens, model_name) of a finished call."""
    inp = out = 0
    found = False
    model: str | None = None
    for candidates in response.generations:
        for gen in candidates:
            if not isinstance(gen, ChatGeneration) or not isinstance(gen.message, AIMessage):
                continue
            meta = gen.message.response_metadata or {}
            model = model or meta.get("model_name") or meta.get("model")
            usage = gen.message.usage_metadata
            if usage:
                found = True
                inp += int(usage.get("input_tokens", 0) or 0)
                out += int(usage.get("output_tokens", 0) or 0)
    llm_output = response.llm_output or {}
    model = model or llm_output.get("model_name") or llm_output.get("model")
    if not found:
        token_usage = llm_output.get("token_usage") or llm_output.get("usage") or {}
        if isinstance(token_usage, dict):
            inp = int(token_usage.get("prompt_tokens", token_usage.get("input_tokens", 0)) or 0)
            out = int(
                token_usage.get("completion_tokens", token_usage.get("output_tokens", 0)) or 0
            )
    return inp, out, model if isinstance(model, str) else None

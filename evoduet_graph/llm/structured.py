"""Structured LLM calls with a typed fallback chain, and plain text calls (docs/design.md §4).

`structured_call` asks a chat model for an object of a pydantic schema and never fails because
of what the model wrote. It is a LangChain runnable chain, built once (`_STAGES`): four stages,
each a runnable, joined by ``with_fallbacks`` (a stage that gets no value raises `_NoValue`,
which moves the chain to the next; any other error passes straight through), then the
caller's typed default:

1. ``json_schema`` — the provider's own structured output:
   ``llm.with_structured_output(schema, method=...)`` with the method the provider's quirks name
   (`evoduet_graph.llm.providers.structured_method`): ``json_schema`` for OpenAI structured
   outputs, Gemini, vLLM/Ollama guided decoding and the embedded model's grammar;
   ``function_calling`` (the provider's tool calling) for Anthropic, Mistral, Groq and Bedrock.
   The stage keeps its name in `StructuredResult.method` and the fallback lines;
2. ``json_mode`` — ``method="json_mode"`` (any-JSON mode) with the schema in the prompt;
3. ``extraction`` — a plain call with the schema in the prompt; the reply goes through
   `extract_json_object` (strips ``<think>``, code fences, prose; repairs broken JSON with the
   ``json-repair`` library) and pydantic validation;
4. ``repair`` — one re-prompt showing the validation error and the schema, asking for JSON only;
5. ``default`` — the caller's typed default.

Whenever a stage yields reply *text* that its own parser rejected, the tolerant extraction is
tried on that text before the next call is made (result method ``"extraction"``), which saves a
call when e.g. a server wraps valid JSON in a code fence. Every stage that did not produce the
value appends one line to `StructuredResult.fallbacks` (``"<stage>: <reason>"``), so callers
count fallbacks with ``len(result.fallbacks)``.

Error policy (the choice documented for the lead):

* Garbage, truncated or invalid model output never raises: it falls through to the default.
* A stage whose *feature* is unsupported (``NotImplementedError``, a provider rejecting
  ``response_format`` with HTTP 400/422, a parser error) falls through to the next stage.
* A *transport or account* failure — connection refused, timeout, HTTP 5xx, rate limit,
  authentication/permission, unknown model, context overflow — is raised at once as
  `LLMCallError` (chained to the original; ChatOpenAI has already retried it
  ``max_retries`` times). Trying the next stage would hit the same wall and a silent default
  would hide a dead endpoint. The caller marks the iteration failed.
* Any exception from the plain call of stage 3 is raised as `LLMCallError` too: nothing is
  left to fall back on but the default, and a request that cannot be made is not "output".
* Programming errors (a schema that is not a pydantic model, a default of the wrong type) raise
  ``TypeError`` before any call.

Retries: pass ``retry=RetryPolicy.for_model(llm, n, deadline_s=d)`` and every model call of
`invoke_text` / `structured_call` is retried up to ``n`` times (tenacity, exponential backoff
with jitter) while the failure is retryable (`LLMCallError.retryable`: connection errors,
timeouts, 429, 5xx) and no retry starts once ``d`` seconds have passed since the first attempt
(``llm.call_deadline_s``, the per-call deadline). The chat model the factory builds for
``openai:`` has no retries of its own and a request timeout of at most the deadline, so a
connected-but-silent endpoint costs one deadline per call, not timeout × retries.
``for_model`` gives no extra retries to a model that has its own (a ``ChatOpenAI`` a caller
built with ``max_retries``), so attempts never multiply. The retries are tenacity's, not
``Runnable.with_retry``: that takes exception types, while a retry here depends on the error's
content (`LLMCallError.retryable`: an HTTP status, a ``Retry-After`` header to honour) and stops
at a deadline across attempts.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from langchain_core.exceptions import (
    ContextOverflowError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
    ModelTimeoutError,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from pydantic import BaseModel, ValidationError
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
    wait_random,
)
from tenacity.stop import stop_base

from evoduet_graph.errors import EvoDuetError
from evoduet_graph.llm.providers import mark_cache_prefix, structured_method
from evoduet_graph.llm.text import extract_json_object, message_text, strip_think

__all__ = [
    "LLMCallError",
    "RetryPolicy",
    "StructuredMethod",
    "StructuredResult",
    "invoke_text",
    "is_transport_error",
    "structured_call",
]

T = TypeVar("T", bound=BaseModel)

StructuredMethod = Literal["json_schema", "json_mode", "extraction", "repair", "default"]

# Characters of a previous reply shown back to the model in the repair prompt.
_REPAIR_ECHO_CHARS = 6000
# Characters of an exception message kept in a fallback reason.
_REASON_CHARS = 300

_FATAL_MODEL_ERRORS: tuple[type[BaseException], ...] = (
    ContextOverflowError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
    ModelTimeoutError,
)
# Class names (anywhere in the MRO) of provider SDK / HTTP errors that mean "no usable answer
# will come from this endpoint now": openai, anthropic and httpx spell them this way.
_FATAL_CLASS_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "AuthenticationError",
        "PermissionDeniedError",
        "RateLimitError",
        "InternalServerError",
        "NotFoundError",
        "TransportError",
        "TimeoutException",
    }
)


class LLMCallError(EvoDuetError, RuntimeError):
    """A chat-model call failed for a reason other than the content of the reply.

    Attributes:
        stage: the `structured_call` stage (or ``"invoke"``) during which it failed.
        fallbacks: the fallback reasons collected before the failure.
        retryable: whether retrying later may help (connection, timeout, 5xx, rate limit).
    """

    def __init__(
        self,
        message: str,
        *,
        stage: str = "invoke",
        fallbacks: Sequence[str] = (),
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.stage = stage
        self.fallbacks = list(fallbacks)
        self.retryable = retryable


R = TypeVar("R")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of retryable model failures (connection, timeout, rate limit, 5xx).

    Attributes:
        retries: extra attempts after the first (0: none).
        initial_s: first backoff wait in seconds (doubling, with jitter).
        max_s: longest backoff wait in seconds.
    """

    retries: int = 0
    initial_s: float = 0.5
    max_s: float = 8.0
    deadline_s: float | None = None

    @classmethod
    def for_model(cls, llm: Any, retries: int, **kwargs: float | None) -> RetryPolicy:
        """The retry policy for ``llm``.

        ``retries`` app-level retries, or none when ``llm`` retries by itself (a positive
        integer ``max_retries`` attribute, as a caller's own ``ChatOpenAI`` may have).
        """
        own = getattr(llm, "max_retries", None)
        if isinstance(own, int) and not isinstance(own, bool) and own > 0:
            return cls(retries=0, **kwargs)  # type: ignore[arg-type]
        return cls(retries=max(0, int(retries)), **kwargs)  # type: ignore[arg-type]

    def call(self, fn: Callable[[], R]) -> R:
        """``fn()``, retried while it raises a retryable error and the deadline has not passed.

        The last error is re-raised.
        """
        if self.retries <= 0:
            return fn()
        stop: stop_base = stop_after_attempt(self.retries + 1)
        if self.deadline_s is not None:
            stop = stop | stop_after_delay(self.deadline_s)
        retrying = Retrying(
            stop=stop,
            wait=_honour_retry_after(
                # exponential backoff with jitter, spelled so that every tenacity the
                # dependencies admit takes it (google-genai caps tenacity below 9.2, whose
                # wait_exponential_jitter is the first to take `multiplier`)
                wait_exponential(multiplier=self.initial_s, max=self.max_s)
                + wait_random(0, self.initial_s),
                self.max_s,
            ),
            retry=retry_if_exception(_is_retryable),
            reraise=True,
        )
        return retrying(fn)


_NO_RETRY = RetryPolicy()


def _retry_after_s(exc: BaseException | None) -> float | None:
    """Seconds a rate-limited endpoint asked to wait, if it said.

    Seconds a rate-limited endpoint asked to wait (``retry-after-ms`` / ``retry-after``
    header of the HTTP response an openai/httpx error carries), if it said.
    """
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if exc is not None and headers is None and exc.__cause__ is not None:
        return _retry_after_s(exc.__cause__)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            value = headers.get(name)
            if value is not None:
                return max(0.0, float(value) * scale)
        except (TypeError, ValueError, AttributeError):
            continue
    return None


def _honour_retry_after(base: Callable[[Any], float], cap: float) -> Callable[[Any], float]:
    """A tenacity wait that honours ``Retry-After``.

    A tenacity wait: the backoff, or longer when the endpoint sent ``Retry-After`` (at
    most ``cap`` seconds), as the openai SDK's own retries did.
    """

    def wait(retry_state: Any) -> float:
        backoff = min(base(retry_state), cap)
        outcome = retry_state.outcome
        asked = _retry_after_s(outcome.exception() if outcome is not None else None)
        return max(backoff, min(asked, cap)) if asked is not None else backoff

    return wait


@dataclass(frozen=True)
class StructuredResult(Generic[T]):
    """What `structured_call` returns.

    Attributes:
        value: the validated object (the caller's default when ``method == "default"``).
        method: the stage that produced ``value``.
        fallbacks: one ``"<stage>: <reason>"`` line per stage that failed before it.
        raw: the reply text ``value`` was parsed from (for ``"default"``: the last reply text
            seen, if any); ``None`` when no text was available.
    """

    value: T
    method: StructuredMethod
    fallbacks: list[str] = field(default_factory=list)
    raw: str | None = None

    @property
    def used_default(self) -> bool:
        """True when every stage failed and ``value`` is the caller's default."""
        return self.method == "default"


def is_transport_error(exc: BaseException) -> bool:
    """Whether ``exc`` means the endpoint cannot answer now (not that the answer was bad).

    True for LangChain's standard model errors for connection, timeout, 5xx, rate limit,
    authentication, permission, unknown model and context overflow; for the same conditions
    raised by provider SDKs (openai, anthropic) or httpx; and for the built-in
    ``ConnectionError`` / ``TimeoutError``.
    """
    if isinstance(exc, (*_FATAL_MODEL_ERRORS, ConnectionError, TimeoutError)):
        return True
    return any(cls.__name__ in _FATAL_CLASS_NAMES for cls in type(exc).__mro__)


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, ModelError):
        return bool(type(exc).is_retryable)
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        isinstance(exc, (ConnectionError, TimeoutError))
        or names
        & {
            "APIConnectionError",
            "APITimeoutError",
            "RateLimitError",
            "InternalServerError",
            "TransportError",
            "TimeoutException",
        }
    )


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > _REASON_CHARS:
        text = text[: _REASON_CHARS - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _as_messages(messages: Any) -> list[BaseMessage]:
    if isinstance(messages, str):
        return [HumanMessage(content=messages)]
    if isinstance(messages, PromptValue):
        return list(messages.to_messages())
    return list(convert_to_messages(messages))


def invoke_text(
    llm: Runnable[LanguageModelInput, BaseMessage],
    messages: Any,
    config: RunnableConfig | None = None,
    *,
    retry: RetryPolicy | None = None,
) -> tuple[str, AIMessage]:
    """Call a chat model and return its reply text without ``<think>`` blocks.

    Args:
        llm: any LangChain chat model (or one with tools bound: ``bind_tools``).
        messages: a prompt string, a `PromptValue`, or a sequence of messages (anything
            ``convert_to_messages`` accepts). For a provider that caches prompts only on
            request (Anthropic) the system message is marked as the cached prefix
            (`evoduet_graph.llm.providers.mark_cache_prefix`); so it is in `structured_call`.
        config: passed to ``llm.invoke`` (callbacks such as `UsageTracker`, tags, metadata).
        retry: retries of retryable failures (module docstring); default none.

    Returns:
        ``(text, message)``: the reply text with reasoning stripped (`strip_think`), and the
        full `AIMessage` (raw content, ``usage_metadata``, ``response_metadata``).

    Raises:
        LLMCallError: the call raised (any exception; chained). ``retryable`` tells whether
            waiting may help.
    """
    msgs = mark_cache_prefix(llm, _as_messages(messages))
    policy = retry or _NO_RETRY
    try:
        reply = policy.call(lambda: llm.invoke(msgs, config=config))
    except Exception as exc:
        raise LLMCallError(
            f"chat model call failed: {_describe(exc)}",
            stage="invoke",
            retryable=_is_retryable(exc),
        ) from exc
    if not isinstance(reply, AIMessage):
        reply = AIMessage(content=message_text(reply))
    return strip_think(message_text(reply)), reply


@functools.lru_cache(maxsize=64)
def _schema_json(schema: type[BaseModel]) -> str:
    # cached per schema class: building a JSON schema costs ~1 ms and the node schemas are
    # fixed classes (a per-call class such as `scores_schema`'s simply misses the cache)
    return json.dumps(schema.model_json_schema(), separators=(",", ":"), ensure_ascii=False)


def _format_instruction(schema: type[BaseModel]) -> str:
    return (
        "Reply with a single JSON object and nothing else: no prose, no markdown code fences. "
        f"The object must conform to this JSON schema:\n{_schema_json(schema)}"
    )


def _summarise_validation(exc: ValidationError, limit: int = 8) -> str:
    lines = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
        lines.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = exc.error_count() - limit
    if more > 0:
        lines.append(f"... and {more} more")
    return "; ".join(lines)


def _parse_text(text: str, schema: type[T]) -> tuple[T | None, str]:
    """Tolerant extraction + validation. Returns ``(value, "")`` or ``(None, reason)``."""
    if not text or not text.strip():
        return None, "empty reply"
    obj = extract_json_object(text)
    if obj is None:
        return None, "no JSON object found in the reply"
    return _validate(schema, obj, "JSON does not match the schema")


def _validate(schema: type[T], payload: Any, what: str) -> tuple[T | None, str]:
    """``schema.model_validate(payload)`` as ``(value, "")`` or ``(None, reason)``.

    Schemas' validators raise only validation errors (tested for every structured schema);
    any other exception from one is still a reply that cannot be used, never a crashed run.
    """
    try:
        return schema.model_validate(payload), ""
    except ValidationError as exc:
        return None, f"{what} ({_summarise_validation(exc)})"
    except Exception as exc:  # noqa: BLE001 - a validator bug must not end the run
        return None, f"{what} (validator raised {_describe(exc)})"


def _unpack_structured(out: Any, schema: type[T]) -> tuple[T | None, str | None, str]:
    """Read a ``with_structured_output(..., include_raw=True)`` result.

    Returns:
        ``(value, raw_text, reason)``; ``value`` is ``None`` when parsing failed.
    """
    raw_text: str | None = None
    parsed: Any = out
    error: Any = None
    if isinstance(out, dict) and "parsed" in out and "raw" in out:
        raw = out.get("raw")
        raw_text = message_text(raw) if raw is not None else None
        parsed = out.get("parsed")
        error = out.get("parsing_error")
    if isinstance(parsed, schema):
        return parsed, raw_text, ""
    if error is not None:
        return None, raw_text, f"unparseable output ({_describe(error)})"
    if parsed is None:
        return None, raw_text, "no parsed output"
    payload = parsed.model_dump() if isinstance(parsed, BaseModel) else parsed
    value, reason = _validate(schema, payload, "output does not match the schema")
    return value, raw_text, reason


class _NoValue(Exception):
    """A stage gave no value (its reason is in the fallbacks): the next stage runs."""


@dataclass
class _Call(Generic[T]):
    """The state of one `structured_call`, and its stages (run by `_STAGES`).

    Each stage returns a `StructuredResult` or raises `_NoValue` after appending its
    ``"<stage>: <reason>"`` line to ``fallbacks``. Model calls use the caller's ``config`` (the
    call stays a child of the node's run, named as the node asked).
    """

    llm: BaseChatModel
    msgs: list[BaseMessage]
    schema: type[T]
    config: RunnableConfig | None
    policy: RetryPolicy
    fallbacks: list[str] = field(default_factory=list)
    last_raw: str | None = None
    _instruction: HumanMessage | None = None
    _reply: tuple[str, str] | None = None  # the extraction stage's reply text and reason

    @property
    def instruction(self) -> HumanMessage:
        """The schema instruction message, built only when a stage needs it.

        The first stage, the provider's JSON-schema mode, does not.
        """
        if self._instruction is None:
            self._instruction = HumanMessage(content=_format_instruction(self.schema))
        return self._instruction

    def fatal(self, stage: str, exc: BaseException) -> LLMCallError:
        return LLMCallError(
            f"chat model call failed during structured output stage {stage!r}: {_describe(exc)}",
            stage=stage,
            fallbacks=self.fallbacks,
            retryable=_is_retryable(exc),
        )

    def fail(self, line: str) -> _NoValue:
        self.fallbacks.append(line)
        return _NoValue(line)

    def result(self, value: T, method: StructuredMethod, raw: str | None) -> StructuredResult[T]:
        return StructuredResult(value=value, method=method, fallbacks=self.fallbacks, raw=raw)

    def invoke(self, runnable: Runnable[Any, Any], msgs: list[BaseMessage]) -> Any:
        return self.policy.call(lambda: runnable.invoke(msgs, config=self.config))

    def provider(self, method: Literal["json_schema", "json_mode"]) -> StructuredResult[T]:
        """Stages 1-2: ``with_structured_output(schema, method=..., include_raw=True)``.

        Reply text its own parser rejected goes through the tolerant extraction before the
        next call is made (result method ``"extraction"``).
        """
        msgs = self.msgs if method == "json_schema" else [*self.msgs, self.instruction]
        # the first stage uses the provider's own mechanism (tool calling or JSON schema)
        call_method = structured_method(self.llm) if method == "json_schema" else method
        try:
            runnable = self.llm.with_structured_output(
                self.schema, method=call_method, include_raw=True
            )
        except Exception as exc:  # noqa: BLE001 - NotImplementedError, ValueError("unsupported")
            raise self.fail(f"{method}: not supported by the model ({_describe(exc)})") from None
        try:
            out = self.invoke(runnable, msgs)
        except Exception as exc:
            if is_transport_error(exc):
                raise self.fatal(method, exc) from exc
            raise self.fail(f"{method}: call rejected ({_describe(exc)})") from None
        value, raw_text, reason = _unpack_structured(out, self.schema)
        if raw_text is not None:
            self.last_raw = raw_text
        if value is not None:
            return self.result(value, method, raw_text)
        self.fallbacks.append(f"{method}: {reason}")
        if raw_text:
            rescued, _ = _parse_text(raw_text, self.schema)
            if rescued is not None:
                return self.result(rescued, "extraction", raw_text)
        raise _NoValue(reason)

    def extraction(self) -> StructuredResult[T]:
        """Stage 3: a plain call with the schema in the prompt, read tolerantly."""
        try:
            reply = self.invoke(self.llm, [*self.msgs, self.instruction])
        except Exception as exc:
            raise self.fatal("extraction", exc) from exc
        text = self.last_raw = message_text(reply)
        value, reason = _parse_text(text, self.schema)
        if value is not None:
            return self.result(value, "extraction", text)
        self._reply = (text, reason)
        raise self.fail(f"extraction: {reason}")

    def repair(self) -> StructuredResult[T]:
        """Stage 4: one re-prompt showing the extraction reply, its fault and the schema."""
        text, reason = self._reply or ("", "no reply")
        echoed = text if len(text) <= _REPAIR_ECHO_CHARS else text[:_REPAIR_ECHO_CHARS] + "\n[...]"
        msgs = [
            *self.msgs,
            self.instruction,
            AIMessage(content=echoed),
            HumanMessage(
                content=(
                    f"Your reply could not be used: {reason}.\n"
                    "Reply again with ONLY the JSON object: no explanation, no code fences, no "
                    f"reasoning. It must conform to this JSON schema:\n{_schema_json(self.schema)}"
                )
            ),
        ]
        try:
            repaired = self.invoke(self.llm, msgs)
        except Exception as exc:
            if is_transport_error(exc):
                raise self.fatal("repair", exc) from exc
            raise self.fail(f"repair: call rejected ({_describe(exc)})") from None
        text = self.last_raw = message_text(repaired)
        value, reason = _parse_text(text, self.schema)
        if value is not None:
            return self.result(value, "repair", text)
        raise self.fail(f"repair: {reason}")


class _Stage(Runnable[_Call[Any], StructuredResult[Any]]):
    """One stage of `_STAGES`: a runnable that runs one method of the `_Call` it is given.

    A `Runnable` of its own rather than a ``RunnableLambda``: the lambda inspects its
    function's signature and opens a callback scope on every call (about 0.25 ms each, four
    per structured call when the stages fall through), for a run nobody traces (`_UNTRACED`).
    """

    def __init__(self, name: str, method: Callable[[_Call[Any]], StructuredResult[Any]]) -> None:
        self.name = name
        self._method = method

    def invoke(
        self, input: _Call[Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> StructuredResult[Any]:
        return self._method(input)


_STAGES: Runnable[_Call[Any], StructuredResult[Any]] = _Stage(
    "json_schema", lambda call: call.provider("json_schema")
).with_fallbacks(
    [
        _Stage("json_mode", lambda call: call.provider("json_mode")),
        _Stage("extraction", _Call.extraction),
        _Stage("repair", _Call.repair),
    ],
    exceptions_to_handle=(_NoValue,),
)
"""Stages 1-4 of `structured_call`, one runnable built once: json_schema, then json_mode,
extraction and repair as its fallbacks. `_NoValue` moves it to the next stage; a transport
failure (`LLMCallError`) passes through every stage at once."""

# the chain's own runs are not traced: only its model calls are (with the caller's config)
_UNTRACED: RunnableConfig = {"callbacks": []}


def structured_call(
    llm: BaseChatModel,
    messages: Any,
    schema: type[T],
    *,
    default: T | Callable[[], T],
    config: RunnableConfig | None = None,
    retry: RetryPolicy | None = None,
) -> StructuredResult[T]:
    """Ask ``llm`` for an object of ``schema``, falling back stage by stage (module docstring).

    Args:
        llm: any LangChain chat model (ChatOpenAI, the embedded local model, test fakes).
        messages: the prompt: a string, a `PromptValue` or a sequence of messages. It should
            describe the fields; the schema itself is appended by the json_mode, extraction and
            repair stages.
        schema: a pydantic model class.
        default: the value (or a zero-argument factory, called only when needed) returned
            when every stage fails.
        config: passed to every model call (callbacks, tags, metadata).
        retry: retries of retryable failures, per model call (module docstring); default none.

    Returns:
        A `StructuredResult` with the value, the stage that produced it, the fallback reasons
        and the raw reply text. At most 4 model calls are made (json_schema, json_mode,
        extraction, repair); fewer when a stage is unsupported by the model or succeeds.

    Raises:
        LLMCallError: a transport/account failure at any stage, or any failure of the plain
            call (stage 3). Never raised for the *content* of a reply.
        TypeError: ``schema`` is not a pydantic model class, or ``default`` is not a
            ``schema`` instance (checked before any call for a value, at the end for a
            factory).
    """
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise TypeError(f"schema must be a pydantic BaseModel subclass, got {schema!r}")
    if not callable(default) and not isinstance(default, schema):
        raise TypeError(
            f"default must be a {schema.__name__} instance or a factory, got {type(default)!r}"
        )
    # the model calls get what a direct call in this place would inherit, never the chain's
    # own (untraced) callback scope
    config = ensure_config(config)
    if config.get("callbacks") is None:
        config["callbacks"] = []
    msgs = mark_cache_prefix(llm, _as_messages(messages))
    call = _Call(llm, msgs, schema, config, retry or _NO_RETRY)
    try:
        return _STAGES.invoke(call, config=_UNTRACED)
    except _NoValue:
        pass
    # Stage 5: the typed default.
    # a model default is copied: callers may mutate it, keep theirs intact
    value = default.model_copy(deep=True) if isinstance(default, BaseModel) else default()
    if not isinstance(value, schema):
        raise TypeError(f"default factory returned {type(value)!r}, not {schema.__name__}")
    return StructuredResult(
        value=value, method="default", fallbacks=call.fallbacks, raw=call.last_raw
    )

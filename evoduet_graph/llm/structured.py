"""Structured LLM calls with a typed fallback chain, and plain text calls (docs/design.md §4).

`structured_call` asks a chat model for an object of a pydantic schema and never fails because
of what the model wrote. It tries, in order:

1. ``json_schema`` — the provider's own structured output:
   ``llm.with_structured_output(schema, method=...)`` with the method the provider's quirks name
   (`evoduet_graph.llm.providers.structured_method`): ``json_schema`` for OpenAI structured
   outputs, Gemini, vLLM/Ollama guided decoding and the embedded model's grammar;
   ``function_calling`` (the provider's tool calling) for Anthropic, Mistral, Groq and Bedrock.
   The stage keeps its name in `StructuredResult.method` and the fallback lines;
2. ``json_mode`` — ``method="json_mode"`` (any-JSON mode) with the schema in the prompt;
3. ``extraction`` — a plain call with the schema in the prompt; the reply goes through
   `extract_json_object` (strips ``<think>``, code fences, prose) and pydantic validation;
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
built with ``max_retries``), so attempts never multiply.
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
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ValidationError
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
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
                wait_exponential_jitter(
                    multiplier=self.initial_s, max=self.max_s, jitter=self.initial_s
                ),
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
        backoff = base(retry_state)
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


class _LazyInstruction:
    """The schema instruction message, built only when a stage needs it.

    The schema instruction message, built only when a stage needs it (the first stage,
    the provider's JSON-schema mode, does not).
    """

    def __init__(self, schema: type[BaseModel]) -> None:
        self._schema = schema
        self._message: HumanMessage | None = None

    @property
    def message(self) -> HumanMessage:
        if self._message is None:
            self._message = HumanMessage(content=_format_instruction(self._schema))
        return self._message


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


def _provider_stages(
    llm: BaseChatModel,
    msgs: list[BaseMessage],
    schema: type[T],
    instruction: _LazyInstruction,
    *,
    config: RunnableConfig | None,
    policy: RetryPolicy,
    fallbacks: list[str],
    fatal: Callable[[str, BaseException], LLMCallError],
) -> tuple[StructuredResult[T] | None, str | None]:
    """Stages 1-2 of `structured_call`: the provider's json_schema and json_mode outputs.

    Returns:
        The result when a stage produced a valid value (or one extracted from its raw text),
        else None; and the last raw reply text seen. Each failed stage appends its reason to
        ``fallbacks``.
    """
    last_raw: str | None = None
    method: Literal["json_schema", "json_mode"]
    for method in ("json_schema", "json_mode"):
        stage_msgs = msgs if method == "json_schema" else [*msgs, instruction.message]
        call_method = structured_method(llm) if method == "json_schema" else method
        try:
            runnable = llm.with_structured_output(schema, method=call_method, include_raw=True)
        except Exception as exc:  # noqa: BLE001 - NotImplementedError, ValueError("unsupported")
            fallbacks.append(f"{method}: not supported by the model ({_describe(exc)})")
            continue
        try:
            out = policy.call(
                lambda r=runnable, m=stage_msgs: r.invoke(m, config=config)  # type: ignore[misc]
            )
        except Exception as exc:
            if is_transport_error(exc):
                raise fatal(method, exc) from exc
            fallbacks.append(f"{method}: call rejected ({_describe(exc)})")
            continue
        value, raw_text, reason = _unpack_structured(out, schema)
        if raw_text is not None:
            last_raw = raw_text
        if value is not None:
            result = StructuredResult(value=value, method=method, fallbacks=fallbacks, raw=raw_text)
            return result, last_raw
        fallbacks.append(f"{method}: {reason}")
        if raw_text:
            rescued, _ = _parse_text(raw_text, schema)
            if rescued is not None:
                result = StructuredResult(
                    value=rescued, method="extraction", fallbacks=fallbacks, raw=raw_text
                )
                return result, last_raw
    return None, last_raw


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
    msgs = mark_cache_prefix(llm, _as_messages(messages))
    fallbacks: list[str] = []
    policy = retry or _NO_RETRY

    def fatal(stage: str, exc: BaseException) -> LLMCallError:
        return LLMCallError(
            f"chat model call failed during structured output stage {stage!r}: {_describe(exc)}",
            stage=stage,
            fallbacks=fallbacks,
            retryable=_is_retryable(exc),
        )

    instruction = _LazyInstruction(schema)

    # Stages 1-2: the provider's own structured-output modes.
    result, last_raw = _provider_stages(
        llm,
        msgs,
        schema,
        instruction,
        config=config,
        policy=policy,
        fallbacks=fallbacks,
        fatal=fatal,
    )
    if result is not None:
        return result

    # Stage 3: plain call, tolerant extraction.
    extraction_msgs = [*msgs, instruction.message]
    try:
        reply = policy.call(lambda: llm.invoke(extraction_msgs, config=config))
    except Exception as exc:
        raise fatal("extraction", exc) from exc
    text = message_text(reply)
    last_raw = text
    value, reason = _parse_text(text, schema)
    if value is not None:
        return StructuredResult(value=value, method="extraction", fallbacks=fallbacks, raw=text)
    fallbacks.append(f"extraction: {reason}")

    # Stage 4: one repair re-prompt.
    echoed = text if len(text) <= _REPAIR_ECHO_CHARS else text[:_REPAIR_ECHO_CHARS] + "\n[...]"
    repair_msgs = [
        *extraction_msgs,
        AIMessage(content=echoed),
        HumanMessage(
            content=(
                f"Your reply could not be used: {reason}.\n"
                "Reply again with ONLY the JSON object: no explanation, no code fences, no "
                f"reasoning. It must conform to this JSON schema:\n{_schema_json(schema)}"
            )
        ),
    ]
    try:
        repaired = policy.call(lambda: llm.invoke(repair_msgs, config=config))
    except Exception as exc:
        if is_transport_error(exc):
            raise fatal("repair", exc) from exc
        fallbacks.append(f"repair: call rejected ({_describe(exc)})")
    else:
        repaired_text = message_text(repaired)
        last_raw = repaired_text
        value, reason = _parse_text(repaired_text, schema)
        if value is not None:
            return StructuredResult(
                value=value, method="repair", fallbacks=fallbacks, raw=repaired_text
            )
        fallbacks.append(f"repair: {reason}")

    # Stage 5: the typed default.
    # a model default is copied: callers may mutate it, keep theirs intact
    value = default.model_copy(deep=True) if isinstance(default, BaseModel) else default()
    if not isinstance(value, schema):
        raise TypeError(f"default factory returned {type(value)!r}, not {schema.__name__}")
    return StructuredResult(value=value, method="default", fallbacks=fallbacks, raw=last_raw)

"""The embedded local chat model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M run by llama-cpp-python.

docs/design.md §4. `make_local_chat_model` takes the GGUF file `evoduet_graph.llm.model_file`
assembles and verifies, and loads it with llama-cpp-python behind a LangChain chat model
(`LocalChatModel`).

Why an own `BaseChatModel` rather than langchain-community's ``ChatLlamaCpp`` (0.4.x):
``ChatLlamaCpp`` reports token counts only in ``llm_output`` (no ``AIMessage.usage_metadata``,
so `UsageTracker` and LangChain's usage handler see nothing), streams by default, has no lock
around the non-thread-safe ``Llama`` object, loads a fresh copy of the weights per instance,
defaults to ``n_batch=8`` (slow prompt evaluation) and its ``with_structured_output`` only does
tool calling and rejects ``method=...``. The wrapper here is ~150 lines over
``Llama.create_chat_completion`` and does each of those things.

Concurrent free-text calls (the N candidates of an iteration, or ``model.batch([...])``)
decode together as one llama.cpp batch (`evoduet_graph.llm.batching`): the prompt
prefix they share is evaluated once and each decode step advances every sequence. Calls with
a ``response_format`` (JSON grammar) stay single-sequence ``create_chat_completion`` calls.
``local_parallel: 1`` turns batching off. The batched decoder drafts with prompt lookup
(`evoduet_graph.llm.prompt_lookup`) unless ``local_prompt_lookup`` is false.

``local_prompt_cache_mib`` > 0 gives the loaded ``Llama`` a bounded in-memory prompt cache
(`evoduet_graph.llm.prompt_cache`): sequential calls can start from the state
of an earlier call that shares more of their prompt than the previous call did.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from operator import itemgetter
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, Self, cast

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from evoduet_graph.config import LLMConfig, config_options
from evoduet_graph.llm import runtime
from evoduet_graph.llm.batching import (
    BatchDecoder,
    LlamaBackend,
    SamplingParams,
    SequenceRequest,
    common_prefix,
    enable_parallel_sequences,
    new_request,
    resolve_seed,
)
from evoduet_graph.llm.model_file import (
    INSTALL_HINT,
    MODEL_NAME,
    REPEAT_PENALTY,
    LocalModelError,
    assemble_model,
)
from evoduet_graph.llm.prompt_lookup import PromptLookup
from evoduet_graph.llm.text import message_text
from evoduet_graph.llm.worker import IN_WORKER_ENV, ModelWorker, WorkerSettings

if TYPE_CHECKING:  # optional (the `local` extra): for annotations only
    from llama_cpp.llama_types import ChatCompletionRequestMessage

__all__ = [
    "LocalChatModel",
    "make_local_chat_model",
]


def _prompt_cache() -> ModuleType:
    """`evoduet_graph.llm.prompt_cache`, imported once a model uses one.

    It subclasses llama-cpp-python's cache class, so importing it imports ``llama_cpp``.
    """
    from evoduet_graph.llm import prompt_cache  # imports llama_cpp (the `local` extra)

    return prompt_cache


# --------------------------------------------------------------------------------------------
# Loading (one llama.cpp model per process per (path, n_ctx, n_threads, parallel, prompt cache,
# prompt lookup))
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Loaded:
    """The in-process engine: one loaded ``Llama``, its lock, and its batch decoder.

    `LocalChatModel` calls it directly (``local_isolation: none``) or through the model
    worker (`evoduet_graph.llm.worker`, the default), which hosts one in a child process; the
    methods below are the whole interface between the two.
    """

    llama: Any  # llama_cpp.Llama
    lock: threading.Lock  # llama.cpp contexts are not thread-safe: one call at a time
    parallel: int = 1  # sequences decoded together (1: no batching)
    decoder: BatchDecoder | None = None
    queue: deque[SequenceRequest] = field(default_factory=deque)  # batched, not yet admitted
    guard: threading.Lock = field(default_factory=threading.Lock)  # guards ``queue``
    variant: str | None = None  # the llama.cpp CPU variant loaded (`evoduet_graph.llm.runtime`)

    def complete(self, payload: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        """One chat completion as a plain reply dict (`_reply_to_result` makes the message)."""
        if self.decoder is not None and params.get("response_format") is None:
            return _complete_batched(self, payload, params)
        return _complete_single(self, payload, params)

    def seed(self, seed: int) -> None:
        """Start the stream of per-call sampling seeds at ``seed``."""
        with self.lock:
            self.llama.set_seed(int(seed) & 0xFFFFFFFF)

    def clear_cache(self) -> None:
        """Forget the evaluated prompt and the prompt cache's entries."""
        with self.lock:
            llama = self.llama
            llama._ctx.kv_cache_seq_rm(0, 0, -1)
            llama.reset()
            cache = getattr(llama, "cache", None)
            if cache is not None:
                cache.clear()

    def warm_up(self) -> None:
        """Decode one token, so a start proves the kernels run (the worker's ``ready``)."""
        with self.lock:
            self.llama.create_completion("def", max_tokens=1, temperature=0.0)
            self.llama._ctx.kv_cache_seq_rm(0, 0, -1)
            self.llama.reset()

    def close(self) -> None:
        """Free the model (the worker calls it before it exits)."""
        if self.decoder is not None:
            self.decoder.backend.close()  # type: ignore[attr-defined]
        self.llama.close()


_LOADED: dict[tuple[str, int, int, int, int, bool], _Loaded] = {}
_LOADED_GUARD = threading.Lock()


@atexit.register
def _close_loaded() -> None:
    """Free the models before interpreter shutdown.

    llama-cpp-python's own finaliser runs too late (its C bindings are already gone) and prints a
    TypeError traceback at exit.
    """
    with _LOADED_GUARD:
        for loaded in _LOADED.values():
            with contextlib.suppress(Exception):  # best effort at exit
                loaded.close()
        _LOADED.clear()


def _load_llama(settings: WorkerSettings) -> _Loaded:
    """The shared ``Llama`` of these settings, loaded on first use (``engine`` is not read).

    The prompt cache size is part of the sharing key: a cache belongs to its ``Llama`` (it is
    consulted and filled by every sequential call on it), so models asking for different caches
    get different ``Llama`` objects rather than one silently taking the other's setting.
    """
    n_ctx, n_threads, parallel = settings.n_ctx, settings.n_threads, settings.parallel
    prompt_cache_mib, prompt_lookup = settings.prompt_cache_mib, settings.prompt_lookup
    if isinstance(prompt_cache_mib, bool) or not isinstance(prompt_cache_mib, int):
        raise ValueError(f"prompt_cache_mib must be an int, got {prompt_cache_mib!r}")
    if prompt_cache_mib < 0:
        raise ValueError(f"prompt_cache_mib must be >= 0 (0: no cache), got {prompt_cache_mib}")
    key = (
        str(Path(settings.model_path).resolve()),
        n_ctx,
        n_threads,
        parallel,
        prompt_cache_mib,
        prompt_lookup,
    )
    with _LOADED_GUARD:
        loaded = _LOADED.get(key)
        if loaded is not None:
            return loaded
        try:
            llama_cpp = runtime.llama_cpp_module()
        except ImportError as exc:
            raise LocalModelError(
                f"llama-cpp-python is not installed; install it with: {INSTALL_HINT}"
            ) from exc
        # In the worker, its start is the check (`ModelWorker`); in-process, a child decodes
        # first (cached per build), so a runtime that crashes is named, not run.
        forced = None if os.environ.get(IN_WORKER_ENV) else runtime.ensure_runtime(key[0])
        try:
            variant = runtime.load_cpu_backend(forced)
        except RuntimeError as exc:
            raise LocalModelError(str(exc)) from exc
        try:
            llama = llama_cpp.Llama(
                model_path=key[0],
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                n_batch=512,
                verbose=False,
            )
        except Exception as exc:  # llama_cpp raises ValueError on an unreadable file
            raise LocalModelError(f"llama.cpp could not load {key[0]}: {exc}") from exc
        if "tokenizer.chat_template" not in llama.metadata:
            llama.chat_format = "chatml"  # Qwen's format; never llama.cpp's llama-2 fallback
        if prompt_cache_mib > 0:
            cache = _prompt_cache()
            llama.set_cache(cache.PromptStateCache(capacity_bytes=prompt_cache_mib * cache.MIB))
        decoder = None
        if parallel > 1:
            try:
                enable_parallel_sequences(llama, parallel + 1)  # seq 0 stays Llama's
            except Exception as exc:
                llama.close()
                raise LocalModelError(
                    f"llama.cpp could not create a {parallel}-sequence context for {key[0]}: {exc}"
                ) from exc
            lookup = PromptLookup() if prompt_lookup else None
            decoder = BatchDecoder(LlamaBackend(llama), parallel, lookup)
            _chat_prompt(llama, [{"role": "user", "content": ""}])  # compile the template now:
            # concurrent first calls then reach the batch together (same start, same rounding)
        loaded = _Loaded(
            llama=llama, lock=threading.Lock(), parallel=parallel, decoder=decoder, variant=variant
        )
        _LOADED[key] = loaded
        return loaded


def load_engine(settings: WorkerSettings) -> _Loaded:
    """The model worker's engine factory (`WorkerSettings.engine`): the in-process engine."""
    return _load_llama(settings)


# --------------------------------------------------------------------------------------------
# One measured completion: prompt tokens reused from the context, prompt-evaluation and decode time
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompletionTiming:
    """What one llama.cpp completion cost.

    Attributes:
        reused_tokens: prompt tokens llama.cpp did not evaluate because the context already
            held them: the longest common prefix of the new prompt with the tokens the previous
            call left in the context, or with the tokens of the prompt-cache entry
            llama-cpp-python loaded instead (`evoduet_graph.llm.prompt_cache.reuse_source`;
            ``Llama.generate`` keeps that prefix; a prompt that is entirely a prefix
            re-evaluates its last token to get fresh logits).
        from_cache: whether a prompt-cache entry was loaded for this call.
        prompt_eval_s: seconds spent evaluating the rest of the prompt (llama.cpp's own
            ``t_p_eval`` perf counter).
        decode_s: seconds after the prompt: token-by-token decoding, sampling and the JSON
            grammar (the call's compute time minus ``prompt_eval_s``).
    """

    reused_tokens: int
    prompt_eval_s: float
    decode_s: float
    from_cache: bool = False


def common_prefix_length(before: Sequence[int], prompt: Sequence[int]) -> int:
    """Tokens of ``prompt`` that llama.cpp reuses from a context holding ``before``.

    The common prefix (`evoduet_graph.llm.batching.common_prefix`), less the last token when
    that is the whole prompt: llama.cpp evaluates it again for fresh logits.
    """
    n = common_prefix(before, prompt)
    return n - 1 if n >= len(prompt) > 0 else n


def measured_completion(
    llama: Any, messages: list[dict[str, str]], params: dict[str, Any]
) -> tuple[dict[str, Any], CompletionTiming]:
    """``llama.create_chat_completion`` with its `CompletionTiming` (call it under the lock).

    The context's tokens before the call (``Llama._input_ids``: the evaluated ones, not the
    stale slots of the ``input_ids`` array behind them) are compared with the prompt's tokens
    after it (`common_prefix_length`). With a prompt cache (``llama.cache``)
    the cache's keys and entries before the call are kept too, and the tokens compared are
    those of the entry llama-cpp-python loaded, if it loaded one
    (`evoduet_graph.llm.prompt_cache.reuse_source`). A call without its own ``seed`` then gets
    the next seed of the model's stream up front (`resolve_seed`, as ``create_completion``
    would draw it), because loading an entry restores the seed stream saved with it: later
    calls would otherwise repeat earlier calls' seeds.

    llama.cpp's perf counters are reset before the call and read after it. Reading them costs
    microseconds; a binding without them gives 0 s prompt time, one without ``input_ids`` 0
    reused tokens.
    """
    llama_cpp = runtime.llama_cpp_module()
    if hasattr(llama, "_input_ids"):
        before = list(llama._input_ids)
    else:  # a stand-in without a context: its input_ids, or none
        before = list(getattr(llama, "input_ids", ()))
    cache = getattr(llama, "cache", None)
    entries = list(getattr(cache, "cache_state", {}).items()) if cache is not None else []
    if cache is not None and params.get("seed") is None:
        params = {**params, "seed": resolve_seed(llama, None)}
    ctx = getattr(getattr(llama, "_ctx", None), "ctx", None)
    perf = ctx is not None and hasattr(llama_cpp, "llama_perf_context")
    if perf:
        llama_cpp.llama_perf_context_reset(ctx)
    started = time.perf_counter()
    response = llama.create_chat_completion(messages=messages, **params)
    compute = time.perf_counter() - started
    prompt_eval = llama_cpp.llama_perf_context(ctx).t_p_eval_ms / 1000.0 if perf else 0.0
    prompt_tokens = int((response.get("usage") or {}).get("prompt_tokens", 0))
    prompt = list(getattr(llama, "input_ids", ())[:prompt_tokens])
    from_cache = False
    if entries:  # entries exist only where a prompt cache was set, so the module is loaded
        before, from_cache = _prompt_cache().reuse_source(before, entries, prompt)
    reused = common_prefix_length(before, prompt)
    timing = CompletionTiming(
        reused_tokens=max(0, reused),
        prompt_eval_s=min(prompt_eval, compute),
        decode_s=max(0.0, compute - prompt_eval),
        from_cache=from_cache,
    )
    return response, timing


# --------------------------------------------------------------------------------------------
# The chat model
# --------------------------------------------------------------------------------------------

_CALL_KWARGS = frozenset(
    {
        "response_format",
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "repeat_penalty",
        "stop",
    }
)


def _to_llama_message(message: BaseMessage) -> dict[str, str]:
    if isinstance(message, SystemMessage):
        role = "system"
    elif isinstance(message, HumanMessage):
        role = "user"
    elif isinstance(message, AIMessage):
        role = "assistant"
    elif isinstance(message, ChatMessage) and message.role in ("system", "user", "assistant"):
        role = message.role
    elif isinstance(message, ToolMessage):
        role = "user"  # no tool calling here; show the result as text
    else:
        raise ValueError(f"unsupported message type for the local model: {type(message)!r}")
    return {"role": role, "content": message_text(message)}


class LocalChatModel(BaseChatModel):
    """LangChain chat model over an in-process ``llama_cpp.Llama`` (docs/design.md §4).

    Calls are serialised per loaded model (llama.cpp is not thread-safe). Free-text calls
    made concurrently (threads generating candidates, ``batch``) decode as one llama.cpp batch
    when ``parallel`` > 1 (`evoduet_graph.llm.batching`); calls with a ``response_format`` run
    alone. Every reply carries ``usage_metadata`` (input/output tokens;
    ``input_token_details.cache_read``: prompt tokens not evaluated again — reused from the
    context, or shared within a batch —, the field LangChain's OpenAI models fill from
    ``prompt_tokens_details.cached_tokens``) and ``response_metadata`` (``model_name``,
    ``finish_reason``, ``latency_s``, ``lock_wait_s``, ``prompt_eval_s``, ``decode_s``; see
    `CompletionTiming`; sequential calls add ``from_prompt_cache``, batched calls
    ``batch_size``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_path: str = Field(description="Path of the GGUF file.")
    model_name: str = Field(MODEL_NAME, description="Name reported in response metadata.")
    n_ctx: int = Field(8192, ge=512, description="Context window (tokens).")
    n_threads: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    temperature: float = 0.7
    max_tokens: int = Field(1024, ge=1, description="Completion token limit per call.")
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = Field(
        REPEAT_PENALTY, ge=0.0, description="llama.cpp's penalty on the last 64 tokens."
    )
    seed: int | None = Field(None, description="Sampling seed; None: random per call.")
    stop: list[str] | None = None
    parallel: int = Field(
        8, ge=1, le=64, description="Free-text calls decoded together in one batch (1: none)."
    )
    prompt_cache_mib: int = Field(
        0,
        ge=0,
        description="Memory bound of the in-memory prompt cache of sequential calls "
        "(`evoduet_graph.llm.prompt_cache`); 0: none.",
    )
    prompt_lookup: bool = Field(
        True,
        description="Prompt-lookup speculative decoding of batched free-text calls "
        "(`evoduet_graph.llm.prompt_lookup`).",
    )

    isolation: Literal["process", "none"] = Field(
        "process",
        description="`process`: the model runs in a worker process of its own "
        "(`evoduet_graph.llm.worker`), so a native crash fails a call, not the run; `none`: "
        "in this process.",
    )
    engine: str = Field(
        "evoduet_graph.llm.local:load_engine",
        description="`module:function` the worker builds its engine with (tests swap it).",
    )

    _loaded: _Loaded | _WorkerEngine | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _load_weights(self) -> Self:
        """Load (or reuse) the llama.cpp model at construction, so failures surface early."""
        # the worker's settings are this model's fields of the same names
        own = self.model_dump(include={f.name for f in fields(WorkerSettings)})
        settings = WorkerSettings(**{**own, "model_path": str(Path(self.model_path).resolve())})
        in_process = self.isolation == "none"
        self._loaded = _load_llama(settings) if in_process else _worker_engine(settings)
        return self

    @property
    def _llm_type(self) -> str:
        return "evoduet-llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        """The fields that tell this model's replies apart (LangChain's cache key, traces)."""
        return self.model_dump(include={"model_name", "n_ctx", "temperature", "max_tokens"})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        extra = {k: v for k, v in kwargs.items() if not k.startswith("ls_")}
        unknown = set(extra) - _CALL_KWARGS
        if unknown:
            raise TypeError(f"unsupported arguments for the local model: {sorted(unknown)}")
        params: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repeat_penalty": self.repeat_penalty,
            "seed": self.seed,
            "stop": list(stop or self.stop or []),
        }
        params.update(extra)
        payload = [_to_llama_message(m) for m in messages]
        assert self._loaded is not None
        started = time.perf_counter()
        reply = self._loaded.complete(payload, params)
        return _reply_to_result(reply, self.model_name, time.perf_counter() - started)

    def seed_sampling(self, seed: int) -> None:
        """Start the model's stream of per-call sampling seeds at ``seed``.

        A call without its own ``seed`` draws one from the stream (as ``llama_cpp.Llama``
        does), so after ``seed_sampling(s)`` the same calls in the same order sample the same
        tokens (kernel rounding aside: see `evoduet_graph.llm.batching`). The run driver calls
        it with the run's ``seed`` (``seed``: "parent selection and sampling"); before, every
        run of a process started from llama.cpp's fixed default seed, so runs with different
        seeds sampled alike.
        """
        assert self._loaded is not None
        self._loaded.seed(seed)

    def clear_cache(self) -> None:
        """Forget the evaluated prompt and the prompt cache's entries (benchmarks start cold)."""
        assert self._loaded is not None
        self._loaded.clear_cache()

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: Literal["json_schema", "json_mode", "function_calling"] = "json_schema",
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Structured output by grammar-constrained decoding.

        ``json_schema``: llama.cpp's ``response_format={"type": "json_object", "schema": ...}``
        (the schema is compiled to a GBNF grammar, so the reply is valid JSON of that shape);
        ``json_mode``: any JSON object (the prompt must describe the fields). The result is a
        runnable (the bound model, then LangChain's output parser) like any provider's; only
        the grammar check stays outside it: the schema is compiled here, once, because a schema
        llama.cpp cannot compile must fail when the runnable is made (so `structured_call`
        moves to ``json_mode`` without a call), not on every invocation.

        Args:
            schema: a pydantic model class or a JSON-schema dict.
            include_raw: return ``{"raw", "parsed", "parsing_error"}`` instead of raising.
            method: ``"json_schema"`` or ``"json_mode"``.
            **kwargs: none is supported but a null ``strict`` (LangChain's signature).

        Raises:
            NotImplementedError: ``method="function_calling"``, or a schema llama.cpp cannot
                compile into a grammar (callers then fall back, see `structured_call`).
            ValueError: unknown keyword arguments.
        """
        if kwargs.pop("strict", None) is not None or kwargs:
            raise ValueError(f"unsupported arguments: {sorted(kwargs)}")
        is_pydantic = isinstance(schema, type) and issubclass(schema, BaseModel)
        if is_pydantic:
            json_schema = schema.model_json_schema()  # type: ignore[union-attr]
        elif isinstance(schema, dict):
            json_schema = schema
        else:
            raise NotImplementedError(f"unsupported schema type {type(schema)!r}")
        if method == "json_schema":
            try:
                grammar = runtime.llama_cpp_module().llama_grammar
                grammar.json_schema_to_gbnf(json.dumps(json_schema))
            except Exception as exc:  # unsupported JSON-schema features
                raise NotImplementedError(
                    f"llama.cpp cannot compile this schema into a grammar: {exc}"
                ) from exc
            response_format: dict[str, Any] = {"type": "json_object", "schema": json_schema}
        elif method == "json_mode":
            response_format = {"type": "json_object"}
        else:
            raise NotImplementedError(
                f"method={method!r} is not supported by the local model; "
                "use 'json_schema' or 'json_mode'"
            )
        llm = self.bind(response_format=response_format)
        parser: Runnable[Any, Any] = (
            PydanticOutputParser(pydantic_object=schema) if is_pydantic else JsonOutputParser()
        )
        if not include_raw:
            return llm | parser
        parse_with_raw = RunnablePassthrough.assign(
            parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
        )
        parse_failed = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=llm) | parse_with_raw.with_fallbacks(
            [parse_failed], exception_key="parsing_error"
        )


def _overflow(exc: BaseException) -> BaseException:
    """A context-window error as LangChain's `ContextOverflowError` (others unchanged)."""
    if "exceed context window" in str(exc):
        return ContextOverflowError(f"{exc} (raise llm.local_n_ctx or shorten the prompt)")
    return exc


def _complete_single(
    loaded: _Loaded, payload: list[dict[str, str]], params: dict[str, Any]
) -> dict[str, Any]:
    """One ``create_chat_completion`` under the model lock (calls with a JSON grammar)."""
    started = time.perf_counter()
    with loaded.lock:
        waited = time.perf_counter() - started
        try:
            response, timing = measured_completion(loaded.llama, payload, params)
        except ValueError as exc:
            error = _overflow(exc)
            if error is exc:
                raise
            raise error from exc
    choice = response["choices"][0]
    usage = response.get("usage") or {}
    return {
        "content": choice["message"].get("content") or "",
        "finish_reason": choice.get("finish_reason"),
        "input_tokens": int(usage.get("prompt_tokens", 0)),
        "output_tokens": int(usage.get("completion_tokens", 0)),
        "cache_read": timing.reused_tokens,
        "metadata": {
            "lock_wait_s": round(waited, 4),
            "prompt_eval_s": round(timing.prompt_eval_s, 4),
            "decode_s": round(timing.decode_s, 4),
            "from_prompt_cache": timing.from_cache,
        },
    }


def _complete_batched(
    loaded: _Loaded, payload: list[dict[str, str]], params: dict[str, Any]
) -> dict[str, Any]:
    """One free-text call as a sequence of the shared batch (`BatchDecoder`).

    The request is queued; whichever waiting caller takes the model lock decodes every
    queued request together (holding the lock for the whole batch), and requests queued
    meanwhile join at the next step. A caller returns as soon as its own sequence is done.
    """
    assert loaded.decoder is not None
    llama = loaded.llama
    formatted = _chat_prompt(llama, payload)
    tokens = llama.tokenize(
        formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
    )
    stop = list(params["stop"] or [])
    if formatted.stop:
        stop += [formatted.stop] if isinstance(formatted.stop, str) else list(formatted.stop)
    with loaded.guard:
        seed = resolve_seed(llama, params["seed"])
        request = new_request(
            tokens,
            max_tokens=int(params["max_tokens"]),
            sampling=SamplingParams(
                temperature=float(params["temperature"]),
                top_p=float(params["top_p"]),
                top_k=int(params["top_k"]),
                min_p=float(params["min_p"]),
                repeat_penalty=float(params["repeat_penalty"]),
                seed=seed,
            ),
            stop=stop,
        )
        loaded.queue.append(request)
    while not request.done.is_set():
        if loaded.lock.acquire(timeout=0.05):
            try:
                if not request.done.is_set():
                    loaded.decoder.run(loaded.queue, loaded.guard)
            finally:
                loaded.lock.release()
    if request.error is not None:
        error = _overflow(request.error)
        if error is request.error:
            raise request.error
        raise error from request.error
    return {
        "content": request.text,
        "finish_reason": request.finish_reason,
        "input_tokens": len(tokens),
        "output_tokens": request.completion_tokens,
        "cache_read": request.prompt_reused,
        "metadata": {
            "lock_wait_s": round(request.queued_s, 4),
            "prompt_eval_s": round(request.prompt_eval_s, 4),
            "decode_s": round(request.decode_s, 4),
            "batch_size": request.batch_size,
            "decode_steps": request.decode_steps,
            "draft_tokens": request.draft_tokens,
            "draft_accepted": request.draft_accepted,
        },
    }


def _reply_to_result(reply: dict[str, Any], model_name: str, latency: float) -> ChatResult:
    """The `ChatResult` of an engine's reply dict (the same in-process and from the worker)."""
    n_in, n_out = int(reply["input_tokens"]), int(reply["output_tokens"])
    finish = reply["finish_reason"]
    usage_metadata = UsageMetadata(
        input_tokens=n_in,
        output_tokens=n_out,
        total_tokens=n_in + n_out,
        input_token_details={"cache_read": int(reply["cache_read"])},
    )
    message = AIMessage(
        content=reply["content"],
        usage_metadata=usage_metadata,
        response_metadata={
            "model_name": model_name,
            "model_provider": "llama-cpp",
            "finish_reason": finish,
            "latency_s": round(latency, 4),
            **reply["metadata"],
        },
    )
    usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
    return ChatResult(
        generations=[
            ChatGeneration(
                message=message, generation_info={"finish_reason": reply["finish_reason"]}
            )
        ],
        llm_output={"token_usage": usage, "model_name": model_name},
    )


class _WorkerEngine:
    """The engine interface of `_Loaded`, forwarded to a `ModelWorker`'s child process."""

    def __init__(self, worker: ModelWorker) -> None:
        self.worker = worker

    @property
    def variant(self) -> str | None:
        return self.worker.variant

    def complete(self, payload: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        """The worker's reply, with ``ipc_s``: the call's wait outside the worker's engine."""
        started = time.perf_counter()
        reply, engine_s = self.worker.call("complete", payload, params)
        boundary = max(0.0, time.perf_counter() - started - engine_s)
        reply["metadata"]["ipc_s"] = round(boundary, 6)
        return reply  # type: ignore[no-any-return]

    def seed(self, seed: int) -> None:
        self.worker.call("seed", seed)

    def clear_cache(self) -> None:
        self.worker.call("clear_cache")


_WORKER_ENGINES: dict[tuple[str, ...], _WorkerEngine] = {}


def _worker_engine(settings: WorkerSettings) -> _WorkerEngine:
    """The shared worker of these settings, started on first use (one per process)."""
    key = tuple(str(v) for v in asdict(settings).values())
    with _LOADED_GUARD:
        engine = _WORKER_ENGINES.get(key)
        if engine is None:
            engine = _WorkerEngine(ModelWorker(settings))
            _WORKER_ENGINES[key] = engine
        return engine


def _chat_prompt(llama: Any, messages: list[dict[str, str]]) -> Any:
    """The prompt ``create_chat_completion`` would build for ``messages``.

    The prompt ``create_chat_completion`` would build for ``messages`` (a
    ``ChatFormatterResponse``: ``prompt``, ``stop``, ``added_special``): the GGUF's chat
    template, or ChatML when the file has none.
    """
    llama_chat_format = runtime.llama_cpp_module().llama_chat_format
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        return llama_chat_format.format_chatml(messages=messages)
    formatter = getattr(llama, "_evoduet_formatter", None)
    if formatter is None:
        model = llama._model
        eos_id, bos_id = llama.token_eos(), llama.token_bos()
        formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=model.token_get_text(eos_id) if eos_id != -1 else "",
            bos_token=model.token_get_text(bos_id) if bos_id != -1 else "",
            stop_token_ids=[eos_id],
        )
        llama._evoduet_formatter = formatter
    # the role/content dicts are llama_cpp's ChatCompletionRequestMessage TypedDicts
    return formatter(messages=cast("list[ChatCompletionRequestMessage]", messages))


def make_local_chat_model(
    cfg: LLMConfig,
    *,
    cache_dir: str | Path | None = None,
    callbacks: Sequence[Any] | None = None,
) -> LocalChatModel:
    """The embedded model as a chat model, assembling the GGUF first if needed (docs/design.md §4).

    Args:
        cfg: ``temperature``, ``top_p`` (when set; else the model's 0.95), ``max_tokens``,
            ``local_n_ctx``, ``local_n_threads`` (default:
            ``os.cpu_count()``), ``local_parallel``, ``local_prompt_cache_mib``,
            ``local_prompt_lookup``,
            ``local_isolation``, ``local_engine`` and ``local_cache_dir`` are used.
        cache_dir: overrides ``cfg.local_cache_dir``.
        callbacks: LangChain callback handlers attached to the model (e.g. `UsageTracker`).

    Returns:
        A `LocalChatModel`; the weights are loaded once per process per (path, n_ctx,
        n_threads, parallel, prompt cache size, prompt lookup) and shared by every instance.

    Raises:
        LocalModelError: the parts are missing or corrupt, llama-cpp-python is not installed,
            or llama.cpp cannot load the file.
    """
    path = assemble_model(cache_dir if cache_dir is not None else cfg.local_cache_dir)
    return LocalChatModel(
        model_path=str(path),
        n_threads=cfg.local_n_threads or os.cpu_count() or 1,
        **({"top_p": cfg.top_p} if cfg.top_p is not None else {}),
        callbacks=list(callbacks) if callbacks else None,
        **config_options(cfg, _CONFIG_KEYS),
    )


_CONFIG_KEYS = {
    "n_ctx": "local_n_ctx",
    "temperature": "temperature",
    "max_tokens": "max_tokens",
    "parallel": "local_parallel",
    "prompt_cache_mib": "local_prompt_cache_mib",
    "prompt_lookup": "local_prompt_lookup",
    "isolation": "local_isolation",
    "engine": "local_engine",
}
"""`LocalChatModel` field → the ``llm`` key it comes from (`make_local_model`)."""

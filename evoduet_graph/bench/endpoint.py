"""The model endpoint every bench method talks to.

A LangChain chat model on the OpenAI-compatible endpoint (llama.cpp's server for ``--model local``)
and the probe that checks it answers before any run starts.
"""

from __future__ import annotations

import random
import threading
from typing import Any, ClassVar, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.utils.function_calling import convert_to_json_schema
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr, SecretStr

from evoduet_graph import LLMConfig, UserError, make_chat_model
from evoduet_graph.bench.common import (
    BenchError,
    LogFn,
)


class LlamaCppChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` for llama-cpp-python's OpenAI-compatible server.

    That server (0.3.x) accepts ``response_format`` types ``text`` and ``json_object`` only
    (with an optional ``schema``, which it compiles into a grammar); a ``json_schema`` request
    fails with HTTP 500, which the OpenAI client retries before our structured-output helper
    falls back. ``with_structured_output(method="json_schema")`` is therefore sent as
    ``{"type": "json_object", "schema": <schema>}``: the same schema-constrained decoding, one
    request.

    Sampling seeds: the server draws a request's seed from one stream that starts when the
    server starts (llama-cpp-python's ``Llama`` does so for a request without ``seed``), so on a
    server shared by a whole bench a run would sample according to the runs served before it,
    not to its own seed. With ``sampling_seed`` set, every request carries the next seed of a
    stream of this run's own that starts at that seed and is drawn the way ``Llama`` draws its
    stream: what `evoduet_graph.llm.local.LocalChatModel.seed_sampling` does for the embedded
    model in process. The same run with the same seed then asks for the same seeds in the same
    order, whichever runs came before it on the server. Copies of the model (structured
    output) share the stream.
    """

    sampling_seed: int | None = None
    """The run's seed: the first seed of the run's stream of request seeds (None: the server's
    own stream)."""

    _seeds: dict[str, Any] = PrivateAttr(default_factory=dict)

    native_tool_calling: ClassVar[bool] = False
    """llama-cpp-python's server calls tools only with a function-calling chat format, which
    the embedded model is not served with: joint-level search takes its structured path."""

    def _next_seed(self) -> int | None:
        """The next seed of the run's stream (`Llama`'s draw: ``Random(previous).randint``)."""
        if self.sampling_seed is None:
            return None
        stream = self._seeds
        if "lock" not in stream:
            stream.update(lock=threading.Lock(), last=int(self.sampling_seed) & 0xFFFFFFFF)
        with stream["lock"]:
            stream["last"] = random.Random(stream["last"]).randint(0, 2**32)
            return int(stream["last"])

    def _get_request_payload(
        self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """`ChatOpenAI`'s request body, with the next seed of the run's stream."""
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        seed = self._next_seed()
        if seed is not None and payload.get("seed") is None:
            payload["seed"] = seed
        return payload

    def with_structured_output(
        self,
        schema: Any = None,
        *,
        method: Literal["function_calling", "json_mode", "json_schema"] = "json_schema",
        include_raw: bool = False,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """`ChatOpenAI.with_structured_output`, with ``json_schema`` as described above."""
        if method == "json_schema" and schema is not None:
            body = dict(self.extra_body or {})
            body["response_format"] = {
                "type": "json_object",
                "schema": convert_to_json_schema(schema),
            }
            constrained = self.model_copy(update={"extra_body": body})
            return ChatOpenAI.with_structured_output(
                constrained, schema, method="json_mode", include_raw=include_raw, **kwargs
            )
        return super().with_structured_output(
            schema, method=method, include_raw=include_raw, strict=strict, **kwargs
        )


def endpoint_chat_model(
    cfg: LLMConfig, *, llama_cpp_server: bool = False, seed: int | None = None
) -> BaseChatModel:
    """The chat model our methods use against the bench's endpoint.

    `make_chat_model` (``openai:<model>``), plus ``max_tokens`` in the request body for any
    OpenAI-compatible ``base_url``: langchain-openai (1.x) sends the completion limit only as
    ``max_completion_tokens``, which llama-cpp-python's server (0.3.x) ignores, so its
    completions would run until the context is full, while OpenEvolve sends ``max_tokens``;
    this way every method gets the same limit. OpenAI itself (no ``base_url``) is left alone:
    its reasoning models reject ``max_tokens``.

    Args:
        cfg: the ``llm`` section (``openai:<model>``).
        llama_cpp_server: the endpoint is the bench's own llama.cpp server: use
            `LlamaCppChatOpenAI`.
        seed: the run's seed, which starts the run's stream of request seeds on the bench's
            llama.cpp server (`LlamaCppChatOpenAI.sampling_seed`).
    """
    model = make_chat_model(cfg)
    if isinstance(model, ChatOpenAI) and cfg.base_url:
        extra = dict(model.extra_body or {})
        extra.setdefault("max_tokens", cfg.max_tokens)
        if llama_cpp_server:
            model = LlamaCppChatOpenAI(
                **_chat_openai_init(model), extra_body=extra, sampling_seed=seed
            )
        else:
            model = model.model_copy(update={"extra_body": extra})
    return model


def probe_endpoint(cfg: LLMConfig, log: LogFn) -> None:
    """Check that the bench's endpoint answers before any job runs.

    Ask the bench's ``openai:<model>`` endpoint for a few tokens before any job runs, so a dead
    URL, a wrong model name or a rejected key stops the bench at once instead of failing every
    iteration of every job.

    Raises:
        BenchError: the key is missing, or the request failed after one retry (the message
            names the base URL and quotes the error).
    """
    try:
        # the limit goes into the config: endpoint_chat_model also puts it in the request body
        model = endpoint_chat_model(cfg.model_copy(update={"max_retries": 1, "max_tokens": 5}))
    except UserError as exc:  # a missing key or package: nothing was asked of the endpoint
        raise BenchError(str(exc)) from None
    try:
        model.invoke("Reply with OK.")
    except Exception as exc:  # noqa: BLE001 - any failure means the endpoint is unusable
        where = cfg.base_url or "OpenAI's default endpoint"
        raise BenchError(
            f"the model endpoint {where} did not answer a 5-token test request for "
            f"{cfg.model!r}: {type(exc).__name__}: {str(exc)[:300]}; check `--model`, "
            f"OPENAI_BASE_URL and {cfg.api_key_env}"
        ) from None
    log(f"model endpoint answered: {cfg.model} at {cfg.base_url or 'default URL'}")


def _chat_openai_init(model: ChatOpenAI) -> dict[str, Any]:
    """Constructor arguments that rebuild ``model`` (as `make_chat_model` configured it)."""
    key = model.openai_api_key
    return {
        "model": model.model_name,
        "base_url": model.openai_api_base,
        "api_key": key.get_secret_value() if isinstance(key, SecretStr) else None,
        "temperature": model.temperature,
        "max_tokens": model.max_tokens,
        "timeout": model.request_timeout,
        "max_retries": model.max_retries,
    }

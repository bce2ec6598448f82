"""Model providers and their quirks, as data (docs/models.md "Providers").

A model string ``<provider>:<model>`` names a provider LangChain's ``init_chat_model`` knows
(``anthropic:claude-...``, ``google_genai:gemini-...``, ``ollama:qwen2.5-coder:7b``,
``bedrock_converse:...``); `PROVIDERS` says, per provider, what differs between them:

* which integration package builds it and which ``evoduet-graph`` extra installs it;
* which environment variable holds its key (checked before the first iteration);
* which sampling parameters it accepts, and which of them it refuses together (Anthropic's
  newer models refuse ``temperature`` together with ``top_p``);
* the constructor's name of the completion limit (``max_tokens``, Gemini's
  ``max_output_tokens``, Ollama's ``num_predict``), of the request timeout and of the retries;
* whether structured output goes through the provider's tool calling (``function_calling``) or
  its JSON-schema mode (``json_schema``): the first stage of
  `evoduet_graph.llm.structured.structured_call`;
* where the reply's usage says how many input tokens were read from the provider's prompt
  cache (every integration used here maps it to LangChain's
  ``usage_metadata["input_token_details"]["cache_read"]``);
* whether the provider caches prompts only when asked (Anthropic: ``cache_control`` on the
  shared prefix, `mark_cache_prefix`) and how the price catalogue names it.

`FAMILIES` refines a provider for a model family where it matters (OpenAI's reasoning models
accept no sampling parameter). `request_settings` turns the ``llm`` section into the keyword
arguments of one provider's chat model and says which settings it dropped, so an unsupported
parameter is left out with one warning when the model is built, never a failed call in
iteration 40.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

__all__ = [
    "FAMILIES",
    "PROVIDERS",
    "SAMPLING_PARAMS",
    "Family",
    "Quirks",
    "cache_read_path",
    "key_is_set",
    "mark_cache_prefix",
    "package_installed",
    "provider_of",
    "quirks_for",
    "remember_shared_prefix",
    "request_settings",
    "structured_method",
]

SAMPLING_PARAMS = ("temperature", "top_p")
"""The sampling settings of the ``llm`` section, in the order they win a conflict."""

StructuredVia = Literal["json_schema", "function_calling"]

CACHE_READ = ("input_token_details", "cache_read")
"""Where LangChain's ``usage_metadata`` keeps the input tokens read from a prompt cache."""


@dataclass(frozen=True)
class Quirks:
    """What one provider needs (see the module docstring).

    Attributes:
        provider: ``init_chat_model``'s provider name (the model string's prefix).
        package: the integration package on PyPI.
        module: its import name.
        extra: the ``evoduet-graph`` extra that installs it (None: install the package itself).
        key_env: environment variables that hold the key, any one of them (empty: no key).
        key_files: credential files that stand for a key when one exists (AWS's shared
            credentials and config files).
        key_param: the constructor argument a key from ``llm.api_key_env`` is passed as.
        limit_param: the constructor argument of the completion limit (``llm.max_tokens``).
        timeout_param: the constructor argument of the request timeout (None: not settable).
        timeout_int: the timeout is whole seconds (Mistral, Bedrock Converse).
        retries_param: the constructor argument of the client's own retries (None: none; the
            run's retry policy retries).
        no_retries: the value of ``retries_param`` that means "no retries" (Google's SDK reads
            0 as "its default", so 1 there).
        base_url_param: the constructor argument of the endpoint (``llm.base_url``).
        sampling: the sampling parameters the provider accepts.
        exclusive: sampling parameters it refuses together (the first of `SAMPLING_PARAMS`
            that is set is kept).
        structured: structured output by the provider's tool calling or its JSON-schema mode.
        cache_read: where LangChain's usage of a reply says the input tokens served from the
            provider's prompt cache (a path into ``usage_metadata``; None: never reported).
        cache_control: the provider caches a prompt prefix only when it is marked
            (`mark_cache_prefix`); else caching is automatic or absent.
        price_provider: the price catalogue's provider id (None: not priced by provider).
        free: the model runs on the user's own machine (USD 0).
    """

    provider: str
    package: str
    module: str
    extra: str | None = None
    key_env: tuple[str, ...] = ()
    key_files: tuple[str, ...] = ()
    key_param: str = "api_key"
    limit_param: str = "max_tokens"
    timeout_param: str | None = "timeout"
    timeout_int: bool = False
    retries_param: str | None = "max_retries"
    no_retries: int = 0
    base_url_param: str | None = "base_url"
    sampling: frozenset[str] = frozenset(SAMPLING_PARAMS)
    exclusive: frozenset[str] = frozenset()
    structured: StructuredVia = "function_calling"
    cache_read: tuple[str, ...] | None = CACHE_READ
    cache_control: bool = False
    price_provider: str | None = None
    free: bool = False

    @property
    def install(self) -> str:
        """The pip command that installs the integration package."""
        if self.extra is not None:
            return f"pip install 'evoduet-graph[{self.extra}]'"
        return f"pip install {self.package}"


_AWS_KEY_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
)
_AWS_KEY_FILES = ("~/.aws/credentials", "~/.aws/config")


def _q(provider: str, package: str, module: str, **kwargs: Any) -> Quirks:
    return Quirks(provider=provider, package=package, module=module, **kwargs)


_BEDROCK: dict[str, Any] = {
    "package": "langchain-aws",
    "module": "langchain_aws",
    "extra": "bedrock",
    "key_env": _AWS_KEY_ENV,
    "key_files": _AWS_KEY_FILES,
    "key_param": "aws_secret_access_key",
    "retries_param": None,  # botocore's own retry mode
    "price_provider": "aws",
}
"""What both Bedrock clients (Converse and InvokeModel) share."""

PROVIDERS: dict[str, Quirks] = {
    q.provider: q
    for q in (
        _q(
            "openai",
            "langchain-openai",
            "langchain_openai",
            key_env=("OPENAI_API_KEY",),
            structured="json_schema",
            price_provider="openai",
        ),
        _q(
            "anthropic",
            "langchain-anthropic",
            "langchain_anthropic",
            extra="anthropic",
            key_env=("ANTHROPIC_API_KEY",),
            # Claude Opus 4.1, Sonnet 4.5 and later refuse both at once; older ones accept it,
            # but one of them is all a run needs
            exclusive=frozenset(SAMPLING_PARAMS),
            cache_control=True,
            price_provider="anthropic",
        ),
        _q(
            "google_genai",
            "langchain-google-genai",
            "langchain_google_genai",
            extra="google",
            key_env=("GOOGLE_API_KEY", "GEMINI_API_KEY"),
            limit_param="max_output_tokens",
            no_retries=1,
            structured="json_schema",
            price_provider="google",
        ),
        _q(
            "ollama",
            "langchain-ollama",
            "langchain_ollama",
            extra="ollama",
            limit_param="num_predict",
            timeout_param=None,  # set through the client (`request_settings`)
            retries_param=None,
            structured="json_schema",
            cache_read=None,
            free=True,
        ),
        _q("bedrock_converse", **_BEDROCK, timeout_int=True),
        _q("bedrock", **_BEDROCK, timeout_param=None, base_url_param="endpoint_url"),
        _q(
            "mistralai",
            "langchain-mistralai",
            "langchain_mistralai",
            extra="mistral",
            key_env=("MISTRAL_API_KEY",),
            timeout_int=True,
            price_provider="mistral",
        ),
        _q(
            "groq",
            "langchain-groq",
            "langchain_groq",
            extra="groq",
            key_env=("GROQ_API_KEY",),
            price_provider="groq",
        ),
        _q(
            "azure_openai",
            "langchain-openai",
            "langchain_openai",
            key_env=("AZURE_OPENAI_API_KEY",),
            base_url_param="azure_endpoint",
            structured="json_schema",
            price_provider="azure",
        ),
        _q(
            "deepseek",
            "langchain-deepseek",
            "langchain_deepseek",
            key_env=("DEEPSEEK_API_KEY",),
            base_url_param="api_base",
            price_provider="deepseek",
        ),
        _q(
            "xai",
            "langchain-xai",
            "langchain_xai",
            key_env=("XAI_API_KEY",),
            price_provider="x-ai",
        ),
        _q(
            "fireworks",
            "langchain-fireworks",
            "langchain_fireworks",
            key_env=("FIREWORKS_API_KEY",),
            price_provider="fireworks",
        ),
        _q(
            "together",
            "langchain-together",
            "langchain_together",
            key_env=("TOGETHER_API_KEY",),
            price_provider="together",
        ),
        _q("cohere", "langchain-cohere", "langchain_cohere", key_env=("COHERE_API_KEY",)),
        _q(
            "perplexity",
            "langchain-perplexity",
            "langchain_perplexity",
            key_env=("PPLX_API_KEY",),
            price_provider="perplexity",
        ),
        _q(
            "huggingface",
            "langchain-huggingface",
            "langchain_huggingface",
            key_env=("HUGGINGFACEHUB_API_TOKEN", "HF_TOKEN"),
            key_param="huggingfacehub_api_token",
        ),
        _q("nvidia", "langchain-nvidia-ai-endpoints", "langchain_nvidia_ai_endpoints"),
        _q("google_vertexai", "langchain-google-vertexai", "langchain_google_vertexai"),
        _q(
            "google_anthropic_vertex",
            "langchain-google-vertexai",
            "langchain_google_vertexai",
            exclusive=frozenset(SAMPLING_PARAMS),
        ),
        _q("azure_ai", "langchain-azure-ai", "langchain_azure_ai"),
        _q("ibm", "langchain-ibm", "langchain_ibm", key_env=("WATSONX_APIKEY",)),
        _q("upstage", "langchain-upstage", "langchain_upstage", key_env=("UPSTAGE_API_KEY",)),
    )
}


try:  # a private table of langchain's: `_builtin_providers` reads the provider names off it
    from langchain.chat_models.base import _BUILTIN_PROVIDERS
except ImportError:  # another langchain layout: the table above is what is known
    _BUILTIN_PROVIDERS = {}


def _builtin_providers() -> dict[str, str]:
    """``init_chat_model``'s providers → the module of their chat model class."""
    return {name: spec[0].split(".", 1)[0] for name, spec in _BUILTIN_PROVIDERS.items()}


for _name, _module in _builtin_providers().items():
    if _name not in PROVIDERS:  # no quirk known: LangChain's defaults, no key checked here
        PROVIDERS[_name] = _q(_name, _module.replace("_", "-"), _module)
"""Every provider ``init_chat_model`` builds, by its name: the table above, and the rest of
``init_chat_model``'s providers with the defaults. Providers without a key variable here
(Vertex AI, Azure AI, NVIDIA, ...) authenticate through their own credential chain, which the
integration checks when the model is built or at the first call."""


@dataclass(frozen=True)
class Family:
    """A model family of one provider whose quirks differ from the provider's.

    Attributes:
        provider: the provider.
        pattern: a regular expression the bare model name matches (from its start).
        changes: the `Quirks` fields that differ.
        why: what the provider does with these models.
    """

    provider: str
    pattern: str
    changes: Mapping[str, Any] = field(default_factory=dict)
    why: str = ""


FAMILIES: tuple[Family, ...] = (
    Family(
        "openai",
        r"(o1|o3|o4|gpt-5)(?![\w.]*-chat)",
        {"sampling": frozenset()},
        "OpenAI's reasoning models refuse sampling parameters other than the defaults",
    ),
    Family(
        "azure_openai",
        r"(o1|o3|o4|gpt-5)(?![\w.]*-chat)",
        {"sampling": frozenset()},
        "OpenAI's reasoning models refuse sampling parameters other than the defaults",
    ),
    Family(
        "bedrock_converse",
        r"([a-z]+\.)?anthropic\.",
        {"exclusive": frozenset(SAMPLING_PARAMS)},
        "Claude on Bedrock refuses temperature together with top_p, as on Anthropic's API",
    ),
    Family(
        "bedrock",
        r"([a-z]+\.)?anthropic\.",
        {"exclusive": frozenset(SAMPLING_PARAMS)},
        "Claude on Bedrock refuses temperature together with top_p, as on Anthropic's API",
    ),
    Family(
        "groq",
        r"(openai/gpt-oss|qwen/qwen3|deepseek-r1)",
        {"structured": "json_schema"},
        "Groq's JSON-schema mode serves these models; others answer through tool calling",
    ),
)


def package_installed(quirks: Quirks) -> bool:
    """Whether the provider's integration package can be imported (nothing is imported)."""
    try:
        return importlib.util.find_spec(quirks.module) is not None
    except (ImportError, ValueError, AttributeError):  # a module set to None: not installed
        return False


def key_is_set(quirks: Quirks) -> bool:
    """Whether one of the provider's key variables is set (True when it needs none).

    A credential file of `Quirks.key_files` counts too (AWS's default profile).
    """
    if not quirks.key_env or any(os.environ.get(name) for name in quirks.key_env):
        return True
    return any(Path(name).expanduser().is_file() for name in quirks.key_files)


def provider_of(model: str) -> str | None:
    """The provider of a model string (None: ``local``, ``python:`` or no known provider)."""
    prefix, sep, _ = model.strip().partition(":")
    prefix = prefix.strip().lower()
    return prefix if sep and prefix in PROVIDERS else None


def quirks_for(provider: str, model: str = "") -> Quirks:
    """The quirks of ``provider`` for the bare model name ``model`` (its family's, if any).

    Raises:
        KeyError: an unknown provider.
    """
    quirks = PROVIDERS[provider]
    name = model.strip().lower()
    for family in FAMILIES:
        if family.provider == provider and re.match(family.pattern, name):
            quirks = replace(quirks, **family.changes)
    return quirks


@dataclass(frozen=True)
class RequestSettings:
    """The constructor arguments of one provider's chat model, and what was left out.

    Attributes:
        kwargs: keyword arguments for ``init_chat_model`` (besides the model and provider).
        dropped: one line per setting left out because the provider refuses it.
    """

    kwargs: dict[str, Any]
    dropped: tuple[str, ...] = ()


def request_settings(
    quirks: Quirks,
    *,
    sampling: Mapping[str, float | None],
    max_tokens: int,
    timeout_s: float,
    base_url: str | None = None,
) -> RequestSettings:
    """The ``llm`` settings as ``quirks.provider``'s constructor arguments.

    Args:
        quirks: the provider's (and model family's) quirks.
        sampling: ``temperature``, ``top_p`` (None: not set).
        max_tokens: the completion limit, passed as ``quirks.limit_param``.
        timeout_s: the request timeout (Ollama: its HTTP client's ``timeout``).
        base_url: the endpoint (None: the provider's own).

    Returns:
        The arguments, and a line for each sampling setting the provider refuses (not set
        for it, or refused together with one already sent).
    """
    kwargs: dict[str, Any] = {quirks.limit_param: max_tokens}
    dropped: list[str] = []
    sent: list[str] = []
    for name in SAMPLING_PARAMS:
        value = sampling.get(name)
        if value is None:
            continue
        if name not in quirks.sampling:
            dropped.append(f"{name}={value:g} (the model accepts no {name})")
            continue
        clash = [s for s in sent if s in quirks.exclusive and name in quirks.exclusive]
        if clash:
            dropped.append(f"{name}={value:g} (refused together with {clash[0]})")
            continue
        kwargs[name] = value
        sent.append(name)
    if quirks.timeout_param is not None:
        kwargs[quirks.timeout_param] = max(1, round(timeout_s)) if quirks.timeout_int else timeout_s
    elif quirks.provider == "ollama":
        kwargs["client_kwargs"] = {"timeout": timeout_s}
    if quirks.retries_param is not None:
        # the run's RetryPolicy retries, within the per-call deadline
        kwargs[quirks.retries_param] = quirks.no_retries
    if base_url and quirks.base_url_param is not None:
        kwargs[quirks.base_url_param] = base_url
    return RequestSettings(kwargs=kwargs, dropped=tuple(dropped))


def _ls_provider(llm: Any) -> tuple[str | None, str]:
    """LangChain's provider name and model name of a chat model (its tracing parameters)."""
    try:
        params = llm._get_ls_params()
    except Exception:  # noqa: BLE001 - a user's model without tracing parameters
        return None, ""
    provider = params.get("ls_provider")
    model = params.get("ls_model_name")
    return (
        provider if isinstance(provider, str) else None,
        model if isinstance(model, str) else "",
    )


_LS_ALIASES = {
    "amazon_bedrock": "bedrock_converse",
    "mistral": "mistralai",
    "azure": "azure_openai",
}
"""LangChain's tracing provider names (``ls_provider``) that differ from the model string's."""


def _quirks_of_model(llm: Any) -> Quirks | None:
    provider, model = _ls_provider(llm)
    provider = _LS_ALIASES.get(provider or "", provider)
    if provider not in PROVIDERS:
        return None
    return quirks_for(provider, model)


def cache_read_path(ls_provider: str | None) -> tuple[str, ...] | None:
    """Where a reply of the provider LangChain calls ``ls_provider`` says its cached input.

    `CACHE_READ` for a provider no row of `PROVIDERS` claims (the embedded model, a user's
    model, an OpenAI-compatible server); None for a provider that reports none (Ollama).
    """
    provider = _LS_ALIASES.get(ls_provider or "", ls_provider)
    if provider not in PROVIDERS:
        return CACHE_READ
    return PROVIDERS[provider].cache_read


def structured_method(llm: Any) -> StructuredVia:
    """How ``llm`` gives structured output natively: ``json_schema`` or ``function_calling``.

    By the quirks of the provider the model reports (``ls_provider``); ``json_schema`` for a
    model no provider of `PROVIDERS` claims (the embedded model's grammar, test fakes).
    """
    quirks = _quirks_of_model(llm)
    return quirks.structured if quirks is not None else "json_schema"


CACHE_CONTROL = {"type": "ephemeral"}
"""Anthropic's marker of a prompt prefix to cache (five minutes)."""

_SHARED_PREFIXES: deque[str] = deque(maxlen=32)
_SHARED_LOCK = threading.Lock()
_MIN_PREFIX_CHARS = 200  # a shorter context is not worth a cache breakpoint


def remember_shared_prefix(text: str) -> None:
    """Note the iteration context c_t that this iteration's user messages will start with.

    `evoduet_graph.prompts.descriptor.context_text` calls it for every context it renders;
    `mark_cache_prefix` then ends a cache block exactly where the context ends. The last 32
    contexts are kept (iterations in flight render several at once).
    """
    text = text.rstrip()
    if len(text) >= _MIN_PREFIX_CHARS:
        with _SHARED_LOCK:
            if text not in _SHARED_PREFIXES:
                _SHARED_PREFIXES.append(text)


def _shared_prefix_of(text: str) -> str | None:
    with _SHARED_LOCK:
        found = [p for p in _SHARED_PREFIXES if text.startswith(p) and len(text) > len(p)]
    return max(found, key=len) if found else None


def mark_cache_prefix(llm: Any, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with the shared prefix marked for a provider that caches only on request.

    Every call of an iteration starts with the same system message (`prompts/system.md`,
    equal for the whole run) and a user message that opens with the iteration's context c_t
    (docs/methods.md "Prompt order and prompt caching"). For a provider with
    ``cache_control`` (Anthropic) the system message becomes one text block carrying
    ``cache_control: ephemeral``, and the first user message is split into two text blocks,
    the context (marked the same way: `remember_shared_prefix`) and the node's own part, so the
    gate, the inner loop and the mutation read both from the cache after the first call. The
    text sent is unchanged; other providers get ``messages`` as they are.
    """
    quirks = _quirks_of_model(llm)
    if quirks is None or not quirks.cache_control:
        return list(messages)
    out = list(messages)
    system_done = user_done = False
    for i, message in enumerate(out):
        if not isinstance(message.content, str):
            continue
        if isinstance(message, SystemMessage) and not system_done:
            block = {"type": "text", "text": message.content, "cache_control": CACHE_CONTROL}
            out[i] = message.model_copy(update={"content": [block]})
            system_done = True
        elif isinstance(message, HumanMessage) and not user_done:
            user_done = True
            prefix = _shared_prefix_of(message.content)
            if prefix is not None:
                blocks = [
                    {"type": "text", "text": prefix, "cache_control": CACHE_CONTROL},
                    {"type": "text", "text": message.content[len(prefix) :]},
                ]
                out[i] = message.model_copy(update={"content": blocks})
    return out

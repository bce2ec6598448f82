"""Chat-model factory: `LLMConfig` → a LangChain `BaseChatModel` (docs/design.md §4).

Model strings:

* ``local`` — the embedded Qwen2.5-Coder-1.5B GGUF (`evoduet_graph.llm.local`), the default;
* ``openai:<model>`` — ``ChatOpenAI`` against any OpenAI-compatible endpoint (OpenAI,
  OpenRouter, vLLM, Ollama, llama.cpp server); ``base_url`` from the config or
  ``$OPENAI_BASE_URL``, key from ``$<api_key_env>`` (none needed with a base URL);
* ``<provider>:<model>`` — any other provider LangChain's ``init_chat_model`` knows
  (``anthropic:claude-...``, ``google_genai:gemini-...``, ``ollama:qwen2.5-coder:7b``,
  ``bedrock_converse:...``), built by ``init_chat_model`` with the provider's quirks applied
  (`evoduet_graph.llm.providers`: the completion limit's name, the sampling parameters it
  accepts, its key variable and integration package);
* ``python:<module>:<factory>`` — a chat model of the user's own: a ``BaseChatModel`` or a
  function with no arguments returning one (the escape hatch the search backends have as
  ``langchain:<module>:<factory>``);
* a non-empty ``llm.models`` list — a weighted ensemble of such models
  (`evoduet_graph.llm.ensemble.EnsembleChatModel`), each member's unset fields taken from
  ``llm``; ``task`` stands for the task config's models and is resolved by
  `evoduet_graph.tasks.settings` before the model is built.

Construction makes no network call; a dead endpoint or a bad key shows up at the first request
(as `LLMCallError` through `structured_call` / `invoke_text`). A missing integration package
or key is an `LLMConfigError` of one line (the extra to install, the variable to set), raised
before a run writes anything. A sampling setting the provider refuses is left out with one
warning when the model is built.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from langchain.chat_models import init_chat_model
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI

from evoduet_graph.config import LLMConfig, WeightedModelConfig
from evoduet_graph.errors import UserError
from evoduet_graph.llm import local
from evoduet_graph.llm.ensemble import EnsembleChatModel
from evoduet_graph.llm.providers import (
    PROVIDERS,
    Quirks,
    key_is_set,
    package_installed,
    quirks_for,
    request_settings,
)
from evoduet_graph.plugins import PluginError, build_plugin, import_attribute

__all__ = [
    "VALID_MODEL_FORMS",
    "LLMConfigError",
    "check_model",
    "make_chat_model",
    "parse_model_string",
    "unsent_message",
    "unsent_settings",
]

logger = logging.getLogger(__name__)

PLUGIN_PREFIX = "python"
"""The model string prefix of a user's own chat model (``python:<module>:<factory>``)."""

VALID_MODEL_FORMS = (
    "'local' (embedded Qwen2.5-Coder-1.5B, needs the [local] extra)",
    (
        "'openai:<model>' (any OpenAI-compatible endpoint, e.g. openai:gpt-4o-mini; "
        "with llm.base_url / $OPENAI_BASE_URL for OpenRouter, vLLM, Ollama, llama.cpp server)"
    ),
    "'<provider>:<model>' for a provider of LangChain's init_chat_model ("
    + ", ".join(p for p in PROVIDERS if p != "openai")
    + "), e.g. anthropic:claude-sonnet-4-5",
    "'python:<module>:<factory>' (a chat model of your own)",
)

# Sent as the key to keyless OpenAI-compatible servers (vLLM, Ollama, llama.cpp server).
PLACEHOLDER_API_KEY = "not-needed"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
"""``llm.api_key_env``'s default: other providers then read their own key variable."""


class LLMConfigError(UserError, ValueError):
    """The `LLMConfig` cannot produce a chat model; the message says what to set."""


def parse_model_string(model: str) -> tuple[str, str | None]:
    """Split a model string into ``(provider, model_name)``.

    Returns:
        ``("local", None)``, ``("<provider>", "<model>")`` for a provider of
        `evoduet_graph.llm.providers.PROVIDERS` (everything after the first colon is the
        model: ``ollama:qwen2.5-coder:7b`` is ``qwen2.5-coder:7b``), or
        ``("python", "<module>:<factory>")``.

    Raises:
        LLMConfigError: an unknown provider prefix or an empty model name.
    """
    text = (model or "").strip()
    if text.lower() == "local":
        return "local", None
    provider, sep, name = text.partition(":")
    provider = provider.strip().lower()
    if sep and (provider in PROVIDERS or provider == PLUGIN_PREFIX):
        if not name.strip():
            example = "openai:gpt-4o-mini" if provider == "openai" else f"{provider}:<model>"
            raise LLMConfigError(
                f"model {model!r} names no model after '{provider}:'; e.g. {example}"
            )
        return provider, name.strip()
    raise LLMConfigError(f"unknown model {model!r}; valid forms: " + "; ".join(VALID_MODEL_FORMS))


def shares_endpoint(model: str, other: str) -> bool:
    """Whether ``other`` (a role's or ensemble member's model) inherits ``model``'s base URL.

    ``openai:`` models share the run's endpoint (an OpenAI-compatible server serves several
    models), and so do models of ``model``'s own provider (a gateway of that provider);
    another provider's model keeps its own endpoint.
    """
    try:
        mine, theirs = parse_model_string(model)[0], parse_model_string(other)[0]
    except LLMConfigError:
        return False
    return theirs == "openai" or (theirs == mine and theirs not in ("local", PLUGIN_PREFIX))


def member_config(cfg: LLMConfig, member: WeightedModelConfig) -> LLMConfig:
    """The ``llm`` settings of one ``llm.models`` member: its own fields over ``cfg``'s."""
    return cfg.model_copy(
        update={
            "model": member.model,
            "models": [],
            "roles": {},
            "base_url": member.base_url
            or (cfg.base_url if shares_endpoint(cfg.model, member.model) else None),
            "api_key_env": member.api_key_env or cfg.api_key_env,
            "temperature": cfg.temperature if member.temperature is None else member.temperature,
            "max_tokens": member.max_tokens or cfg.max_tokens,
        }
    )


def _require_package(model: str, quirks: Quirks) -> None:
    """Raise a one-line `LLMConfigError` when the provider's integration package is missing."""
    if not package_installed(quirks):
        raise LLMConfigError(
            f"model {model!r} needs the {quirks.package} package: {quirks.install}"
        )


def _key_arguments(cfg: LLMConfig, quirks: Quirks) -> dict[str, Any]:
    """The key as a constructor argument (a custom ``llm.api_key_env``), after checking it.

    With the default ``api_key_env`` the provider's own variables are checked and the
    integration reads the key itself.

    Raises:
        LLMConfigError: no variable holding the key is set (one line naming it).
    """
    if cfg.api_key_env != DEFAULT_KEY_ENV:
        key = os.environ.get(cfg.api_key_env)
        if not key:
            raise LLMConfigError(
                f"model {cfg.model!r} needs an API key: ${cfg.api_key_env} is not set"
            )
        return {quirks.key_param: key}
    if not key_is_set(quirks):
        names = " or ".join(f"${name}" for name in quirks.key_env)
        raise LLMConfigError(
            f"model {cfg.model!r} needs an API key: {names} is not set. "
            f"Set {quirks.key_env[0]} or --model local."
        )
    return {}


def check_model(cfg: LLMConfig) -> None:
    """Check that ``cfg.model`` can be built here: its form, package and key (nothing is built).

    The preflight of a model string (`evoduet_graph.api.validate_model` runs it for every
    configured model before a run writes anything).

    Raises:
        LLMConfigError: an unknown form, a missing integration package (naming the extra)
            or a missing key (naming the variable), each in one line.
    """
    provider, name = parse_model_string(cfg.model)
    if provider in ("local", PLUGIN_PREFIX):
        return
    if provider == "openai":
        _openai_key(cfg)
        return
    quirks = quirks_for(provider, name or "")
    _require_package(cfg.model, quirks)
    _key_arguments(cfg, quirks)


def _openai_key(cfg: LLMConfig) -> tuple[str | None, str]:
    """``(base_url, api_key)`` of an ``openai:`` model (the placeholder key with a base URL)."""
    base_url = cfg.base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = os.environ.get(cfg.api_key_env) or None
    if api_key is None:
        if base_url is None:
            raise LLMConfigError(
                f"model {cfg.model!r} needs an API key: ${cfg.api_key_env} is not set. "
                f"Set {cfg.api_key_env} or --model local (or set llm.base_url to a keyless "
                "OpenAI-compatible server such as vLLM or Ollama)."
            )
        api_key = PLACEHOLDER_API_KEY
    return base_url, api_key


def unsent_settings(cfg: LLMConfig) -> tuple[str, ...]:
    """The sampling settings of ``cfg`` its model's provider refuses, one line each.

    What `make_chat_model` leaves out of the model it builds (and warns about once); empty
    for ``local``, ``python:`` and an unknown model string.
    """
    try:
        provider, name = parse_model_string(cfg.model)
    except LLMConfigError:
        return ()
    if provider in ("local", PLUGIN_PREFIX):
        return ()
    settings = request_settings(
        quirks_for(provider, name or ""),
        sampling=_sampling(cfg),
        max_tokens=cfg.max_tokens,
        timeout_s=cfg.timeout_s,
    )
    return settings.dropped


def unsent_message(model: str, dropped: Sequence[str]) -> str:
    """The one warning about settings left out of ``model``'s requests."""
    return f"model {model}: not sent: {'; '.join(dropped)}"


def _warn_dropped(model: str, dropped: Sequence[str]) -> None:
    if dropped:
        logger.warning("%s", unsent_message(model, dropped))


def _sampling(cfg: LLMConfig) -> dict[str, float | None]:
    return {"temperature": cfg.temperature, "top_p": cfg.top_p}


def _plugin_model(
    cfg: LLMConfig, spec: str, callbacks: Sequence[BaseCallbackHandler] | None
) -> BaseChatModel:
    """The user's own chat model ``python:<module>:<factory>`` names."""
    try:
        target = import_attribute(
            spec, what="llm.model", example="python:my_models:make_chat_model"
        )
        model: BaseChatModel = build_plugin(
            target,
            kinds=(BaseChatModel,),
            what="llm.model",
            spec=cfg.model,
            label="a LangChain chat model",
        )
    except PluginError as exc:
        raise LLMConfigError(str(exc)) from None
    if callbacks:
        model.callbacks = list(callbacks)
    return model


def _provider_model(
    cfg: LLMConfig,
    provider: str,
    name: str,
    callbacks: Sequence[BaseCallbackHandler] | None,
) -> BaseChatModel:
    """A chat model of ``provider`` built by LangChain's ``init_chat_model``."""
    quirks = quirks_for(provider, name)
    _require_package(cfg.model, quirks)
    kwargs = _key_arguments(cfg, quirks)
    settings = request_settings(
        quirks,
        sampling=_sampling(cfg),
        max_tokens=cfg.max_tokens,
        timeout_s=min(cfg.timeout_s, cfg.call_deadline_s),
        base_url=cfg.base_url,
    )
    _warn_dropped(cfg.model, settings.dropped)
    kwargs.update(settings.kwargs)
    if callbacks:
        kwargs["callbacks"] = list(callbacks)
    try:
        model: BaseChatModel = init_chat_model(name, model_provider=provider, **kwargs)
    except ImportError:
        raise LLMConfigError(
            f"model {cfg.model!r} needs the {quirks.package} package: {quirks.install}"
        ) from None
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        text = " ".join(str(exc).split())[:300]
        raise LLMConfigError(f"model {cfg.model!r} cannot be built: {text}") from None
    return model


def make_chat_model(
    cfg: LLMConfig,
    *,
    callbacks: Sequence[BaseCallbackHandler] | None = None,
    seed: int = 0,
) -> BaseChatModel:
    """Build the chat model a run uses.

    Args:
        cfg: the ``llm`` section of the run configuration.
        callbacks: handlers attached to the model itself, e.g. a `UsageTracker` (they see
            every call, whatever config the call carries).
        seed: the run's ``seed``: it seeds the ensemble's member choice (``llm.models``) and
            the embedded model's stream of sampling seeds (`LocalChatModel.seed_sampling`).

    Returns:
        ``ChatOpenAI`` for ``openai:<model>`` (``temperature``, ``max_tokens``,
        ``timeout=min(cfg.timeout_s, cfg.call_deadline_s)``, ``max_retries=0``: the run's
        `RetryPolicy` retries ``cfg.max_retries`` times within the deadline); the provider's
        chat model from ``init_chat_model`` for ``<provider>:<model>``, with the same limit,
        deadline and retries under the provider's own argument names
        (`evoduet_graph.llm.providers.request_settings`); the user's model for
        ``python:<module>:<factory>``; or the embedded `LocalChatModel` for ``local``.

    Raises:
        LLMConfigError: unknown model form; a missing integration package or key (one line
            naming the extra or the variable); ``openai:`` with ``$<api_key_env>`` unset and
            no base URL (neither ``cfg.base_url`` nor ``$OPENAI_BASE_URL``).
        LocalModelError: ``local`` but the embedded model cannot be assembled or loaded.
    """
    if cfg.models:
        members = []
        for member in cfg.models:
            member_cfg = member_config(cfg, member)
            members.append((member.model, make_chat_model(member_cfg, seed=seed), member.weight))
        ensemble = EnsembleChatModel.from_members(members, seed=seed)
        if callbacks:
            ensemble.callbacks = list(callbacks)
        return ensemble
    if cfg.model.strip().lower() == "task":
        raise LLMConfigError(
            "model 'task' uses the task folder's config.yaml model settings, but none were "
            "resolved (the task config names no models); pass another --model"
        )
    provider, name = parse_model_string(cfg.model)
    if provider == "local":  # looked up on the module at call time, so tests can replace it
        embedded = local.make_local_chat_model(cfg, callbacks=callbacks)
        embedded.seed_sampling(seed)
        return embedded
    if provider == PLUGIN_PREFIX:
        return _plugin_model(cfg, name or "", callbacks)
    if provider != "openai":
        return _provider_model(cfg, provider, name or "", callbacks)

    base_url, api_key = _openai_key(cfg)
    settings = request_settings(
        quirks_for("openai", name or ""),
        sampling=_sampling(cfg),
        max_tokens=cfg.max_tokens,
        timeout_s=min(cfg.timeout_s, cfg.call_deadline_s),
    )
    _warn_dropped(cfg.model, settings.dropped)
    kwargs: dict[str, Any] = {"model": name, "base_url": base_url, "api_key": api_key}
    # the completion limit, sampling and the per-call deadline (`RetryPolicy`): one request
    # never outlasts it, and retries are made by the run's RetryPolicy, which starts none
    # after it (a silent endpoint would otherwise cost timeout × (1 + max_retries) per call)
    kwargs.update(settings.kwargs)
    if base_url is not None:
        # langchain-openai sends the limit as `max_completion_tokens`, which OpenAI-compatible
        # servers such as llama.cpp's and older vLLM ignore; send the classic key as well.
        kwargs["extra_body"] = {"max_tokens": cfg.max_tokens}
    if callbacks:
        kwargs["callbacks"] = list(callbacks)
    return ChatOpenAI(**kwargs)

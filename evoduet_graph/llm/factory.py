"""Chat-model factory: `LLMConfig` → a LangChain `BaseChatModel` (docs/design.md §4).

Model strings:

* ``local`` — the embedded Qwen2.5-Coder-1.5B GGUF (`evoduet_graph.llm.local`);
* ``openai:<model>`` — ``ChatOpenAI`` against any OpenAI-compatible endpoint (OpenAI,
  OpenRouter, vLLM, Ollama, llama.cpp server); ``base_url`` from the config or
  ``$OPENAI_BASE_URL``, key from ``$<api_key_env>``;
* a non-empty ``llm.models`` list — a weighted ensemble of such models
  (`evoduet_graph.llm.ensemble.EnsembleChatModel`), each member's unset fields taken from
  ``llm``; ``task`` stands for the task config's models and is resolved by
  `evoduet_graph.tasks.settings` before the model is built.

Construction makes no network call; a dead endpoint or a bad key shows up at the first request
(as `LLMCallError` through `structured_call` / `invoke_text`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI

from evoduet_graph.config import LLMConfig
from evoduet_graph.errors import UserError
from evoduet_graph.llm import local
from evoduet_graph.llm.ensemble import EnsembleChatModel

__all__ = ["VALID_MODEL_FORMS", "LLMConfigError", "make_chat_model", "parse_model_string"]

VALID_MODEL_FORMS = (
    "'local' (embedded Qwen2.5-Coder-1.5B, needs the [local] extra)",
    (
        "'openai:<model>' (any OpenAI-compatible endpoint, e.g. openai:gpt-4o-mini; "
        "with llm.base_url / $OPENAI_BASE_URL for OpenRouter, vLLM, Ollama, llama.cpp server)"
    ),
)

# Sent as the key to keyless OpenAI-compatible servers (vLLM, Ollama, llama.cpp server).
PLACEHOLDER_API_KEY = "not-needed"


class LLMConfigError(UserError, ValueError):
    """The `LLMConfig` cannot produce a chat model; the message says what to set."""


def parse_model_string(model: str) -> tuple[str, str | None]:
    """Split a model string into ``(provider, model_name)``.

    Returns:
        ``("local", None)`` or ``("openai", "<model>")``.

    Raises:
        LLMConfigError: an unknown provider prefix or an empty model name.
    """
    text = (model or "").strip()
    if text.lower() == "local":
        return "local", None
    provider, sep, name = text.partition(":")
    if sep and provider.strip().lower() == "openai":
        if not name.strip():
            raise LLMConfigError(
                f"model {model!r} names no model after 'openai:'; e.g. openai:gpt-4o-mini"
            )
        return "openai", name.strip()
    raise LLMConfigError(f"unknown model {model!r}; valid forms: " + "; ".join(VALID_MODEL_FORMS))


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
        `RetryPolicy` retries ``cfg.max_retries`` times within the deadline) or the embedded
        `LocalChatModel` for ``local``.

    Raises:
        LLMConfigError: unknown model form; or ``openai:`` with ``$<api_key_env>`` unset and
            no base URL (neither ``cfg.base_url`` nor ``$OPENAI_BASE_URL``).
        LocalModelError: ``local`` but the embedded model cannot be assembled or loaded.
    """
    if cfg.models:
        members = []
        for member in cfg.models:
            member_cfg = cfg.model_copy(
                update={
                    "model": member.model,
                    "models": [],
                    "base_url": member.base_url or cfg.base_url,
                    "api_key_env": member.api_key_env or cfg.api_key_env,
                    "temperature": cfg.temperature
                    if member.temperature is None
                    else member.temperature,
                    "max_tokens": member.max_tokens or cfg.max_tokens,
                }
            )
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
    kwargs: dict[str, Any] = {
        "model": name,
        "base_url": base_url,
        "api_key": api_key,
        "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens,
        # the per-call deadline (`RetryPolicy`): one request never outlasts it, and retries
        # are made by the run's RetryPolicy, which starts none after it (a silent endpoint
        # would otherwise cost timeout × (1 + max_retries) per call)
        "timeout": min(cfg.timeout_s, cfg.call_deadline_s),
        "max_retries": 0,
    }
    if base_url is not None:
        # langchain-openai sends the limit as `max_completion_tokens`, which OpenAI-compatible
        # servers such as llama.cpp's and older vLLM ignore; send the classic key as well.
        kwargs["extra_body"] = {"max_tokens": cfg.max_tokens}
    if callbacks:
        kwargs["callbacks"] = list(callbacks)
    return ChatOpenAI(**kwargs)

"""Model roles: which chat model each LLM-calling node uses.

Model roles: which chat model each LLM-calling node uses (docs/design.md §4, "a per-node
role map").

``llm.roles`` maps a node name (`ROLE_NODES`) to a model: a model string (``openai:<m>``,
``anthropic:<m>``, any ``<provider>:<m>``, ``local``) or a mapping of `ROLE_FIELDS` laid over
the ``llm`` section (e.g. another ``base_url`` or ``temperature``). A cheap model can then
serve the world-knowledge layer (gate, query construction, hypothetical scoring) while a strong
one mutates. Without roles
every node uses ``llm.model`` — the paper's setting of one frozen model (§4.1), which stays the
default. Roles that resolve to the same settings share one model object (the embedded model is
loaded once).

The weighted ensemble ``llm.models`` (OpenEvolve's ``llm.models`` with weights) is the run's
model: it serves every unmapped node, and a role that names its own ``model`` leaves it (a
role mapping without ``model``, e.g. ``{temperature: 0.0}``, keeps the ensemble with that
setting).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import ValidationError

from evoduet_graph.config import ConfigError, LLMConfig
from evoduet_graph.llm.factory import (
    LLMConfigError,
    make_chat_model,
    member_config,
    parse_model_string,
    shares_endpoint,
)

ROLE_NODES = (
    "gate",
    "construct_query",
    "hypothetical_score",
    "rerank",
    "generate",
    "revise_strategy",
)
"""Node names ``llm.roles`` may map (``revise_strategy``: the EvoX strategy revision)."""

ROLE_FIELDS = (
    "model",
    "base_url",
    "api_key_env",
    "temperature",
    "top_p",
    "max_tokens",
    "timeout_s",
    "max_retries",
)
"""``llm`` keys a role given as a mapping may set."""


def role_config(cfg: LLMConfig, role: str) -> LLMConfig:
    """The ``llm`` settings of ``role``.

    ``cfg`` with the role's model or fields laid over it (``cfg`` itself when the role is not
    mapped).

    Raises:
        ValueError: ``role`` is not one of `ROLE_NODES`.
    """
    if role not in ROLE_NODES:
        raise ValueError(f"unknown model role {role!r}; roles: {', '.join(ROLE_NODES)}")
    value = cfg.roles.get(role)
    if value is None:
        return cfg
    update: dict[str, Any] = {"model": value} if isinstance(value, str) else dict(value)
    if "model" in update:
        update["models"] = []  # a role's own model replaces the ensemble (``llm.models``)
        if "base_url" not in update and not shares_endpoint(cfg.model, update["model"]):
            update["base_url"] = None
    return type(cfg).model_validate({**cfg.model_dump(), **update, "roles": {}})


def check_roles(cfg: LLMConfig) -> None:
    """Check ``llm.roles`` when a run starts: node names, keys and model strings.

    Nothing is built and nothing is sent.

    Raises:
        ConfigError: a role that is no node of `ROLE_NODES`, a mapping key outside
            `ROLE_FIELDS`, a value the ``llm`` section refuses, or an unknown model string
            (the message names the role).
    """
    for role, spec in cfg.roles.items():
        if role not in ROLE_NODES:
            raise ConfigError(f"llm.roles: unknown role {role!r}; roles: {', '.join(ROLE_NODES)}")
        unknown = sorted(set(spec) - set(ROLE_FIELDS)) if isinstance(spec, dict) else []
        if unknown:
            raise ConfigError(
                f"llm.roles: role {role!r}: unknown key(s) {', '.join(unknown)}; allowed: "
                f"{', '.join(ROLE_FIELDS)}"
            )
        try:
            parse_model_string(role_config(cfg, role).model)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"llm.roles: role {role!r}: {where}: {err['msg']}") from None
        except LLMConfigError as exc:
            raise ConfigError(f"llm.roles: role {role!r}: {exc}") from None


def configured_models(cfg: LLMConfig) -> list[LLMConfig]:
    """The settings of every model a run builds.

    The ensemble's members (or ``llm.model``) and each role's own model, in that order (roles
    with the same settings once); a member's unset fields come from ``cfg``
    (`evoduet_graph.llm.factory.member_config`).
    """
    out = [member_config(cfg, m) for m in cfg.models] or [cfg.model_copy(update={"roles": {}})]
    seen = {_key(c) for c in out}
    for role in cfg.roles:
        rc = role_config(cfg, role)
        if _key(rc) not in seen and not rc.models:
            seen.add(_key(rc))
            out.append(rc)
    return out


def _key(cfg: LLMConfig) -> str:
    return json.dumps({**cfg.model_dump(mode="json"), "roles": {}}, sort_keys=True)


def make_role_models(
    cfg: LLMConfig,
    default: BaseChatModel,
    *,
    make: Callable[[LLMConfig], BaseChatModel] | None = None,
    seed: int = 0,
) -> dict[str, BaseChatModel]:
    """One chat model per mapped role (roles with the default's settings get ``default``).

    Args:
        cfg: the ``llm`` section.
        default: the run's model (``llm.model``), possibly injected by the caller.
        make: the factory (default `evoduet_graph.llm.make_chat_model`).
        seed: the run's seed (an ensemble kept by a role draws its members with it).

    Returns:
        ``{role: model}`` for the mapped roles only.

    Raises:
        LLMConfigError / LocalModelError: a role's model cannot be built.
    """
    if make is None:

        def make(rc: LLMConfig) -> BaseChatModel:
            return make_chat_model(rc, seed=seed)

    built: dict[str, BaseChatModel] = {_key(cfg): default}
    out: dict[str, BaseChatModel] = {}
    for role in cfg.roles:
        rc = role_config(cfg, role)
        key = _key(rc)
        if key not in built:
            built[key] = make(rc)
        out[role] = built[key]
    return out


def model_label(model: BaseChatModel) -> str:
    """A short name of a chat model for events (``model_name`` / ``model`` attribute)."""
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__

"""``llm.roles``: validation, the settings each role resolves to, shared model objects."""

from __future__ import annotations

from typing import Any

import pytest

from evoduet_graph.config import ConfigError, EvoDuetConfig, LLMConfig
from evoduet_graph.llm.roles import ROLE_NODES, check_roles, make_role_models, role_config
from tests.fakes import ScriptedChatModel


def test_roles_default_to_the_one_model() -> None:
    cfg = LLMConfig()
    assert cfg.roles == {}
    assert all(role_config(cfg, r) is cfg for r in ROLE_NODES)


def test_role_string_and_mapping_lay_over_the_llm_section() -> None:
    cfg = LLMConfig(
        model="openai:strong",
        base_url="http://127.0.0.1:9/v1",
        temperature=0.7,
        roles={"gate": "openai:cheap", "generate": {"temperature": 1.1}, "rerank": "local"},
    )
    gate = role_config(cfg, "gate")
    assert (gate.model, gate.base_url, gate.temperature) == ("openai:cheap", cfg.base_url, 0.7)
    gen = role_config(cfg, "generate")
    assert (gen.model, gen.temperature) == ("openai:strong", 1.1)
    local = role_config(cfg, "rerank")
    assert local.model == "local" and local.base_url is None
    assert role_config(cfg, "construct_query") is cfg
    with pytest.raises(ValueError, match="unknown model role 'select'"):
        role_config(cfg, "select")


def test_roles_with_the_same_settings_share_one_model() -> None:
    cfg = LLMConfig(
        model="openai:strong",
        roles={
            "gate": "openai:cheap",
            "construct_query": "openai:cheap",
            "generate": "openai:strong",
        },
    )
    built: list[str] = []

    def make(rc: LLMConfig) -> Any:
        built.append(rc.model)
        return ScriptedChatModel(responses=[])

    default = ScriptedChatModel(responses=[])
    models = make_role_models(cfg, default, make=make)
    assert built == ["openai:cheap"]  # once, and never the default's settings
    assert models["gate"] is models["construct_query"] and models["generate"] is default


@pytest.mark.parametrize(
    ("roles", "message"),
    [
        ({"mutate": "local"}, "unknown role 'mutate'; roles: gate, construct_query"),
        ({"gate": "gpt-4o"}, "role 'gate': unknown model 'gpt-4o'"),
        ({"gate": {"modle": "local"}}, "role 'gate': unknown key\\(s\\) modle"),
        ({"gate": {"temperature": 9.0}}, "role 'gate': temperature"),
    ],
)
def test_bad_roles_are_config_errors(roles: dict[str, Any], message: str) -> None:
    cfg = EvoDuetConfig().with_overrides({"llm.roles": roles})  # names are checked at setup
    with pytest.raises(ConfigError, match=message):
        check_roles(cfg.llm)


def test_a_hosted_role_pins_the_endpoint_into_the_run_config(monkeypatch) -> None:
    from evoduet_graph.driver import pin_base_url

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    local = EvoDuetConfig()
    assert pin_base_url(local).llm.base_url is None
    mixed = local.with_overrides({"llm.roles": {"gate": "openai:cheap"}})
    pinned = pin_base_url(mixed)
    assert pinned.llm.base_url == "http://127.0.0.1:8000/v1"
    assert role_config(pinned.llm, "gate").base_url == "http://127.0.0.1:8000/v1"
    assert role_config(pinned.llm, "generate").model == "local"


def test_a_role_with_its_own_model_leaves_the_ensemble() -> None:
    cfg = LLMConfig(
        model="openai:a",
        models=[{"model": "openai:a", "weight": 1.0}, {"model": "openai:b", "weight": 3.0}],
        roles={"gate": "openai:cheap", "generate": {"temperature": 0.2}},
    )
    gate = role_config(cfg, "gate")
    assert gate.model == "openai:cheap" and gate.models == []
    gen = role_config(cfg, "generate")  # no model of its own: still the ensemble
    assert [m.model for m in gen.models] == ["openai:a", "openai:b"] and gen.temperature == 0.2

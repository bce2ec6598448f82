"""Provider model strings, the quirk table, the preflight and the pricing of cached tokens."""

from __future__ import annotations

import logging
import sys

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm.factory import (
    LLMConfigError,
    check_model,
    make_chat_model,
    parse_model_string,
    shares_endpoint,
)
from evoduet_graph.llm.providers import (
    PROVIDERS,
    mark_cache_prefix,
    quirks_for,
    remember_shared_prefix,
    request_settings,
    structured_method,
)
from evoduet_graph.llm.roles import role_config
from evoduet_graph.rundir.budget import usage_cost
from evoduet_graph.rundir.pricing import model_name, price_for
from evoduet_graph.rundir.usage import UsageTotals
from tests.fakes import ScriptedChatModel

ANTHROPIC = "anthropic:claude-haiku-4-5"


def test_every_init_chat_model_provider_is_a_model_string():
    from langchain.chat_models.base import _BUILTIN_PROVIDERS

    assert set(_BUILTIN_PROVIDERS) <= set(PROVIDERS)
    for provider in _BUILTIN_PROVIDERS:
        assert parse_model_string(f"{provider}:some-model") == (provider, "some-model")


@pytest.mark.parametrize("model", ["anthropic:", "python:", "ollama: "])
def test_a_provider_without_a_model_is_refused(model):
    with pytest.raises(LLMConfigError, match="names no model"):
        parse_model_string(model)


def test_model_string_keeps_colons_of_the_model_name():
    assert parse_model_string("ollama:qwen2.5-coder:7b") == ("ollama", "qwen2.5-coder:7b")
    assert parse_model_string("Anthropic: claude-x ") == ("anthropic", "claude-x")
    assert parse_model_string("python:my_models:make") == ("python", "my_models:make")
    assert parse_model_string("local") == ("local", None)


def test_each_named_provider_has_its_extra():
    extras = {p: PROVIDERS[p].extra for p in PROVIDERS if PROVIDERS[p].extra}
    assert extras == {
        "anthropic": "anthropic",
        "google_genai": "google",
        "ollama": "ollama",
        "bedrock": "bedrock",
        "bedrock_converse": "bedrock",
        "mistralai": "mistral",
        "groq": "groq",
    }


def test_anthropic_sends_temperature_or_top_p_never_both():
    quirks = quirks_for("anthropic", "claude-sonnet-4-5")
    both = request_settings(
        quirks, sampling={"temperature": 0.3, "top_p": 0.8}, max_tokens=500, timeout_s=30
    )
    assert both.kwargs == {"max_tokens": 500, "temperature": 0.3, "timeout": 30, "max_retries": 0}
    assert both.dropped == ("top_p=0.8 (refused together with temperature)",)
    only = request_settings(quirks, sampling={"temperature": 0.3}, max_tokens=500, timeout_s=30)
    assert only.dropped == () and only.kwargs["temperature"] == 0.3


def test_each_provider_names_the_completion_limit_its_own_way():
    def limit(provider: str) -> dict[str, object]:
        settings = request_settings(
            quirks_for(provider), sampling={}, max_tokens=321, timeout_s=9, base_url="http://h"
        )
        return settings.kwargs

    assert limit("anthropic") == {
        "max_tokens": 321,
        "timeout": 9,
        "max_retries": 0,
        "base_url": "http://h",
    }
    # Google's SDK reads max_retries=0 as "its default": 1 is one attempt
    assert limit("google_genai") == {
        "max_output_tokens": 321,
        "timeout": 9,
        "max_retries": 1,
        "base_url": "http://h",
    }
    assert limit("ollama") == {
        "num_predict": 321,
        "client_kwargs": {"timeout": 9},
        "base_url": "http://h",
    }


def test_reasoning_models_get_no_sampling_parameters_and_one_warning(monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    caplog.set_level(logging.WARNING, logger="evoduet_graph.llm.factory")
    reasoning = make_chat_model(LLMConfig(model="openai:o3-mini", temperature=0.5))
    assert reasoning.temperature is None
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        "model openai:o3-mini: not sent: temperature=0.5 (the model accepts no temperature)"
    ]
    caplog.clear()
    chat = make_chat_model(LLMConfig(model="openai:gpt-4o-mini", temperature=0.5, top_p=0.9))
    assert (chat.temperature, chat.top_p) == (0.5, 0.9) and caplog.records == []


def test_structured_output_method_follows_the_provider(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    built = {
        m: make_chat_model(LLMConfig(model=m))
        for m in (ANTHROPIC, "google_genai:gemini-2.5-flash", "ollama:qwen2.5-coder:7b")
    }
    assert [structured_method(llm) for llm in built.values()] == [
        "function_calling",
        "json_schema",
        "json_schema",
    ]
    assert structured_method(ScriptedChatModel(responses=[])) == "json_schema"


def test_only_anthropic_marks_the_shared_prefix(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    context = "## Current program\n" + "\n".join(["x = 1"] * 60)
    remember_shared_prefix(context + "\n\n")  # what context_text renders
    messages = [
        SystemMessage(content="role and task"),
        HumanMessage(content=context + "\n\n## Your job now: the gate"),
    ]
    claude = make_chat_model(LLMConfig(model=ANTHROPIC))
    marked = mark_cache_prefix(claude, messages)
    ephemeral = {"type": "ephemeral"}
    assert marked[0].content == [
        {"type": "text", "text": "role and task", "cache_control": ephemeral}
    ]
    assert marked[1].content == [
        {"type": "text", "text": context, "cache_control": ephemeral},
        {"type": "text", "text": "\n\n## Your job now: the gate"},
    ]
    assert messages[0].content == "role and task"  # the caller's messages are left alone
    # a user message that does not start with a known context: the system message only
    other = mark_cache_prefix(claude, [messages[0], HumanMessage(content="short")])
    assert other[1].content == "short"
    ollama = make_chat_model(LLMConfig(model="ollama:qwen2.5-coder:7b"))
    assert mark_cache_prefix(ollama, messages) == messages


def test_preflight_names_the_extra_or_the_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match=r"\$ANTHROPIC_API_KEY is not set"):
        check_model(LLMConfig(model=ANTHROPIC))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    check_model(LLMConfig(model=ANTHROPIC))
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)
    with pytest.raises(LLMConfigError) as info:
        check_model(LLMConfig(model=ANTHROPIC))
    assert "\n" not in str(info.value)
    assert "pip install 'evoduet-graph[anthropic]'" in str(info.value)
    check_model(LLMConfig(model="ollama:qwen2.5-coder:7b"))  # no key needed


def test_a_custom_key_variable_is_passed_to_the_provider(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MY_CLAUDE_KEY", "sk-mine")
    llm = make_chat_model(LLMConfig(model=ANTHROPIC, api_key_env="MY_CLAUDE_KEY"))
    assert llm.anthropic_api_key.get_secret_value() == "sk-mine"


def _my_model() -> BaseChatModel:
    return ScriptedChatModel(responses=["mine"])


def test_python_escape_hatch_builds_the_users_model():
    llm = make_chat_model(LLMConfig(model=f"python:{__name__}:_my_model"))
    assert isinstance(llm, ScriptedChatModel)
    with pytest.raises(LLMConfigError, match="does not import"):
        make_chat_model(LLMConfig(model="python:no_such_module_here:make"))
    with pytest.raises(LLMConfigError, match="neither a LangChain chat model"):
        make_chat_model(LLMConfig(model=f"python:{__name__}:ANTHROPIC"))


def test_roles_share_the_endpoint_of_their_own_provider_only():
    assert shares_endpoint(ANTHROPIC, "anthropic:claude-opus-4-1")
    assert shares_endpoint("local", "openai:gpt-4o-mini")
    assert not shares_endpoint(ANTHROPIC, "google_genai:gemini-2.5-flash")
    cfg = LLMConfig(
        model=ANTHROPIC,
        base_url="http://gateway",
        roles={"gate": "anthropic:claude-x", "generate": "ollama:qwen2.5-coder:7b"},
    )
    assert role_config(cfg, "gate").base_url == "http://gateway"
    assert role_config(cfg, "generate").base_url is None


def test_cached_input_is_priced_at_the_cache_read_price():
    price = price_for(ANTHROPIC, base_url="http://gateway")  # a gateway keeps the price
    assert price is not None and price.source == "genai-prices"
    assert price.cache_read_per_mtok == pytest.approx(price.input_per_mtok / 10)
    full = price.cost(1_000_000, 0)
    assert price.cost(1_000_000, 0, cached_input_tokens=1_000_000) == pytest.approx(full / 10)
    assert price_for("ollama:qwen2.5-coder:7b").cost(10**6, 10**6) == 0.0
    assert model_name("ollama:qwen2.5-coder:7b") == model_name("qwen2.5-coder:7b")


def test_usage_cost_prices_an_answer_by_its_configured_provider():
    totals = UsageTotals()
    totals.add(
        {
            "event": "node",
            "node": "gate",
            "llm_calls": 2,
            "input_tokens": 2000,
            "output_tokens": 100,
            "llm_by_model": {
                "claude-haiku-4-5": {
                    "calls": 1,
                    "input_tokens": 1000,
                    "cached_input_tokens": 800,
                    "output_tokens": 50,
                },
                "qwen2.5-coder:7b": {"calls": 1, "input_tokens": 1000, "output_tokens": 50},
            },
        }
    )
    total, per_model = usage_cost(
        totals, ANTHROPIC, base_url="http://127.0.0.1:9", role_models=["ollama:qwen2.5-coder:7b"]
    )
    claude = price_for(ANTHROPIC)
    assert claude is not None
    assert per_model == {
        "claude-haiku-4-5": pytest.approx(claude.cost(1000, 50, 800)),
        "qwen2.5-coder:7b": 0.0,
    }
    assert total == pytest.approx(claude.cost(1000, 50, 800))
    assert claude.cost(1000, 50, 800) < claude.cost(1000, 50)


def test_doctor_lists_the_providers_a_run_could_use(monkeypatch):
    from evoduet_graph.doctor import check_providers

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setitem(sys.modules, "langchain_groq", None)
    found = check_providers()
    assert found.status == "OK"
    ready, no_key, missing = found.detail.split("; ")
    assert "anthropic" in ready and "ollama" in ready
    assert "google_genai ($GOOGLE_API_KEY)" in no_key
    assert "groq [groq]" in missing


def test_cached_tokens_are_read_where_the_provider_reports_them():
    from uuid import uuid4

    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, LLMResult

    from evoduet_graph.llm.providers import CACHE_READ, cache_read_path
    from evoduet_graph.llm.usage import UsageTracker, track_node

    assert cache_read_path("anthropic") == cache_read_path("google_genai") == CACHE_READ
    assert cache_read_path(None) == CACHE_READ and cache_read_path("ollama") is None
    usage = {
        "input_tokens": 10,
        "output_tokens": 2,
        "total_tokens": 12,
        "input_token_details": {"cache_read": 6},
    }
    result = LLMResult(
        generations=[[ChatGeneration(message=AIMessage(content="x", usage_metadata=usage))]]
    )
    tracker = UsageTracker()
    cached = {}
    for provider in ("anthropic", "ollama"):
        with track_node(provider) as scope:
            run_id = uuid4()
            tracker.on_chat_model_start({}, [[]], run_id=run_id, metadata={"ls_provider": provider})
            tracker.on_llm_end(result, run_id=run_id)
        cached[provider] = scope.cached_input_tokens
    assert cached == {"anthropic": 6, "ollama": 0}


def test_the_embedded_model_takes_top_p_when_set(monkeypatch, tmp_path):
    import threading

    from evoduet_graph.llm import local

    loaded = local._Loaded(llama=object(), lock=threading.Lock())
    monkeypatch.setattr(local, "_load_llama", lambda *_args, **_kwargs: loaded)
    monkeypatch.setattr(local, "assemble_model", lambda cache_dir=None: tmp_path / "m.gguf")
    base = {"model": "local", "local_isolation": "none"}
    assert local.make_local_chat_model(LLMConfig(**base)).top_p == 0.95
    assert local.make_local_chat_model(LLMConfig(**base, top_p=0.8)).top_p == 0.8


def test_claude_on_bedrock_is_exclusive_and_timeouts_are_whole_seconds():
    claude = quirks_for("bedrock_converse", "us.anthropic.claude-3-5-haiku-20241022-v1:0")
    llama = quirks_for("bedrock_converse", "meta.llama3-70b-instruct-v1:0")
    sampling = {"temperature": 0.5, "top_p": 0.9}
    on_claude = request_settings(claude, sampling=sampling, max_tokens=64, timeout_s=12.6)
    on_llama = request_settings(llama, sampling=sampling, max_tokens=64, timeout_s=12.6)
    assert "top_p" not in on_claude.kwargs and on_claude.dropped
    assert on_llama.kwargs["top_p"] == 0.9 and on_llama.dropped == ()
    assert on_claude.kwargs["timeout"] == 13  # botocore takes whole seconds


def test_aws_credentials_file_stands_for_a_key(monkeypatch, tmp_path):
    from evoduet_graph.llm.providers import key_is_set

    quirks = quirks_for("bedrock_converse")
    for name in quirks.key_env:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not key_is_set(quirks)
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("[default]\n")
    assert key_is_set(quirks)

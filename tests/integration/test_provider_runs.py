"""Gate-llm runs on the native integrations of Anthropic, Google GenAI and Ollama.

Each run drives the real integration package (langchain-anthropic, langchain-google-genai,
langchain-ollama, built by ``init_chat_model`` from the model string) against a scripted server
on loopback that speaks the provider's own wire format (`tests.fake_provider_servers`), with
the offline search backend over a small corpus: the requests carry the parameters the
provider's quirks call for, and the report shows each provider's tokens, cached tokens and USD.
A missing integration package or key stops the run at startup: exit 2, one line, nothing
written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.cli import app
from evoduet_graph.report.markdown import report_markdown
from evoduet_graph.report.summary import run_summary
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.pricing import price_for
from tests.conftest import RADIUS_UP
from tests.fake_provider_servers import AnthropicServer, GeminiServer, OllamaServer
from tests.fakes import KnowledgeResponder

runner = CliRunner()


def _config(tmp_path: Path, model: str, base_url: str) -> dict[str, Any]:
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "hull.md").write_text(
        "# Convex hull area\n\nPoints on the unit circle with radius 1.0, spread over the full "
        "turn, give the largest hull area.\n",
        encoding="utf-8",
    )
    return {
        "iterations": 2,
        "population": {"num_islands": 2},
        "novelty": {"enabled": False},
        "gate": {"mode": "llm"},
        "retrieval": {
            "backend": "offline",
            "corpus": [str(corpus)],
            "offline_include_pydoc": [],
            "index_cache_dir": str(tmp_path / "index"),
            "inner_rounds": 1,
            "search_retries": 0,
        },
        "llm": {
            "model": model,
            "base_url": base_url,
            "max_retries": 0,
            "temperature": 0.4,
            "top_p": 0.9,
            "max_tokens": 900,
        },
    }


def _run(tmp_path: Path, server_cls: type, model: str) -> tuple[Path, Any, list[dict[str, Any]]]:
    """A gate-llm run of 2 iterations on the smoke task; every gate decides ``retrieve``."""
    responder = KnowledgeResponder(gate="retrieve", generate=RADIUS_UP)
    with server_cls(responder) as server:
        cfg = EvoDuetConfig.model_validate(_config(tmp_path, model, server.base_url))
        rdir = tmp_path / "run"
        result = run(Path(__file__).parents[2] / "tasks" / "smoke_polygon_area", cfg, run_dir=rdir)
        bodies = server.bodies()
    assert result.iterations == 2
    kinds = {kind for kind, _text in responder.log}
    assert {"gate", "construct_query", "hypothetical_score", "generate"} <= kinds
    return rdir, responder, bodies


def _report_row(rdir: Path, model: str) -> list[str]:
    md = report_markdown(rdir)
    section = md[md.index("## LLM usage per model") :]
    [row] = [line for line in section.splitlines() if line.startswith(f"| {model} |")]
    return [cell.strip() for cell in row.strip("|").split("|")]


def _check_usage(rdir: Path, model: str, configured: str, *, cached: bool) -> None:
    """The report's per-model row: calls, tokens, cached tokens and USD as priced."""
    models = run_summary(rdir).llm_models
    assert set(models) == {model}
    usage = models[model]
    assert usage.calls >= 6 and usage.input_tokens > 0 and usage.output_tokens > 0
    assert (usage.cached_input_tokens > 0) is cached
    assert usage.cached_input_tokens < usage.input_tokens
    price = price_for(configured)
    assert price is not None
    expected = price.cost(
        int(usage.input_tokens), int(usage.output_tokens), int(usage.cached_input_tokens)
    )
    assert usage.usd == pytest.approx(expected)
    row = _report_row(rdir, model)
    assert row[1:5] == [
        f"{int(usage.calls):,}",
        f"{int(usage.input_tokens):,}",
        f"{int(usage.cached_input_tokens):,}",
        f"{int(usage.output_tokens):,}",
    ]
    assert float(row[5]) == pytest.approx(expected, abs=1e-6)


def test_anthropic_run(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    model = "claude-haiku-4-5"
    rdir, _responder, bodies = _run(tmp_path, AnthropicServer, f"anthropic:{model}")
    for body in bodies:
        # temperature only: Claude refuses it together with top_p (the server answers 400)
        assert body["temperature"] == 0.4 and "top_p" not in body
        assert body["max_tokens"] == 900 and body["model"] == model
        # the shared prefix, the run's system message, is marked for the prompt cache
        [block] = body["system"]
        assert block["cache_control"] == {"type": "ephemeral"} and block["text"].strip()
    systems = {body["system"][0]["text"] for body in bodies}
    assert len(systems) == 1  # one system message for the gate, the inner loop and the mutation
    # the user message: the iteration's context c_t as a marked block, then the node's part
    contexts: dict[str, int] = {}
    for body in bodies:
        context, own = body["messages"][0]["content"]
        assert context["cache_control"] == {"type": "ephemeral"} and "cache_control" not in own
        assert own["text"].strip()
        contexts[context["text"]] = contexts.get(context["text"], 0) + 1
    # one context per iteration, read by its gate, queries, scores and mutation
    assert 1 <= len(contexts) <= 2 and all(n >= 4 for n in contexts.values())
    # structured output through Anthropic's tool calling, plain text for the mutation
    forced = [b for b in bodies if (b.get("tool_choice") or {}).get("type") == "tool"]
    assert forced and len(forced) < len(bodies)
    # one tool per schema: the gate's reply, the queries, the predicted scores
    assert len({b["tool_choice"]["name"] for b in forced}) >= 3
    # the dropped top_p: one warning, kept in the run's events
    warnings = [e["message"] for e in read_events(rdir / "events.jsonl") if e["event"] == "warning"]
    assert [w for w in warnings if "not sent" in w] == [
        f"model anthropic:{model}: not sent: top_p=0.9 (refused together with temperature)"
    ]
    price = price_for(f"anthropic:{model}")
    assert price is not None and price.cache_read_per_mtok < price.input_per_mtok
    _check_usage(rdir, model, f"anthropic:{model}", cached=True)


def test_google_genai_run(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-test")
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    model = "gemini-2.5-flash"
    rdir, _responder, bodies = _run(tmp_path, GeminiServer, f"google_genai:{model}")
    for body in bodies:
        generation = body["generationConfig"]
        assert generation["temperature"] == 0.4 and generation["topP"] == 0.9
        assert generation["maxOutputTokens"] == 900  # Gemini's name of the completion limit
        assert body["systemInstruction"]["parts"][0]["text"].strip()
    # structured output through Gemini's JSON-schema mode
    schemas = [b["generationConfig"].get("responseJsonSchema") for b in bodies]
    assert any(s is not None for s in schemas) and any(s is None for s in schemas)
    _check_usage(rdir, model, f"google_genai:{model}", cached=True)
    events = read_events(rdir / "events.jsonl")
    assert not [e for e in events if e["event"] == "warning" and e.get("node") == "llm"]


def test_ollama_run(tmp_path):
    model = "qwen2.5-coder:7b"
    rdir, responder, bodies = _run(tmp_path, OllamaServer, f"ollama:{model}")
    for body in bodies:
        assert body["model"] == model
        assert body["options"] == {"num_predict": 900, "temperature": 0.4, "top_p": 0.9}
    formats = [b.get("format") for b in bodies]  # structured output: Ollama's JSON schema
    assert any(isinstance(f, dict) for f in formats) and any(f is None for f in formats)
    assert len(bodies) == len(responder.log)
    _check_usage(rdir, model, f"ollama:{model}", cached=False)
    assert run_summary(rdir).llm_models[model].usd == 0.0  # runs on the user's machine


def _cli_run(smoke_task_dir: Path, out: Path, model: str) -> Any:
    return runner.invoke(
        app,
        ["run", str(smoke_task_dir), "--model", model, "--iterations", "1", "--out", str(out)],
    )


def _one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    return lines[0]


def test_missing_integration_package_is_one_line_and_exit_2(smoke_task_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)  # as if not installed
    out = tmp_path / "run"
    result = _cli_run(smoke_task_dir, out, "anthropic:claude-haiku-4-5")
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    assert "langchain-anthropic" in line and "evoduet-graph[anthropic]" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("model", "variables"),
    [
        ("anthropic:claude-haiku-4-5", ("ANTHROPIC_API_KEY",)),
        ("google_genai:gemini-2.5-flash", ("GOOGLE_API_KEY", "GEMINI_API_KEY")),
    ],
)
def test_missing_key_is_one_line_and_exit_2(
    smoke_task_dir, tmp_path, monkeypatch, model, variables
):
    for name in variables:
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "run"
    result = _cli_run(smoke_task_dir, out, model)
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    assert variables[0] in line
    assert not out.exists()


def test_a_role_on_another_provider_missing_its_key_stops_the_run(
    smoke_task_dir, tmp_path, monkeypatch
):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    cfg = tmp_path / "roles.yaml"
    cfg.write_text(
        json.dumps({"llm": {"model": "ollama:qwen2.5-coder:7b", "roles": {"gate": "anthropic:c"}}})
    )
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["run", str(smoke_task_dir), "--config", str(cfg), "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert "ANTHROPIC_API_KEY" in _one_error_line(result.output)
    assert not out.exists()


def test_bench_takes_a_provider_model_and_checks_it_first(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = tmp_path / "bench"
    common = ["bench", "--out", str(out), "--tasks", "smoke_polygon_area", "--iterations", "1"]
    model = ["--model", "anthropic:claude-haiku-4-5"]
    oe = runner.invoke(app, [*common, *model, "--methods", "evoduet,openevolve"])
    assert oe.exit_code == 2 and "openevolve method speaks only the OpenAI API" in oe.output
    keyless = runner.invoke(app, [*common, *model, "--methods", "evoduet"])
    assert keyless.exit_code == 2 and "$ANTHROPIC_API_KEY is not set" in keyless.output
    assert not list(out.rglob("run.json"))  # no job started


def test_roles_on_two_providers_each_priced_by_its_own(tmp_path, monkeypatch):
    """The knowledge layer on Ollama, the mutation on Claude: each on its own wire format."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    responder = KnowledgeResponder(gate="retrieve", generate=RADIUS_UP)
    with AnthropicServer(responder) as claude, OllamaServer(responder) as ollama:
        data = _config(tmp_path, "anthropic:claude-haiku-4-5", claude.base_url)
        layer = {"model": "ollama:qwen2.5-coder:7b", "base_url": ollama.base_url}
        data["llm"]["roles"] = {
            "gate": layer,
            "construct_query": layer,
            "hypothetical_score": layer,
        }
        rdir = tmp_path / "run"
        result = run(
            Path(__file__).parents[2] / "tasks" / "smoke_polygon_area",
            EvoDuetConfig.model_validate(data),
            run_dir=rdir,
        )
        claude_bodies, ollama_bodies = claude.bodies(), ollama.bodies()
    assert result.iterations == 2
    assert claude_bodies and all("tool_choice" not in b for b in claude_bodies)  # mutation only
    assert ollama_bodies and all(isinstance(b.get("format"), dict) for b in ollama_bodies)
    models = run_summary(rdir).llm_models
    assert set(models) == {"claude-haiku-4-5", "qwen2.5-coder:7b"}
    assert models["qwen2.5-coder:7b"].usd == 0.0
    claude_price = price_for("anthropic:claude-haiku-4-5")
    assert claude_price is not None
    u = models["claude-haiku-4-5"]
    expected = claude_price.cost(
        int(u.input_tokens), int(u.output_tokens), int(u.cached_input_tokens)
    )
    assert u.usd == pytest.approx(expected) and u.usd > 0
    assert run_summary(rdir).cost.llm_usd == pytest.approx(expected)

"""A run with ``llm.roles`` on two models of an OpenAI-compatible endpoint.

The world-knowledge layer on ``cheap``, mutation on ``strong``; each role's calls reach its model,
and the report prices each model on its own.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import convert_to_messages

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.report.markdown import report_markdown
from evoduet_graph.report.summary import run_summary
from evoduet_graph.rundir.events import read_events
from tests.conftest import RADIUS_UP
from tests.fake_openai_server import FaultyServer
from tests.fakes import FakeSearcher, KnowledgeResponder, prompt_kind


def test_each_role_calls_its_model_and_cost_is_per_model(smoke_task_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    responder = KnowledgeResponder(gate="retrieve", generate=RADIUS_UP)

    def answer(body):
        return responder(convert_to_messages(body["messages"]))

    with FaultyServer(["ok"], content=answer) as server:
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": 2,
                "population": {"num_islands": 2},
                "novelty": {"enabled": False},
                "gate": {"mode": "llm"},
                "retrieval": {"inner_rounds": 1, "search_retries": 0},
                "llm": {
                    "model": "openai:strong",
                    "base_url": server.base_url,
                    "max_retries": 0,
                    "roles": {
                        "gate": "openai:cheap",
                        "construct_query": "openai:cheap",
                        "hypothetical_score": {"model": "openai:cheap", "temperature": 0.0},
                    },
                },
                "budget": {"prices": {"cheap": [1.0, 2.0], "strong": [10.0, 20.0]}},
            }
        )
        rdir = tmp_path / "run"
        result = run(smoke_task_dir, cfg, run_dir=rdir, searcher=FakeSearcher())
        requests = [body for _fault, body in server.requests]
    assert result.iterations == 2
    by_kind: dict[str, set[str]] = {}
    for body in requests:
        kind = prompt_kind(convert_to_messages(body["messages"]))
        by_kind.setdefault(kind, set()).add(body["model"])
    assert by_kind == {
        "gate": {"cheap"},
        "construct_query": {"cheap"},
        "hypothetical_score": {"cheap"},
        "generate": {"strong"},
    }
    temps = {
        b.get("temperature")
        for b in requests
        if prompt_kind(convert_to_messages(b["messages"])) == "hypothetical_score"
    }
    assert temps == {0.0}

    events = list(read_events(rdir / "events.jsonl"))
    [start] = [e for e in events if e["event"] == "run_start"]
    assert start["roles"] == {
        "gate": "openai:cheap",
        "construct_query": "openai:cheap",
        "hypothetical_score": "openai:cheap",
    }
    gate_models = {m for e in events if e.get("node") == "gate" for m in e.get("llm_by_model", {})}
    gen_models = {
        m for e in events if e.get("node") == "generate" for m in e.get("llm_by_model", {})
    }
    assert gate_models == {"cheap"} and gen_models == {"strong"}

    models = run_summary(rdir).llm_models
    assert set(models) == {"cheap", "strong"}
    n_cheap = sum(1 for b in requests if b["model"] == "cheap")
    assert models["cheap"].calls == n_cheap
    assert models["strong"].calls == len(requests) - n_cheap
    for name, (p_in, p_out) in {"cheap": (1.0, 2.0), "strong": (10.0, 20.0)}.items():
        u = models[name]
        expected = (u.input_tokens * p_in + u.output_tokens * p_out) / 1e6
        assert u.usd == pytest.approx(expected) and u.usd > 0
    # the report's LLM cost is the per-model sum, not all tokens at the run's model's price
    assert run_summary(rdir).cost.llm_usd == pytest.approx(sum(u.usd for u in models.values()))
    md = report_markdown(rdir)
    section = md[md.index("## LLM usage per model") :]
    assert "| cheap |" in section and "| strong |" in section


def test_joint_search_runs_on_the_generate_role_model(smoke_task_dir, tmp_path, monkeypatch):
    """Joint-level search (an ablation-ladder row) is part of the mutation call.

    Its search turns and the final answer go to the ``generate`` role's model, never to the run's
    default model.
    """
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    responder = KnowledgeResponder(
        generate=RADIUS_UP,
        joint=lambda i, _p: (
            {"action": "search", "query": "hull area"}
            if i == 0
            else {"action": "answer", "query": ""}
        ),
    )

    def answer(body):
        return responder(convert_to_messages(body["messages"]))

    searcher = FakeSearcher()
    with FaultyServer(["ok"], content=answer) as server:
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": 1,
                "population": {"num_islands": 2},
                "novelty": {"enabled": False},
                "gate": {"mode": "never"},
                "joint_search": {"enabled": True, "protocol": "structured", "max_calls": 2},
                "retrieval": {"search_retries": 0},
                "llm": {
                    "model": "openai:main",
                    "base_url": server.base_url,
                    "max_retries": 0,
                    "roles": {"generate": "openai:gen"},
                },
            }
        )
        result = run(smoke_task_dir, cfg, run_dir=tmp_path / "run", searcher=searcher)
        requests = [body for _fault, body in server.requests]
    assert result.iterations == 1 and searcher.queries == ["hull area"]
    kinds = {prompt_kind(convert_to_messages(b["messages"])) for b in requests}
    assert kinds == {"joint_search_step", "generate"}
    assert {b["model"] for b in requests} == {"gen"}


def test_stateless_gate_and_rerank_run_on_their_role_models(smoke_task_dir, tmp_path, monkeypatch):
    """The stateless gate and listwise rerank call their role models.

    The ablation ladder's stateless gate (``use_search_database: false``) and listwise rerank
    call the ``gate`` and ``rerank`` role models; mutation stays on the run's model.
    """
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    responder = KnowledgeResponder(gate="retrieve", generate=RADIUS_UP)

    def answer(body):
        return responder(convert_to_messages(body["messages"]))

    with FaultyServer(["ok"], content=answer) as server:
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": 1,
                "population": {"num_islands": 2},
                "novelty": {"enabled": False},
                "gate": {"mode": "llm"},
                "retrieval": {
                    "inner_rounds": 1,
                    "search_retries": 0,
                    "ranking": "listwise_rerank",
                    "use_search_database": False,
                },
                "llm": {
                    "model": "openai:strong",
                    "base_url": server.base_url,
                    "max_retries": 0,
                    "roles": {"gate": "openai:cheap", "rerank": "openai:ranker"},
                },
            }
        )
        result = run(smoke_task_dir, cfg, run_dir=tmp_path / "run", searcher=FakeSearcher())
        requests = [body for _fault, body in server.requests]
    assert result.iterations == 1
    by_kind: dict[str, set[str]] = {}
    for body in requests:
        by_kind.setdefault(prompt_kind(convert_to_messages(body["messages"])), set()).add(
            body["model"]
        )
    assert by_kind == {
        "gate": {"cheap"},
        "construct_query": {"strong"},
        "rerank": {"ranker"},
        "generate": {"strong"},
    }
    assert any(
        "every search starts from scratch" in str(b["messages"])
        for b in requests
        if b["model"] == "cheap"
    )

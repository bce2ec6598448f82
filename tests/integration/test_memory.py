"""Long-term memory in a LangGraph store (``memory`` / ``--memory``).

A second run on the same task starts with what the first one learned; runs without it stay
independent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.config import ConfigError
from evoduet_graph.rundir.events import read_events
from evoduet_graph.search import SearchDatabase
from evoduet_graph.search.memory import TaskMemory, open_store
from tests.conftest import RADIUS_UP
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel


def _config(**dotted: Any) -> EvoDuetConfig:
    base = {
        "iterations": 1,
        "population": {"num_islands": 2},
        "novelty": {"enabled": False},
        "gate": {"mode": "llm"},
        "retrieval": {"inner_rounds": 1, "search_retries": 0},
    }
    return EvoDuetConfig.model_validate(base).with_overrides(dotted)


def _run(task: Path, rdir: Path, cfg: EvoDuetConfig, query: str) -> KnowledgeResponder:
    responder = KnowledgeResponder(
        gate="retrieve", generate=RADIUS_UP, queries=lambda n, _t: [query]
    )
    run(
        task,
        cfg,
        llm=ScriptedChatModel(responses=[], default=responder),
        run_dir=rdir,
        searcher=FakeSearcher(),
    )
    return responder


def test_second_run_gate_sees_the_first_runs_outcomes(smoke_task_dir, tmp_path):
    memory = str(tmp_path / "memory.sqlite")
    _run(smoke_task_dir, tmp_path / "first", _config(memory=memory), "first run query")
    first = SearchDatabase(tmp_path / "first" / "search_database.jsonl").records()
    assert first[0].impacts[0].outcome == "improved"

    second = _run(smoke_task_dir, tmp_path / "second", _config(memory=memory), "second query")
    gate_prompt = second.prompts("gate")[0]
    assert "[mem_000001]" in gate_prompt and "improved" in gate_prompt
    assert "first run query" in gate_prompt
    db = SearchDatabase(tmp_path / "second" / "search_database.jsonl")
    recalled = db.get_record("mem_000001")
    assert recalled is not None and recalled.parent_id.startswith("first-")
    assert recalled.realised_delta == pytest.approx(first[0].realised_delta)
    assert {d.url for d in db.documents()} >= {
        d.url for d in SearchDatabase(tmp_path / "first" / "search_database.jsonl").documents()
    }
    for doc_id in recalled.final_doc_ids:  # look-up can name the recalled documents
        assert db.has_document(doc_id)
    # the first run's predictions come back with their loop, for the first run's parent only
    first_db = SearchDatabase(tmp_path / "first" / "search_database.jsonl")
    first_preds = first_db.predictions(record_id=first[0].record_id)
    recalled_preds = db.predictions(record_id="mem_000001")
    assert first_preds and len(recalled_preds) == len(first_preds)
    assert {p.predicted_score for p in recalled_preds} == {p.predicted_score for p in first_preds}
    assert {p.parent_id for p in recalled_preds} == {recalled.parent_id}
    [event] = [
        e for e in read_events(tmp_path / "second" / "events.jsonl") if e["event"] == "memory"
    ]
    assert event["records"] == 1

    # the store now holds both runs' outcomes, namespaced by task
    store = open_store(memory)
    outcomes = TaskMemory(store, "smoke_polygon_area", "x")._all(
        ("evoduet", "smoke_polygon_area", "outcomes")
    )
    assert len(outcomes) == 2
    assert store.search(("evoduet", "another_task", "outcomes")) == []


def test_without_memory_runs_stay_independent(smoke_task_dir, tmp_path):
    _run(smoke_task_dir, tmp_path / "first", _config(), "first run query")
    second = _run(smoke_task_dir, tmp_path / "second", _config(), "second query")
    assert "mem_" not in second.prompts("gate")[0]
    assert "first run query" not in second.prompts("gate")[0]


def test_a_file_that_is_not_a_store_fails_before_the_run(smoke_task_dir, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database " * 100, encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot be used as a memory store"):
        _run(smoke_task_dir, tmp_path / "run", _config(memory=str(bad)), "q")
    assert not (tmp_path / "run").exists()


def test_cli_memory_option_sets_the_store_path(smoke_task_dir, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from evoduet_graph.cli import app

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(smoke_task_dir),
            "--iterations",
            "0",
            "--model",
            "openai:none",
            "--memory",
            str(tmp_path / "mem.sqlite"),
            "--out",
            str(out),
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    cfg = (out / "config.yaml").read_text(encoding="utf-8")
    assert f"memory: {tmp_path / 'mem.sqlite'}" in cfg
    assert (tmp_path / "mem.sqlite").is_file()


def test_stateless_retrieval_neither_recalls_nor_writes_the_memory(smoke_task_dir, tmp_path):
    """Without a search database the long-term memory is left alone.

    ``retrieval.use_search_database: false`` (the ablation ladder's row without the search
    database) keeps no search database, so the memory is left alone: nothing recalled, nothing
    written.
    """
    memory = str(tmp_path / "memory.sqlite")
    _run(smoke_task_dir, tmp_path / "first", _config(memory=memory), "first run query")
    mem = TaskMemory(open_store(memory), "smoke_polygon_area", "check")
    before = len(mem._all(mem.outcomes_ns))
    assert before == 1
    rdir = tmp_path / "stateless"
    second = _run(
        smoke_task_dir,
        rdir,
        _config(**{"memory": memory, "retrieval.use_search_database": False}),
        "stateless query",
    )
    assert "[mem_000001]" not in second.prompts("gate")[0]
    assert not (rdir / "search_database.jsonl").exists()
    assert [e for e in read_events(rdir / "events.jsonl") if e["event"] == "memory"] == []
    after = TaskMemory(open_store(memory), "smoke_polygon_area", "check")._all(mem.outcomes_ns)
    assert len(after) == before

"""Human review with ``interrupt()``.

``retrieval.review_queries`` and ``gate.review`` through the Python API (the CLI's pty test and
Studio's SDK test are in test_cli_review.py and test_studio.py). The pause is checkpointed: a run
left waiting resumes waiting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoduet_graph import EvoDuetConfig, resume, run
from evoduet_graph.api import REVIEW_PREFIX
from evoduet_graph.rundir.events import read_events
from evoduet_graph.search import SearchDatabase
from tests.conftest import RADIUS_UP
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel, prompt_text


def _config(**dotted: Any) -> EvoDuetConfig:
    base = {
        "iterations": 1,
        "population": {"num_islands": 2},
        "novelty": {"enabled": False},
        "gate": {"mode": "always"},
        "retrieval": {"inner_rounds": 1, "search_retries": 0, "review_queries": True},
    }
    return EvoDuetConfig.model_validate(base).with_overrides(dotted)


def _llm(**kw: Any) -> ScriptedChatModel:
    return ScriptedChatModel(responses=[], default=KnowledgeResponder(generate=RADIUS_UP, **kw))


def _events(rdir: Path, name: str) -> list[dict[str, Any]]:
    return [e for e in read_events(rdir / "events.jsonl") if e["event"] == name]


def test_reviewer_edits_the_queries_and_the_edited_ones_are_searched(smoke_task_dir, tmp_path):
    searcher = FakeSearcher()
    seen: list[dict[str, Any]] = []

    def reviewer(payload: dict[str, Any]) -> Any:
        seen.append(payload)
        return ["regular polygon area unit circle"]

    rdir = tmp_path / "run"
    result = run(
        smoke_task_dir, _config(), llm=_llm(), run_dir=rdir, searcher=searcher, review=reviewer
    )
    assert result.iterations == 1 and result.stop_reason is None
    assert seen == [
        {
            "kind": "review_queries",
            "iteration": 1,
            "round": 0,
            "queries": ["query 0"],
            "knowledge_gap": None,
        }
    ]
    assert searcher.queries == ["regular polygon area unit circle"]
    [record] = SearchDatabase(rdir / "search_database.jsonl").records()
    assert "regular polygon area unit circle" in str(record.model_dump())
    assert "'query 0'" not in str(record.model_dump()["rounds"])
    [review] = _events(rdir, "review")
    assert review["edited"] is True and review["proposal"] == ["query 0"]


def test_unanswered_review_waits_in_the_checkpoint_and_resumes_waiting(smoke_task_dir, tmp_path):
    searcher = FakeSearcher()
    llm = _llm()
    rdir = tmp_path / "run"
    first = run(smoke_task_dir, _config(), llm=llm, run_dir=rdir, searcher=searcher)
    assert first.stop_reason == f"{REVIEW_PREFIX} (review_queries)" and searcher.calls == 0
    again = resume(rdir, llm=llm, searcher=searcher)  # still nobody answers: still waiting
    assert again.stop_reason == first.stop_reason and searcher.calls == 0
    done = resume(rdir, llm=llm, searcher=searcher, review=lambda p: None)  # keep the proposal
    assert done.iterations == 1 and done.stop_reason is None
    assert searcher.queries == ["query 0"]
    construct = [m for m in llm.prompts if "You write web-search queries" in prompt_text(m)]
    assert len(construct) == 1  # the proposal was not asked for again
    assert len(_events(rdir, "review_pending")) == 1


def test_a_malformed_answer_is_refused_and_asked_again(smoke_task_dir, tmp_path):
    searcher = FakeSearcher()
    answers: list[Any] = [42, ["edited query"]]
    payloads: list[dict[str, Any]] = []

    def reviewer(payload: dict[str, Any]) -> Any:
        payloads.append(payload)
        return answers[len(payloads) - 1]

    rdir = tmp_path / "run"
    done = run(
        smoke_task_dir, _config(), llm=_llm(), run_dir=rdir, searcher=searcher, review=reviewer
    )
    assert done.iterations == 1 and searcher.queries == ["edited query"]
    assert "error" not in payloads[0]
    assert "list of query strings" in payloads[1]["error"]
    assert payloads[1]["queries"] == ["query 0"]  # the proposal is still there
    assert len(_events(rdir, "review_refused")) == 1


def test_gate_review_changes_the_decision_without_asking_the_model_twice(smoke_task_dir, tmp_path):
    llm = _llm(gate="retrieve")
    searcher = FakeSearcher()
    rdir = tmp_path / "run"
    cfg = _config(**{"gate.mode": "llm", "gate.review": True, "retrieval.review_queries": False})
    waiting = run(smoke_task_dir, cfg, llm=llm, run_dir=rdir, searcher=searcher)
    assert waiting.stop_reason == f"{REVIEW_PREFIX} (review_gate)"
    payloads: list[dict[str, Any]] = []

    def reviewer(payload: dict[str, Any]) -> Any:
        payloads.append(payload)
        return "no-op"

    done = resume(rdir, llm=llm, searcher=searcher, review=reviewer)
    assert done.iterations == 1 and searcher.calls == 0
    assert payloads[0]["decision"] == "retrieve" and payloads[0]["kind"] == "review_gate"
    gates = [m for m in llm.prompts if "You decide whether an evolutionary" in prompt_text(m)]
    assert len(gates) == 1
    [decision] = [
        e
        for e in read_events(rdir / "events.jsonl")
        if e["event"] == "node" and e["node"] == "gate"
    ]
    assert decision["gate_decision"] == "no-op"


def test_gate_review_refuses_a_look_up_of_unknown_documents(smoke_task_dir, tmp_path):
    cfg = _config(**{"gate.review": True, "retrieval.review_queries": False})
    answers: list[Any] = [
        {"decision": "look-up", "document_ids": ["doc_999999"]},
        "maybe",
        "retrieve",
    ]
    errors: list[str | None] = []

    def reviewer(payload: dict[str, Any]) -> Any:
        errors.append(payload.get("error"))
        return answers[len(errors) - 1]

    result = run(
        smoke_task_dir,
        cfg,
        llm=_llm(),
        run_dir=tmp_path / "run",
        searcher=FakeSearcher(),
        review=reviewer,
    )
    assert result.iterations == 1
    assert errors[0] is None and "unknown: doc_999999" in errors[1]
    assert "one of no-op, look-up, retrieve" in errors[2]


def test_gate_review_wraps_the_stateless_gate_and_refuses_a_look_up(smoke_task_dir, tmp_path):
    """The stateless gate is reviewed like the method's gate.

    ``retrieval.use_search_database: false`` (the ablation ladder's stateless gate) is reviewed like
    the method's gate; a reviewer's look-up is refused (there is no search database).
    """
    cfg = _config(
        **{
            "gate.mode": "llm",
            "gate.review": True,
            "retrieval.review_queries": False,
            "retrieval.use_search_database": False,
        }
    )
    llm = _llm(gate="retrieve")
    payloads: list[dict[str, Any]] = []
    answers: list[Any] = [{"decision": "look-up", "document_ids": ["doc_000001"]}, "no-op"]

    def reviewer(payload: dict[str, Any]) -> Any:
        payloads.append(payload)
        return answers[len(payloads) - 1]

    searcher = FakeSearcher()
    rdir = tmp_path / "run"
    done = run(smoke_task_dir, cfg, llm=llm, run_dir=rdir, searcher=searcher, review=reviewer)
    assert done.iterations == 1 and searcher.calls == 0
    assert payloads[0]["decision"] == "retrieve" and "error" not in payloads[0]
    assert "use_search_database is false" in payloads[1]["error"]
    stateless = "No earlier search results are kept"
    gates = [m for m in llm.prompts if any(stateless in str(x.content) for x in m)]
    assert len(gates) == 1  # the stateless prompt, asked once
    [decision] = [
        e
        for e in read_events(rdir / "events.jsonl")
        if e["event"] == "node" and e["node"] == "gate"
    ]
    assert decision["gate_decision"] == "no-op"
    assert not (rdir / "search_database.jsonl").exists()  # stateless: nothing written


def test_the_oracle_mode_is_not_reviewed(smoke_task_dir, tmp_path):
    """``gate.mode: oracle`` makes no decision, so ``gate.review`` has nothing to ask."""
    cfg = _config(**{"gate.mode": "oracle", "gate.review": True, "retrieval.review_queries": False})
    asked: list[Any] = []
    rdir = tmp_path / "run"
    done = run(
        smoke_task_dir, cfg, llm=_llm(), run_dir=rdir, searcher=FakeSearcher(), review=asked.append
    )
    assert done.iterations == 1 and done.stop_reason is None and asked == []
    assert _events(rdir, "review") == []

"""The ablation ladder's rows beyond what every shipped config shows.

The ablation ladder's new rows beyond what every shipped config shows
(`tests/integration/test_shipped_configs.py`): joint-level search over native tool calling,
the oracle and grounding document sets' errors, the stateless gate's schema, relevance/novelty
selection by stored assessments, and the ladder's bench methods with their summary columns.
Scripted models and fake search backends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.bench import BenchSettings, run_bench
from evoduet_graph.config import ConfigError, load_config
from evoduet_graph.nodes.gate_stateless import StatelessGateOutput
from evoduet_graph.nodes.joint_search import native_tool_calling
from evoduet_graph.report.summary import run_summary
from evoduet_graph.rundir.events import read_events
from evoduet_graph.search import SearchDatabase
from evoduet_graph.search.database import RoundLog, RoundResult, SearchRecord
from evoduet_graph.search.fixed import DocumentSetError, load_documents
from tests.conftest import RADIUS_UP, ROOT, SMOKE_TASK
from tests.fakes import (
    FakeSearcher,
    KnowledgeResponder,
    ScriptedChatModel,
    ToolCallingScriptedChatModel,
    prompt_text,
)
from tests.fault_harness import InProcessEvaluator

BASE = {"population": {"num_islands": 2}, "evaluation": {"workers": 1}, "iterations": 2}


def _cfg(name: str, **overrides: Any) -> EvoDuetConfig:
    return load_config(ROOT / "configs" / name).with_overrides({"iterations": 2, **overrides})


def test_joint_search_with_native_tool_calling_binds_a_search_tool(tmp_path):
    """The tools protocol: the model calls ``search`` twice, then writes the program.

    Each call runs one search, its results come back as a ToolMessage, and D_search records the
    queries and URLs as one joint-search record per candidate.
    """

    def answer(messages: list[Any]) -> Any:
        tool_results = [m for m in messages if isinstance(m, ToolMessage)]
        if len(tool_results) < 2:
            n = len(tool_results)
            return AIMessage(
                content="",
                tool_calls=[{"name": "search", "args": {"query": f"hull area {n}"}, "id": f"c{n}"}],
            )
        assert "Finding 0 about hull area 1" in str(tool_results[-1].content)
        return RADIUS_UP

    llm = ToolCallingScriptedChatModel(responses=[], default=answer)
    assert native_tool_calling(llm) and not native_tool_calling(ScriptedChatModel(responses=[]))
    searcher = FakeSearcher()
    cfg = _cfg("joint_search.yaml", **{"novelty.enabled": True})
    result = run(
        SMOKE_TASK,
        cfg,
        llm=llm,
        evaluator=InProcessEvaluator(),
        searcher=searcher,
        run_dir=tmp_path / "run",
    )
    assert result.iterations == 2
    assert [t.name for t in llm.bound_tools] == ["search", "search"]  # bound per mutation call
    # iteration 2 repeats both queries: the run's search cache answers them (retrieval.cache)
    assert searcher.queries == ["hull area 0", "hull area 1"]
    db = SearchDatabase(tmp_path / "run" / "search_database.jsonl")
    records = db.records()
    assert [(r.record_id, r.decision) for r in records] == [
        ("jnt_000001_c0", "joint-search"),
        ("jnt_000002_c0", "joint-search"),
    ]
    assert records[0].queries == ["hull area 0", "hull area 1"]
    assert db.url_stats()["seen_before_share"] == pytest.approx(0.5)  # iteration 2 repeats
    events = read_events(tmp_path / "run" / "events.jsonl")
    assert [e["protocol"] for e in events if e["event"] == "joint_search"] == ["tools", "tools"]
    searches = [e for e in read_events(tmp_path / "run" / "events.jsonl") if e["event"] == "search"]
    assert [(e["query"], e["cached"]) for e in searches] == [
        ("hull area 0", False),
        ("hull area 1", False),
        ("hull area 0", True),
        ("hull area 1", True),
    ]


def test_joint_search_stops_at_max_calls_and_asks_for_the_program(tmp_path):
    """A model that keeps calling the tool gets max_calls searches, then one plain call.

    The results it sees are capped (joint_search.max_result_chars over max_calls × results).
    """
    calls = {"tool": 0}
    seen: list[str] = []

    def answer(messages: list[Any]) -> Any:
        seen[:] = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
        if any("Now write the new program" in str(m.content) for m in messages[-1:]):
            return RADIUS_UP
        calls["tool"] += 1  # a new query each time (a repeated one is answered by the cache)
        return AIMessage(
            content="",
            tool_calls=[{"name": "search", "args": {"query": f"q{calls['tool']}"}, "id": "x"}],
        )

    from evoduet_graph.search import Document

    def long_results(query: str, n: int) -> list[Document]:
        return [
            Document(url=f"https://x.example/{query}/{i}", content="z" * 9000) for i in range(n)
        ]

    llm = ToolCallingScriptedChatModel(responses=[], default=answer)
    searcher = FakeSearcher(long_results)
    cfg = _cfg("joint_search.yaml", **{"iterations": 1, "joint_search.max_calls": 2})
    run(
        SMOKE_TASK,
        cfg,
        llm=llm,
        evaluator=InProcessEvaluator(),
        searcher=searcher,
        run_dir=tmp_path / "run",
    )
    assert searcher.calls == 2 and calls["tool"] == 2
    per_document = cfg.joint_search.max_result_chars // (2 * cfg.retrieval.results_per_query)
    assert len(seen) == 2
    for text in seen:  # 5 documents, each cut to its share
        assert text.count("z" * per_document) == 5 and "z" * (per_document + 1) not in text


def test_oracle_documents_from_a_jsonl_file_and_clear_errors(tmp_path):
    good = tmp_path / "oracle.jsonl"
    good.write_text(json.dumps({"url": "u1", "title": "T one", "content": "use a circle"}) + "\n")
    responder = KnowledgeResponder(generate=RADIUS_UP)
    llm = ScriptedChatModel(responses=[], default=responder)
    cfg = _cfg("oracle_documents.yaml", **{"retrieval.oracle_documents": str(good)})
    run(SMOKE_TASK, cfg, llm=llm, evaluator=InProcessEvaluator(), run_dir=tmp_path / "run")
    prompts = [prompt_text(m) for m in llm.prompts]
    assert len(prompts) == 2 and all("use a circle" in p for p in prompts)

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"url": "u", "content": "x"}\n{"url": "", "content": "y"}\n')
    with pytest.raises(DocumentSetError, match=r"bad.jsonl:2: `url`"):
        load_documents(bad, source="oracle")
    for source, message in ((bad, "bad.jsonl:2"), (tmp_path / "missing", "does not exist")):
        cfg = _cfg("oracle_documents.yaml", **{"retrieval.oracle_documents": str(source)})
        with pytest.raises(ConfigError, match=message):
            run(SMOKE_TASK, cfg, llm=llm, evaluator=InProcessEvaluator(), run_dir=tmp_path / "r2")
        assert not (tmp_path / "r2").exists()  # refused before the run directory exists
    cfg = _cfg("grounding_offline.yaml", **{"retrieval.grounding_documents": str(tmp_path / "x")})
    with pytest.raises(ConfigError, match="retrieval.grounding_documents"):
        run(
            SMOKE_TASK,
            cfg,
            llm=llm,
            evaluator=InProcessEvaluator(),
            searcher=FakeSearcher(),
            run_dir=tmp_path / "r3",
        )


def test_every_bundled_task_has_oracle_documents_with_a_source_line():
    tasks = [p for p in sorted((ROOT / "tasks").iterdir()) if (p / "task.yaml").is_file()]
    assert tasks
    for task in tasks:
        docs = load_documents(task / "oracle", source="oracle")
        for doc in docs:
            assert doc.content.startswith("Source: "), doc.url


def test_the_stateless_gate_cannot_look_up():
    assert StatelessGateOutput.model_validate({"decision": "search"}).decision == "retrieve"
    with pytest.raises(ValueError, match="no-op or retrieve"):
        StatelessGateOutput.model_validate({"decision": "look-up"})
    assert "document_ids" not in StatelessGateOutput.model_fields


def _record(
    db: SearchDatabase,
    it: int,
    docs: list[tuple[str, float | None, float | None]],
    predicted: list[float] | None = None,
) -> None:
    from evoduet_graph.search import Document

    stored = db.add_documents([Document(url=u, title=u) for u, _, _ in docs], it)
    scores = list(predicted or []) + [None] * len(docs)
    results = [
        RoundResult(doc_id=s.doc_id, url=s.url, relevance=rel, novelty=nov, predicted_score=score)
        for s, (_, rel, nov), score in zip(stored, docs, scores[: len(docs)], strict=True)
    ]
    db.add_record(
        SearchRecord(
            record_id=f"ret_{it:06d}",
            iteration=it,
            parent_id="p",
            parent_score=1.0,
            rounds=[RoundLog(round=0, queries=[f"q{it}"], results=results)],
            final_doc_ids=[s.doc_id for s in stored],
        )
    )


def test_relevance_novelty_selection_orders_by_the_stored_assessments():
    db = SearchDatabase(None)
    _record(db, 1, [("a", 0.9, 0.1)])  # 0.5 with equal weights
    _record(db, 2, [("b", 0.4, 0.9), ("c", 0.6, 0.9)])  # 0.7
    _record(db, 3, [("d", 0.2, 0.2)])  # 0.2
    assert [r.iteration for r in db.select("relevance_novelty", 3)] == [2, 1, 3]
    # the weights decide: relevance only
    assert [r.iteration for r in db.select("relevance_novelty", 2, weights=(1.0, 0.0))] == [1, 2]
    # records without ratings: hypothetical predicted gain, novelty against the chosen ones
    plain = SearchDatabase(None)
    _record(plain, 1, [("a", None, None)], predicted=[1.5])  # gain 0.5
    _record(plain, 2, [("b", None, None)], predicted=[3.0])  # gain 2.0
    _record(plain, 3, [("c", None, None)], predicted=[1.0])  # gain 0.0
    assert [r.iteration for r in plain.select("relevance_novelty", 3)] == [2, 1, 3]


def test_the_ladder_methods_run_in_the_bench_with_their_knowledge_figures(tmp_path):
    out = tmp_path / "bench"
    methods = ["openevolve-mode", "oracle", "joint-search", "rerank", "no-search-database"]

    def llm(_job: Any) -> ScriptedChatModel:
        return ScriptedChatModel(
            responses=[],
            default=KnowledgeResponder(
                gate="retrieve",
                generate=RADIUS_UP,
                joint=lambda _n, text: (
                    {"action": "search", "query": "hull"}
                    if "so far in this mutation:\n(none)" in text
                    else {"action": "answer"}
                ),
            ),
        )

    settings = BenchSettings(
        tasks=[SMOKE_TASK],
        out=out,
        methods=methods,
        seeds=[0],
        iterations=2,
        config=EvoDuetConfig.model_validate({k: v for k, v in BASE.items() if k != "iterations"}),
    )
    result = run_bench(settings, llm_factory=llm, searcher_factory=lambda _job: FakeSearcher())
    assert not result.failed and len(result.ran) == len(methods)

    def knowledge(method: str) -> dict[str, Any]:
        path = out / "runs" / "smoke_polygon_area" / method / "seed0" / "bench_run.json"
        return json.loads(path.read_text())["outcome"]["details"]["knowledge"]

    assert knowledge("openevolve-mode")["queries"] == 0
    assert knowledge("oracle")["iterations_with_documents"] == 2
    assert knowledge("oracle")["queries"] == 0
    joint = knowledge("joint-search")
    assert joint["queries"] == 2 and joint["repeated_url_share"] == pytest.approx(0.5)
    assert knowledge("rerank")["queries"] == 2  # one query per retrieve, 2 retrieves
    assert knowledge("no-search-database")["returned_urls"] > 0  # from the events
    # every iteration whose mutation prompt held documents counts as one with documents
    for method in ("oracle", "joint-search", "rerank"):
        seed_dir = out / "runs" / "smoke_polygon_area" / method / "seed0"
        (events,) = seed_dir.rglob("events.jsonl")
        groups = run_summary(events.parent).improvement.by_evidence
        assert groups["no documents"].iterations == 0, method
        assert sum(g.iterations for g in groups.values()) == 2, method
    summary = (out / "summary.md").read_text()
    assert "## World knowledge per method" in summary
    assert "| joint-search |" in summary and "50.0%" in summary

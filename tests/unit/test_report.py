"""`evoduet_graph.report.summary`: the figures of a run directory, checked against its raw files.

One fake run (module fixture) exercises every gate decision, a garbage gate reply, invented
look-up ids, two retrievals, invalid and valid candidates; the report must agree with the
events, D_search and the program store read independently, never modify the run directory,
and survive missing files and torn lines.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.report.markdown import report_markdown
from evoduet_graph.report.summary import run_summary
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.rundir.usage import INCLUSIVE_NODES
from evoduet_graph.search import SearchDatabase
from tests.conftest import BAD_DIFF, GARBAGE, RADIUS_UP, SMOKE_TASK, SPREAD_UP
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory) -> dict[str, Any]:
    """A 5-iteration run: gate retrieve, look-up (one invented id), garbage, no-op, retrieve."""

    def gate(n: int, prompt: str) -> Any:
        stored = re.findall(r'^  (doc_\d{6}) "', prompt, re.MULTILINE)
        return [
            {"decision": "retrieve"},
            {"decision": "look-up", "document_ids": [*stored[:1], "doc_404404"]},
            "no JSON here at all",
            {"decision": "no-op"},
            {"decision": "retrieve"},
        ][n]

    answers = iter([RADIUS_UP, BAD_DIFF, GARBAGE, SPREAD_UP, BAD_DIFF, GARBAGE, RADIUS_UP])

    def generate(_messages) -> str:
        return next(answers, GARBAGE)

    responder = KnowledgeResponder(gate=gate, generate=generate)
    llm = ScriptedChatModel(responses=[], default=responder)
    searcher = FakeSearcher()
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": 5,
            "candidates_after_retrieval": 2,
            "population": {"num_islands": 1},
            "evaluation": {"workers": 1},
            "gate": {"mode": "llm"},
            "retrieval": {"inner_rounds": 2, "search_retries": 0},
            # the scripted answers repeat programs: evaluate them (no novelty resamples), so
            # the model-call counts below hold; novelty figures: test_novelty_rejection.py
            "novelty": {"enabled": False},
        }
    )
    rdir = tmp_path_factory.mktemp("report") / "run"
    result = run(SMOKE_TASK, cfg, llm=llm, run_dir=rdir, searcher=searcher)
    return {"dir": rdir, "llm": llm, "searcher": searcher, "result": result}


def _snapshot(rdir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(rdir.iterdir()) if p.is_file()}


def test_summary_matches_the_raw_files(fake_run):
    rdir: Path = fake_run["dir"]
    before = _snapshot(rdir)
    s = run_summary(rdir)
    assert _snapshot(rdir) == before  # the report reads, never writes

    assert s.task == "smoke_polygon_area" and s.iterations == 5
    assert s.finished and s.sessions == 1 and s.resumed == 0 and s.wall_s > 0
    assert s.events.unreadable_lines == 0 and all(s.files.values())

    best = json.loads((rdir / "best_program.json").read_text())
    assert s.best.id == best["id"] == fake_run["result"].best_id
    assert s.best.ndg == best["ndg"] and s.best.metric_value == best["metric_value"]
    assert s.best.score == fake_run["result"].best_score

    store = ProgramStore(rdir / "programs.sqlite")
    programs = store.all_programs()
    store.close()
    initial = next(p.score for p in programs if p.id == "initial")
    assert s.initial_score == initial
    best_so_far, improvements = initial, 0
    for it in range(1, 6):
        scores = [p.score for p in programs if p.iteration == it and p.valid]
        if scores and max(scores) > best_so_far:
            best_so_far, improvements = max(scores), improvements + 1
    assert s.improvements == improvements >= 1
    assert [h.best_score for h in s.history][-1] == best_so_far

    # the garbage reply of iteration 3 is a fallback, not the model's no-op
    assert s.gate_decisions == {"no-op": 1, "look-up": 1, "retrieve": 2, "fallback": 1}
    assert [h.gate_decision for h in s.history] == [
        "retrieve",
        "look-up",
        "fallback",
        "no-op",
        "retrieve",
    ]
    assert s.improvement.by_decision["fallback"].iterations == 1
    assert s.improvement.by_decision["no-op"].iterations == 1
    assert [h.candidates for h in s.history] == [2, 2, 1, 1, 2]
    assert s.fallbacks["gate_fallback"] == 1 and s.fallbacks["gate_invalid_ids"] == 1
    assert s.fallbacks["search_error"] == 0

    searcher = fake_run["searcher"]
    search = s.search
    assert search.queries == searcher.calls == 4
    assert search.distinct_queries == len({q.lower() for q in searcher.queries})
    assert search.results_returned == 20
    db = SearchDatabase(rdir / "search_database.jsonl")
    stats = db.url_stats()
    assert search.documents_stored == stats["documents"] == 20
    assert search.returned_urls == stats["returned"] == 20
    assert search.distinct_urls == stats["distinct"]
    assert search.seen_before == stats["seen_before"] == 0
    assert search.seen_before_share == 0.0
    assert search.records == 3
    assert search.records_by_decision == {"retrieve": 2, "look-up": 1}

    pairs = []
    for record in db.records():
        # a record's own iteration: the Δ of a later look-up of its documents (credited to it
        # too) belongs to another parent, for which its predictions were not made
        own = [i for i in record.impacts if i.iteration == record.iteration]
        children = [i.child_score for i in own if i.child_score is not None]
        found = [
            db.prediction_for(d, record.parent_id, record_id=record.record_id)
            for d in record.final_doc_ids
        ]
        preds = [f.predicted_score for f in found if f is not None]
        if children and preds:
            pairs.append((sum(preds) / len(preds), sum(children) / len(children)))
    pred = s.prediction
    assert pred.records == len(pairs) >= 1
    assert pred.mean_predicted == pytest.approx(sum(p for p, _ in pairs) / len(pairs))
    assert pred.mean_realised == pytest.approx(sum(r for _, r in pairs) / len(pairs))
    assert [p for pair in pred.pairs for p in pair] == pytest.approx(
        [p for pair in pairs for p in pair]
    )
    assert pred.rank.n == len(pairs)
    assert sum(pred.outcomes.values()) == 3
    assert sum(len(r.impacts) for r in db.records()) > 3  # the look-up credited its sources

    # LLM usage: per node from the events; the total counts every model call once
    llm = fake_run["llm"]
    by_node = s.llm.by_node
    kinds = Counter(k for k, _ in fake_run["llm"].default.log)
    assert by_node["gate"].calls == 6  # 5 gate calls + 1 repair re-prompt
    assert by_node["construct_query"].calls == kinds["construct_query"] == 4
    assert by_node["hypothetical_score"].calls == 4
    assert by_node["generate"].calls == 8
    assert by_node["query_evolution"].calls == 8  # includes the inner loop's calls
    assert s.llm.total.calls == llm.calls
    events = list(read_events(rdir / "events.jsonl"))
    tokens = sum(
        e.get("input_tokens", 0)
        for e in events
        if e["event"] == "node" and e["node"] not in INCLUSIVE_NODES
    )
    assert s.llm.total.input_tokens == tokens > 0
    # one llm_call event per model call, under the node that made it (the inner loop's calls
    # are construct_query's and hypothetical_score's, never retrieve's too)
    calls = s.llm_calls
    assert {n: f.calls for n, f in calls.by_node.items()} == {
        n: u.calls for n, u in by_node.items() if n not in INCLUSIVE_NODES and u.calls
    }
    assert calls.total.calls == llm.calls
    assert calls.total.input_tokens == tokens

    wall = s.wall_time.by_node
    assert wall["select"].executions == 5 and wall["initialize"].executions == 1
    assert wall["construct_query"].executions == 4
    assert s.wall_time.total_s == pytest.approx(
        sum(w.total_s for n, w in wall.items() if n != "query_evolution")
    )

    fail = s.failures
    statuses = Counter("valid" if p.valid else p.status for p in programs if p.kind != "initial")
    assert fail.candidates == 8 == sum(statuses.values())
    assert fail.valid == statuses["valid"] and fail.invalid == statuses["invalid"] >= 2
    reasons = {r: n for r, n in fail.top_errors}
    assert sum(reasons.values()) == 8 - fail.valid
    assert any("SEARCH" in r for r in reasons)


def test_improvement_rates_by_evidence_and_decision_match_the_raw_files(fake_run):
    """Paper §4's improvement rates, by evidence and by decision.

    Paper §4's figures: iterations whose evidence held a document predicted (for the parent
    that was mutated) to beat the parent vs iterations without documents; and per decision.
    """
    rdir: Path = fake_run["dir"]
    s = run_summary(rdir)
    store = ProgramStore(rdir / "programs.sqlite")
    programs = {p.id: p for p in store.all_programs()}
    store.close()
    db = SearchDatabase(rdir / "search_database.jsonl")
    events = list(read_events(rdir / "events.jsonl"))
    parents = {
        e["iteration"]: e["parent_id"]
        for e in events
        if e["event"] == "node" and e["node"] == "select"
    }
    gates = {
        e["iteration"]: e["gate_decision"]
        for e in events
        if e["event"] == "node" and e["node"] == "gate"
    }
    for e in events:  # a gate whose reply was unusable decided nothing: its own row
        if e["event"] == "gate_fallback":
            gates[e["iteration"]] = "fallback"
    groups: dict[str, list[bool]] = {}
    decisions: dict[str, list[bool]] = {}
    for it in range(1, 6):
        parent_score = programs[parents[it]].score
        children = [
            p.score
            for p in programs.values()
            if p.iteration == it and p.valid and p.kind != "initial"
        ]
        improved = bool(children) and max(children) > parent_score
        record = db.get_record(f"ret_{it:06d}") or db.get_record(f"lku_{it:06d}")
        docs = record.final_doc_ids if record is not None else []
        preds = [db.prediction_for(d, parents[it], record_id=record.record_id) for d in docs]
        beats = any(p is not None and p.predicted_score > parent_score for p in preds)
        group = (
            "no documents"
            if not docs
            else "evidence predicted to beat the parent"
            if beats
            else "documents, none predicted to beat the parent"
        )
        groups.setdefault(group, []).append(improved)
        decisions.setdefault(gates[it], []).append(improved)
    for group, row in s.improvement.by_evidence.items():
        outcomes = groups.get(group, [])
        assert (row.iterations, row.improved) == (len(outcomes), sum(outcomes))
    assert s.improvement.by_evidence["no documents"].iterations == 2  # the no-ops
    for decision, row in s.improvement.by_decision.items():
        outcomes = decisions.get(decision, [])
        assert (row.iterations, row.improved) == (len(outcomes), sum(outcomes))
    assert s.improvement.all.iterations == 5
    text = report_markdown(rdir)
    no_docs = s.improvement.by_evidence["no documents"]
    rate = f"{100 * no_docs.rate:.1f}%"
    assert f"| no documents | 2 | {no_docs.improved} | {rate} |" in text
    # the fake run's model is the default embedded one: USD 0
    assert s.cost.llm_usd == 0.0


def test_markdown_tables(fake_run):
    text = report_markdown(fake_run["dir"])
    assert text.startswith("# EvoDuet run report: smoke_polygon_area\n")
    for heading in (
        "## Overview",
        "## Gate decisions",
        "## Search",
        "## Predicted vs realised child score",
        "## LLM usage per node",
        "## Wall time per node",
        "## Candidates and failures",
        "## Model calls per node: prompt cache and model time",
        "## Fallbacks",
        "## Per iteration",
        "## Improvement rate by evidence",
        "## Cost",
    ):
        assert f"\n{heading}\n" in text
    assert "| retrieve | 2 |" in text and "| look-up | 1 |" in text
    assert "| gate_fallback | 1 |" in text
    assert "| queries issued | 4 |" in text
    assert "| returned URLs seen before | 0 |" in text
    assert "| repeated-URL share | 0.0% |" in text
    assert "| iterations completed | 5 |" in text
    assert f"\n| **total** | {fake_run['llm'].calls} | " in text
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert all(ln.endswith("|") for ln in rows)
    assert "missing files" not in text


def test_torn_lines_are_counted_and_left_alone(fake_run, tmp_path):
    rdir = tmp_path / "run"
    shutil.copytree(fake_run["dir"], rdir)
    with (rdir / "events.jsonl").open("a") as fh:
        fh.write('{"event": "node", "node": "gen')
    with (rdir / "search_database.jsonl").open("a") as fh:
        fh.write('{"type": "record", "record_id": "ret_0000')
    before = _snapshot(rdir)
    s = run_summary(rdir)
    assert s.events.unreadable_lines == 1 and s.search.dropped_lines == 1
    assert s.search.records == 3 and s.iterations == 5
    text = report_markdown(rdir)
    assert "1 unreadable line(s) in `events.jsonl`" in text
    assert "1 unreadable line(s) in `search_database.jsonl`" in text
    assert _snapshot(rdir) == before


def test_missing_files_of_a_run_killed_early(fake_run, tmp_path):
    rdir = tmp_path / "run"
    shutil.copytree(fake_run["dir"], rdir)
    for name in (
        "programs.sqlite",
        "best_program.json",
        "search_database.jsonl",
        "programs.sqlite-wal",
        "programs.sqlite-shm",
    ):
        (rdir / name).unlink(missing_ok=True)
    lines = (rdir / "events.jsonl").read_text().splitlines()
    cut = next(
        i for i, ln in enumerate(lines) if '"node": "select"' in ln and '"iteration": 3' in ln
    )
    (rdir / "events.jsonl").write_text("\n".join(lines[:cut]) + "\n")

    s = run_summary(rdir)
    assert s.iterations == 2 and not s.finished and s.stop_reason is None
    assert s.best is None and s.initial_score is not None
    assert s.search.records == 0 and s.search.queries == 2
    assert s.prediction.records == 0 and s.prediction.mean_predicted is None
    assert s.failures.source == "events.jsonl" and s.failures.candidates == 4
    assert s.gate_decisions["retrieve"] == 1 and s.gate_decisions["look-up"] == 1
    text = report_markdown(rdir)
    assert "missing files: `search_database.jsonl`, `programs.sqlite`, `best_program.json`" in text
    assert "| best score | n/a |" in text
    assert not (rdir / "programs.sqlite").exists()  # not created by the report


def test_empty_and_missing_run_dir(tmp_path):
    s = run_summary(tmp_path)
    assert s.iterations == 0 and s.events.count == 0 and s.best is None
    assert s.gate_decisions == {"no-op": 0, "look-up": 0, "retrieve": 0}
    assert s.history == () and s.llm.total.calls == 0
    text = report_markdown(tmp_path)
    assert "## Overview" in text and "## Per iteration" not in text
    with pytest.raises(FileNotFoundError, match="run directory not found"):
        run_summary(tmp_path / "nope")


def test_a_prediction_equal_to_the_shown_parent_score_does_not_beat_it(tmp_path):
    """A prediction equal to the shown parent score does not beat it.

    A model that copies the parent's score as the prompt shows it (6 significant digits)
    predicts no change: the iteration is not counted as 'predicted to beat the parent'.
    """
    from evoduet_graph.rundir.events import EventLog
    from evoduet_graph.search import Document, Prediction, SearchRecord

    parent = 0.35999999999999993
    events = EventLog(tmp_path / "events.jsonl")
    db = SearchDatabase(tmp_path / "search_database.jsonl")
    for it, predicted in ((1, 0.36), (2, 0.3601)):
        (doc,) = db.add_documents(
            [Document(url=f"https://d.example/{it}", title="d", content="c")], it
        )
        db.add_record(
            SearchRecord(
                record_id=f"ret_{it:06d}",
                iteration=it,
                parent_id="p",
                parent_score=parent,
                final_doc_ids=[doc.doc_id],
            )
        )
        db.add_prediction(
            Prediction(
                record_id=f"ret_{it:06d}",
                doc_id=doc.doc_id,
                iteration=it,
                round=0,
                parent_id="p",
                parent_score=parent,
                predicted_score=predicted,
            )
        )
        events.emit("node", node="select", iteration=it, parent_id="p")
        events.emit("node", node="gate", iteration=it, gate_decision="retrieve")
        events.emit("node", node="record", iteration=it)
    events.close()
    groups = run_summary(tmp_path).improvement.by_evidence
    assert groups["evidence predicted to beat the parent"].iterations == 1  # iteration 2
    assert groups["documents, none predicted to beat the parent"].iterations == 1


def test_a_failed_gate_call_is_a_fallback_row_not_the_models_no_op():
    from evoduet_graph.report.summary import gate_by_iteration

    events = [
        {"event": "gate_error", "iteration": 1, "error": "connection refused"},
        {"event": "node", "node": "gate", "iteration": 1, "gate_decision": "no-op"},
        {"event": "node", "node": "gate", "iteration": 2, "gate_decision": "no-op"},
        {"event": "gate_fallback", "iteration": 3, "fallbacks": ["unusable"]},
        {"event": "node", "node": "gate", "iteration": 3, "gate_decision": "no-op"},
        # iteration 3 again after a resume: the model answered this time
        {"event": "node", "node": "gate", "iteration": 3, "gate_decision": "retrieve"},
    ]
    gates = gate_by_iteration(events)
    assert {it: e["gate_decision"] for it, e in gates.items()} == {
        1: "fallback",
        2: "no-op",
        3: "retrieve",
    }


def test_call_figures_sum_cache_reuse_and_model_time_per_node():
    from evoduet_graph.report.calls import call_figures, call_table

    def call(node: str, inp: int, cached: int | None, reason: str, **extra: float) -> dict:
        ev = {
            "event": "llm_call",
            "from_node": node,
            "input_tokens": inp,
            "output_tokens": 5,
            "finish_reason": reason,
            **extra,
        }
        if cached is not None:
            ev["cached_input_tokens"] = cached
        return ev

    events = [
        {"event": "node", "node": "gate", "llm_calls": 1},  # not a call event: ignored
        call("gate", 1000, 100, "stop", prompt_eval_s=9.0, decode_s=3.0, lock_wait_s=0.5),
        call("generate", 1200, 900, "stop", prompt_eval_s=3.0, decode_s=20.0),
        call("generate", 800, None, "length", decode_s=10.0),
    ]
    f = call_figures(events)
    gen = f.by_node["generate"]
    assert gen.calls == 2 and gen.input_tokens == 2000 and gen.cached_input_tokens == 900
    assert gen.cache_share == 0.45 and gen.finish_reasons == {"length": 1, "stop": 1}
    assert f.total.cache_share == round(1000 / 3000, 4)
    assert f.total.prompt_eval_s == 12.0 and f.total.lock_wait_s == 0.5
    headers, rows = call_table(f)
    assert rows[-1][0] == "**total**" and rows[-1][headers.index("cached share")] == "33.3%"
    assert call_figures([]).by_node == {} and call_figures([]).total.cache_share is None

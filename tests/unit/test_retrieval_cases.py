"""What the documents did per iteration (`benchmarks/retrieval_cases.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoduet_graph.rundir.store import ProgramRow, ProgramStore
from tests.conftest import ROOT, load_script

rc = load_script(ROOT / "benchmarks" / "retrieval_cases.py")

PARENT = "x = 1\n"


def _program(pid: str, iteration: int, score: float | None, status: str = "evaluated"):
    return ProgramRow(
        id=pid,
        code=f"x = {pid!r}\n" if iteration else PARENT,
        parent_id=None if iteration == 0 else "initial",
        iteration=iteration,
        kind="initial" if iteration == 0 else "rewrite",
        status=status,
        score=score,
        valid=score is not None,
    )


def _run(tmp_path: Path, method: str, events: list[dict], programs: list[ProgramRow]) -> Path:
    run = tmp_path / "runs" / "t" / method / "seed1" / "run"
    run.mkdir(parents=True)
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    docs = [{"type": "document", "doc_id": "doc_1", "url": "oracle/a.md", "title": "A"}]
    (run / "search_database.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    store = ProgramStore(run / "programs.sqlite")
    for row in [_program("initial", 0, 0.5), *programs]:
        store.put_program(row)
    store.close()
    return run


def test_oracle_documents_count_and_their_outcome_comes_from_the_program_store(tmp_path):
    gate = {"event": "node", "node": "gate", "gate_decision": "no-op"}
    gate["gate_reason"] = "gate mode oracle: 1 fixed document(s)"
    events = [{**gate, "iteration": i, "documents": ["doc_1"]} for i in (1, 2, 3)]
    run = _run(
        tmp_path,
        "oracle",
        events,
        [
            _program("c1", 1, None, status="invalid"),
            _program("c2", 2, 0.4),
            _program("c3", 3, 0.7),
        ],
    )
    blocks, picked = rc.run_cases(run, max_diff_lines=10)
    assert len(blocks) == 3
    assert picked == {"not improved": 2, "improved": 3}
    assert "no-op (gate mode oracle: 1 fixed document(s)), outcome not_evaluated" in blocks[0]
    assert "outcome decreased (Δ -0.1)" in blocks[1]
    assert "outcome improved (Δ 0.2)" in blocks[2]
    assert "- document doc_1: A (oracle/a.md)\n" in blocks[2]


def test_an_impact_event_gives_the_outcome_and_predictions_and_joint_searches_name_the_candidate(
    tmp_path,
):
    events = [
        {"event": "gate_decision", "iteration": 1, "decision": "retrieve"},
        {"event": "search", "iteration": 1, "round": 0, "query": "basin hopping"},
        {"event": "impact", "iteration": 1, "outcome": "unchanged", "delta": 0.0}
        | {"doc_ids": ["doc_1"], "predicted": [0.9]},
        {"event": "joint_search", "iteration": 2, "candidate_index": 0, "doc_ids": ["doc_1"]},
        {"event": "node", "node": "gate", "iteration": 4, "documents": []},
    ]
    run = _run(tmp_path, "evoduet", events, [_program("c1", 1, 0.9), _program("c2", 2, 0.6)])
    blocks, picked = rc.run_cases(run, max_diff_lines=10)
    assert len(blocks) == 2  # iteration 4's prompt had no documents
    assert "#### iteration 1: retrieve, outcome unchanged (Δ 0)" in blocks[0]
    assert "predicted 0.9" in blocks[0] and "“basin hopping”" in blocks[0]
    assert "outcome improved (Δ 0.1)" in blocks[1]
    assert "(oracle/a.md), candidate 0" in blocks[1]
    assert picked == {"not improved": 1, "improved": 2}


def test_a_run_whose_gate_never_brought_documents_gets_a_section_that_says_so(tmp_path, capsys):
    events = [
        {"event": "gate_decision", "iteration": 1, "decision": "no-op"},
        {"event": "gate_lookup_fallback", "iteration": 2},
        {"event": "gate_decision", "iteration": 2, "decision": "no-op"},
        {"event": "node", "node": "gate", "iteration": 2, "documents": []},
    ]
    _run(tmp_path, "evoduet", events, [_program("c1", 1, 0.9), _program("c2", 2, 0.6)])
    assert rc.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## t / evoduet / seed1\n")
    assert "Gate decisions: no-op 2 (of the no-ops, 1 a look-up with nothing stored" in out
    assert "No iteration's mutation prompt carried documents." in out


def test_a_run_without_a_readable_events_log_still_gets_a_section_that_says_so(tmp_path, capsys):
    (_run(tmp_path, "evoduet", [], []) / "events.jsonl").unlink()
    torn = _run(tmp_path, "oracle", [], []) / "events.jsonl"
    torn.write_text('{"event": "gate_decision", "iter\n[1, 2]\n')
    assert rc.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (
        "## t / evoduet / seed1\n\nNo events log (events.jsonl): nothing of this run to read.\n"
        in out
    )
    assert (
        "## t / oracle / seed1\n\nIts events log (events.jsonl) holds no readable event "
        "(2 unreadable): nothing of this run to read.\n"
    ) in out


def test_an_unreadable_program_store_is_named_once_and_its_diffs_left_out(tmp_path, capsys):
    gate = {"event": "node", "node": "gate", "gate_decision": "no-op", "documents": ["doc_1"]}
    events = [{**gate, "iteration": i} for i in (1, 2)]
    programs = [_program("c1", 1, 0.7), _program("c2", 2, 0.4)]
    (_run(tmp_path, "oracle", events, programs) / "programs.sqlite").write_bytes(b"not sqlite")
    (_run(tmp_path, "evoduet", events, programs) / "programs.sqlite").unlink()
    assert rc.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("Program store unreadable (not a program store): children and diffs") == 1
    assert out.count("Program store unreadable (no programs.sqlite): children and diffs") == 1
    assert "```diff" not in out and "outcome n/a" in out and "Cases: none." in out


def test_an_event_with_a_field_of_the_wrong_type_is_left_out_and_counted(tmp_path, capsys):
    events = [
        {"event": "gate_decision", "iteration": 1, "decision": "retrieve"},
        {"event": "search", "iteration": 1, "round": "abc", "query": "torn round"},
        {"event": "search", "iteration": 1, "round": 1, "query": "basin hopping"},
        {"event": "gate_decision", "iteration": "2", "decision": "retrieve"},
        {"event": "impact", "iteration": 1, "outcome": "improved", "delta": 0.4}
        | {"doc_ids": ["doc_1"], "predicted": [0.9]},
        {"event": "impact", "iteration": 2, "doc_ids": [["doc_1"]], "predicted": [0.9]},
    ]
    run = _run(tmp_path, "evoduet", events, [_program("c1", 1, 0.9)])
    blocks, picked = rc.run_cases(run, max_diff_lines=10)
    assert len(blocks) == 1 and picked == {"improved": 1}
    assert "“basin hopping”" in blocks[0] and "torn round" not in blocks[0]
    assert rc.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Gate decisions: retrieve 1.\n\nUnreadable events left out: 3 (a torn line" in out


def test_unknown_methods_or_tasks_and_max_diff_lines_below_1_are_refused(tmp_path, capsys):
    _run(tmp_path, "evoduet", [], [])
    assert rc.main([str(tmp_path), "--methods", "evoduet,nosuch,other"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"error: no run directories of method(s) nosuch, other under {tmp_path / 'runs'}; "
        "methods there: evoduet\n"
    )
    assert rc.main([str(tmp_path), "--tasks", "nosuch"]) == 2
    assert "task(s) nosuch" in capsys.readouterr().err
    for lines in ("-1", "0"):
        with pytest.raises(SystemExit) as exit_:
            rc.main([str(tmp_path), "--max-diff-lines", lines])
        assert exit_.value.code == 2
        assert "--max-diff-lines" in capsys.readouterr().err

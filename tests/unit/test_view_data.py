"""The prompt log and the view's reading of a run directory.

Read-only, the last prompt per candidate and attempt, non-finite numbers served as null.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from evoduet_graph.rundir import layout
from evoduet_graph.rundir.prompts import PromptLog, message_dicts, read_prompts
from evoduet_graph.rundir.read import load_programs
from evoduet_graph.rundir.store import ProgramRow, ProgramStore
from evoduet_graph.view.data import RunSource


def test_messages_are_kept_with_openai_roles() -> None:
    messages = [
        SystemMessage(content="sys"),
        HumanMessage(content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        AIMessage(content="reply"),
        ("user", "pair"),
    ]
    assert message_dicts(messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "ab"},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": "pair"},
    ]


def test_a_torn_last_line_is_cut_when_the_log_is_opened_again(tmp_path: Path) -> None:
    path = tmp_path / layout.PROMPTS
    log = PromptLog(path)
    log.write(
        iteration=1,
        candidate="it00001-c0",
        parent="initial",
        attempt=0,
        messages=[("user", "x")],
        reply="y",
    )
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"iteration": 2, "candi')  # a kill mid-line
    assert [r["candidate"] for r in read_prompts(path)] == ["it00001-c0"]
    PromptLog(path).write(
        iteration=2,
        candidate="it00002-c0",
        parent="it00001-c0",
        attempt=0,
        messages=[("user", "x")],
        reply=None,
        error="LLM call failed",
    )
    records = list(read_prompts(path))
    assert [r["candidate"] for r in records] == ["it00001-c0", "it00002-c0"]
    assert records[1]["reply"] is None and records[1]["error"] == "LLM call failed"
    assert (
        PromptLog(None).write(
            iteration=1, candidate="c", parent=None, attempt=0, messages=[], reply="r"
        )["reply"]
        == "r"
    )


def _run_dir(tmp_path: Path) -> Path:
    rdir = tmp_path / "run"
    store = ProgramStore(rdir / layout.PROGRAMS)
    store.put_program(
        ProgramRow(
            id="initial",
            code="a = 1\n",
            parent_id=None,
            iteration=0,
            kind="initial",
            status="evaluated",
            score=0.1,
            valid=True,
        )
    )
    store.put_program(
        ProgramRow(
            id="it00001-c0",
            code="a = 2\n",
            parent_id="initial",
            iteration=1,
            kind="rewrite",
            status="evaluated",
            score=0.2,
            valid=True,
        )
    )
    store.close()
    return rdir


def test_the_store_is_read_without_writing_a_file(tmp_path: Path) -> None:
    rdir = _run_dir(tmp_path)
    before = sorted(p.name for p in rdir.iterdir())
    assert before == [layout.PROGRAMS]  # closed cleanly: no -wal, no -shm
    rows = load_programs(rdir / layout.PROGRAMS)
    assert rows is not None and [r.id for r in rows] == ["initial", "it00001-c0"]
    assert sorted(p.name for p in rdir.iterdir()) == before


def test_a_replayed_generate_shows_its_last_call(tmp_path: Path) -> None:
    rdir = _run_dir(tmp_path)
    log = PromptLog(rdir / layout.PROMPTS)
    for reply in ("first session", "replayed after the resume"):
        log.write(
            iteration=1,
            candidate="it00001-c0",
            parent="initial",
            attempt=0,
            messages=[("user", "improve")],
            reply=reply,
        )
    log.write(
        iteration=1,
        candidate="it00001-c0",
        parent="initial",
        attempt=1,
        messages=[("user", "improve")],
        reply="the novelty resample",
    )
    program = RunSource(rdir, "run").program("it00001-c0")
    assert [(p["attempt"], p["reply"]) for p in program["prompts"]] == [
        (0, "replayed after the resume"),
        (1, "the novelty resample"),
    ]
    assert program["diff"].splitlines()[-2:] == ["-a = 1", "+a = 2"]


def test_a_non_finite_number_in_a_log_is_served_as_null(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from evoduet_graph.view.app import make_app

    rdir = _run_dir(tmp_path)
    # json.loads reads NaN / Infinity; a line written by hand or by another tool may hold them
    (rdir / layout.EVENTS).write_text(
        '{"event": "gate_decision", "iteration": 1, "decision": "retrieve"}\n'
        '{"event": "impact", "iteration": 1, "record_id": "ret_000001", "delta": NaN,'
        ' "realised": Infinity, "outcome": "improved"}\n',
        encoding="utf-8",
    )
    client = TestClient(make_app([RunSource(rdir, "run")]))
    response = client.get("/api/runs/0/timeline")
    assert response.status_code == 200
    (impact,) = response.json()["iterations"][0]["impacts"]
    assert impact["delta"] is None and impact["realised"] is None
    assert client.get("/api/runs/0/programs").json()["best_lineage"] == ["initial", "it00001-c0"]

"""Live progress: custom-stream events, the rich display, ``--json`` / ``--quiet``.

Live progress: the custom-stream events of a run, the rich display, ``--json`` / ``--quiet``,
and the offline index build's progress.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.cli import app
from evoduet_graph.report.live import LiveDisplay, RunStatus
from evoduet_graph.rundir.events import read_events
from evoduet_graph.search.offline import OfflineSearcher, OfflineSources, index_progress
from tests.conftest import BAD_DIFF, RADIUS_UP, SMOKE_TASK, SPREAD_UP
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel

OUTER = ("initialize", "select", "gate", "query_evolution", "generate", "evaluate", "record")


def _knowledge_config(**kw: Any) -> EvoDuetConfig:
    base = {
        "iterations": 3,
        "population": {"num_islands": 1},
        "evaluation": {"workers": 1},
        "gate": {"mode": "llm"},
        "retrieval": {"inner_rounds": 2, "search_retries": 0},
    }
    base.update(kw)
    return EvoDuetConfig.model_validate(base)


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> dict[str, Any]:
    """A 3-iteration retrieve-every-time run with both callbacks recorded."""
    answers = iter([RADIUS_UP, BAD_DIFF, SPREAD_UP])
    responder = KnowledgeResponder(gate="retrieve", generate=lambda _m: next(answers))
    llm = ScriptedChatModel(responses=[], default=responder)
    rdir = tmp_path_factory.mktemp("progress") / "run"
    events: list[dict[str, Any]] = []
    updates: list[str] = []
    result = run(
        SMOKE_TASK,
        _knowledge_config(),
        llm=llm,
        run_dir=rdir,
        searcher=FakeSearcher(),
        on_event=events.append,
        progress=lambda node, update: updates.append(node),
    )
    return {"events": events, "updates": updates, "dir": rdir, "result": result}


def test_progress_callback_contract_is_unchanged(streamed):
    # outer nodes only, one call per node execution, in order
    assert streamed["updates"][:1] == ["initialize"]
    assert streamed["updates"][1:] == list(OUTER[1:]) * 3


def test_node_events_mirror_events_jsonl(streamed):
    stream = [e for e in streamed["events"] if e["event"] == "node"]
    logged = [e for e in read_events(streamed["dir"] / "events.jsonl") if e["event"] == "node"]
    key = ("node", "iteration", "elapsed_s", "llm_calls", "output_tokens")
    assert [tuple(e.get(k) for k in key) for e in stream] == [
        tuple(e.get(k) for k in key) for e in logged
    ]
    starts = [e for e in streamed["events"] if e["event"] == "node_start"]
    assert sorted(e["node"] for e in starts) == sorted(e["node"] for e in stream)


def test_inner_loop_events_carry_round_and_query(streamed):
    inner = [e for e in streamed["events"] if e.get("subgraph") == "query_evolution"]
    assert {e["event"] for e in inner} >= {"node_start", "node", "queries", "search"}
    starts = [e for e in inner if e["event"] == "node_start" and e["node"] == "construct_query"]
    assert [(e["iteration"], e["round"], e["rounds"]) for e in starts] == [
        (it, r, 2) for it in (1, 2, 3) for r in (0, 1)
    ]
    queries = [e for e in inner if e["event"] == "queries"]
    assert all(e["queries"] for e in queries) and len(queries) == 6
    searches = [e for e in inner if e["event"] == "search"]
    assert all(e["results"] == 5 and e["error"] is None for e in searches)
    gaps = [e for e in inner if e["event"] == "node" and e.get("knowledge_gap")]
    assert gaps and gaps[0]["knowledge_gap"] == "gap"
    # outer events are not tagged
    assert not any(e.get("subgraph") for e in streamed["events"] if e.get("node") in OUTER)


def test_new_best_events_carry_ndg(streamed):
    best = [e for e in streamed["events"] if e["event"] == "new_best"]
    task = load_task(SMOKE_TASK)
    assert best[0]["iteration"] == 0 and best[0]["id"] == "initial"
    assert best[-1]["id"] == streamed["result"].best_id
    assert best[-1]["ndg"] == pytest.approx(task.ndg(best[-1]["metric_value"]))
    assert best[-1]["ndg"] == pytest.approx(streamed["result"].ndg)
    assert all(json.dumps(e) for e in streamed["events"])  # JSON-ready


def test_run_status_lines(streamed):
    status = RunStatus(load_task(SMOKE_TASK))
    lines_mid: list[str] = []
    for ev in streamed["events"]:
        status.update(ev)
        if ev["event"] == "search" and ev["iteration"] == 2:
            lines_mid = status.lines()
    text = "\n".join(lines_mid)
    assert "node: search (query_evolution) (iteration 2)" in text
    assert "gate: retrieve" in text and "gap: gap" in text
    assert "inner loop: round" in text and "query: “query" in text and "5 results" in text
    assert "NDG" in text and "LLM " in text and "failures: 0" in text
    final = "\n".join(status.lines())
    assert status.completed == 3
    assert "failures: 1 (1 invalid)" in final
    assert f"NDG {streamed['result'].ndg:.1f}%" in final


def test_tokens_per_second_leave_out_inclusive_nodes():
    status = RunStatus()
    for node, tokens, latency in (
        ("gate", 100, 2.0),
        ("query_evolution", 500, 5.0),
        ("search", 0, 0),
    ):
        status.update(
            {
                "event": "node",
                "node": node,
                "llm_calls": 1,
                "output_tokens": tokens,
                "llm_latency_s": latency,
            }
        )
    assert status.tokens_per_s == pytest.approx(50.0) and status.llm_calls == 2
    assert "LLM 2 calls, 100 tokens, 50.0 tok/s" in status.lines()[-1]


def test_live_display_draws_bar_and_status(streamed):
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=200, color_system=None)
    task = load_task(SMOKE_TASK)
    with LiveDisplay(task, 3, console=console) as display:
        for ev in streamed["events"]:
            display.on_event(ev)
    out = buf.getvalue()
    assert "smoke_polygon_area" in out and "3/3 iterations" in out and "ETA" in out
    assert f"best: {streamed['result'].best_score:.6g}" in out
    assert f"NDG {streamed['result'].ndg:.1f}%" in out


def _patch_model(monkeypatch, answers: list[str]) -> None:
    import evoduet_graph.llm as llm_pkg

    def fake_factory(cfg, **_kw):
        return ScriptedChatModel(responses=list(answers), default="no change")

    monkeypatch.setattr(llm_pkg, "make_chat_model", fake_factory)


def test_cli_run_json_lines(smoke_task_dir, tmp_path, monkeypatch):
    _patch_model(monkeypatch, [RADIUS_UP, SPREAD_UP])
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(smoke_task_dir),
            "--iterations",
            "2",
            "--out",
            str(out),
            "--json",
            "--gate",
            "never",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.strip().splitlines()]
    kinds = [e["event"] for e in lines]
    assert kinds[0] == "node_start" and kinds[-1] == "result"
    assert {"node", "new_best"} <= set(kinds)
    final = lines[-1]
    assert final["iterations"] == 2 and final["run_dir"] == str(out.resolve())
    assert final["best_id"] == "it00002-c0" and final["ndg"] is not None
    assert "━" not in result.output  # no bar in --json mode


def test_cli_run_quiet_prints_only_the_summary(smoke_task_dir, tmp_path, monkeypatch):
    _patch_model(monkeypatch, [RADIUS_UP])
    result = CliRunner().invoke(
        app,
        ["run", str(smoke_task_dir), "--iterations", "1", "--out", str(tmp_path / "r"), "--quiet"],
    )
    assert result.exit_code == 0, result.output
    assert "done" in result.output and "NDG" in result.output
    assert "node:" not in result.output and "iterations ·" not in result.output


def test_cli_resume_json(smoke_task_dir, tmp_path, monkeypatch):
    _patch_model(monkeypatch, [RADIUS_UP])
    out = tmp_path / "r"
    runner = CliRunner()
    first = runner.invoke(
        app, ["run", str(smoke_task_dir), "--iterations", "1", "--out", str(out), "--quiet"]
    )
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, ["resume", str(out), "--iterations", "2", "--json"])
    assert again.exit_code == 0, again.output
    lines = [json.loads(line) for line in again.stdout.strip().splitlines()]
    assert lines[-1]["event"] == "result" and lines[-1]["iterations"] == 2
    assert any(e.get("node") == "select" and e.get("iteration") == 2 for e in lines)


def test_offline_index_build_reports_progress(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"note{i}.md").write_text(f"# Note {i}\n\ncircle packing idea {i}\n")
    sources = OfflineSources(folders=(corpus,))
    seen: list[dict[str, Any]] = []
    with index_progress(seen.append):
        OfflineSearcher(sources, cache_dir=tmp_path / "cache").preflight()
    stages = [e["stage"] for e in seen]
    assert stages[0] == "start" and stages[-1] == "done"
    assert stages.count("files") == 3 and "bm25" in stages
    assert seen[-1]["cache_hit"] is False and seen[-1]["documents"] == 3
    again: list[dict[str, Any]] = []
    with index_progress(again.append):
        OfflineSearcher(sources, cache_dir=tmp_path / "cache").preflight()
    assert [e["stage"] for e in again] == ["start", "done"] and again[-1]["cache_hit"] is True
    # outside the context nothing is reported
    OfflineSearcher(sources, cache_dir=tmp_path / "cache2").preflight()
    assert len(seen) == len(stages)


def test_run_forwards_index_progress(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Points\n\nPut the points on a circle.\n")
    cfg = _knowledge_config(
        iterations=1,
        retrieval={
            "backend": "offline",
            "corpus": [str(corpus)],
            "offline_include_pydoc": [],
            "index_cache_dir": str(tmp_path / "cache"),
        },
    )
    llm = ScriptedChatModel(responses=[], default=KnowledgeResponder(gate="no-op"))
    events: list[dict[str, Any]] = []
    run(SMOKE_TASK, cfg, llm=llm, run_dir=tmp_path / "r", on_event=events.append)
    index = [e for e in events if e["event"] == "index"]
    assert index and index[-1]["stage"] == "done"
    assert events.index(index[-1]) < events.index(
        next(e for e in events if e["event"] == "node_start")
    )
    status = RunStatus()
    for ev in index[:-1]:
        status.update(ev)
    assert status.index and "offline search index" in status.index


def test_off_a_terminal_the_display_ends_its_last_line_before_the_summary():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=80)
    with LiveDisplay(load_task(SMOKE_TASK), 3, console=console):
        pass
    console.print("done in 1.0 s")
    assert "\ndone in 1.0 s\n" in buffer.getvalue()

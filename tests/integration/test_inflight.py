"""Iterations in flight (``max_iterations_in_flight``).

K iterations run at once, each recorded once when it finishes, D_search credit stays with its own
iteration, k = 1 is the sequential loop, and a SIGKILL mid-flight loses only the iterations in
flight.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.config import ConfigError
from evoduet_graph.errors import RunError
from evoduet_graph.report.live import RunStatus
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.rundir.usage import completed_iterations
from evoduet_graph.search import SearchDatabase
from tests.conftest import ROOT, SMOKE_TASK
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel

GATE_PATTERN = ("retrieve", "no-op", "look-up", "no-op")


def _llm(delay_s: float = 0.05) -> ScriptedChatModel:
    task = load_task(SMOKE_TASK)
    lock = threading.Lock()
    counter = {"k": 0}

    def rewrite(_messages: Any) -> str:
        with lock:
            counter["k"] += 1
            k = counter["k"]
        code = task.initial_program.replace("radius = 0.6", f"radius = {0.6 + 0.001 * k:.4f}")
        return f"```python\n{code}\n```"

    responder = KnowledgeResponder(
        gate=lambda i, _t: GATE_PATTERN[i % len(GATE_PATTERN)], generate=rewrite, delay_s=delay_s
    )
    return ScriptedChatModel(responses=[], default=responder)


def _config(k: int, iterations: int = 8, **extra: Any) -> EvoDuetConfig:
    return EvoDuetConfig.model_validate(
        {
            "iterations": iterations,
            "max_iterations_in_flight": k,
            "prompt": {"diff_based": False},
            "population": {"num_islands": 2},
            "gate": {"mode": "llm"},
            "retrieval": {"inner_rounds": 2, "search_retries": 0},
            **extra,
        }
    )


def _nodes(run_dir: Path) -> list[dict[str, Any]]:
    return [e for e in read_events(run_dir / "events.jsonl") if e.get("event") == "node"]


@pytest.fixture(scope="module")
def four_in_flight(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    run_dir = tmp_path_factory.mktemp("inflight") / "run"
    result = run(
        load_task(SMOKE_TASK), _config(4), llm=_llm(), run_dir=run_dir, searcher=FakeSearcher()
    )
    return result, run_dir


def test_four_in_flight_record_every_iteration_once(four_in_flight):
    result, run_dir = four_in_flight
    nodes = _nodes(run_dir)
    records = Counter(e["iteration"] for e in nodes if e["node"] == "record")
    assert records == Counter(range(1, 9))
    assert result.iterations == 8 and result.stop_reason is None
    assert completed_iterations(run_dir) == 8
    run_end = [e for e in read_events(run_dir / "events.jsonl") if e["event"] == "run_end"]
    assert run_end[-1]["iterations"] == 8
    # iterations overlapped: several gates ran before the first record
    first_record = next(i for i, e in enumerate(nodes) if e["node"] == "record")
    assert len({e["iteration"] for e in nodes[:first_record] if e["node"] == "gate"}) >= 2
    # each iteration ran its own gate, generate and evaluate exactly once
    for node in ("select", "gate", "generate", "evaluate"):
        assert Counter(e["iteration"] for e in nodes if e["node"] == node) == Counter(range(1, 9))


def test_parents_come_from_iterations_recorded_before_the_child_started(four_in_flight):
    _, run_dir = four_in_flight
    nodes = _nodes(run_dir)
    recorded_at = {e["iteration"]: i for i, e in enumerate(nodes) if e["node"] == "record"}
    for pos, event in enumerate(nodes):
        if event["node"] != "select" or event["parent_id"] == "initial":
            continue
        parent_iteration = int(event["parent_id"][2:7])  # it00003-c0
        assert recorded_at[parent_iteration] < pos, (event["iteration"], event["parent_id"])


def test_dsearch_credit_goes_to_its_own_iteration_once(four_in_flight):
    _, run_dir = four_in_flight
    db = SearchDatabase(run_dir / "search_database.jsonl")
    store = ProgramStore(run_dir / "programs.sqlite")
    try:
        credited = Counter((r.record_id, i.iteration) for r in db.records() for i in r.impacts)
        assert credited and all(n == 1 for n in credited.values()), credited
        for record in db.records():
            for impact in record.impacts:
                assert impact.iteration == record.iteration
                children = [
                    p
                    for p in store.all_programs()
                    if p.iteration == impact.iteration and p.valid and p.kind != "initial"
                ]
                best = max(p.score for p in children)
                assert impact.child_score == pytest.approx(best)
                parent = store.get_program(children[0].parent_id)
                assert impact.parent_score == pytest.approx(parent.score)
    finally:
        store.close()


def test_one_in_flight_is_the_sequential_loop(tmp_path):
    run_dir = tmp_path / "run"
    run(load_task(SMOKE_TASK), _config(1, 4), llm=_llm(0), run_dir=run_dir, searcher=FakeSearcher())
    nodes = _nodes(run_dir)
    assert not {e["node"] for e in nodes} & {"dispatch", "collect"}
    outer = [e for e in nodes if e["node"] in ("select", "record")]
    assert [(e["node"], e["iteration"]) for e in outer] == [
        (n, i) for i in range(1, 5) for n in ("select", "record")
    ]
    # each iteration's nodes run between its select and its record
    current = 0
    for event in nodes[1:]:
        if event["node"] == "select":
            current = event["iteration"]
        assert event["iteration"] == current


def test_bad_values_fail_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="max_iterations_in_flight"):
        EvoDuetConfig().with_overrides({"max_iterations_in_flight": 0})
    cfg = _config(4, gate={"mode": "llm", "review": True})
    with pytest.raises(ConfigError, match="max_iterations_in_flight=4"):
        run(
            load_task(SMOKE_TASK), cfg, llm=_llm(0), run_dir=tmp_path / "r", searcher=FakeSearcher()
        )
    assert not (tmp_path / "r" / "events.jsonl").exists()


def test_a_continued_run_cannot_change_k(tmp_path):
    run_dir = tmp_path / "run"
    task = load_task(SMOKE_TASK)
    run(task, _config(1, 1), llm=_llm(0), run_dir=run_dir, searcher=FakeSearcher())
    with pytest.raises(RunError, match="max_iterations_in_flight"):
        run(task, _config(4, 2), llm=_llm(0), run_dir=run_dir, searcher=FakeSearcher())


def test_progress_counts_iterations_finishing_out_of_order():
    status = RunStatus()
    for done, iteration in ((1, 3), (2, 1), (3, 4)):
        status.update(
            {"event": "node", "node": "collect", "iteration": iteration, "iterations_done": done}
        )
        status.update({"event": "node", "node": "record", "iteration": iteration})
    assert status.completed == 3


def _start(run_dir: Path, iterations: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration._run_inflight",
            str(run_dir),
            str(iterations),
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_mid_flight_then_resume_loses_only_the_iterations_in_flight(tmp_path):
    run_dir = tmp_path / "run"
    total = 10
    proc = _start(run_dir, total)

    def killable() -> bool:
        nodes = _nodes(run_dir) if (run_dir / "events.jsonl").exists() else []
        recorded = {e["iteration"] for e in nodes if e["node"] == "record"}
        # two iterations recorded and a later one part-way (its generate done, not recorded)
        return len(recorded) >= 2 and any(
            e["node"] == "generate" and e["iteration"] not in recorded for e in nodes
        )

    try:
        deadline = time.time() + 180
        while not killable():
            assert time.time() < deadline and proc.poll() is None, proc.stderr.read()[-3000:]
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    before = _nodes(run_dir)
    recorded_before = {e["iteration"] for e in before if e["node"] == "record"}
    started_before = {e["iteration"] for e in before if e["node"] == "select"}
    in_flight = started_before - recorded_before
    assert recorded_before and in_flight and len(recorded_before) < total

    resumed = _start(run_dir, total, "resume")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    assert out.strip().splitlines()[-1].startswith(f"DONE {total} ")

    after = _nodes(run_dir)[len(before) :]
    # nothing recorded before the kill started again; what was in flight did
    restarted = {e["iteration"] for e in after if e["node"] == "select"}
    assert not restarted & recorded_before
    assert in_flight <= restarted
    records = Counter(e["iteration"] for e in before + after if e["node"] == "record")
    assert set(records) == set(range(1, total + 1))
    # a record node re-run after a kill between its event and its checkpoint is the only
    # repeat allowed (as with one iteration at a time); its outcome is committed once. With
    # iterations in flight other iterations' node events follow that record event, so the
    # one that may repeat is the last *record* before the kill, not the last event.
    last_record = [e["iteration"] for e in before if e["node"] == "record"][-1]
    assert all(n == 1 for i, n in records.items() if i != last_record), records
    db = SearchDatabase(run_dir / "search_database.jsonl")
    credited = Counter((r.record_id, i.iteration) for r in db.records() for i in r.impacts)
    assert all(n == 1 for n in credited.values()), credited
    assert all(it in records for _, it in credited)
    # children of iterations recorded before the kill were evaluated once, in the first process
    log = [json.loads(x) for x in (run_dir / "evaluations.log").read_text().splitlines()]
    ids = Counter(entry["id"] for entry in log)
    for pid, n in ids.items():
        if pid.startswith("it") and int(pid[2:7]) in recorded_before:
            assert n == 1, (pid, n)
    assert completed_iterations(run_dir) == total


def test_cli_option_runs_iterations_in_flight_against_an_endpoint(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from evoduet_graph.cli import app
    from tests.fake_openai_server import FaultyServer
    from tests.studio_fakes import responder_content

    llm = _llm(0)
    rdir = tmp_path / "run"
    with FaultyServer(["ok"], content=responder_content(llm.default), delay_s=0.05) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        result = CliRunner().invoke(
            app,
            [
                "run",
                str(SMOKE_TASK),
                "--iterations",
                "4",
                "--iterations-in-flight",
                "2",
                "--gate",
                "never",
                "--model",
                "openai:scripted",
                "--out",
                str(rdir),
                "--quiet",
            ],
        )
    assert result.exit_code == 0, result.output
    assert "max_iterations_in_flight: 2" in (rdir / "config.yaml").read_text()
    nodes = _nodes(rdir)
    assert {"dispatch", "collect"} <= {e["node"] for e in nodes}
    assert Counter(e["iteration"] for e in nodes if e["node"] == "record") == Counter(range(1, 5))


def test_an_iteration_that_raises_stops_the_run_resumably(tmp_path):
    from evoduet_graph import resume
    from evoduet_graph.nodes.evaluate import evaluate

    def flaky_evaluate(state, runtime):
        if state["iteration"] == 3:
            raise RuntimeError("evaluator host went away")
        return evaluate(state, runtime)

    run_dir = tmp_path / "run"
    task = load_task(SMOKE_TASK)
    with pytest.raises(RuntimeError, match="evaluator host went away"):
        run(
            task,
            _config(3, 6),
            llm=_llm(0.02),
            run_dir=run_dir,
            searcher=FakeSearcher(),
            nodes={"evaluate": flaky_evaluate},
        )
    recorded_before = {e["iteration"] for e in _nodes(run_dir) if e["node"] == "record"}
    assert 3 not in recorded_before
    result = resume(run_dir, llm=_llm(0.02), searcher=FakeSearcher())
    assert result.iterations == 6
    records = Counter(e["iteration"] for e in _nodes(run_dir) if e["node"] == "record")
    assert set(records) == set(range(1, 7)) and all(n == 1 for n in records.values()), records


def test_graph_input_runs_iterations_in_flight(tmp_path, monkeypatch):
    """The graph ``langgraph.json`` serves (Studio) takes k in its input config."""
    import evoduet_graph
    from tests.fake_openai_server import FaultyServer
    from tests.studio_fakes import responder_content

    monkeypatch.setenv("EVODUET_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("EVODUET_CONFIG", raising=False)
    llm = _llm(0)
    with FaultyServer(["ok"], content=responder_content(llm.default), delay_s=0.05) as server:
        config = {
            "llm": {"model": "openai:scripted", "base_url": server.base_url, "max_retries": 0},
            "retrieval": {"offline_include_pydoc": [], "inner_rounds": 1},
            "max_iterations_in_flight": 3,
        }
        state = evoduet_graph.graph.invoke(
            {"task_dir": str(SMOKE_TASK), "max_iterations": 5, "config": config}
        )
    assert state["iterations_done"] == 5 and state["in_flight"] == []
    nodes = _nodes(Path(state["run_dir"]))
    assert Counter(e["iteration"] for e in nodes if e["node"] == "record") == Counter(range(1, 6))

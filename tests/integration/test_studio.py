"""LangGraph Studio: the served graph, its JSON context and a real dev server.

LangGraph Studio: the graph ``langgraph.json`` serves, its JSON context, and a real
``langgraph dev`` server driven through the LangGraph SDK (loopback only, fake model).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver

from evoduet_graph.graphs.outer import build_outer_graph
from evoduet_graph.graphs.studio import StudioContext, StudioContextError, load_model_spec
from evoduet_graph.report.summary import run_summary
from evoduet_graph.rundir.events import read_events
from tests.conftest import ROOT, SMOKE_TASK
from tests.fake_openai_server import FaultyServer
from tests.fakes import KnowledgeResponder
from tests.studio_fakes import growing_radius, responder_content

FAKE_MODEL = "python:tests.studio_fakes:improving_model"
INNER = ("construct_query", "search", "hypothetical_score", "update_knowledge")


def _context(run_dir: Path) -> dict:
    return {
        "task_dir": str(SMOKE_TASK),
        "run_dir": str(run_dir),
        "model": FAKE_MODEL,
        "config": {
            "population": {"num_islands": 1},
            "evaluation": {"workers": 1},
            "retrieval": {"offline_include_pydoc": []},  # the task's docs: a small index
        },
    }


def test_xray_shows_the_inner_loop_inside_query_evolution():
    nodes = set(build_outer_graph().compile().get_graph(xray=True).nodes)
    assert {f"query_evolution:{n}" for n in INNER} <= nodes
    assert "query_evolution" not in nodes  # drawn as the subgraph
    plain = set(build_outer_graph().compile().get_graph().nodes)
    assert "query_evolution" in plain and not any(n.startswith("query_evolution:") for n in plain)


def test_studio_graph_runs_from_a_json_context(tmp_path):
    from evoduet_graph.graphs.studio import graph

    assert graph.context_schema is StudioContext
    schema = graph.get_context_jsonschema()
    assert set(schema["properties"]) == {"task_dir", "run_dir", "config_file", "config", "model"}

    studio = build_outer_graph(context_schema=StudioContext).compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "studio-test"}}
    rdir = tmp_path / "studio-run"
    state = studio.invoke({"max_iterations": 2}, thread, context=_context(rdir))
    assert state["iteration"] == 2 and state["best_id"] == "it00002-c0"
    # a second run on the same thread continues with the same cached dependencies
    state = studio.invoke({"max_iterations": 3}, thread, context=_context(rdir))
    assert state["iteration"] == 3
    meta = json.loads((rdir / "run.json").read_text())
    assert meta["studio"] is True and meta["thread_id"] == "studio-test"
    summary = run_summary(rdir)  # `evoduet report` works on a Studio run directory
    assert summary.iterations == 3 and summary.best.id == "it00002-c0"


def test_studio_context_errors(tmp_path):
    with pytest.raises(StudioContextError, match="python:<module>:<attribute>"):
        load_model_spec("python:nomodule")
    with pytest.raises(StudioContextError, match="does not import"):
        load_model_spec("python:tests.studio_fakes:nope")
    from evoduet_graph.config import ConfigError

    ctx = StudioContext(
        task_dir=str(SMOKE_TASK), run_dir=str(tmp_path / "r"), config={"gate": {"mode": "x"}}
    )
    with pytest.raises(ConfigError, match="gate.mode"):
        ctx.resolve()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _langgraph_cli() -> Path:
    exe = Path(sys.executable).parent / "langgraph"
    if not exe.exists():
        pytest.fail("langgraph-cli[inmem] is not installed (it is in the [dev] extra)")
    return exe


@contextlib.contextmanager
def _dev_server(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Any]:
    """``langgraph dev`` on a free loopback port in the project root.

    ``langgraph dev`` on a free loopback port in the project root (log in
    ``tmp_path/server.log``); yields ``(client, server process)`` once it answers.
    """
    pytest.importorskip("langgraph_api", reason="needs langgraph-cli[inmem] (the [dev] extra)")
    from langgraph_sdk import get_sync_client

    port = _free_port()
    full_env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [
            str(_langgraph_cli()),
            "dev",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-browser",
            *args,
        ],
        cwd=ROOT,
        env=full_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        client = get_sync_client(url=f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 90
        while True:
            if server.poll() is not None:
                pytest.fail("langgraph dev exited:\n" + (tmp_path / "server.log").read_text())
            try:
                client.assistants.search()
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    pytest.fail(
                        "langgraph dev did not start:\n" + (tmp_path / "server.log").read_text()
                    )
                time.sleep(0.5)
        yield client, server
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        log.close()


def test_langgraph_dev_server_runs_two_iterations(tmp_path):
    with _dev_server(tmp_path, "--no-reload") as (client, _server):
        assistants = client.assistants.search()
        assert [a["graph_id"] for a in assistants] == ["evoduet"]
        drawn = client.assistants.get_graph(assistants[0]["assistant_id"], xray=True)
        assert {f"query_evolution:{n}" for n in INNER} <= {n["id"] for n in drawn["nodes"]}
        # Studio draws the gate's edges with the paper's decision names
        plain = client.assistants.get_graph(assistants[0]["assistant_id"])
        labels = {(e["target"], e.get("data")) for e in plain["edges"] if e["source"] == "gate"}
        assert labels == {
            ("generate", "no-op"),
            ("look_up", "look-up"),
            ("query_evolution", "retrieve"),
        }

        thread = client.threads.create()
        rdir = tmp_path / "run"
        result = client.runs.wait(
            thread["thread_id"], "evoduet", input={"max_iterations": 2}, context=_context(rdir)
        )
        assert isinstance(result, dict) and "__error__" not in result, result
        state = client.threads.get_state(thread["thread_id"])
        values = state["values"]
        assert values["iteration"] == 2 and values["best_id"] == "it00002-c0"
        assert values["best_score"] > values["initial_score"]
        assert state["next"] == []
        assert json.loads((rdir / "best_program.json").read_text())["id"] == "it00002-c0"


def test_a_studio_thread_with_only_the_task_as_input_survives_the_file_watcher(tmp_path):
    """A thread whose input names only the task runs on the server's defaults.

    A thread whose input is only ``{"task_dir", "max_iterations"}`` (no context) runs on
    the defaults — the model comes from ``$EVODUET_CONFIG``, the server's base config — and
    writes every new best program into the default run directory, outside the project, so
    the dev server's file watcher (on: no ``--no-reload``) never restarts the server.
    """
    responder = KnowledgeResponder(gate=["retrieve", "no-op"], generate=growing_radius())
    with FaultyServer(["ok"], content=responder_content(responder)) as model:
        base = tmp_path / "studio.yaml"
        base.write_text(
            yaml.safe_dump(
                {
                    "llm": {
                        "model": "openai:scripted",
                        "base_url": model.base_url,
                        "max_retries": 0,
                    },
                    "retrieval": {
                        "offline_include_pydoc": []
                    },  # the task's docs only: a small index
                    "evaluation": {"workers": 1},
                }
            )
        )
        data = tmp_path / "data"  # the user's data folder (XDG_DATA_HOME), not the project
        # the default root under XDG_DATA_HOME; an inherited EVODUET_RUNS_DIR would move it
        env = {"EVODUET_CONFIG": str(base), "XDG_DATA_HOME": str(data), "EVODUET_RUNS_DIR": ""}
        # info: uvicorn then logs the reloader it starts ("... using WatchFiles")
        with _dev_server(tmp_path, "--server-log-level", "info", env=env) as (client, server):
            thread = client.threads.create()
            result = client.runs.wait(
                thread["thread_id"],
                "evoduet",
                input={"task_dir": "tasks/smoke_polygon_area", "max_iterations": 3},
            )
            assert isinstance(result, dict) and "__error__" not in result, result
            values = client.threads.get_state(thread["thread_id"])["values"]
            assert server.poll() is None  # the same server answered throughout
    log = (tmp_path / "server.log").read_text()
    assert "using WatchFiles" in log  # the watcher was on: uvicorn started its reloader
    assert "detected changes" not in log and "Reloading" not in log, log[-3000:]
    assert values["iteration"] == 3 and values["best_id"] == "it00003-c0"
    run_dir = data / "evoduet_graph" / "runs" / "threads" / thread["thread_id"]
    assert Path(values["run_dir"]) == run_dir.resolve()
    bests = [
        e
        for e in read_events(run_dir / "events.jsonl")
        if e.get("node") == "record" and "best_score" in e
    ]
    assert [e["iteration"] for e in bests] == [1, 2, 3]  # a new best program each iteration
    assert json.loads((run_dir / "best_program.json").read_text())["id"] == "it00003-c0"
    decisions = [
        e["gate_decision"] for e in read_events(run_dir / "events.jsonl") if e.get("node") == "gate"
    ]
    assert decisions == ["retrieve", "no-op", "no-op"]  # the LLM gate: the method, by default
    assert not (ROOT / "runs" / "studio" / thread["thread_id"]).exists()


def _interrupts(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The thread's pending interrupts (listed once, by id)."""
    found = list(state.get("interrupts") or [])
    for task in state.get("tasks") or []:
        found += list(task.get("interrupts") or [])
    return list({i.get("id") or json.dumps(i, sort_keys=True): i for i in found}.values())


def test_studio_review_queries_stops_and_resumes_with_an_edited_query(tmp_path):
    """``retrieval.review_queries`` in Studio: interrupt, edit, resume.

    ``retrieval.review_queries`` in Studio: the thread stops at the interrupt with the
    proposed queries, is resumed with an edited query, and that query is the one searched.
    """
    rdir = tmp_path / "run"
    context = _context(rdir)
    context["config"] = {
        **context["config"],
        "gate": {"mode": "always"},
        "retrieval": {
            "backend": "langchain:tests.search_plugins:make_retriever",
            "inner_rounds": 1,
            "review_queries": True,
        },
    }
    with _dev_server(tmp_path, "--no-reload") as (client, _server):
        thread = client.threads.create()["thread_id"]
        client.runs.wait(thread, "evoduet", input={"max_iterations": 1}, context=context)
        state = client.threads.get_state(thread)
        assert state["next"], state  # stopped, not finished
        [pause] = _interrupts(state)
        assert pause["value"]["kind"] == "review_queries"
        assert pause["value"]["queries"] == ["query 0"]
        result = client.runs.wait(
            thread,
            "evoduet",
            command={"resume": ["points on the unit circle"]},
            context=context,
        )
        assert isinstance(result, dict) and "__error__" not in result, result
        state = client.threads.get_state(thread)
        assert state["next"] == [] and state["values"]["iteration"] == 1
    events = [json.loads(line) for line in (rdir / "events.jsonl").read_text().splitlines()]
    assert [e["query"] for e in events if e["event"] == "search"] == ["points on the unit circle"]
    [search] = [e for e in events if e["event"] == "search"]
    assert "papers/polygons.md" in search["urls"]
    [review] = [e for e in events if e["event"] == "review"]
    assert review["edited"] is True and review["proposal"] == ["query 0"]

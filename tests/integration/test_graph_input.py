"""``graph.invoke(task)``: the graph builds every dependency from its input.

``graph.invoke(task)``: the package's default compiled graph and the graph ``langgraph.json``
serves take the task in their input and build every dependency themselves, on the defaults
(the EvoDuet method); the graph's edges speak the paper's words; any node of either loop is
swapped by name. The model is a scripted OpenAI-compatible server on loopback.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import evoduet_graph
from evoduet_graph import ConfigError, EvoDuetConfig, build_graph, run
from evoduet_graph.graphs.registry import UnknownNodeError
from evoduet_graph.graphs.studio_context import StudioContextError
from evoduet_graph.rundir.events import read_events
from evoduet_graph.task import TaskError
from tests.conftest import ROOT, SMOKE_TASK
from tests.fake_openai_server import FaultyServer
from tests.fakes import KnowledgeResponder
from tests.studio_fakes import growing_radius, responder_content


def _model(server: FaultyServer) -> dict[str, Any]:
    """Config overrides that point the run at the scripted server.

    The offline backend over the task's docs only (no package docs: a small index) — everything else
    the defaults.
    """
    return {
        "llm": {"model": "openai:scripted", "base_url": server.base_url, "max_retries": 0},
        "retrieval": {"offline_include_pydoc": []},
        "evaluation": {"workers": 1},
    }


@pytest.fixture
def runs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "data-runs"
    monkeypatch.setenv("EVODUET_RUNS_DIR", str(root))
    monkeypatch.delenv("EVODUET_CONFIG", raising=False)
    return root


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return list(read_events(Path(run_dir) / "events.jsonl"))


def test_the_defaults_are_the_method() -> None:
    cfg = EvoDuetConfig()
    assert cfg.gate.mode == "llm" and cfg.retrieval.backend == "offline"
    r = cfg.retrieval
    assert (r.inner_rounds, r.queries_per_round, r.results_per_query, r.top_k) == (3, 1, 5, 3)
    assert cfg.candidates == 1
    baseline = yaml.safe_load((ROOT / "configs" / "openevolve_mode.yaml").read_text())
    assert baseline["gate"]["mode"] == "never"


def test_package_graph_runs_from_the_task_in_its_input(runs_root: Path) -> None:
    responder = KnowledgeResponder(gate=["retrieve", "no-op"], generate=growing_radius())
    with FaultyServer(["ok"], content=responder_content(responder)) as server:
        state = evoduet_graph.graph.invoke(
            {"task_dir": str(SMOKE_TASK), "max_iterations": 2, "config": _model(server)}
        )
    assert state["iteration"] == 2 and state["best_id"] == "it00002-c0"
    assert state["best_score"] > state["initial_score"]
    # a new run directory outside the project, named in the state
    run_dir = Path(state["run_dir"])
    assert run_dir.parent == runs_root and run_dir.name.startswith("smoke_polygon_area-")
    assert json.loads((run_dir / "best_program.json").read_text())["id"] == "it00002-c0"
    # the method ran: the LLM gate decided, the inner loop searched the task's docs
    decisions = [e["gate_decision"] for e in _events(run_dir) if e.get("node") == "gate"]
    assert decisions == ["retrieve", "no-op"]
    kinds = [kind for kind, _ in responder.log]
    assert kinds[:2] == ["gate", "construct_query"] and kinds.count("generate") == 2
    docs = [
        json.loads(line)
        for line in (run_dir / "search_database.jsonl").read_text().splitlines()
        if '"type": "document"' in line
    ]
    assert docs and all(d["url"].startswith("file:docs/") for d in docs)
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert cfg["gate"]["mode"] == "llm" and cfg["retrieval"]["inner_rounds"] == 3


def test_only_task_and_iterations_in_the_input_with_the_model_from_evoduet_config(
    runs_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    responder = KnowledgeResponder(gate="no-op", generate=growing_radius())
    with FaultyServer(["ok"], content=responder_content(responder)) as server:
        base = tmp_path / "studio.yaml"
        base.write_text(yaml.safe_dump(_model(server)))
        monkeypatch.setenv("EVODUET_CONFIG", str(base))
        state = evoduet_graph.graph.invoke({"task_dir": str(SMOKE_TASK), "max_iterations": 1})
    assert state["iteration"] == 1 and state["best_id"] == "it00001-c0"
    assert Path(state["run_dir"]).parent == runs_root
    assert [k for k, _ in responder.log] == ["gate", "generate"]


def test_run_dir_and_config_overrides_in_the_input(runs_root: Path, tmp_path: Path) -> None:
    responder = KnowledgeResponder(gate="retrieve", generate=growing_radius())
    with FaultyServer(["ok"], content=responder_content(responder)) as server:
        config = {**_model(server), "gate": {"mode": "never"}}  # the baseline, one key away
        state = evoduet_graph.graph.invoke(
            {
                "task_dir": str(SMOKE_TASK),
                "max_iterations": 2,
                "config": config,
                "run_dir": str(tmp_path / "mine"),
            }
        )
    assert state["run_dir"] == str((tmp_path / "mine").resolve())
    assert not runs_root.exists()
    assert [k for k, _ in responder.log] == ["generate", "generate"]  # no gate call
    decisions = {e["gate_decision"] for e in _events(tmp_path / "mine") if e.get("node") == "gate"}
    assert decisions == {"no-op"}
    assert not (tmp_path / "mine" / "search_database.jsonl").exists()


def test_the_langgraph_json_graph_takes_the_same_input(runs_root: Path) -> None:
    spec = json.loads((ROOT / "langgraph.json").read_text())["graphs"]["evoduet"]
    path, _, attr = spec.partition(":")
    # load it by file path, as `langgraph dev` does
    module_spec = importlib.util.spec_from_file_location("served_graph", ROOT / path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    served = getattr(module, attr)
    responder = KnowledgeResponder(gate="no-op", generate=growing_radius())
    with FaultyServer(["ok"], content=responder_content(responder)) as server:
        state = served.invoke(
            {"task_dir": str(SMOKE_TASK), "max_iterations": 1, "config": _model(server)}
        )
    assert state["iteration"] == 1 and state["best_score"] > state["initial_score"]


@pytest.mark.parametrize(
    ("graph_input", "error", "message"),
    [
        ({"task_dir": 5}, StudioContextError, "graph input 'task_dir' must be a folder path"),
        ({"task_dir": "tasks/no_such_task"}, TaskError, "no_such_task"),
        (
            {"task_dir": str(SMOKE_TASK), "config": ["gate", "never"]},
            StudioContextError,
            "graph input 'config' must be a mapping",
        ),
        (
            {"task_dir": str(SMOKE_TASK), "config": {"gate": {"mode": "sometimes"}}},
            ConfigError,
            "gate.mode",
        ),
    ],
)
def test_bad_graph_input_is_a_clear_error_before_anything_is_written(
    runs_root: Path, graph_input: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        evoduet_graph.graph.invoke({**graph_input, "max_iterations": 1})
    assert not runs_root.exists() or not any(runs_root.rglob("programs.sqlite"))


def test_a_graph_without_context_or_task_says_what_it_needs() -> None:
    with pytest.raises(RuntimeError, match="needs a runtime context"):
        build_graph().compile().invoke({"max_iterations": 1})


# ------------------------------------------------------------------------------------------
# The graph speaks the paper's words; one node registry for both loops
# ------------------------------------------------------------------------------------------


def test_evoduet_graph_labels_the_gate_edges_no_op_look_up_retrieve() -> None:
    for extra in ([], ["--xray"]):
        out = subprocess.run(
            [sys.executable, "-m", "evoduet_graph.cli", "graph", *extra],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
        gate_edges = sorted(line.strip() for line in out.splitlines() if "gate -." in line)
        target = "query_evolution\\3a__start__" if extra else "query_evolution"
        assert gate_edges == [
            "gate -. &nbsp;look-up&nbsp; .-> look_up;",
            "gate -. &nbsp;no-op&nbsp; .-> generate;",
            f"gate -. &nbsp;retrieve&nbsp; .-> {target};",
        ]
    drawn = evoduet_graph.graph.get_graph()
    labels = {(e.target, e.data) for e in drawn.edges if e.source == "gate"}
    assert labels == {
        ("generate", "no-op"),
        ("look_up", "look-up"),
        ("query_evolution", "retrieve"),
    }


def test_run_swaps_a_node_of_each_loop_by_name(tmp_path: Path) -> None:
    seen: list[str] = []

    def my_gate(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        seen.append("gate")
        return {"gate_decision": "retrieve", "gate_reason": "always, by my gate"}

    def my_queries(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        seen.append("construct_query")
        queries = ["convex hull area of points in a disk"]
        return {"queries": queries, "query_history": [*state.get("query_history", []), *queries]}

    responder = KnowledgeResponder(generate=growing_radius())
    with FaultyServer(["ok"], content=responder_content(responder)) as server:
        cfg = EvoDuetConfig.model_validate({**_model(server), "iterations": 1})
        result = run(
            SMOKE_TASK,
            cfg,
            run_dir=tmp_path / "run",
            nodes={"gate": my_gate, "construct_query": my_queries},
        )
    assert result.iterations == 1
    assert seen == ["gate", "construct_query", "construct_query", "construct_query"]
    kinds = [kind for kind, _ in responder.log]
    assert "gate" not in kinds and "construct_query" not in kinds  # both replaced
    assert "hypothetical_score" in kinds and "generate" in kinds  # the others are not
    with pytest.raises(UnknownNodeError, match="unknown node 'gte'; known nodes: outer loop"):
        run(SMOKE_TASK, cfg, run_dir=tmp_path / "other", nodes={"gte": my_gate})
    assert not (tmp_path / "other").exists()


# ------------------------------------------------------------------------------------------
# `evoduet run` with no options runs EvoDuet and ends with the newcomer's summary
# ------------------------------------------------------------------------------------------


def test_cli_run_defaults_to_the_method_and_prints_the_summary(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from evoduet_graph.cli import app

    responder = KnowledgeResponder(gate=["retrieve", "no-op", "no-op"], generate=growing_radius())
    with FaultyServer(["ok"], content=responder_content(responder)) as server:
        base = tmp_path / "model.yaml"  # the model and a small index; the gate is not set
        base.write_text(yaml.safe_dump(_model(server)))
        out = tmp_path / "run"
        result = CliRunner().invoke(
            app,
            [
                "run",
                str(SMOKE_TASK),
                "--iterations",
                "3",
                "--config",
                str(base),
                "--out",
                str(out),
                "--quiet",
                "--report",
            ],
        )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "iterations: 3" in text
    best = json.loads((out / "best_program.json").read_text())
    assert f"best score: {best['score']:.6g} (initial 0.155291)" in text
    assert f"NDG: {best['ndg']:.2f}%" in text and best["ndg"] > 0
    assert "gate decisions: no-op 2 look-up 0 retrieve 1" in text
    queries = sum(1 for e in _events(out) if e.get("event") == "search")
    assert queries >= 1
    docs = [
        json.loads(line)
        for line in (out / "search_database.jsonl").read_text().splitlines()
        if '"type": "document"' in line
    ]
    assert (
        f"search: {queries} queries issued, {len(docs)} distinct documents returned "
        f"({len(docs)} from the task's docs/)" in text
    )
    report = out / "report" / "report.md"
    assert report.is_file() and f"report: {report}" in text


# ------------------------------------------------------------------------------------------
# The graph input applies the run-directory rules of `evoduet run --out` (findings 1-3)
# ------------------------------------------------------------------------------------------


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_graph_input_refuses_a_task_folder_as_run_dir(runs_root: Path, tmp_path: Path) -> None:
    import shutil

    from evoduet_graph import RunError

    folder = tmp_path / "task-copy"
    shutil.copytree(SMOKE_TASK, folder)
    before = _tree(folder)
    with pytest.raises(RunError, match="is not empty and is not an evoduet run directory"):
        evoduet_graph.graph.invoke(
            {
                "task_dir": str(SMOKE_TASK),
                "max_iterations": 1,
                "run_dir": str(folder),
                "config": {
                    "llm": {"model": "openai:scripted", "base_url": "http://127.0.0.1:9/v1"}
                },
            }
        )
    assert _tree(folder) == before  # the task's config.yaml is intact, nothing added


def test_graph_input_refuses_a_cli_run_and_leaves_it_intact(
    runs_root: Path, tmp_path: Path
) -> None:
    from evoduet_graph import RunError

    rdir = tmp_path / "cli-run"
    responder = KnowledgeResponder(gate="no-op", generate=growing_radius())
    with FaultyServer(["ok"], content=responder_content(responder)) as server:
        run(SMOKE_TASK, {**_model(server), "iterations": 1}, run_dir=rdir)
        before = _tree(rdir)
        with pytest.raises(RunError, match="started with `evoduet run`.*evoduet resume"):
            evoduet_graph.graph.invoke(
                {
                    "task_dir": str(SMOKE_TASK),
                    "max_iterations": 3,
                    "run_dir": str(rdir),
                    "config": {**_model(server), "gate": {"mode": "never"}},
                }
            )
    after = _tree(rdir)
    for name in ("run.json", "config.yaml", "programs.sqlite", "events.jsonl"):
        assert after[name] == before[name], name


def test_graph_input_respects_the_run_dir_lock(runs_root: Path, tmp_path: Path) -> None:
    from evoduet_graph import RunError
    from evoduet_graph.rundir.lock import RunDirLock

    rdir = tmp_path / "locked"
    rdir.mkdir()
    with RunDirLock(rdir), pytest.raises(RunError, match="in use"):
        evoduet_graph.graph.invoke(
            {
                "task_dir": str(SMOKE_TASK),
                "max_iterations": 1,
                "run_dir": str(rdir),
                "config": {
                    "llm": {"model": "openai:scripted", "base_url": "http://127.0.0.1:9/v1"}
                },
            }
        )
    assert sorted(p.name for p in rdir.iterdir()) == [".lock"]


def test_graph_input_never_restarts_an_earlier_run_over_its_rows(
    runs_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evoduet_graph import RunError
    from evoduet_graph.graphs import studio_context

    rdir = tmp_path / "graph-run"
    responder = KnowledgeResponder(gate="no-op", generate=growing_radius())
    with FaultyServer(["ok"], content=responder_content(responder)) as server:
        graph_input = {
            "task_dir": str(SMOKE_TASK),
            "max_iterations": "1",  # a JSON client's
            "run_dir": str(rdir),
            "config": _model(server),
        }
        state = evoduet_graph.graph.invoke(graph_input)
        assert state["iteration"] == 1 and state["max_iterations"] == 1
        before = _tree(rdir)
        # again in this process (the context is cached): no thread to continue
        with pytest.raises(RunError, match="already holds the iterations"):
            evoduet_graph.graph.invoke(graph_input)
        # again in a new process (nothing cached)
        monkeypatch.setattr(studio_context, "_CACHE", {})
        with pytest.raises(RunError, match="earlier graph-input run"):
            evoduet_graph.graph.invoke(graph_input)
    after = _tree(rdir)
    for name in ("run.json", "config.yaml", "programs.sqlite"):
        assert after[name] == before[name], name


@pytest.mark.parametrize("value", ["abc", -1, "-1", 1.5, [3]])
def test_bad_max_iterations_is_one_clear_error_before_anything_is_written(
    runs_root: Path, tmp_path: Path, value: Any
) -> None:
    rdir = tmp_path / "nonempty"
    rdir.mkdir()
    (rdir / "x").write_text("mine")
    with pytest.raises(StudioContextError, match="'max_iterations' must be a whole number ≥ 0"):
        evoduet_graph.graph.invoke(
            {"task_dir": str(SMOKE_TASK), "max_iterations": value, "run_dir": str(rdir)}
        )
    assert sorted(p.name for p in rdir.iterdir()) == ["x"]

"""``evoduet bench --protocol``: protocol files, resuming after SIGKILL, the Ray executor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from evoduet_graph.bench import run_bench
from evoduet_graph.bench.protocol import (
    ProtocolError,
    load_protocol,
    protocol_settings,
    validate_protocol,
)
from tests.conftest import RADIUS_UP, SMOKE_TASK, load_script
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ROOT / "benchmarks" / "protocols"


def _write(tmp_path: Path, data: dict, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _scripted(_job):
    return ScriptedChatModel(
        responses=[], default=KnowledgeResponder(gate="no-op", generate=RADIUS_UP)
    )


@pytest.mark.parametrize(
    "name",
    [
        "paper.yaml",
        "local.yaml",
        "local_baseline.yaml",
        "local_candidates.yaml",
        "local_openevolve.yaml",
    ],
)
def test_the_shipped_protocols_resolve_every_task_method_and_key(name):
    labels = validate_protocol(PROTOCOLS / name)
    protocol = load_protocol(PROTOCOLS / name)
    assert len(labels) == len(protocol.methods)
    assert len(protocol.seeds) >= 3 and protocol.iterations >= 15
    if name == "paper.yaml":
        assert protocol.iterations == 100 and len(protocol.seeds) == 4
        assert {"openevolve-mode", "oracle", "evoduet", "evoduet-n8"} <= set(labels)
        assert protocol.search_backend == "tavily" and protocol.model.startswith("openai:")


@pytest.mark.parametrize(
    ("name", "method", "in_local"),
    [
        ("local_baseline.yaml", "openevolve-mode", True),
        ("local_openevolve.yaml", "openevolve", False),
    ],
)
def test_a_local_step_is_local_yaml_with_one_method(name, method, in_local):
    # the baseline step runs first into the same folder, so the task choice is checked on
    # baseline runs only; the real-OpenEvolve step runs after it. Every key but the methods
    # must stay local.yaml's, or the steps' runs would not be comparable (nor skipped later)
    local = load_protocol(PROTOCOLS / "local.yaml").model_dump()
    step = load_protocol(PROTOCOLS / name).model_dump()
    assert step.pop("methods") == [method]
    assert (method in local.pop("methods")) == in_local
    local.pop("description"), step.pop("description")
    assert step == local


def test_the_candidate_tasks_protocol_is_the_baseline_step_on_other_tasks():
    # run into the same folder at the same commit; only the tasks differ. The task choice's
    # fixed order is the first baseline step's three tasks, then the candidates in file order,
    # and the local protocol's tasks are taken from it in that order.
    task_choice = load_script(PROTOCOLS.parent / "task_choice.py")
    order = list(task_choice.ORDER)
    baseline = load_protocol(PROTOCOLS / "local_baseline.yaml").model_dump()
    candidates = load_protocol(PROTOCOLS / "local_candidates.yaml").model_dump()
    chosen = [Path(t).name for t in baseline.pop("tasks")]
    assert [Path(t).name for t in candidates.pop("tasks")] == order[3:]
    assert chosen == [t for t in order if t in chosen] and len(chosen) == 3
    candidates.pop("description"), baseline.pop("description")
    assert candidates == baseline


def test_a_variant_lays_its_settings_over_its_method_and_forced_settings_under_it(tmp_path):
    path = _write(
        tmp_path,
        {
            "tasks": [str(SMOKE_TASK)],
            "methods": [
                "openevolve-mode",
                "evoduet",
                {"name": "evoduet-n4", "method": "evoduet", "config": {"candidates": 4}},
            ],
            "seeds": [0],
            "iterations": 1,
            "candidates": 2,
            "search_backend": "offline",
        },
    )
    settings = protocol_settings(load_protocol(path), tmp_path / "out")
    assert settings.variants == {"evoduet-n4": ("evoduet", {"candidates": 4})}
    assert settings.forced == {"candidates": 2, "retrieval.backend": "offline"}
    result = run_bench(settings, llm_factory=_scripted, searcher_factory=lambda _j: FakeSearcher())
    assert not result.failed and len(result.ran) == 3

    def candidates(method: str) -> int:
        (cfg,) = (tmp_path / "out" / "runs" / "smoke_polygon_area" / method).rglob("config.yaml")
        data = yaml.safe_load(cfg.read_text())
        return data["candidates"], data["retrieval"]["backend"]

    assert candidates("evoduet") == (2, "offline")
    assert candidates("evoduet-n4") == (4, "offline")
    assert candidates("openevolve-mode")[0] == 2


def test_a_forced_search_backend_is_not_laid_over_a_method_that_never_searches():
    from evoduet_graph.bench.runner import GRAPH_METHODS, _with_forced

    forced = {"retrieval.backend": "tavily", "candidates": 8}
    assert _with_forced(GRAPH_METHODS["evoduet"], forced)["retrieval"]["backend"] == "tavily"
    baseline = _with_forced(GRAPH_METHODS["openevolve-mode"], forced)
    assert "retrieval" not in baseline and baseline["candidates"] == 8
    joint = {"gate": {"mode": "never"}, "joint_search": {"enabled": True}}
    assert _with_forced(joint, forced)["retrieval"]["backend"] == "tavily"


def _smoke(**over: object) -> dict:
    """A valid one-iteration protocol on the smoke task, with ``over`` laid over it."""
    return {
        "tasks": ["smoke_polygon_area"],
        "methods": ["evoduet"],
        "seeds": [0],
        "iterations": 1,
    } | over


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tasks": ["smoke_polygon_area"], "methods": ["evoduet"], "seeds": [0]}, "iterations"),
        (
            {
                "tasks": ["smoke_polygon_area"],
                "methods": ["evoduet"],
                "seeds": [0],
                "iterations": 1,
                "itertions": 2,
            },
            "itertions",
        ),
        (
            {"tasks": ["no_such_task"], "methods": ["evoduet"], "seeds": [0], "iterations": 1},
            "no_such_task",
        ),
        (
            {
                "tasks": ["smoke_polygon_area"],
                "methods": ["evodeut"],
                "seeds": [0],
                "iterations": 1,
            },
            "evodeut",
        ),
        (
            {
                "tasks": ["smoke_polygon_area"],
                "methods": ["evoduet"],
                "seeds": [0],
                "iterations": 1,
                "search_backend": "bing",
            },
            "bing",
        ),
        (
            {
                "tasks": ["smoke_polygon_area"],
                "seeds": [0],
                "iterations": 1,
                "methods": [{"name": "evoduet", "method": "evoduet"}],
            },
            "named twice or like its method",
        ),
        (
            {
                "tasks": ["smoke_polygon_area"],
                "methods": ["evoduet"],
                "seeds": [0],
                "iterations": 1,
                "model": "gpt-4o",
            },
            "model",
        ),
        ("- just\n- a list\n", "must hold a mapping"),
        ("tasks: [unclosed\n", "not valid YAML"),
        (b"tasks: [smoke_polygon_area]\n# \xff\xfe\n", "not UTF-8 text"),
        (_smoke(seeds=[1, 1]), r"seed\(s\) \[1\] listed twice"),
        (_smoke(seeds=[-1]), "seeds.0: Input should be greater than or equal to 0"),
        (_smoke(seeds=[True]), "seeds.0: Input should be a valid integer"),
        (_smoke(seeds=[2**32]), "seeds.0: Input should be less than or equal to 4294967295"),
        (
            _smoke(
                methods=[
                    {"name": "e2", "method": "evoduet", "config": {"retrieval": {"backend": "x"}}}
                ]
            ),
            r"invalid configuration in variant 'e2' of method 'evoduet'.*unknown search backend",
        ),
        (_smoke(iterations="3"), "iterations: Input should be a valid integer"),
        (_smoke(tasks=[""]), "tasks.0: String should have at least 1 character"),
        (
            _smoke(tasks=["smoke_polygon_area", "smoke_polygon_area"]),
            "two tasks are named smoke_polygon_area",
        ),
        (
            _smoke(methods=["openevolve"], model="anthropic:claude-x"),
            "the openevolve method speaks only the OpenAI API",
        ),
        (_smoke(methods=["openevolve-mode"], search_backend="nosuch"), "nosuch"),
        (
            _smoke(methods=["evoduet", {"name": "openevolve-mode", "method": "evoduet"}]),
            "'openevolve-mode' is named like a method",
        ),
        (
            _smoke(methods=[{"name": "../../escape", "method": "evoduet"}]),
            "method variant '../../escape': the name is its runs' folder",
        ),
        (
            _smoke(methods=[{"name": "v1", "method": "nope"}]),
            "method variant 'v1': unknown method 'nope'",
        ),
        (
            _smoke(methods=[{"name": "oe8", "method": "openevolve"}]),
            "'openevolve' takes no variants",
        ),
        (
            _smoke(
                methods=[{"name": "e2", "method": "evoduet", "config": {"llm": {"temperature": 1}}}]
            ),
            "method variant 'e2' has an llm section",
        ),
        (
            _smoke(config={"llm": {"model": "openai:gpt-4o"}}),
            "the base configuration sets llm.model",
        ),
    ],
)
def test_a_bad_protocol_is_one_clear_error_before_anything_runs(tmp_path, data, message):
    path = tmp_path / "p.yaml"
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    with pytest.raises(ProtocolError, match=message):
        validate_protocol(path, tasks_dir=ROOT / "tasks")
    assert list(tmp_path.iterdir()) == [path]  # nothing written


_BENCH_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from evoduet_graph.bench import run_bench
    from evoduet_graph.bench.protocol import load_protocol, protocol_settings
    from tests.conftest import RADIUS_UP
    from tests.fakes import KnowledgeResponder, ScriptedChatModel

    class Slow(ScriptedChatModel):
        def _generate(self, *args, **kwargs):
            if self.calls >= int(sys.argv[3]):
                time.sleep(30)  # the second run hangs here until it is killed
            return super()._generate(*args, **kwargs)

    def factory(job):
        return Slow(responses=[], default=KnowledgeResponder(gate="no-op", generate=RADIUS_UP))

    settings = protocol_settings(load_protocol(sys.argv[1]), Path(sys.argv[2]))
    run_bench(settings, llm_factory=factory)
    """
)


def test_a_protocol_bench_resumes_after_sigkill_without_rerunning_a_finished_run(tmp_path):
    path = _write(
        tmp_path,
        {
            "tasks": [str(SMOKE_TASK)],
            "methods": ["openevolve-mode"],
            "seeds": [0, 1],
            "iterations": 2,
        },
    )
    out = tmp_path / "out"
    script = tmp_path / "bench.py"
    script.write_text(_BENCH_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    # each run makes 2 mutation calls; the model of seed 1 hangs at its second call
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path), str(out), "1"], env=env, cwd=ROOT
    )
    first = out / "runs" / "smoke_polygon_area" / "openevolve-mode" / "seed0" / "bench_run.json"
    second = first.parents[1] / "seed1" / "bench_run.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        states = [
            json.loads(p.read_text()).get("status") if p.exists() else None for p in (first, second)
        ]
        if states == ["done", "running"] and (second.parent / "run" / "events.jsonl").exists():
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the bench did not reach its second run")
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    finished = first.read_text()

    calls: list[str] = []

    def factory(job):
        calls.append(job.label)
        return _scripted(job)

    result = run_bench(protocol_settings(load_protocol(path), out), llm_factory=factory)
    assert result.skipped == ["smoke_polygon_area/openevolve-mode/seed0"]
    assert result.ran == ["smoke_polygon_area/openevolve-mode/seed1"] and not result.failed
    assert calls == ["smoke_polygon_area/openevolve-mode/seed1"]
    assert first.read_text() == finished  # the finished run was not touched
    resumed = json.loads(second.read_text())
    assert resumed["status"] == "done" and len(resumed["sessions"]) == 2
    assert resumed["outcome"]["iterations"] == 2


def test_the_ray_executor_runs_a_two_run_protocol_on_a_local_ray_instance(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("EVODUET_RAY_CPUS", "0.5")
    path = _write(
        tmp_path,
        {
            "tasks": [str(SMOKE_TASK)],
            "methods": ["openevolve-mode"],
            "seeds": [0, 1],
            "iterations": 1,
            "executor": "ray",
        },
    )
    out = tmp_path / "out"
    try:
        result = run_bench(protocol_settings(load_protocol(path), out), llm_factory=_scripted)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    assert sorted(result.ran) == [
        "smoke_polygon_area/openevolve-mode/seed0",
        "smoke_polygon_area/openevolve-mode/seed1",
    ]
    for seed in (0, 1):
        job = out / "runs" / "smoke_polygon_area" / "openevolve-mode" / f"seed{seed}"
        data = json.loads((job / "bench_run.json").read_text())
        assert data["status"] == "done" and data["task_dir"] == str(SMOKE_TASK)
        assert (job / "run" / "events.jsonl").is_file()  # gathered back from the worker
    assert "| smoke_polygon_area" in (out / "summary.md").read_text()

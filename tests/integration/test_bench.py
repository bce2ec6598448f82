"""`evoduet bench`: orchestration, outputs, resumability and the OpenEvolve peer.

`evoduet bench`: orchestration, CSV/table/plots, resumability, failure recording, NDG floor,
the OpenEvolve config writer and trace reader, and the local model server wrapper.

Fast: our two graph methods run on the smoke task with a scripted model and a fake search backend
(no real model); the server wrapper is tested against a tiny fake HTTP server. The tests that need
the real OpenEvolve create its venv on first use (pip); the real-server test needs the [local,bench]
extras, which `make test` installs.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from typer.testing import CliRunner

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.bench import BenchError, BenchSettings, MethodOutcome, floored_ndg, run_bench
from evoduet_graph.bench.common import Endpoint, IterationPoint, Session, cumulative_wall
from evoduet_graph.bench.openevolve_method import (
    OPENEVOLVE_VERSION,
    OpenEvolveEnv,
    default_venv_dir,
    latest_checkpoint,
    openevolve_command,
    openevolve_config,
    read_best,
    read_trace,
    unknown_config_keys,
    write_openevolve_config,
)
from evoduet_graph.bench.server import (
    LlamaCppServer,
    ServerDependencyError,
    ServerError,
    free_port,
    missing_server_modules,
    wait_ready,
)
from evoduet_graph.cli import app
from evoduet_graph.tasks.openevolve_config import OPENEVOLVE_FIELDS
from tests.conftest import (
    CIRCLE_TASK,
    GARBAGE,
    OUT_OF_DISK,
    RADIUS_UP,
    ROOT,
    SMOKE_TASK,
    load_script,
)
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel

# novelty off: the scripted model repeats one answer, whose copies would be rejected and
# resampled, and these tests count model calls per iteration
BASE = EvoDuetConfig.model_validate(
    {"population": {"num_islands": 2}, "evaluation": {"workers": 1}, "novelty": {"enabled": False}}
)
GRAPH_METHODS = ["evoduet", "openevolve-mode"]


def _llm(generate: Any = RADIUS_UP, gate: Any = "no-op"):
    """A scripted model per job: the gate answers ``gate``, generation answers ``generate``."""

    def factory(_job):
        return ScriptedChatModel(
            responses=[], default=KnowledgeResponder(gate=gate, generate=generate)
        )

    return factory


def _settings(out: Path, **kw: Any) -> BenchSettings:
    base = {
        "tasks": [SMOKE_TASK],
        "out": out,
        "methods": GRAPH_METHODS,
        "seeds": [0, 1],
        "iterations": 2,
        "config": BASE,
    }
    base.update(kw)
    return BenchSettings(**base)


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _bench_run(out: Path, method: str, seed: int) -> dict[str, Any]:
    path = out / "runs" / "smoke_polygon_area" / method / f"seed{seed}" / "bench_run.json"
    return json.loads(path.read_text())


# ------------------------------------------------------------------------------------------
# orchestration
# ------------------------------------------------------------------------------------------


def test_bench_writes_results_table_and_plots(tmp_path):
    out = tmp_path / "bench"
    searchers: list[FakeSearcher] = []

    def searcher_factory(_job):
        searchers.append(FakeSearcher())
        return searchers[-1]

    result = run_bench(
        _settings(out), llm_factory=_llm(gate="retrieve"), searcher_factory=searcher_factory
    )
    assert sorted(result.ran) == sorted(
        f"smoke_polygon_area/{m}/seed{s}" for m in GRAPH_METHODS for s in (0, 1)
    )
    assert not result.failed and not result.skipped
    # the evoduet method retrieved through its (fake) backend; the baseline never did
    assert searchers and any(s.calls for s in searchers)
    assert len(searchers) == 2  # one per evoduet job, none for openevolve-mode

    task = load_task(SMOKE_TASK)
    rows = _csv(out / "results.csv")
    assert list(rows[0]) == [
        "task",
        "method",
        "seed",
        "iteration",
        "best",
        "ndg",
        "llm_calls",
        "tokens",
        "wall_s",
        "status",
    ]
    assert len(rows) == 4 * 3  # 4 runs x iterations 0..2
    by_run: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        by_run.setdefault((row["method"], row["seed"]), []).append(row)
    for run_rows in by_run.values():
        assert [int(r["iteration"]) for r in run_rows] == [0, 1, 2]
        first, last = run_rows[0], run_rows[-1]
        assert float(first["best"]) == pytest.approx(task.initial_score)
        assert float(first["ndg"]) == 0.0
        # radius 0.6 -> 1.0 at iteration 1 scales the hull area by 1 / 0.36
        assert float(last["best"]) == pytest.approx(task.initial_score / 0.36, rel=1e-6)
        assert float(last["ndg"]) == pytest.approx(task.ndg(task.initial_score / 0.36), rel=1e-6)
        calls = [int(r["llm_calls"]) for r in run_rows]
        assert calls == sorted(calls) and calls[-1] >= 2
        assert int(last["tokens"]) > 0 and float(last["wall_s"]) > 0
    # the evoduet method made gate calls on top of the generation calls
    evo = int(by_run[("evoduet", "0")][-1]["llm_calls"])
    base = int(by_run[("openevolve-mode", "0")][-1]["llm_calls"])
    assert evo > base == 2

    runs = _csv(out / "runs.csv")
    assert {r["status"] for r in runs} == {"done"} and len(runs) == 4
    assert all(r["evoduet_graph"] and r["model"] == "injected chat model" for r in runs)

    summary = (out / "summary.md").read_text()
    assert "| task | evoduet | openevolve-mode |" in summary
    ndg = task.ndg(task.initial_score / 0.36)
    assert f"| smoke_polygon_area | {ndg:.1f} ± 0.0 (n=2) | {ndg:.1f} ± 0.0 (n=2) |" in summary
    assert "**overall**" in summary
    # the paper's knowledge figures, per method, from each run directory (pooled over seeds)
    assert "## Knowledge figures per method: finished runs" in summary
    section = summary.split("## Knowledge figures per method: finished runs")[1]
    knowledge = [ln for ln in section.splitlines() if ln.startswith("| evoduet | 2 |")]
    assert len(knowledge) == 1
    cells = [c.strip() for c in knowledge[0].strip("|").split("|")]
    assert cells[4] == "0.0%"  # repeated-URL share
    assert cells[5] == "0.000000"  # the run's configured model is the free local one
    figures = [
        json.loads((out / f"runs/smoke_polygon_area/evoduet/seed{k}/bench_run.json").read_text())[
            "outcome"
        ]["details"]["knowledge"]
        for k in (0, 1)
    ]
    assert cells[6] == f"{sum(f['search_calls'] for f in figures) / 2:.1f}"
    for png in ("best_smoke_polygon_area.png", "ndg.png"):
        data = (out / "plots" / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["versions"]["evoduet_graph"]
    assert manifest["invocations"][-1]["seeds"] == [0, 1]
    # our run directory is a normal run directory
    assert (out / "runs/smoke_polygon_area/evoduet/seed0/run/events.jsonl").is_file()


def test_second_invocation_skips_finished_runs(tmp_path):
    out = tmp_path / "bench"
    settings = _settings(out, seeds=[0])
    run_bench(settings, llm_factory=_llm(), searcher_factory=lambda _j: FakeSearcher())
    before = (out / "results.csv").read_text()

    calls: list[str] = []

    def counting_factory(job):
        calls.append(job.method)
        return _llm()(job)

    again = run_bench(settings, llm_factory=counting_factory)
    assert calls == []
    assert again.ran == [] and len(again.skipped) == 2
    assert (out / "results.csv").read_text() == before

    # asking for more iterations continues the finished runs from their run directories
    more = run_bench(_settings(out, seeds=[0], iterations=3), llm_factory=counting_factory)
    assert sorted(more.ran) == sorted(f"smoke_polygon_area/{m}/seed0" for m in GRAPH_METHODS)
    rows = [r for r in _csv(out / "results.csv") if r["method"] == "openevolve-mode"]
    assert [int(r["iteration"]) for r in rows] == [0, 1, 2, 3]
    run_json = _bench_run(out, "openevolve-mode", 0)
    assert len(run_json["sessions"]) == 2


def test_the_run_records_alone_elsewhere_are_summarised_and_skipped(tmp_path):
    # a bench's per-run records copied to another machine, where the recorded task folder
    # does not exist: the task is the bundled one of the same name, the runs are not rerun
    out = tmp_path / "bench"
    settings = _settings(out, seeds=[0])
    run_bench(settings, llm_factory=_llm(), searcher_factory=lambda _j: FakeSearcher())
    moved = tmp_path / "moved"
    for record in out.glob("runs/*/*/seed*/bench_run.json"):
        data = json.loads(record.read_text())
        data["task_dir"] = str(tmp_path / "gone" / data["task"])
        target = moved / record.relative_to(out)
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(data))
    again = run_bench(_settings(moved, seeds=[0]), llm_factory=lambda _j: pytest.fail("rerun"))
    assert again.ran == [] and len(again.skipped) == 2
    ndg = {r["method"]: r["ndg"] for r in _csv(out / "runs.csv")}
    assert {r["method"]: r["ndg"] for r in _csv(moved / "runs.csv")} == ndg
    assert all(value != "" for value in ndg.values())


def test_a_killed_run_resumes_from_its_run_directory(tmp_path):
    out = tmp_path / "bench"
    job_dir = out / "runs" / "smoke_polygon_area" / "openevolve-mode" / "seed0"
    # what a bench killed after one of two iterations leaves behind
    cfg = BASE.with_overrides(
        {"iterations": 1, "seed": 0, "prompt.diff_based": True, "gate.mode": "never"}
    )  # the openevolve-mode baseline: the gate never retrieves
    first = ScriptedChatModel(responses=[RADIUS_UP])
    run(SMOKE_TASK, cfg, llm=first, run_dir=job_dir / "run")
    t0 = time.time()
    (job_dir / "bench_run.json").write_text(
        json.dumps(
            {
                "status": "running",
                "iterations": 2,
                "task": "smoke_polygon_area",
                "task_dir": str(SMOKE_TASK),
                "method": "openevolve-mode",
                "seed": 0,
                "sessions": [{"start": t0 - 5.0, "end": None}],
            }
        )
    )
    second = ScriptedChatModel(responses=[], default=RADIUS_UP)
    result = run_bench(
        _settings(out, methods=["openevolve-mode"], seeds=[0]), llm_factory=lambda _j: second
    )
    assert result.ran == ["smoke_polygon_area/openevolve-mode/seed0"]
    assert second.calls == 1  # only iteration 2 ran again
    rows = _csv(out / "results.csv")
    assert [int(r["iteration"]) for r in rows] == [0, 1, 2]
    task = load_task(SMOKE_TASK)
    assert float(rows[1]["best"]) == pytest.approx(task.initial_score / 0.36, rel=1e-6)
    data = _bench_run(out, "openevolve-mode", 0)
    assert data["status"] == "done" and len(data["sessions"]) == 2


def test_a_failing_method_is_recorded_and_the_bench_continues(tmp_path):
    out = tmp_path / "bench"

    def factory(job):
        if job.method == "evoduet" and job.seed == 0:
            raise RuntimeError("model endpoint exploded")
        return _llm()(job)

    def broken(_ctx):
        raise ValueError("this method is broken")

    result = run_bench(
        _settings(out, methods=[*GRAPH_METHODS, "broken"]),
        llm_factory=factory,
        searcher_factory=lambda _j: FakeSearcher(),
        runners={"broken": broken},
    )
    assert set(result.failed) == {
        "smoke_polygon_area/evoduet/seed0",
        "smoke_polygon_area/broken/seed0",
        "smoke_polygon_area/broken/seed1",
    }
    assert "model endpoint exploded" in result.failed["smoke_polygon_area/evoduet/seed0"]
    assert len(result.ran) == 3  # evoduet seed1 and openevolve-mode seeds 0, 1
    runs = {(r["method"], r["seed"]): r for r in _csv(out / "runs.csv")}
    assert runs[("evoduet", "0")]["status"] == "failed"
    assert "exploded" in runs[("evoduet", "0")]["error"]
    assert runs[("evoduet", "1")]["status"] == "done"
    data = _bench_run(out, "evoduet", 0)
    assert data["status"] == "failed" and "RuntimeError" in data["error"]
    summary = (out / "summary.md").read_text()
    assert "## Failed runs" in summary and "this method is broken" in summary
    assert (out / "plots" / "ndg.png").is_file()

    # the next invocation retries the failed runs only
    calls: list[str] = []
    retry = run_bench(
        _settings(out, methods=GRAPH_METHODS),
        llm_factory=lambda job: calls.append(job.label) or _llm()(job),
        searcher_factory=lambda _j: FakeSearcher(),
    )
    assert retry.ran == ["smoke_polygon_area/evoduet/seed0"] and not retry.failed
    assert calls == ["smoke_polygon_area/evoduet/seed0"]


def test_a_run_whose_model_never_answers_is_failed_and_left_out_of_the_means(tmp_path):
    out = tmp_path / "bench"
    cfg = BASE.with_overrides({"llm.max_retries": 0})

    def factory(job):
        if job.seed == 0:
            return ScriptedChatModel(responses=[], default=ConnectionError("endpoint down"))
        return _llm()(job)

    result = run_bench(_settings(out, methods=["openevolve-mode"], config=cfg), llm_factory=factory)
    assert set(result.failed) == {"smoke_polygon_area/openevolve-mode/seed0"}
    assert "the model did not answer" in result.failed["smoke_polygon_area/openevolve-mode/seed0"]
    runs = {r["seed"]: r for r in _csv(out / "runs.csv")}
    assert runs["0"]["status"] == "failed" and runs["1"]["status"] == "done"
    summary = (out / "summary.md").read_text()
    assert "(n=1)" in summary and "(n=2)" not in summary  # seed 0 is not in the means


def test_a_dead_openai_endpoint_stops_the_bench_before_any_job(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    out = tmp_path / "bench"
    start = time.monotonic()
    with pytest.raises(BenchError, match=r"127\.0\.0\.1:9/v1 did not answer"):
        run_bench(_settings(out, methods=["openevolve-mode"], model="openai:m"), llm_factory=None)
    assert time.monotonic() - start < 60
    assert not (out / "runs").exists()


def test_ndg_is_floored_at_zero_and_best_includes_the_initial_program(tmp_path):
    out = tmp_path / "bench"
    # every child is invalid (points outside the disk): the best stays the initial program
    result = run_bench(
        _settings(out, methods=["openevolve-mode"], seeds=[0]),
        llm_factory=_llm(generate=OUT_OF_DISK),
    )
    assert result.ran and not result.failed
    rows = _csv(out / "results.csv")
    task = load_task(SMOKE_TASK)
    assert all(float(r["best"]) == pytest.approx(task.initial_score) for r in rows)
    assert all(float(r["ndg"]) == 0.0 for r in rows)

    # the floor itself: below the initial score the raw NDG is negative, the bench's is 0
    assert task.ndg(0.1) < 0
    assert floored_ndg(task, 0.1) == 0.0
    assert floored_ndg(task, task.sota_score) == pytest.approx(100.0)
    assert floored_ndg(task, None) is None


def test_bad_settings_fail_before_anything_runs(tmp_path):
    with pytest.raises(BenchError, match="unknown method"):
        run_bench(_settings(tmp_path / "a", methods=["nope"]), llm_factory=_llm())
    with pytest.raises(BenchError, match="does not exist"):
        run_bench(_settings(tmp_path / "b", tasks=[tmp_path / "missing"]), llm_factory=_llm())
    with pytest.raises(BenchError, match="method config file .*missing.yaml does not exist"):
        run_bench(
            _settings(tmp_path / "d", methods=[str(tmp_path / "missing.yaml")]), llm_factory=_llm()
        )
    with pytest.raises(BenchError, match="unknown model"):
        run_bench(_settings(tmp_path / "c", model="gpt-4o"), llm_factory=None)
    assert not (tmp_path / "a").exists()


def test_cli_bench_runs_and_resumes(tmp_path, monkeypatch):
    """The CLI parses its options into BenchSettings and calls run_bench."""
    seen: list[BenchSettings] = []
    import evoduet_graph.bench as bench_pkg

    def fake_run_bench(settings, log=None):
        seen.append(settings)
        return run_bench(
            settings, llm_factory=_llm(), searcher_factory=lambda _j: FakeSearcher(), log=log
        )

    monkeypatch.setattr(bench_pkg, "run_bench", fake_run_bench)
    config = tmp_path / "base.yaml"
    config.write_text(yaml.safe_dump({"population": {"num_islands": 2}}))
    out = tmp_path / "bench"
    args = [
        "bench",
        "--tasks",
        str(SMOKE_TASK),
        "--iterations",
        "1",
        "--seeds",
        "3",
        "--methods",
        "openevolve-mode",
        "--out",
        str(out),
        "--config",
        str(config),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert seen[0].seeds == [3] and seen[0].methods == ["openevolve-mode"]
    assert seen[0].iterations == 1 and seen[0].config.population.num_islands == 2
    assert "| smoke_polygon_area |" in result.stdout
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "1 skipped" in again.output

    bad = CliRunner().invoke(app, ["bench", "--out", str(out), "--tasks", "no_such_task"])
    assert bad.exit_code == 2 and "not found" in bad.output


# ------------------------------------------------------------------------------------------
# common arithmetic
# ------------------------------------------------------------------------------------------


def test_cumulative_wall_over_a_killed_and_a_resumed_session():
    sessions = [Session(100.0, None), Session(200.0, 230.0)]
    stamps = {1: 110.0, 2: 120.0, 3: 210.0}
    walls = cumulative_wall(sessions, stamps)
    # the killed session lasted until its last stamp (20 s); the resumed one adds from 200
    assert walls == {1: 10.0, 2: 20.0, 3: 30.0}


def test_method_outcome_round_trips_through_json():
    outcome = MethodOutcome(
        iterations=1, initial=1.0, best=2.0, points=[IterationPoint(0, 1.0), IterationPoint(1, 2.0)]
    )
    again = MethodOutcome.from_json(json.loads(json.dumps(outcome.to_json())))
    assert again == outcome


# ------------------------------------------------------------------------------------------
# OpenEvolve: config writer, command line, output readers
# ------------------------------------------------------------------------------------------

# Fields of OpenEvolve 0.4.1's config dataclasses (openevolve/config.py), transcribed for the
# sections the bench writes; used when no OpenEvolve installation is at hand.
OE_041_FIELDS = OPENEVOLVE_FIELDS


def _endpoint(**kw: Any) -> Endpoint:
    base = {"model": "qwen-local", "base_url": "http://127.0.0.1:9999/v1", "local": True}
    base.update(kw)
    return Endpoint(**base)


@pytest.mark.parametrize("task_dir", [SMOKE_TASK, CIRCLE_TASK])
def test_openevolve_config_keys_are_openevolve_fields(task_dir, tmp_path):
    task = load_task(task_dir)
    cfg = write_openevolve_config(
        task,
        tmp_path / "oe.yaml",
        iterations=7,
        seed=3,
        endpoint=_endpoint(temperature=0.4, max_tokens=900, timeout_s=120.5, max_retries=2),
        trace_path=tmp_path / "trace.jsonl",
    )
    assert yaml.safe_load((tmp_path / "oe.yaml").read_text()) == cfg
    assert unknown_config_keys(cfg) == []
    assert set(cfg) <= OE_041_FIELDS[""] | set(task.openevolve_config)
    assert set(cfg["llm"]) <= OE_041_FIELDS["llm"]
    assert set(cfg["evolution_trace"]) <= OE_041_FIELDS["evolution_trace"]
    assert set(cfg["evaluator"]) <= OE_041_FIELDS["evaluator"]
    # the bench's settings
    assert cfg["max_iterations"] == 7 and cfg["random_seed"] == 3
    assert cfg["database"]["random_seed"] == 3 and cfg["checkpoint_interval"] == 1
    assert cfg["llm"]["models"] == [{"name": "qwen-local", "weight": 1.0}]
    assert cfg["llm"]["api_base"] == "http://127.0.0.1:9999/v1"
    assert cfg["llm"]["api_key"] == "not-needed"
    assert cfg["llm"]["temperature"] == 0.4 and cfg["llm"]["max_tokens"] == 900
    assert cfg["llm"]["timeout"] == 121 and cfg["llm"]["retries"] == 2
    assert "model" not in cfg["llm"]  # OpenEvolve 0.4.1 rejects llm.model
    assert cfg["evaluator"]["timeout"] == int(task.timeout_s)
    assert cfg["evolution_trace"]["enabled"] and cfg["evolution_trace"]["include_failures"]
    # the task's own settings are kept
    assert cfg["prompt"]["system_message"] == task.openevolve_config["prompt"]["system_message"]
    for key, value in (task.openevolve_config.get("evaluator") or {}).items():
        if key != "timeout":
            assert cfg["evaluator"][key] == value
    assert cfg.get("diff_based_evolution") == task.openevolve_config.get("diff_based_evolution")


def test_openevolve_config_references_the_key_never_its_value(monkeypatch):
    task = load_task(SMOKE_TASK)
    monkeypatch.setenv("MY_PROVIDER_KEY", "sk-secret")
    cfg = openevolve_config(
        task,
        iterations=1,
        seed=0,
        endpoint=Endpoint(model="gpt-4o-mini", base_url=None, api_key_env="MY_PROVIDER_KEY"),
        trace_path="t.jsonl",
    )
    assert cfg["llm"]["api_key"] == "${MY_PROVIDER_KEY}"
    assert cfg["llm"]["api_base"] == "https://api.openai.com/v1"
    assert "sk-secret" not in yaml.safe_dump(cfg)


def test_every_method_of_a_bench_asks_for_the_same_edit_format():
    """On the embedded model every method asks for full rewrites, OpenEvolve included.

    The smoke task's OpenEvolve config asks for diffs (``diff_based_evolution: true``), which
    the 1.5B model follows unreliably; the bench overrides it for every method alike.
    """
    from evoduet_graph.bench.runner import edit_format

    task = load_task(SMOKE_TASK)
    assert task.openevolve_config["diff_based_evolution"] is True
    base = EvoDuetConfig()
    assert edit_format(base, local=True) is False
    assert edit_format(base, local=False) is None  # an endpoint: each task's own setting
    forced = base.with_overrides({"prompt.diff_based": True})
    assert edit_format(forced, local=True) is True

    def cfg(diff_based):
        endpoint = Endpoint(model="m", base_url="http://127.0.0.1:1/v1", diff_based=diff_based)
        return openevolve_config(task, iterations=1, seed=0, endpoint=endpoint, trace_path="t")

    assert cfg(False)["diff_based_evolution"] is False
    assert cfg(None)["diff_based_evolution"] is True


def test_openevolve_command_line(tmp_path):
    task = load_task(SMOKE_TASK)
    env = OpenEvolveEnv(tmp_path, tmp_path / "bin/python", tmp_path / "bin/openevolve-run", "x")
    cmd = openevolve_command(
        env, task, config_path=tmp_path / "c.yaml", output_dir=tmp_path / "o", iterations=4
    )
    assert cmd[:3] == [
        str(tmp_path / "bin/openevolve-run"),
        str(SMOKE_TASK / "initial_program.py"),
        str(SMOKE_TASK / "evaluator.py"),
    ]
    assert cmd[cmd.index("--iterations") + 1] == "4" and "--checkpoint" not in cmd
    resumed = openevolve_command(
        env,
        task,
        config_path=tmp_path / "c.yaml",
        output_dir=tmp_path / "o",
        iterations=2,
        checkpoint=tmp_path / "o/checkpoints/checkpoint_2",
    )
    assert resumed[-2:] == ["--checkpoint", str(tmp_path / "o/checkpoints/checkpoint_2")]
    assert default_venv_dir().name.startswith(f"openevolve-{OPENEVOLVE_VERSION}-py")


def test_openevolve_output_readers(tmp_path):
    trace = tmp_path / "evolution_trace.jsonl"
    failures = tmp_path / "evolution_trace_failures.jsonl"
    lines = [
        {
            "iteration": 1,
            "timestamp": 10.0,
            "child_metrics": {"combined_score": 0.2, "area": 0.6},
            "child_code": "A",
            "metadata": {"token_usage": {"total_tokens": 100}},
        },
        {
            "iteration": 2,
            "timestamp": 11.0,
            "child_metrics": {"combined_score": 0.0, "error": "bad points"},
            "child_code": "B",
            "metadata": {"token_usage": {"prompt_tokens": 50, "completion_tokens": 7}},
        },
        # iteration 2 re-run after a resume: the later record wins
        {
            "iteration": 2,
            "timestamp": 20.0,
            "child_metrics": {"combined_score": 0.5, "area": 1.5},
            "child_code": "C",
            "metadata": {"token_usage": {"total_tokens": 30}},
        },
    ]
    trace.write_text("\n".join(json.dumps(x) for x in lines) + "\n{torn")
    failures.write_text(
        json.dumps(
            {
                "iteration": 3,
                "timestamp": 21.0,
                "error": "No valid diffs found",
                "token_usage": {"total_tokens": 40},
            }
        )
        + "\n"
    )
    recs = read_trace(trace)
    assert [r.iteration for r in recs] == [1, 2, 3]
    assert [r.code for r in recs] == ["A", "C", None]
    assert [r.tokens for r in recs] == [100, 30, 40]
    assert recs[0].fitness == 0.2 and recs[1].fitness == 0.5 and recs[2].fitness is None
    assert recs[2].error == "No valid diffs found"

    out = tmp_path / "output"
    assert latest_checkpoint(out) is None and read_best(out) is None
    for n in (1, 2, 10):
        ck = out / "checkpoints" / f"checkpoint_{n}"
        ck.mkdir(parents=True)
        (ck / "metadata.json").write_text("{}")
        (ck / "best_program.py").write_text(f"# best at {n}\n")
        (ck / "best_program_info.json").write_text(json.dumps({"iteration": n, "metrics": {}}))
    (out / "checkpoints" / "checkpoint_11").mkdir()  # incomplete: no metadata.json
    assert latest_checkpoint(out) == (10, out / "checkpoints" / "checkpoint_10")
    assert read_best(out) == ("# best at 10\n", {}, 10)
    (out / "best").mkdir()
    (out / "best" / "best_program.py").write_text("# final\n")
    (out / "best" / "best_program_info.json").write_text(
        json.dumps({"iteration": 9, "metrics": {"combined_score": 0.9}})
    )
    assert read_best(out) == ("# final\n", {"combined_score": 0.9}, 9)


@pytest.fixture(scope="session")
def openevolve_python() -> Path:
    """The real OpenEvolve's interpreter: its venv is created on first use (pip, ~20 s)."""
    from evoduet_graph.bench.openevolve_method import ensure_openevolve

    ensure_openevolve()
    return default_venv_dir() / "bin" / "python"


@pytest.mark.parametrize("task_dir", [SMOKE_TASK, CIRCLE_TASK])
def test_openevolve_itself_accepts_the_config(task_dir, tmp_path, openevolve_python):
    """Load the written config with the installed OpenEvolve's own loader."""
    task = load_task(task_dir)
    path = tmp_path / "oe.yaml"
    write_openevolve_config(
        task, path, iterations=5, seed=1, endpoint=_endpoint(), trace_path=tmp_path / "t.jsonl"
    )
    probe = (
        "import json, sys; from openevolve.config import load_config; "
        "c = load_config(sys.argv[1]); "
        "print(json.dumps({'it': c.max_iterations, 'seed': c.random_seed, "
        "'models': [(m.name, m.api_base, m.api_key, m.temperature, m.max_tokens) "
        "for m in c.llm.models], 'timeout': c.evaluator.timeout, "
        "'trace': [c.evolution_trace.enabled, c.evolution_trace.include_failures, "
        "c.evolution_trace.output_path], 'db_seed': c.database.random_seed, "
        "'ck': c.checkpoint_interval, 'sys': c.prompt.system_message}))"
    )
    out = subprocess.run(
        [str(openevolve_python), "-c", probe, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["it"] == 5 and got["seed"] == 1 and got["db_seed"] == 1 and got["ck"] == 1
    assert got["models"] == [["qwen-local", "http://127.0.0.1:9999/v1", "not-needed", 0.7, 1024]]
    assert got["timeout"] == int(task.timeout_s)
    assert got["trace"] == [True, True, str(tmp_path / "t.jsonl")]
    assert got["sys"] == task.openevolve_config["prompt"]["system_message"]


# ------------------------------------------------------------------------------------------
# the local model server wrapper
# ------------------------------------------------------------------------------------------


class _ModelsHandler(BaseHTTPRequestHandler):
    ready_after = 0.0
    started = 0.0

    def do_GET(self) -> None:
        if self.path == "/v1/models" and time.time() - self.started >= self.ready_after:
            body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
            self.send_response(200)
        else:
            body = b"not yet"
            self.send_response(503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


def test_wait_ready_polls_until_the_models_endpoint_answers():
    _ModelsHandler.started = time.time()
    _ModelsHandler.ready_after = 0.6
    server = HTTPServer(("127.0.0.1", 0), _ModelsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        start = time.monotonic()
        data = wait_ready(base, timeout_s=10, interval_s=0.05)
        assert data["data"][0]["id"] == "m"
        assert time.monotonic() - start >= 0.5
    finally:
        server.shutdown()
        server.server_close()


def test_wait_ready_times_out_and_notices_a_dead_process(tmp_path):
    port = free_port()
    with pytest.raises(ServerError, match="did not answer within"):
        wait_ready(f"http://127.0.0.1:{port}/v1", timeout_s=0.5, interval_s=0.1)
    log = tmp_path / "server.log"
    log.write_text("Traceback: model failed to load\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    with pytest.raises(ServerError, match="(?s)exited with status 3.*model failed to load"):
        wait_ready(f"http://127.0.0.1:{port}/v1", timeout_s=30, process=proc, log_path=log)


def test_server_command_line_and_context_manager_with_a_stand_in_server(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    srv = LlamaCppServer(
        model, alias="qwen", n_ctx=4096, n_threads=2, seed=7, log_path=tmp_path / "s.log"
    )
    cmd = srv.command()
    assert cmd[:3] == [sys.executable, "-m", "evoduet_graph.bench.llama_server"]
    pairs = dict(zip(cmd[3::2], cmd[4::2], strict=True))
    assert pairs == {
        "--model": str(model),
        "--model_alias": "qwen",
        "--host": "127.0.0.1",
        "--port": str(srv.port),
        "--n_ctx": "4096",
        "--n_threads": "2",
        "--n_threads_batch": "2",
        "--seed": "7",
    }
    assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"

    # a stand-in that serves /v1/models (and spawns a child) checks start/stop end to end
    stand_in = tmp_path / "stand_in.py"
    stand_in.write_text(
        "import json, subprocess, sys\n"
        "from http.server import BaseHTTPRequestHandler, HTTPServer\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "class H(BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        b = json.dumps({'data': [{'id': 'qwen'}]}).encode()\n"
        "        self.send_response(200); self.send_header('Content-Length', str(len(b)))\n"
        "        self.end_headers(); self.wfile.write(b)\n"
        "HTTPServer(('127.0.0.1', int(sys.argv[sys.argv.index('--port') + 1])), H)"
        ".serve_forever()\n"
    )

    class StandIn(LlamaCppServer):
        def command(self) -> list[str]:
            return [sys.executable, str(stand_in), *super().command()[3:]]

        def check_dependencies(self) -> None:
            return None

    with StandIn(model, alias="qwen", log_path=tmp_path / "s.log") as server:
        assert server.models == {"data": [{"id": "qwen"}]}
        proc = server.process
        assert proc is not None and proc.poll() is None
        pgid = proc.pid
    assert proc.poll() is not None  # the server is gone ...
    deadline = time.monotonic() + 10
    while _live_group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _live_group_members(pgid) == []  # ... and so is the child it started


def _live_group_members(pgid: int) -> list[int]:
    """Pids of processes in group ``pgid`` that are not zombies (from /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[-1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def test_missing_server_dependencies_are_a_clear_error(tmp_path, monkeypatch):
    import evoduet_graph.bench.server as server_mod

    monkeypatch.setattr(server_mod, "missing_server_modules", lambda _p=None: ["uvicorn"])
    srv = LlamaCppServer(tmp_path / "m.gguf", alias="x")
    with pytest.raises(ServerDependencyError, match=r"\[server\].*uvicorn.*pip install"):
        srv.start()
    assert srv.process is None
    assert isinstance(missing_server_modules(), list)


@pytest.mark.local_model
def test_real_llama_cpp_server_serves_the_embedded_model(tmp_path):
    """The real server: ready within a minute, answers, samples without a repeat penalty."""
    from langchain_openai import ChatOpenAI

    from evoduet_graph.llm.model_file import MODEL_NAME, REPEAT_PENALTY, assemble_model

    start = time.monotonic()
    with LlamaCppServer(
        assemble_model(),
        alias=MODEL_NAME,
        n_ctx=2048,
        log_path=tmp_path / "server.log",
        startup_timeout_s=60,
    ) as server:
        assert time.monotonic() - start < 60
        assert server.models["data"][0]["id"] == MODEL_NAME
        chat = ChatOpenAI(
            model=MODEL_NAME,
            base_url=server.base_url,
            api_key="not-needed",
            max_tokens=8,
            temperature=0,
        )
        reply = chat.invoke("Reply with the single word: ok")
        assert reply.content.strip()
        assert reply.usage_metadata and reply.usage_metadata["output_tokens"] > 0

        # a request without repeat_penalty samples as the in-process model does
        # (REPEAT_PENALTY); on this greedy prompt the penalty changes the reply (here: it
        # drops one of the five lines), so the equality below is not one by accident
        line = "radii[i] = radii[i] * scale"
        prompt = (
            "Repeat this line of Python exactly five times, one per line, nothing else:\n" + line
        )
        replies = {}
        for label, extra in (
            ("sent none", {}),
            ("embedded", {"repeat_penalty": REPEAT_PENALTY}),
            ("none", {"repeat_penalty": 1.0}),
        ):
            body = {"max_tokens": 80, **extra}
            greedy = chat.model_copy(update={"max_tokens": 80, "extra_body": body})
            replies[label] = str(greedy.invoke(prompt).content)
        assert replies["none"] != replies["embedded"], replies
        assert replies["sent none"] == replies["embedded"], replies


# ------------------------------------------------------------------------------------------
# the real OpenEvolve against a fake OpenAI-compatible endpoint
# ------------------------------------------------------------------------------------------


class _FakeOpenAI(BaseHTTPRequestHandler):
    """``/v1/models`` and ``/v1/chat/completions`` answering every prompt with ``reply``."""

    reply = RADIUS_UP
    requests: ClassVar[list[dict[str, Any]]] = []

    def _send(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        type(self).requests.append(request)
        self._send(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", "fake-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": self.reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }
        )

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def fake_openai():
    from http.server import ThreadingHTTPServer

    _FakeOpenAI.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_bench_drives_real_openevolve_and_our_graph_through_one_endpoint(
    tmp_path, fake_openai, monkeypatch, openevolve_python
):
    """Both methods call the same OpenAI-compatible endpoint.

    OpenEvolve resumes from its checkpoint when asked for more iterations; its best is re-scored by
    our sandbox.
    """
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "bench"
    cfg = BASE.with_overrides({"llm.base_url": fake_openai, "llm.max_retries": 0})
    settings = _settings(
        out,
        methods=["openevolve-mode", "openevolve"],
        seeds=[0],
        iterations=1,
        model="openai:fake-model",
        config=cfg,
        openevolve_timeout_s=300,
    )
    result = run_bench(settings)
    assert not result.failed, result.failed
    task = load_task(SMOKE_TASK)
    improved = task.initial_score / 0.36
    requests = list(_FakeOpenAI.requests)
    # the first request is the bench's 5-token probe of the endpoint, then one per method
    probe, requests = requests[0], requests[1:]
    assert probe["messages"] == [{"role": "user", "content": "Reply with OK."}]
    assert probe["max_tokens"] == 5
    assert len(requests) == 2 and {r["model"] for r in requests} == {"fake-model"}
    # identical sampling settings for both methods; the limit goes out as max_tokens, the
    # field llama-cpp-python's server reads (langchain-openai alone sends only
    # max_completion_tokens)
    assert {(r.get("temperature"), r.get("max_tokens")) for r in requests} == {(0.7, 1024)}
    runs = {r["method"]: r for r in _csv(out / "runs.csv")}
    for method in ("openevolve-mode", "openevolve"):
        assert runs[method]["status"] == "done"
        assert float(runs[method]["best"]) == pytest.approx(improved, rel=1e-6)
        assert runs[method]["llm_calls"] == "1"
    assert runs["openevolve"]["openevolve"] == OPENEVOLVE_VERSION
    assert runs["openevolve"]["tokens"] == "120"
    oe_dir = out / "runs/smoke_polygon_area/openevolve/seed0/openevolve"
    assert latest_checkpoint(oe_dir / "output")[0] == 1
    details = _bench_run(out, "openevolve", 0)["outcome"]["details"]
    assert details["reevaluated"][0]["metric"] == pytest.approx(improved, rel=1e-6)
    # the task folder is unchanged: no OpenEvolve output, no bytecode next to the evaluator
    assert not (SMOKE_TASK / "openevolve_output").exists()
    assert not (SMOKE_TASK / "__pycache__").exists()

    # one more iteration: OpenEvolve continues from checkpoint_1 (one more LLM call)
    _FakeOpenAI.requests = []
    more = run_bench(
        _settings(
            out,
            methods=["openevolve"],
            seeds=[0],
            iterations=2,
            model="openai:fake-model",
            config=cfg,
        )
    )
    assert more.ran == ["smoke_polygon_area/openevolve/seed0"], more.failed
    assert [r["messages"][0]["content"] for r in _FakeOpenAI.requests[:1]] == ["Reply with OK."]
    assert len(_FakeOpenAI.requests) == 2  # the endpoint probe, then OpenEvolve's one call
    assert "--checkpoint" in (oe_dir / "openevolve.log").read_text()
    rows = [r for r in _csv(out / "results.csv") if r["method"] == "openevolve"]
    assert [r["iteration"] for r in rows] == ["0", "1", "2"]
    assert rows[-1]["llm_calls"] == "2" and rows[-1]["tokens"] == "240"
    assert float(rows[1]["best"]) == pytest.approx(improved, rel=1e-6)


def test_children_die_with_a_killed_parent(tmp_path):
    """A bench killed with SIGKILL leaves no server behind (PR_SET_PDEATHSIG)."""
    assert sys.platform.startswith("linux"), "the bench's server cleanup is Linux-only"
    pid_file = tmp_path / "child.pid"
    parent_code = (
        "import subprocess, sys, time\n"
        "from evoduet_graph.bench.server import die_with_parent\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],\n"
        "                         start_new_session=True, preexec_fn=die_with_parent())\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    _child_dies_with_its_parent(parent_code, pid_file)


def _child_dies_with_its_parent(parent_code: str, pid_file: Path) -> None:
    """SIGKILL a parent and see its child's process group gone within 30 s.

    ``parent_code`` starts the child and writes the child's pid to ``pid_file``.
    """
    parent = subprocess.Popen([sys.executable, "-c", parent_code], cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the parent did not start its child"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        deadline = time.monotonic() + 30
        while _live_group_members(child) != [child] and time.monotonic() < deadline:
            time.sleep(0.05)  # the child may still be starting on a loaded machine
        assert _live_group_members(child) == [child]
        parent.kill()
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _live_group_members(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _live_group_members(child) == []
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_model_server_leaves_when_its_bench_is_gone_even_if_it_ignores_sigterm(tmp_path):
    """The bench's model server leaves as soon as the bench is gone.

    It answers the parent-death SIGTERM only after the request in flight (minutes of
    generation); its watchdog thread ends it when its parent changes.
    """
    ready = tmp_path / "child.ready"
    child_code = (
        "import os, signal, threading, time\n"
        "from evoduet_graph.bench.llama_server import _exit_with_parent\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a server busy with a request\n"
        "args = (os.getppid(), 0.1)\n"
        "threading.Thread(target=_exit_with_parent, args=args, daemon=True).start()\n"
        f"open({str(ready)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(600)\n"
    )
    parent_code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {child_code!r}], start_new_session=True)\n"
        "time.sleep(600)\n"
    )
    _child_dies_with_its_parent(parent_code, ready)


def test_llama_cpp_chat_model_sends_max_tokens_and_schema_as_json_object(fake_openai):
    """Against the bench's llama.cpp server.

    The token limit goes out as ``max_tokens`` and a json_schema structured call as ``{"type":
    "json_object", "schema": ...}`` (what the server accepts), in one request.
    """
    from pydantic import BaseModel

    from evoduet_graph.bench.endpoint import LlamaCppChatOpenAI, endpoint_chat_model
    from evoduet_graph.config import LLMConfig
    from evoduet_graph.llm.structured import structured_call

    class Decision(BaseModel):
        decision: str
        reason: str

    cfg = LLMConfig(
        model="openai:fake-model", base_url=fake_openai, max_tokens=77, api_key_env="NO_SUCH_KEY"
    )
    model = endpoint_chat_model(cfg, llama_cpp_server=True)
    assert isinstance(model, LlamaCppChatOpenAI)
    _FakeOpenAI.reply = json.dumps({"decision": "no-op", "reason": "known"})
    try:
        result = structured_call(
            model, "decide", Decision, default=Decision(decision="d", reason="")
        )
    finally:
        _FakeOpenAI.reply = RADIUS_UP
    assert result.method == "json_schema" and result.value.decision == "no-op"
    (request,) = _FakeOpenAI.requests
    assert request["max_tokens"] == 77
    assert request["response_format"]["type"] == "json_object"
    assert set(request["response_format"]["schema"]["properties"]) == {"decision", "reason"}
    # plain calls carry the limit too; other endpoints keep ChatOpenAI's structured output
    model.invoke("hello")
    assert _FakeOpenAI.requests[-1]["max_tokens"] == 77
    assert "response_format" not in _FakeOpenAI.requests[-1]
    other = endpoint_chat_model(cfg)
    assert not isinstance(other, LlamaCppChatOpenAI) and other.extra_body == {"max_tokens": 77}


def test_each_run_samples_from_its_own_seed_stream_on_the_shared_server(fake_openai):
    """A run's request seeds follow from its seed alone, not from the runs served before it."""
    from pydantic import BaseModel

    from evoduet_graph.bench.endpoint import endpoint_chat_model
    from evoduet_graph.config import LLMConfig
    from evoduet_graph.llm.structured import structured_call

    class Decision(BaseModel):
        decision: str

    cfg = LLMConfig(model="openai:fake-model", base_url=fake_openai, api_key_env="NO_SUCH_KEY")

    def seeds_of_a_run(seed: int) -> list[int]:
        model = endpoint_chat_model(cfg, llama_cpp_server=True, seed=seed)
        start = len(_FakeOpenAI.requests)
        model.invoke("write")
        _FakeOpenAI.reply = json.dumps({"decision": "no-op"})
        try:
            structured_call(model, "decide", Decision, default=Decision(decision="d"))
        finally:
            _FakeOpenAI.reply = RADIUS_UP
        model.invoke("write again")
        return [r.get("seed") for r in _FakeOpenAI.requests[start:]]

    first = seeds_of_a_run(1)
    assert len(first) == 3 and len(set(first)) == 3  # a structured copy draws from the stream
    assert all(isinstance(s, int) for s in first)
    seeds_of_a_run(7)  # another run on the same server in between
    assert seeds_of_a_run(1) == first and seeds_of_a_run(2) != first
    unseeded = endpoint_chat_model(cfg, llama_cpp_server=True)
    unseeded.invoke("write")
    assert "seed" not in _FakeOpenAI.requests[-1]  # the server's own stream, as before


def test_ndg_is_the_metric_of_the_best_program_by_fitness_in_the_bench_and_the_report(tmp_path):
    """One definition of a run's best for NDG: the bench agrees with the run report.

    The evaluator's fitness here falls as the area (the task's metric) grows, so the child with
    the larger area is not the run's best program: the initial one stays the best by fitness,
    and NDG is 0 in both the run's ``best_program.json`` and the bench, not the child's.
    """
    from evoduet_graph.report.summary import run_summary

    task_dir = tmp_path / "task"
    shutil.copytree(SMOKE_TASK, task_dir)
    evaluator = task_dir / "evaluator.py"
    evaluator.write_text(
        evaluator.read_text().replace("def evaluate(program_path):", "def _area(program_path):")
        + "\n\ndef evaluate(program_path):\n"
        "    out = _area(program_path)\n"
        "    if not out.get('error'):\n"
        "        out['combined_score'] = 1.0 / (1.0 + out['area'])\n"
        "    return out\n"
    )
    out = tmp_path / "bench"
    result = run_bench(
        _settings(out, tasks=[task_dir], methods=["openevolve-mode"], seeds=[0], iterations=1),
        llm_factory=_llm(),
    )
    assert not result.failed
    bench = _bench_run(out, "openevolve-mode", 0)  # the task keeps its name
    seed_dir = out / "runs" / "smoke_polygon_area" / "openevolve-mode" / "seed0"
    (events,) = seed_dir.rglob("events.jsonl")
    report_best = run_summary(events.parent).best
    children = [p for p in bench["outcome"]["points"] if p["iteration"] == 1]
    assert children and bench["outcome"]["best"] == pytest.approx(report_best.metric_value)
    assert report_best.ndg == pytest.approx(0.0)
    assert bench["outcome"]["best"] == pytest.approx(bench["outcome"]["initial"])


def test_the_summary_flags_a_method_whose_children_are_mostly_invalid(tmp_path):
    out = tmp_path / "bench"
    run_bench(
        _settings(out, methods=["evoduet", "openevolve-mode"], seeds=[0], iterations=2),
        llm_factory=lambda job: ScriptedChatModel(
            responses=[],
            default=KnowledgeResponder(
                gate="no-op", generate=RADIUS_UP if job.method == "evoduet" else GARBAGE
            ),
        ),
        searcher_factory=lambda _j: FakeSearcher(),
    )
    summary = (out / "summary.md").read_text()
    section = summary.split("## Valid children per task and method")[1].split("\n## ")[0]
    row = next(line for line in section.splitlines() if line.startswith("| smoke_polygon_area"))
    evoduet, openevolve_mode = row.strip("|").split("|")[1:3]
    assert "⚠" not in evoduet and evoduet.strip().startswith("100% (2/2)")
    assert "⚠" in openevolve_mode and openevolve_mode.strip().startswith("0% (0/2)")


def test_best_by_fitness_takes_the_earliest_among_equals_and_ignores_later_iterations():
    from evoduet_graph.bench.common import Explored, best_by_fitness

    programs = [
        Explored(0, 0.5, 10.0),
        Explored(1, 0.4, 99.0),  # a better metric, a worse fitness: not the run's best
        Explored(2, 0.7, 20.0),
        Explored(2, 0.7, 30.0),  # equal fitness, later: the earlier one stays
        Explored(3, 0.9, 40.0),  # past the last iteration
    ]
    curve, best = best_by_fitness(programs, 2)
    assert curve == [10.0, 10.0, 20.0]
    assert best == programs[2]
    assert best_by_fitness([], 1) == ([None, None], None)


def test_retrieval_cases_quote_the_documents_queries_and_child_of_each_iteration(tmp_path):
    out = tmp_path / "bench"
    run_bench(
        _settings(out, methods=["evoduet"], seeds=[0], iterations=2),
        llm_factory=lambda _j: ScriptedChatModel(
            responses=[], default=KnowledgeResponder(gate="retrieve", generate=RADIUS_UP)
        ),
        searcher_factory=lambda _j: FakeSearcher(),
    )
    cases = load_script(ROOT / "benchmarks" / "retrieval_cases.py")
    run_dir = out / "runs" / "smoke_polygon_area" / "evoduet" / "seed0" / "run"
    blocks, picked = cases.run_cases(run_dir, max_diff_lines=10)
    assert len(blocks) == 2 and picked["improved"] == 1
    first = blocks[0]
    assert first.startswith("#### iteration 1: retrieve, outcome improved")
    assert "- query, round 0: “" in first and "- document " in first
    assert "- child it00001-c0 of initial: evaluated, score" in first and "```diff" in first
    # the command line: one section per run, an error line for a folder without runs
    assert cases.main([str(out)]) == 0
    assert cases.main([str(tmp_path / "empty")]) == 2

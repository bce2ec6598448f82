"""Folder programs end to end: `evoduet run` with a scripted OpenAI-compatible model.

A Python folder (the bundled ``tsp_folder``) and a folder mixing Python with C (compiled by
its evaluator with gcc) each run 3 iterations: answers that edit two files are evaluated and
stored with both files changed, an answer naming a path outside the folder is invalid with that
reason, the best program is written out as a folder and the report shows the diff per file.
A run killed mid-iteration resumes without losing or re-evaluating anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from evoduet_graph.candidates.bundle import changed_files, unpack
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from tests.conftest import ROOT
from tests.fake_openai_server import FaultyServer
from tests.folder_answers import (
    MIXED_TASK,
    OUTSIDE,
    TSP_TASK,
    mixed_two_files,
    tsp_two_files,
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LANGSMITH_"))}
    env.update(COLUMNS="200", LANGGRAPH_STRICT_MSGPACK="true", PYTHONUNBUFFERED="1")
    return env


def _run_cli(task: Path, tmp_path: Path, answers: list[str]) -> tuple[Path, FaultyServer]:
    calls = {"n": 0}

    def content(body: dict[str, Any]) -> str:
        calls["n"] += 1
        return answers[min(calls["n"], len(answers)) - 1]

    with FaultyServer(["ok"], content=content) as server:
        cfg = {
            "iterations": 3,
            "seed": 3,
            "population": {"num_islands": 1},
            "novelty": {"enabled": False},
            "gate": {"mode": "never"},
            "prompt": {"diff_based": True},
            "evaluation": {"workers": 1},
            "llm": {"model": "openai:fake", "base_url": server.base_url, "max_retries": 0},
        }
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
        run_dir = tmp_path / "run"
        cli = [sys.executable, "-m", "evoduet_graph.cli"]
        proc = subprocess.run(
            [*cli, "run", str(task), "--config", str(config), "--out", str(run_dir), "--report"],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return run_dir, server


def _prompts(server: FaultyServer) -> list[str]:
    return [body["messages"][-1]["content"] for _, body in server.requests]


def test_a_python_folder_task_runs_three_iterations(tmp_path: Path) -> None:
    run_dir, server = _run_cli(TSP_TASK, tmp_path, [tsp_two_files(1), tsp_two_files(2), OUTSIDE])
    prompts = _prompts(server)
    assert len(prompts) == 3
    assert (
        "driver.py  (evolvable inside its EVOLVE-BLOCK markers)\ngeometry.py  (read-only)"
        in prompts[0]
    )
    assert "### File: <path>" in prompts[0]
    store = ProgramStore(run_dir / "programs.sqlite")
    initial = store.get_program("initial")
    for pid in ("it00001-c0", "it00002-c0"):
        row = store.get_program(pid)
        assert row.status == "evaluated" and row.valid, (pid, row.error)
        parent = store.get_program(row.parent_id or "")
        assert changed_files(parent.code or "", row.code or "") == ["driver.py", "heuristics.py"]
        assert (row.metrics["tour_length"]) < initial.metrics["tour_length"]
    outside = store.get_program("it00003-c0")
    assert outside.status == "invalid" and not outside.valid
    assert (
        outside.error is not None
        and "'../evil.py' goes up with '..', outside the program folder" in outside.error
    )
    assert not (tmp_path / "evil.py").exists()
    best = run_dir / "best_program"
    assert sorted(p.name for p in best.iterdir()) == ["driver.py", "geometry.py", "heuristics.py"]
    assert "MAX_PASSES" in (best / "heuristics.py").read_text()
    info = json.loads((run_dir / "best_program.json").read_text())
    assert info["program_file"] == "best_program" and info["metric_value"] < 9.79
    report = (run_dir / "report" / "report.md").read_text()
    assert "--- a/heuristics.py\n+++ b/heuristics.py" in report
    assert "--- a/driver.py\n+++ b/driver.py" in report
    shown = subprocess.run(
        [sys.executable, "-m", "evoduet_graph.cli", "report", str(run_dir)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]


def test_a_folder_mixing_python_and_c_runs_three_iterations(tmp_path: Path) -> None:
    run_dir, server = _run_cli(
        MIXED_TASK, tmp_path, [mixed_two_files(1), mixed_two_files(2), mixed_two_files(3)]
    )
    prompts = _prompts(server)
    assert "table.bin  (binary, not shown)" in prompts[0]
    assert "BIN" not in prompts[0].split("## Current program")[1].split("## Task")[0].replace(
        "table.bin", ""
    )
    store = ProgramStore(run_dir / "programs.sqlite")
    values = []
    for k in (1, 2, 3):
        row = store.get_program(f"it0000{k}-c0")
        assert row.status == "evaluated" and row.valid, row.error
        parent = store.get_program(row.parent_id or "")
        assert changed_files(parent.code or "", row.code or "") == ["combine.py", "kernel.c"]
        assert f"return {1 + k}.0;" in unpack(row.code or "")["kernel.c"]
        values.append(row.metrics["value"])
    assert values == [min(10.0, (1 + k) * (k + 0.5)) for k in (1, 2, 3)]
    best = run_dir / "best_program"
    assert (best / "table.bin").read_bytes() == b"BIN\x00\x01\x02\xff"
    assert "return 4.0;" in (best / "kernel.c").read_text()
    report = (run_dir / "report" / "report.md").read_text()
    assert "+++ b/kernel.c" in report and "+++ b/combine.py" in report


def _events(run_dir: Path) -> list[dict]:
    return list(read_events(run_dir / "events.jsonl"))


def _start(run_dir: Path, offset: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration._run_folder",
            str(run_dir),
            "4",
            str(offset),
            *extra,
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_folder_run_killed_mid_iteration_resumes_losing_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _start(run_dir, 0)
    try:
        deadline = time.time() + 180
        while not any(
            e.get("node") == "generate" and e.get("iteration") == 2 for e in _events(run_dir)
        ):
            assert time.time() < deadline, "iteration 2 never generated"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    before = {e["iteration"] for e in _events(run_dir) if e.get("node") == "record"}
    assert len(before) < 4
    resumed = _start(run_dir, 1000, "resume")
    out, err = resumed.communicate(timeout=480)
    assert resumed.returncode == 0, err[-3000:]
    assert out.strip().splitlines()[-1].startswith("DONE 4")
    log = [json.loads(x) for x in (run_dir / "evaluations.log").read_text().splitlines()]
    assert all(n == 1 for n in Counter(e["sha"] for e in log).values()), log
    assert all(n == 1 for n in Counter(e["id"] for e in log).values()), log
    records = {e["iteration"] for e in _events(run_dir) if e.get("node") == "record"}
    assert records == {1, 2, 3, 4}
    store = ProgramStore(run_dir / "programs.sqlite")
    evaluated = [e["id"] for e in log if e["id"] != "initial"]
    assert len(evaluated) == 8  # 4 iterations x 2 candidates, each evaluated once
    for pid in evaluated:
        row = store.get_program(pid)
        assert row.status == "evaluated" and row.valid, (pid, row.error)
        parent = store.get_program(row.parent_id or "")
        assert changed_files(parent.code or "", row.code or "") == ["driver.py", "heuristics.py"]
    assert (run_dir / "best_program" / "heuristics.py").is_file()

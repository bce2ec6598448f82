"""What a protocol costs, from a local bench's run records (`benchmarks/protocol_cost.py`)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import ROOT, load_script

pc = load_script(ROOT / "benchmarks" / "protocol_cost.py")


def _record(folder, task, method, seed, *, calls, tokens, queries=0, status="done"):
    knowledge = {"queries": queries, "search_calls": queries} if queries else {}
    data = {
        "task": task,
        "method": method,
        "seed": seed,
        "status": status,
        "outcome": {
            "iterations": 10,
            "initial": 0.0,
            "best": 0.0,
            "llm_calls": calls,
            "tokens": tokens,
            "details": {"knowledge": knowledge},
        },
    }
    path = folder / task / method / f"seed{seed}" / "bench_run.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))


def test_counts_per_iteration_pool_the_finished_runs_of_the_named_tasks(tmp_path):
    _record(tmp_path, "a", "openevolve-mode", 1, calls=10, tokens=1000)
    _record(tmp_path, "a", "openevolve-mode", 2, calls=30, tokens=3000)
    _record(tmp_path, "a", "evoduet", 1, calls=40, tokens=8000, queries=6)
    _record(tmp_path, "a", "evoduet", 2, calls=99, tokens=99, status="running")
    _record(tmp_path, "b", "evoduet", 1, calls=99, tokens=99, queries=99)
    counts = pc._local_counts(tmp_path, {"a"})
    assert counts["openevolve-mode"]["calls"] == 2.0  # 40 calls over 20 iterations
    assert counts["openevolve-mode"]["tokens"] == 200.0
    assert counts["evoduet"] == pytest.approx(
        {"calls": 4.0, "tokens": 800.0, "queries": 0.6, "search_calls": 0.6, "runs": 1}
    )
    bench = tmp_path / "bench"
    (bench / "runs").mkdir(parents=True)
    _record(bench / "runs", "a", "oracle", 1, calls=20, tokens=500)
    assert pc._local_counts(bench, set())["oracle"]["calls"] == 2.0  # a bench folder too


def test_the_cost_table_scales_the_local_counts_to_the_protocol(tmp_path, monkeypatch, capsys):
    _record(tmp_path, "a", "openevolve-mode", 1, calls=10, tokens=1000)
    _record(tmp_path, "a", "oracle", 1, calls=10, tokens=1500)
    _record(tmp_path, "a", "evoduet", 1, calls=40, tokens=8000, queries=6)
    argv = ["protocol_cost.py", str(ROOT / "benchmarks/protocols/paper.yaml")]
    monkeypatch.setattr(sys, "argv", [*argv, "--local", str(tmp_path)])
    assert pc.main() == 0
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and not line.startswith("| method")
    }
    paper = pc.load_protocol(ROOT / "benchmarks/protocols/paper.yaml")
    iterations = len(paper.tasks) * len(paper.seeds) * paper.iterations
    assert rows["openevolve-mode"][0] == f"{iterations:,}"  # one call per iteration
    assert rows["evoduet"][0] == f"{4 * iterations:,}"
    assert rows["evoduet"][3] == f"{round(0.6 * iterations):,}"  # Tavily: one per search
    assert rows["openevolve-mode-n8"][0] == f"{8 * iterations:,}"


def test_no_finished_records_is_a_clear_error(tmp_path):
    _record(tmp_path, "a", "evoduet", 1, calls=1, tokens=1, status="failed")
    with pytest.raises(SystemExit, match="no finished run records"):
        pc._local_counts(tmp_path, set())

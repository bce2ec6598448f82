"""The bench summary names the versions that made its runs, read from each run's record."""

from __future__ import annotations

import csv
import json

from evoduet_graph import load_task
from evoduet_graph.bench.common import IterationPoint, MethodOutcome
from evoduet_graph.bench.jobs import BenchResult
from evoduet_graph.bench.output import RunRecord, write_csvs
from evoduet_graph.bench.tables import write_summary
from tests.conftest import SMOKE_TASK

SHA = "ab" * 32


def _record(method: str, seed: int, git: str) -> RunRecord:
    task = load_task(SMOKE_TASK)
    outcome = MethodOutcome(
        iterations=1,
        initial=task.initial_score,
        best=task.initial_score,
        points=[IterationPoint(0, task.initial_score), IterationPoint(1, task.initial_score)],
    )
    data = {
        "task": task.name,
        "method": method,
        "seed": seed,
        "status": "done",
        "model": "local (model.gguf)",
        "model_sha256": SHA,
        "versions": {
            "evoduet_graph": "0.1.0",
            "evoduet_graph_git": git,
            "llama_cpp_python": "0.3.36",
            "openevolve": None,
            "python": "3.11.7",
        },
    }
    return RunRecord(task, data, outcome)


SUMMARISER = {
    "versions": {"evoduet_graph": "0.1.0", "evoduet_graph_git": "fffffff"},
    "model": {"model": "other"},
}


def test_the_versions_line_is_the_runs_not_the_summarising_invocations(tmp_path):
    records = [_record("openevolve-mode", 1, "1111111"), _record("evoduet", 1, "1111111")]
    head = write_summary(tmp_path, records, SUMMARISER).read_text().split("## ")[0]
    assert "(git 1111111)" in head
    assert f"sha256 `{SHA}`" in head
    assert "Model: local (model.gguf)" in head
    assert "fffffff" not in head and "other" not in head


def test_runs_made_at_different_commits_are_listed_apart(tmp_path):
    records = [_record("openevolve-mode", 1, "1111111"), _record("evoduet", 2, "2222222")]
    head = write_summary(tmp_path, records, SUMMARISER).read_text().split("## ")[0]
    assert "different models or versions" in head
    first = next(line for line in head.splitlines() if "git 1111111" in line)
    second = next(line for line in head.splitlines() if "git 2222222" in line)
    assert "openevolve-mode/seed1" in first and "evoduet" not in first.split("Runs")[1]
    assert "evoduet/seed2" in second


def test_a_record_without_versions_falls_back_to_the_manifest(tmp_path):
    old = _record("evoduet", 1, "x")
    del old.data["versions"]
    head = write_summary(tmp_path, [old], SUMMARISER).read_text().split("## ")[0]
    assert "(git fffffff)" in head


def test_runs_csv_carries_each_runs_commit(tmp_path):
    runs = tmp_path / "runs" / "smoke_polygon_area"
    for rec in (_record("openevolve-mode", 1, "1111111"), _record("evoduet", 2, "2222222")):
        task, method, seed = rec.key
        folder = runs / method / f"seed{seed}"
        folder.mkdir(parents=True)
        data = dict(rec.data, task_dir=str(SMOKE_TASK), outcome=rec.outcome.to_json())
        (folder / "bench_run.json").write_text(json.dumps(data))
    write_csvs(tmp_path, BenchResult(tmp_path))
    with open(tmp_path / "runs.csv", newline="") as fh:
        rows = {row["method"]: row["evoduet_graph_git"] for row in csv.DictReader(fh)}
    assert rows == {"openevolve-mode": "1111111", "evoduet": "2222222"}

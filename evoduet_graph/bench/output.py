"""The bench's output folder: manifest, CSV files and run records.

The bench's output folder: ``manifest.json``, ``results.csv`` / ``runs.csv`` and the run
records read back from ``runs/<task>/<method>/seed<k>/bench_run.json``.
"""

from __future__ import annotations

import csv
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoduet_graph import EvoDuetConfig, Task, TaskError, load_task
from evoduet_graph.bench.common import MethodOutcome, bundled_tasks_dir, floored_ndg, write_json
from evoduet_graph.bench.jobs import (
    BENCH_RUN,
    METHOD_ORDER,
    BenchResult,
    BenchSettings,
    read_run_record,
)
from evoduet_graph.rundir.read import read_json


def write_manifest(
    out: Path, settings: BenchSettings, model_info: dict[str, Any], versions: dict[str, Any]
) -> None:
    """Add this invocation to ``<out>/manifest.json`` with the versions, model and platform."""
    path = out / "manifest.json"
    manifest = read_json(path) or {}
    invocations = list(manifest.get("invocations") or [])
    invocations.append(
        {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "tasks": [str(p) for p in settings.tasks],
            "methods": settings.methods,
            "seeds": settings.seeds,
            "iterations": settings.iterations,
            "model": settings.model,
            "argv": sys.argv,
        }
    )
    manifest.update(
        versions=versions,
        model=model_info,
        platform={"system": platform.platform(), "cpus": os.cpu_count()},
        llm=(settings.config or EvoDuetConfig()).llm.model_dump(mode="json"),
        invocations=invocations,
    )
    write_json(path, manifest)


# ------------------------------------------------------------------------------------------
# results
# ------------------------------------------------------------------------------------------


@dataclass
class RunRecord:
    """One (task, method, seed) as read back from its ``bench_run.json``.

    Attributes:
        task: the loaded task (None when its folder is gone).
        data: the raw ``bench_run.json``.
        outcome: the outcome of a finished run.
    """

    task: Task | None
    data: dict[str, Any]
    outcome: MethodOutcome | None

    @property
    def key(self) -> tuple[str, str, int]:
        """``(task, method, seed)``: the run's place in the bench grid."""
        return (
            str(self.data.get("task")),
            str(self.data.get("method")),
            int(self.data.get("seed", 0)),
        )

    @property
    def status(self) -> str:
        """The run's status as the bench recorded it (``unknown`` when missing)."""
        return str(self.data.get("status") or "unknown")

    def ndg(self, best: float | None) -> float | None:
        """NDG of ``best`` on the run's task (floored; None without a task)."""
        return floored_ndg(self.task, best) if self.task is not None else None


def _run_task(task_dir: str, name: str) -> Task | None:
    """The run's task from its recorded folder, else the bundled task of the same name.

    The fallback reads a bench folder brought from another machine (a Ray worker's, or one
    whose results were copied elsewhere), where the recorded folder does not exist.
    """
    for folder in (task_dir, bundled_tasks_dir() / name if name else None):
        if folder and Path(folder).is_dir():
            try:
                return load_task(folder)
            except (TaskError, OSError):
                continue
    return None


def collect_runs(out: Path, runs: Path | None = None) -> list[RunRecord]:
    """Every ``bench_run.json`` under ``<out>/runs``, sorted by (task, method, seed).

    A run's task is loaded from the folder its record names, else the bundled task of its name.
    ``runs`` names the folder of ``<task>/<method>/seed<k>/`` records instead (run records
    kept apart from their bench folder).

    Raises:
        RunRecordError: a record that does not read back (`read_run_record`), by name.
    """
    records = []
    tasks: dict[str, Task | None] = {}
    for path in sorted((runs or out / "runs").glob(f"*/*/seed*/{BENCH_RUN}")):
        data = read_run_record(path)
        if not data:
            continue
        task_dir = str(data.get("task_dir") or "")
        if task_dir not in tasks:
            tasks[task_dir] = _run_task(task_dir, str(data.get("task") or ""))
        raw = data.get("outcome") if data.get("status") == "done" else None
        outcome = MethodOutcome.from_json(raw) if isinstance(raw, dict) else None
        records.append(RunRecord(tasks[task_dir], data, outcome))
    method_order = {m: i for i, m in enumerate(METHOD_ORDER)}
    records.sort(key=lambda r: (r.key[0], method_order.get(r.key[1], 99), r.key[1], r.key[2]))
    return records


def _num(value: float | None, digits: int = 10) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}g}"


def write_csvs(out: Path, result: BenchResult) -> None:
    """Write ``results.csv`` and ``runs.csv`` from every run record under ``out``."""
    records = collect_runs(out)
    results_path = out / "results.csv"
    runs_path = out / "runs.csv"
    with open(results_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(RESULT_COLUMNS)
        for rec in records:
            task, method, seed = rec.key
            if rec.outcome is None:
                writer.writerow([task, method, seed, "", "", "", "", "", "", rec.status])
                continue
            for p in rec.outcome.points:
                writer.writerow(
                    [
                        task,
                        method,
                        seed,
                        p.iteration,
                        _num(p.best),
                        _num(rec.ndg(p.best), 6),
                        p.llm_calls,
                        p.tokens,
                        _num(p.wall_s, 6),
                        rec.status,
                    ]
                )
    with open(runs_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(RUN_COLUMNS)
        for rec in records:
            task, method, seed = rec.key
            o = rec.outcome
            versions = rec.data.get("versions") or {}
            writer.writerow(
                [
                    task,
                    method,
                    seed,
                    rec.status,
                    o.iterations if o else "",
                    _num(o.initial) if o else "",
                    _num(o.best) if o else "",
                    _num(rec.ndg(o.best), 6) if o else "",
                    o.llm_calls if o else "",
                    o.tokens if o else "",
                    _num(o.wall_s, 6) if o else "",
                    "; ".join(o.notes) if o else "",
                    (rec.data.get("error") or "").splitlines()[0][:500]
                    if rec.data.get("error")
                    else "",
                    rec.data.get("model") or "",
                    rec.data.get("model_sha256") or "",
                    versions.get("evoduet_graph") or "",
                    versions.get("evoduet_graph_git") or "",
                    versions.get("llama_cpp_python") or "",
                    (versions.get("openevolve") or "") if method == "openevolve" else "",
                ]
            )
    result.results_csv, result.runs_csv = results_path, runs_path


RESULT_COLUMNS = (
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
)
RUN_COLUMNS = (
    "task",
    "method",
    "seed",
    "status",
    "iterations",
    "initial",
    "best",
    "ndg",
    "llm_calls",
    "tokens",
    "wall_s",
    "notes",
    "error",
    "model",
    "model_sha256",
    "evoduet_graph",
    "evoduet_graph_git",
    "llama_cpp_python",
    "openevolve",
)

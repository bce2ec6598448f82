"""Result files of a run directory: ``best_program<suffix>`` and ``best_program.json``.

The best program keeps the task's file suffix (``best_program.py``, ``best_program.rs``) so
it can be compiled or run as it is. A folder program is written out as the folder
``best_program/`` (its text files unpacked from the stored bundle, its carried binary files
copied from the task's initial program folder), replaced whole when a better one comes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from evoduet_graph.candidates.bundle import materialise
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.task import Task


def lineage(store: ProgramStore, program_id: str) -> list[dict[str, Any]]:
    """Parent chain of a program, from the initial program to ``program_id``.

    Returns:
        ``[{"id", "iteration", "score"}, ...]`` oldest first.
    """
    chain = []
    seen = set()
    current: str | None = program_id
    while current is not None and current not in seen and store.has_program(current):
        seen.add(current)
        row = store.get_program(current)
        chain.append({"id": row.id, "iteration": row.iteration, "score": row.score})
        current = row.parent_id
    return list(reversed(chain))


def best_program_name(task: Task) -> str:
    """``best_program`` + the task's suffix (``best_program.py``; a folder: ``best_program``)."""
    if task.is_folder:
        return layout.BEST_STEM
    suffix = task.file_suffix if task.file_suffix.startswith(".") else f".{task.file_suffix}"
    return f"{layout.BEST_STEM}{suffix}"


def write_best(run_dir: Path | None, store: ProgramStore, task: Task, program_id: str) -> None:
    """Write ``best_program<suffix>`` and ``best_program.json`` atomically into ``run_dir``.

    Write program ``program_id`` of ``store`` as ``best_program<suffix>`` and its metrics, NDG
    and parent chain as ``best_program.json`` (which names the program file in
    ``program_file``); nothing for an in-memory run (``run_dir`` None).
    """
    if run_dir is None:
        return
    row = store.get_program(program_id)
    metric_value = task.metric_value(row.metrics)
    info = {
        "id": row.id,
        "iteration": row.iteration,
        "score": row.score,
        "metric": task.metric,
        "metric_value": metric_value,
        "direction": task.direction,
        "ndg": task.ndg(metric_value) if metric_value is not None else None,
        "metrics": row.metrics,
        "parent_chain": lineage(store, row.id),
        "program_file": best_program_name(task),
    }
    files = [(layout.BEST_META, json.dumps(info, indent=2))]
    if task.is_folder:
        write_folder(run_dir / best_program_name(task), row.code or "", task)
    else:
        files.insert(0, (best_program_name(task), row.code or ""))
    for name, text in files:
        tmp = run_dir / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, run_dir / name)


def write_folder(target: Path, bundle: str, task: Task) -> None:
    """Write the folder program ``bundle`` as the folder ``target``, replacing it whole.

    Unpacked into a hidden sibling first, then renamed over ``target`` (the old folder is
    removed after the rename), so a kill leaves either the old or the new folder.
    """
    tmp = target.with_name(f".{target.name}.tmp")
    old = target.with_name(f".{target.name}.old")
    for leftover in (tmp, old):
        shutil.rmtree(leftover, ignore_errors=True)
    materialise(bundle, tmp, carried_from=task.program_dir, carried=task.folder_carried)
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)

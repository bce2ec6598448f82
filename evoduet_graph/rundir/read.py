"""The one reader of a run directory's files: JSONL logs, JSON files, the program store and
D_search (read from a copy, so a running run is never disturbed).

Every reader tolerates a torn tail (a killed run's last line) and a missing file: the report, the
budget, the progress line, the bench and the API read the same way.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.search.database import SearchDatabase

# ------------------------------------------------------------------------------------------
# readers
# ------------------------------------------------------------------------------------------


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """JSON objects of a JSONL file and the number of lines that are not one (torn tail)."""
    if not path.is_file():
        return [], 0
    records: list[dict[str, Any]] = []
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(obj, dict):
                records.append(obj)
            else:
                bad += 1
    return records, bad


def load_search_db(path: Path) -> SearchDatabase | None:
    """D_search loaded from a temporary copy of ``path`` (None when the file is missing)."""
    if not path.is_file():
        return None
    with tempfile.TemporaryDirectory(prefix="evoduet-report-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        return SearchDatabase(copy, fsync=False)


def load_programs(path: Path) -> list[Any] | None:
    """Every program row of ``programs.sqlite`` (None when missing or unreadable)."""
    if not path.is_file():
        return None
    try:
        store = ProgramStore(path)
    except sqlite3.Error:
        return None
    try:
        return store.all_programs()
    except sqlite3.Error:
        return None
    finally:
        store.close()


def read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None

"""The one reader of a run directory's files.

JSONL logs, JSON files and the program store. (D_search, read from a copy so that a running run
is never disturbed, is read by `evoduet_graph.search.database.load_search_db`.)

Every reader tolerates a torn tail (a killed run's last line), a line that is not a JSON object
and a missing file: the event log, the report, the budget, the live progress, the bench (also
for OpenEvolve's trace files) and the API all read through `iter_jsonl`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoduet_graph.rundir.store import ProgramRow, all_programs


def _scan(path: Path) -> Iterator[dict[str, Any] | None]:
    """Each non-empty line of ``path`` as a JSON object, or None for one that is not."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                yield None
                continue
            yield obj if isinstance(obj, dict) else None


def iter_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a JSONL file, skipping lines that are not one.

    Args:
        path: the file; a missing file yields nothing.

    Yields:
        Each complete JSON object, in file order (a line torn by a kill is skipped).
    """
    for obj in _scan(Path(path)):
        if obj is not None:
            yield obj


def read_jsonl(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a JSONL file and the number of lines that are not one.

    Args:
        path: the file; a missing file gives ``([], 0)``.

    Returns:
        ``(records, bad)``: every complete JSON object in order, and how many non-empty lines
        were torn or not an object (the report shows the count).
    """
    records: list[dict[str, Any]] = []
    bad = 0
    for obj in _scan(Path(path)):
        if obj is None:
            bad += 1
        else:
            records.append(obj)
    return records, bad


def read_json(path: str | Path) -> dict[str, Any] | None:
    """A JSON object file (``run.json``, ``best_program.json``, a manifest).

    Returns:
        The object, or None when the file is missing, unreadable or not a JSON object.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to a SQLite file of a run directory, which it never writes.

    While a run writes the file its ``-wal`` file exists and the connection reads through it
    (``mode=ro``: it sees every committed transaction). Without one the database is complete
    in its main file and is opened ``immutable``: SQLite then creates no ``-wal`` / ``-shm``
    file beside it, so a finished run's directory is left exactly as it was.

    Raises:
        sqlite3.Error: the file cannot be opened.
    """
    wal = path.with_name(path.name + "-wal")
    mode = "ro" if wal.exists() else "ro&immutable=1"
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True)


def load_programs(path: Path) -> list[ProgramRow] | None:
    """Every program row of ``programs.sqlite`` (None when missing or unreadable).

    Read through `connect_readonly`: a report or ``evoduet view`` never writes the store.
    """
    if not path.is_file():
        return None
    try:
        conn = connect_readonly(path)
    except sqlite3.Error:
        return None
    try:
        return all_programs(conn)
    except sqlite3.Error:
        return None
    finally:
        conn.close()

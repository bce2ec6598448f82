"""Program store: every candidate's source, metrics and outcome, outside the graph state.

One SQLite file (``<run_dir>/programs.sqlite``, WAL, ``synchronous=NORMAL``) with three tables:

* ``programs`` — every program ever produced (initial, children, invalid attempts), by id;
* ``evaluations`` — completed evaluations by the sha256 of the code, so a resumed run never
  evaluates the same program twice (docs/design.md §3: "loses at most the work in flight");
* ``population`` — a snapshot of the population (MAP-Elites islands or top-k), tagged with the
  iteration that produced it, written every ``population.snapshot_interval`` iterations;
* ``population_ops`` — the journal since that snapshot: one small operation per iteration (the
  program added, or "no program: next island"), so an iteration writes O(1) bytes however large
  the population grows. The population is rebuilt as snapshot + replay of the journal
  (`evoduet_graph.population.restore_population`), and a replayed operation is a no-op when it
  is already applied, so the ``record`` node stays idempotent on resume.

All methods are thread-safe (one connection behind a lock); the graph calls them from the
parallel ``generate`` branches.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evoduet_graph.evaluation import EvaluationOutcome

_SCHEMA = """
CREATE TABLE IF NOT EXISTS programs (
    id TEXT PRIMARY KEY,
    code TEXT,
    code_sha TEXT,
    parent_id TEXT,
    iteration INTEGER NOT NULL,
    generation INTEGER NOT NULL DEFAULT 0,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    score REAL,
    valid INTEGER NOT NULL DEFAULT 0,
    metrics TEXT NOT NULL DEFAULT '{}',
    artifacts TEXT NOT NULL DEFAULT '{}',
    error TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS programs_iteration ON programs(iteration);
CREATE TABLE IF NOT EXISTS evaluations (
    code_sha TEXT PRIMARY KEY,
    outcome TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS eval_attempts (
    code_sha TEXT PRIMARY KEY,
    attempts INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS population (
    slot INTEGER PRIMARY KEY CHECK (slot = 1),
    iteration INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS population_ops (
    iteration INTEGER PRIMARY KEY,
    op TEXT NOT NULL
);
"""


ROW_CACHE_SIZE = 4096
"""Parsed program rows `ProgramStore.get_program` keeps in memory (first in, first out)."""


def code_sha(code: str) -> str:
    """sha256 hex digest of the program text (UTF-8)."""
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


class ProgramRow(BaseModel):
    """One row of the ``programs`` table.

    ``kind`` is ``initial``, ``diff``, ``rewrite`` or ``none`` (no code could be extracted);
    ``status`` follows `evoduet_graph.state.CandidateRecord`.
    """

    id: str
    code: str | None
    parent_id: str | None
    iteration: int
    generation: int = 0
    kind: str
    status: str
    score: float | None = None
    valid: bool = False
    metrics: dict[str, float] = Field(default_factory=dict)
    artifacts: dict[str, str] = Field(default_factory=dict)
    error: str | None = None


class ProgramStore:
    """SQLite-backed store of programs, evaluations and the population snapshot.

    Args:
        path: the SQLite file; ``":memory:"`` for tests.

    Raises:
        sqlite3.Error: when the file cannot be opened (e.g. a read-only directory).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # parsed rows by id (a row changes only through `put_program`, which drops it here):
        # prompt building reads the parent, inspirations and top programs every iteration
        self._rows: dict[str, ProgramRow] = {}
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    # -- programs ---------------------------------------------------------------------------
    def put_program(self, row: ProgramRow) -> None:
        """Insert or replace a program row (idempotent by id)."""
        with self._lock:
            self._rows.pop(row.id, None)
            self._conn.execute(
                "INSERT OR REPLACE INTO programs (id, code, code_sha, parent_id, iteration, "
                "generation, kind, status, score, valid, metrics, artifacts, error, created) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    row.id,
                    row.code,
                    code_sha(row.code) if row.code is not None else None,
                    row.parent_id,
                    row.iteration,
                    row.generation,
                    row.kind,
                    row.status,
                    row.score,
                    int(row.valid),
                    json.dumps(row.metrics, allow_nan=False),
                    json.dumps(row.artifacts),
                    row.error,
                    time.time(),
                ),
            )

    def get_program(self, program_id: str) -> ProgramRow:
        """Return the row of ``program_id``.

        Raises:
            KeyError: no such program.
        """
        with self._lock:
            cached = self._rows.get(program_id)
            if cached is not None:
                return cached.model_copy()
            cur = self._conn.execute(
                "SELECT id, code, parent_id, iteration, generation, kind, status, score, valid, "
                "metrics, artifacts, error FROM programs WHERE id = ?",
                (program_id,),
            )
            rec = cur.fetchone()
            if rec is None:
                raise KeyError(f"program {program_id!r} is not in the store")
            row = _row(rec)
            if len(self._rows) >= ROW_CACHE_SIZE:
                self._rows.pop(next(iter(self._rows)))  # oldest first
            self._rows[program_id] = row
            return row.model_copy()

    def has_program(self, program_id: str) -> bool:
        """True when the store holds ``program_id``."""
        with self._lock:
            cur = self._conn.execute("SELECT 1 FROM programs WHERE id = ?", (program_id,))
            return cur.fetchone() is not None

    def get_code(self, program_id: str) -> str:
        """Source text of a program (used by the population for diversity).

        Raises:
            KeyError: no such program or it has no code.
        """
        with self._lock:
            cached = self._rows.get(program_id)
        code = cached.code if cached is not None else self.get_program(program_id).code
        if code is None:
            raise KeyError(f"program {program_id!r} has no code")
        return code

    def recent_attempts(self, limit: int, before_iteration: int | None = None) -> list[ProgramRow]:
        """The ``limit`` most recent non-initial programs (any status), newest first."""
        query = (
            "SELECT id, code, parent_id, iteration, generation, kind, status, score, valid, "
            "metrics, artifacts, error FROM programs WHERE kind != 'initial'"
        )
        args: tuple[Any, ...] = ()
        if before_iteration is not None:
            query += " AND iteration < ?"
            args = (before_iteration,)
        query += " ORDER BY iteration DESC, id DESC LIMIT ?"
        with self._lock:
            rows = self._conn.execute(query, (*args, limit)).fetchall()
        return [_row(r) for r in rows]

    def all_programs(self) -> list[ProgramRow]:
        """Every program in creation order (for reports and tests)."""
        with self._lock:
            return all_programs(self._conn)

    # -- evaluations ------------------------------------------------------------------------
    def cached_evaluation(self, code: str) -> EvaluationOutcome | None:
        """The completed evaluation of exactly this code, if any."""
        with self._lock:
            rec = self._conn.execute(
                "SELECT outcome FROM evaluations WHERE code_sha = ?", (code_sha(code),)
            ).fetchone()
        return EvaluationOutcome.model_validate_json(rec[0]) if rec else None

    def put_evaluation(self, code: str, outcome: EvaluationOutcome) -> None:
        """Remember a completed evaluation (idempotent)."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO evaluations (code_sha, outcome, created) VALUES (?,?,?)",
                (code_sha(code), outcome.model_dump_json(), time.time()),
            )

    def start_evaluation(self, code: str) -> int:
        """Count one more started evaluation of this code and return the count (1 = first).

        A count above 1 without a cached outcome means an earlier process died while
        evaluating it (possibly killed by the candidate itself).
        """
        sha = code_sha(code)
        with self._lock:
            self._conn.execute(
                "INSERT INTO eval_attempts (code_sha, attempts) VALUES (?, 1) "
                "ON CONFLICT(code_sha) DO UPDATE SET attempts = attempts + 1",
                (sha,),
            )
            rec = self._conn.execute(
                "SELECT attempts FROM eval_attempts WHERE code_sha = ?", (sha,)
            ).fetchone()
        return int(rec[0])

    # -- population -------------------------------------------------------------------------
    def save_population(self, iteration: int, data: dict[str, Any]) -> None:
        """Replace the population snapshot and drop the journal up to it.

        Replace the population snapshot with the one produced at ``iteration`` and drop the
        journal up to it (one transaction: a kill leaves the old snapshot and journal, or
        the new ones).
        """
        with self._lock, self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute(
                "INSERT OR REPLACE INTO population (slot, iteration, data) VALUES (1, ?, ?)",
                (iteration, json.dumps(data)),
            )
            self._conn.execute("DELETE FROM population_ops WHERE iteration <= ?", (iteration,))

    def log_population_op(self, iteration: int, op: dict[str, Any]) -> None:
        """Journal the population operation of ``iteration``.

        Journal the population operation of ``iteration`` (idempotent: replaces any earlier
        record of the same iteration, which a resumed ``record`` node writes identically).
        """
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO population_ops (iteration, op) VALUES (?, ?)",
                (iteration, json.dumps(op)),
            )

    def population_ops(self, after: int) -> list[tuple[int, dict[str, Any]]]:
        """Journaled operations of iterations ``> after``, in iteration order."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT iteration, op FROM population_ops WHERE iteration > ? ORDER BY iteration",
                (after,),
            ).fetchall()
        return [(int(it), json.loads(op)) for it, op in rows]

    def load_population(self) -> tuple[int, dict[str, Any]] | None:
        """``(iteration, snapshot)`` of the latest population, or None before the first."""
        with self._lock:
            rec = self._conn.execute("SELECT iteration, data FROM population").fetchone()
        return (int(rec[0]), json.loads(rec[1])) if rec else None


def all_programs(conn: sqlite3.Connection) -> list[ProgramRow]:
    """Every program of the store behind ``conn``, in creation order (iteration, id).

    Raises:
        sqlite3.Error: the database has no ``programs`` table or cannot be read.
    """
    rows = conn.execute(
        "SELECT id, code, parent_id, iteration, generation, kind, status, score, valid, "
        "metrics, artifacts, error FROM programs ORDER BY iteration, id"
    ).fetchall()
    return [_row(r) for r in rows]


def _row(rec: tuple[Any, ...]) -> ProgramRow:
    return ProgramRow(
        id=rec[0],
        code=rec[1],
        parent_id=rec[2],
        iteration=rec[3],
        generation=rec[4],
        kind=rec[5],
        status=rec[6],
        score=rec[7],
        valid=bool(rec[8]),
        metrics=json.loads(rec[9]),
        artifacts=json.loads(rec[10]),
        error=rec[11],
    )

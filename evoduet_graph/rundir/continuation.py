"""The rules for starting or continuing a run in a run directory.

What is checked (docs/design.md §3, docs/resume.md's resume table): one writer at a time
(`hold_run_dir`), no run over a folder that is not a run directory (`check_run_dir`), a
graph-input run only on its own thread (`check_graph_input_run_dir`), and a continuation only
with the settings a resume may change (`check_continuation`: `RESUME_APPLIED`, `RESUME_NOTED`)
and an unchanged task folder.

Every check runs before anything in the run directory is written; a refusal is a `RunError`
that says what is wrong and what to do.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from evoduet_graph.config import ConfigError, EvoDuetConfig, load_config
from evoduet_graph.errors import RunError
from evoduet_graph.evaluation.integrity import changed_files, file_digests, folder_digest
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.lock import RunDirLock, RunDirLockedError
from evoduet_graph.rundir.usage import completed_iterations
from evoduet_graph.task import Task, TaskError


def acquire_lock(lock: RunDirLock) -> None:
    """Take the run directory's lock, as a `RunError` when another process holds it."""
    try:
        lock.acquire()
    except RunDirLockedError as exc:
        raise RunError(str(exc)) from None


_HELD_RUN_DIRS: dict[str, RunDirLock] = {}
_HELD_RUN_DIRS_GUARD = threading.Lock()


def hold_run_dir(rdir: Path) -> Path:
    """Create ``rdir`` and take its lock for the rest of this process.

    Create ``rdir`` and take its lock for the rest of this process (graph-input runs: the
    graph may be invoked again on the same thread, so the lock outlives one invocation).

    Returns:
        The resolved run directory.

    Raises:
        RunError: another process holds the lock.
    """
    key = os.path.realpath(rdir)
    with _HELD_RUN_DIRS_GUARD:
        if key not in _HELD_RUN_DIRS:
            lock = RunDirLock(rdir)
            if rdir.is_dir():  # refuse before creating anything
                acquire_lock(lock)
            rdir.mkdir(parents=True, exist_ok=True)
            acquire_lock(lock)
            _HELD_RUN_DIRS[key] = lock
    return rdir.resolve()


def check_run_dir(rdir: Path, task: Task) -> None:
    """Refuse a run directory that would mix or destroy other work.

    Raises:
        RunError: ``rdir`` is a file; a non-empty folder that is not an evoduet run directory
            (e.g. a task folder, whose ``config.yaml`` would be overwritten); or the run
            directory of another task.
    """
    if rdir.exists() and not rdir.is_dir():
        raise RunError(f"run directory {rdir} is a file; choose another --out")
    if not rdir.is_dir() or all(p.name == ".lock" for p in rdir.iterdir()):
        return  # new, empty, or only the lock file of a run that is starting
    meta_path = rdir / layout.RUN_META
    if not meta_path.is_file():
        raise RunError(
            f"{rdir} is not empty and is not an evoduet run directory (no {layout.RUN_META}); "
            "choose a new or empty --out"
        )
    try:
        previous = Path(json.loads(meta_path.read_text(encoding="utf-8"))["task_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        raise RunError(f"{meta_path} is unreadable; choose a new --out") from None
    if previous.resolve() != Path(task.path).resolve():
        raise RunError(
            f"{rdir} holds a run of another task ({previous}); choose a new --out, or "
            f"`evoduet resume {rdir}` to continue that run"
        )


def check_graph_input_run_dir(
    rdir: Path, task: Task, cfg: EvoDuetConfig, thread_id: str | None
) -> list[str]:
    """The run-directory rules of a graph-input run.

    The run-directory rules of a graph-input run (``evoduet_graph.graph``, LangGraph
    Studio, the SDK): `check_run_dir`, then what only such a run can get wrong.

    A graph-input run keeps its place in its LangGraph thread, not in the run directory, so it
    may continue only the run its own thread started there (``run.json``'s ``studio`` and
    ``thread_id``), under the resume table (`check_continuation`); anything else would restart
    at iteration 0 and overwrite the candidates and ``run.json`` of the run already there.

    Returns:
        One line per applied `RESUME_NOTED` change (as `check_continuation`).

    Raises:
        RunError: every refusal of `check_run_dir` and `check_continuation`; the directory holds
            a run started with ``evoduet run`` / `run` (continue it with ``evoduet resume``), or
            a graph-input run of another (or no) thread.
    """
    check_run_dir(rdir, task)
    meta_path = rdir / layout.RUN_META
    if not meta_path.is_file():
        return []
    meta = json.loads(meta_path.read_text(encoding="utf-8"))  # readable: check_run_dir
    if not meta.get("studio"):
        raise RunError(
            f"{rdir} holds a run started with `evoduet run` (or evoduet_graph.run); the graph "
            f"input cannot continue it: `evoduet resume {rdir}` continues it, or choose a new "
            "run_dir"
        )
    if not (rdir / layout.PROGRAMS).exists():
        return []  # started, killed before its first write
    if thread_id is None or meta.get("thread_id") != thread_id:
        raise RunError(
            f"{rdir} holds an earlier graph-input run (thread {meta.get('thread_id')}); a new "
            "run there would overwrite its candidates: continue it on its own thread, or "
            "choose a new run_dir"
        )
    # the graph input's max_iterations, not cfg.iterations, says how long the run goes
    done = completed_iterations(rdir)
    longest = cfg.with_overrides({"iterations": max(cfg.iterations, done)})
    return check_continuation(rdir, longest, task)


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a.b": value}`` of a nested dict (lists are leaves)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        out.update(_flat(value, name + ".") if isinstance(value, dict) else {name: value})
    return out


RESUME_APPLIED: tuple[str, ...] = (
    "iterations",
    "budget.",
    "stop_at_score",
    "max_concurrency",
    "max_consecutive_failures",
    "max_consecutive_model_failures",
    "allow_invalid_initial",
    "llm.base_url",
    "llm.api_key_env",
    "llm.timeout_s",
    "llm.call_deadline_s",
    "llm.max_retries",
    "llm.local_n_ctx",
    "llm.local_n_threads",
    "llm.local_parallel",
    "llm.local_prompt_lookup",
    "llm.local_cache_dir",
    "evaluation.workers",
    "evaluation.executor",
    "evaluation.ray_",
    "retrieval.search_timeout_s",
    "retrieval.search_retries",
    "retrieval.index_cache_dir",
)
"""Config keys (dotted; a trailing ``.`` or ``_`` is a prefix) a continued run applies
silently: how long it runs, its budgets, how it reaches the model and where it evaluates."""

RESUME_NOTED: tuple[str, ...] = (
    "llm.model",
    "seed",
    "llm.temperature",
    "llm.max_tokens",
    "evaluation.timeout_s",
    "evaluation.memory_mb",
    "evaluation.cpu_time_s",
    "evaluation.max_processes",
    "evaluation.max_file_mb",
    "evaluation.isolate_network",
    "evaluation.isolate_filesystem",
)
"""Config keys a continued run applies with one line each (logged and a ``config_change``
event): they change what later iterations generate or how candidates are judged, not the
stored population. Every key in neither tuple is refused (population layout, scaffold, gate,
retrieval method, prompts, novelty, EvoX, candidates per iteration, cascade, ...)."""


def _matches(key: str, names: tuple[str, ...]) -> bool:
    return any(key == n or (n[-1] in "._" and key.startswith(n)) for n in names)


def _baseline(rdir: Path) -> dict[str, Any] | None:
    """The configuration the run last started with (``run.json``'s ``config``), flattened.

    None for run directories written before it was recorded.
    """
    try:
        meta = json.loads((rdir / layout.RUN_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    config = meta.get("config") if isinstance(meta, dict) else None
    return _flat(config) if isinstance(config, dict) else None


def _stored_task_sha(rdir: Path) -> str | None:
    try:
        meta = json.loads((rdir / layout.RUN_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    sha = meta.get("task_sha256") if isinstance(meta, dict) else None
    return sha if isinstance(sha, str) else None


def _stored_task_files(rdir: Path) -> dict[str, str]:
    """``run.json``'s ``task_files`` (per-file sha256 at run start; empty for older runs)."""
    try:
        meta = json.loads((rdir / layout.RUN_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = meta.get("task_files") if isinstance(meta, dict) else None
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def check_continuation(rdir: Path, cfg: EvoDuetConfig, task: Task | None = None) -> list[str]:
    """Check that an existing run may continue with ``cfg``.

    Every check before anything in the run directory is written — and say what changes.

    The run's configuration when it last started is kept in ``run.json`` (``config``; older run
    directories: their ``config.yaml``). ``cfg`` (for ``evoduet resume``: the run's possibly
    edited ``config.yaml``) may differ from it only in `RESUME_APPLIED` keys (applied) and
    `RESUME_NOTED` keys (applied, one line each); any other difference is refused, and so is a
    task folder whose content changed since the run started (``run.json``'s ``task_sha256``).

    Returns:
        One line per applied `RESUME_NOTED` change (empty for a new run).

    Raises:
        RunError: ``programs.sqlite`` / ``checkpoints.sqlite`` is not a readable SQLite
            database; ``config.yaml`` is unreadable; ``cfg`` differs in a refused key (all such
            keys are named, with both values); ``cfg.iterations`` is below the iterations
            already completed; or the task folder changed.
    """
    if not (rdir / layout.PROGRAMS).exists():
        return []  # a new run, or one killed before its first write
    done = completed_iterations(rdir)
    if cfg.iterations < done:
        raise RunError(
            f"{rdir} has already completed {done} iterations, more than the {cfg.iterations} "
            f"asked for; pass a total of at least {done} iterations"
        )
    for name in (layout.PROGRAMS, layout.CHECKPOINTS):
        path = rdir / name
        if not path.exists():
            continue
        wal = path.with_name(path.name + "-wal")
        if done and path.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size):
            # sqlite would open it as a new, empty database and the run would start over
            raise RunError(
                f"{path} is empty although the run has completed {done} iterations; it cannot "
                "be continued: restore the file from a copy, or start a new run with a new --out"
            )
        try:
            # immutable: reading a WAL database must not create -shm/-wal files next to it
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            try:
                conn.execute("PRAGMA schema_version").fetchone()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise RunError(
                f"{path} is damaged ({exc}); the run cannot be continued: restore the file from "
                "a copy, or start a new run with a new --out"
            ) from None
    stored = _baseline(rdir)
    path = rdir / layout.CONFIG
    if stored is None and path.is_file():
        try:
            stored = _flat(load_config(path).model_dump(mode="json"))
        except ConfigError as exc:
            raise RunError(f"{exc}; the run in {rdir} cannot be continued") from None
    notes: list[str] = []
    if stored is not None:
        given = _flat(cfg.model_dump(mode="json"))
        changed = sorted(k for k in stored.keys() | given.keys() if stored.get(k) != given.get(k))
        refused = [k for k in changed if not _matches(k, RESUME_APPLIED + RESUME_NOTED)]
        if refused:
            shown = ", ".join(
                f"{k} ({stored.get(k)!r} → {given.get(k)!r})" for k in refused[:6]
            ) + (f" and {len(refused) - 6} more" if len(refused) > 6 else "")
            raise RunError(
                f"{rdir} cannot continue with a changed {shown}: a resume may change only how "
                "long the run goes and how it reaches the model (see docs/resume.md's resume "
                f"table); restore the run's values in its config.yaml and `evoduet resume "
                f"{rdir}`, or start a new run with a new --out"
            )
        notes = [
            f"{k} changed from {stored.get(k)!r} to {given.get(k)!r}: applied from now on "
            "(earlier iterations used the old value)"
            for k in changed
            if _matches(k, RESUME_NOTED)
        ]
    recorded = _stored_task_sha(rdir)
    if task is not None and recorded is not None:
        try:
            current = folder_digest(Path(task.path))
        except TaskError as exc:
            raise RunError(f"{exc}; the run in {rdir} cannot be continued") from None
        if current != recorded:
            files = _stored_task_files(rdir)
            what = (
                ", ".join(changed_files(files, file_digests(Path(task.path)))[:6]) + "; "
                if files
                else ""
            )
            raise RunError(
                f"the task folder {task.path} changed since the run in {rdir} started ({what}"
                f"sha256 {current[:12]}…, run.json has {recorded[:12]}…): its files (evaluator, "
                "docs, ...) must stay the same for the whole run; restore them, or start a new run"
            )
    return notes

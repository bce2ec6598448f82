"""The names of every file and folder a run directory holds (docs/design.md §3).

One home for the names: the nodes, the API, the CLI, the report and the bench build their paths
from these constants (``rdir / layout.EVENTS``), so a rename is one line here.
"""

from __future__ import annotations

CONFIG = "config.yaml"
"""The run's configuration as it was last started (editable before ``evoduet resume``)."""

RUN_META = "run.json"
"""The run's identity: task folder, program, task hash, the configuration it started with."""

EVENTS = "events.jsonl"
"""The append-only event log (`evoduet_graph.rundir.events`)."""

PROGRAMS = "programs.sqlite"
"""The program store: every candidate with its code, metrics and status."""

CHECKPOINTS = "checkpoints.sqlite"
"""LangGraph's SQLite checkpointer (resume after a kill)."""

PROMPTS = "prompts.jsonl"
"""The prompt and reply of every ``generate`` model call (`evoduet_graph.rundir.prompts`)."""

SEARCH_DB = "search_database.jsonl"
"""D_search: retrieval records, documents and their realised outcomes."""

SEARCH_CACHE = "search_cache.sqlite"
"""Cached search answers of the run's search backend."""

BEST_STEM = "best_program"
"""Stem of the best program's file; the file keeps the task's suffix (``best_program.py``)."""

BEST_META = "best_program.json"
"""The best program's id, score, metric value and NDG."""

LOCK = ".lock"
"""The single-writer lock (`evoduet_graph.rundir.lock`)."""


REPORT_DIR = "report"
"""Where ``evoduet report`` / ``--report`` writes ``report.md``, the plots and the HTML."""

MARKERS = (RUN_META, EVENTS)
"""Files that only a run directory has (a task folder has a ``config.yaml`` too)."""

"""EvoDuet: evolutionary program search with co-evolving search queries.

evoduet_graph: EvoDuet — LLM-driven evolutionary program search whose solutions and
web-search queries co-evolve, as LangGraph state machines.

Public API::

    from evoduet_graph import graph
    state = graph.invoke({"task_dir": "tasks/circle_packing_26", "max_iterations": 3})

    from evoduet_graph import run, load_task, EvoDuetConfig
    result = run("tasks/circle_packing_26", EvoDuetConfig(iterations=5))
    print(result.best_score, result.ndg)

Beside running: the configuration (`EvoDuetConfig`, its `LLMConfig`, `load_config`,
`merge_config`, and `checked_config`, which checks the names it picks from the registries as
a run does when it starts), the task (`load_task`, `Task`), the seams a user plugs into
(`Evaluator`, `make_evaluator`, `score_from_metrics`, `Searcher`, `make_checked_searcher`,
`make_chat_model`, `parse_model_string`), what a finished run says (`RunResult`, its
stop-reason prefixes `MODEL_DOWN_PREFIX` / `TARGET_PREFIX`, `run_summary` → `RunSummary`,
`paper_metrics`) and the errors (`EvoDuetError`, its `UserError` branch, `ConfigError`,
`TaskError`, `RunError`). The bench (`evoduet_graph.bench`) is built on this API and
`evoduet_graph.rundir` (the few exceptions are named, with their reasons, in its import test).

``graph`` is the default compiled graph (`evoduet_graph.graphs.studio.graph`, the one
``langgraph.json`` serves), built on first access.
"""

from typing import Any

from evoduet_graph._version import __version__ as __version__
from evoduet_graph.api import (
    RunResult,
    build_context,
    build_graph,
    can_retrieve,
    checked_config,
    make_checked_searcher,
    resume,
    run,
)
from evoduet_graph.config import ConfigError, EvoDuetConfig, LLMConfig, load_config, merge_config
from evoduet_graph.context import Context
from evoduet_graph.errors import EvoDuetError, RunError, UserError
from evoduet_graph.evaluation import Evaluator, make_evaluator, score_from_metrics
from evoduet_graph.llm import check_model, make_chat_model, parse_model_string
from evoduet_graph.nodes.stop_rules import MODEL_DOWN_PREFIX, TARGET_PREFIX
from evoduet_graph.report.summary import RunSummary, paper_metrics, run_summary
from evoduet_graph.search import Searcher
from evoduet_graph.task import Task, TaskError, load_task

__all__ = [
    "MODEL_DOWN_PREFIX",
    "TARGET_PREFIX",
    "ConfigError",
    "Context",
    "EvoDuetConfig",
    "EvoDuetError",
    "Evaluator",
    "LLMConfig",
    "RunError",
    "RunResult",
    "RunSummary",
    "Searcher",
    "Task",
    "TaskError",
    "UserError",
    "build_context",
    "build_graph",
    "can_retrieve",
    "check_model",
    "checked_config",
    "graph",
    "load_config",
    "load_task",
    "make_chat_model",
    "make_checked_searcher",
    "make_evaluator",
    "merge_config",
    "paper_metrics",
    "parse_model_string",
    "resume",
    "run",
    "run_summary",
    "score_from_metrics",
]


def __getattr__(name: str) -> Any:
    """``evoduet_graph.graph``: the default compiled graph, compiled on first access."""
    if name == "graph":
        from evoduet_graph.graphs.studio import graph  # start-up: importing it compiles the graph

        return graph
    raise AttributeError(f"module 'evoduet_graph' has no attribute {name!r}")

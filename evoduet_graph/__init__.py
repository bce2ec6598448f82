"""EvoDuet: evolutionary program search with co-evolving search queries.

evoduet_graph: EvoDuet — LLM-driven evolutionary program search whose solutions and
web-search queries co-evolve, as LangGraph state machines.

Public API::

    from evoduet_graph import graph
    state = graph.invoke({"task_dir": "tasks/circle_packing_26", "max_iterations": 3})

    from evoduet_graph import run, load_task, EvoDuetConfig
    result = run("tasks/circle_packing_26", EvoDuetConfig(iterations=5))
    print(result.best_score, result.ndg)

``graph`` is the default compiled graph (`evoduet_graph.graphs.studio.graph`, the one
``langgraph.json`` serves), built on first access.
"""

from typing import Any

from evoduet_graph.api import RunResult, build_context, build_graph, resume, run
from evoduet_graph.config import ConfigError, EvoDuetConfig, load_config
from evoduet_graph.context import Context
from evoduet_graph.errors import RunError
from evoduet_graph.task import Task, TaskError, load_task

__all__ = [
    "ConfigError",
    "Context",
    "EvoDuetConfig",
    "RunError",
    "RunResult",
    "Task",
    "TaskError",
    "build_context",
    "build_graph",
    "graph",
    "load_config",
    "load_task",
    "resume",
    "run",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``evoduet_graph.graph``: the default compiled graph, compiled on first access."""
    if name == "graph":
        from evoduet_graph.graphs.studio import graph

        return graph
    raise AttributeError(f"module 'evoduet_graph' has no attribute {name!r}")

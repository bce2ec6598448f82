"""Runtime context: every dependency a node uses, injected per run (never checkpointed).

Nodes receive it as ``runtime.context`` (LangGraph ``context_schema``); tests and ablations
build it with fakes. `build_context` assembles the real one for a run directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from evoduet_graph.config import EvoDuetConfig
from evoduet_graph.evaluation import Evaluator
from evoduet_graph.events import EventLog
from evoduet_graph.population import Population
from evoduet_graph.store import ProgramStore
from evoduet_graph.task import Task


@dataclass(kw_only=True)
class Context:
    """Dependencies of the outer and inner graphs.

    Attributes:
        task: the loaded task (instruction, evaluator path, direction, reference scores).
        config: the run configuration.
        llm: chat model used by ``generate`` (and later the gate / inner loop).
        evaluator: sandboxed evaluator of candidate programs.
        store: program store (source, metrics, evaluation cache, population snapshot).
        population: the live population; mirrors the store's snapshot.
        events: the run's event log.
        callbacks: LangChain callback handlers passed to every LLM call (usage accounting).
        run_dir: the run directory, or None for in-memory runs.
        searcher: search backend of the world-knowledge layer (None: retrieval unavailable).
        search_db: the search database D_search (documents, retrieval records, impacts).
    """

    task: Task
    config: EvoDuetConfig
    llm: BaseChatModel
    evaluator: Evaluator
    store: ProgramStore
    population: Population
    events: EventLog
    callbacks: list[BaseCallbackHandler] = field(default_factory=list)
    run_dir: Path | None = None
    searcher: Any | None = None
    search_db: Any | None = None

    def llm_config(self, node: str) -> RunnableConfig:
        """RunnableConfig for an LLM call made by ``node`` (callbacks + tags)."""
        return RunnableConfig(callbacks=list(self.callbacks), tags=[f"node:{node}"])

"""Runtime context: every dependency a node uses, injected per run (never checkpointed).

Nodes and routers read it as ``runtime.context`` (LangGraph ``context_schema``); tests and
ablations build it with fakes. `build_context` assembles the real one for a run directory; a
graph run from Studio or from its input alone gets it from
`evoduet_graph.graphs.studio_context.context_for`, once per run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from evoduet_graph.candidates.novelty import NoveltyFilter
from evoduet_graph.config import EvoDuetConfig
from evoduet_graph.evaluation import Evaluator
from evoduet_graph.inflight import IterationPool
from evoduet_graph.llm.structured import RetryPolicy
from evoduet_graph.population import Population
from evoduet_graph.rundir.budget import Budget
from evoduet_graph.rundir.events import EventLog
from evoduet_graph.rundir.prompts import PromptLog
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.search.base import Searcher
from evoduet_graph.search.cache import SearchCache
from evoduet_graph.search.database import SearchDatabase
from evoduet_graph.search.memory import TaskMemory
from evoduet_graph.task import Task

if TYPE_CHECKING:  # the scaffolds take a Context in their select()
    from evoduet_graph.scaffolds.base import Scaffold


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
        max_iterations: a new total set by a resume that changes ``--iterations`` while an
            iteration is in flight; ``record`` writes it into the state (no ``update_state``
            on a half-finished superstep).
        budget: usage against the ``budget:`` limits (`evoduet_graph.rundir.budget.Budget`); None:
            no budget checks.
        scaffold: the parent-selection policy the ``select`` node applies
            (`evoduet_graph.scaffolds.Scaffold`); None: the one ``config.scaffold`` names.
        novelty: the near-duplicate check ``generate`` runs on every child before evaluation
            (`evoduet_graph.candidates.novelty.NoveltyFilter`; `build_context` builds it from
            ``config.novelty``); None: no check, every child is evaluated.
        search_cache: answers of earlier searches (`evoduet_graph.search.cache.SearchCache`);
            None: every query is searched.
        role_llms: the chat model of each node that ``llm.roles`` maps
            (`evoduet_graph.llm.roles`); unmapped nodes use ``llm``.
        memory: the task's long-term memory (`evoduet_graph.search.memory.TaskMemory`); None: off.
        inflight: the iterations running in the background when ``max_iterations_in_flight``
            > 1 (`evoduet_graph.inflight.IterationPool`, made by ``dispatch``); None
            until the first dispatch.
        prompts: the log of every ``generate`` call's prompt and reply
            (`evoduet_graph.rundir.prompts.PromptLog`, ``prompts.jsonl``); None: not kept.
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
    searcher: Searcher | None = None
    search_db: SearchDatabase | None = None
    max_iterations: int | None = None
    budget: Budget | None = None
    scaffold: Scaffold | None = None
    novelty: NoveltyFilter | None = None
    search_cache: SearchCache | None = None
    role_llms: dict[str, BaseChatModel] = field(default_factory=dict)
    memory: TaskMemory | None = None
    inflight: IterationPool | None = None
    prompts: PromptLog | None = None

    def require_search_db(self) -> SearchDatabase:
        """The search database D_search, which every knowledge-layer node writes.

        Raises:
            RuntimeError: this context has none (built without the knowledge layer).
        """
        if self.search_db is None:
            raise RuntimeError("the runtime context has no search database (search_db)")
        return self.search_db

    def model_for(self, role: str) -> BaseChatModel:
        """The chat model of node ``role`` (``llm.roles``), else the run's model."""
        return self.role_llms.get(role, self.llm)

    def llm_config(self, node: str, **metadata: Any) -> RunnableConfig:
        """RunnableConfig for an LLM call made by ``node``.

        The call runs as a child of the node's run: the handlers LangGraph passed to the node
        (a LangSmith tracer enabled by ``LANGSMITH_TRACING``, or any tracer given at
        invocation) see it, plus the run's own `callbacks` (usage accounting). Its run name is
        ``<node>.llm`` and its metadata ``node`` plus the non-None ``metadata`` given (e.g.
        ``iteration``, ``candidate``, ``decision``), so a trace reads like the graph.
        """
        callbacks: list[BaseCallbackHandler] | BaseCallbackManager = list(self.callbacks)
        try:
            inherited = get_config().get("callbacks")
        except RuntimeError:  # not inside a runnable: no callbacks to inherit
            inherited = None
        if isinstance(inherited, BaseCallbackManager):
            manager = inherited.copy()
            for handler in self.callbacks:
                manager.add_handler(handler, inherit=True)
            callbacks = manager
        elif isinstance(inherited, list):
            callbacks = [*inherited, *[h for h in self.callbacks if h not in inherited]]
        meta = {"node": node, **{k: v for k, v in metadata.items() if v is not None}}
        return RunnableConfig(
            callbacks=callbacks, tags=[f"node:{node}"], run_name=f"{node}.llm", metadata=meta
        )

    def llm_retry(self, role: str | None = None) -> RetryPolicy:
        """The `RetryPolicy` of LLM calls.

        ``llm.max_retries`` retries of retryable failures for models without retries of their own,
        none started after ``llm.call_deadline_s``; ``role``: the model of that node.
        """
        llm = self.config.llm
        model = self.llm if role is None else self.model_for(role)
        return RetryPolicy.for_model(model, llm.max_retries, deadline_s=llm.call_deadline_s)

"""What a run checks and assembles before its first iteration.

`checked_config` checks the names a configuration picks from the package's registries (the
scaffold, the search backends, the model roles) and lets the scaffold choose the population
kind; `validate_setup`, `check_document_sets` and `make_checked_searcher` refuse a run that
cannot work before anything is written; `build_context` assembles the runtime `Context` of a
run directory. `evoduet_graph.api` runs them for `run` and `resume`, and Studio's context
(`evoduet_graph.graphs.studio_context`) for graph-input runs; both re-export them.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.language_models import BaseChatModel

import evoduet_graph.llm
from evoduet_graph.candidates.novelty import NoveltyFilter, make_novelty_checker
from evoduet_graph.config import ConfigError, EvoDuetConfig
from evoduet_graph.context import Context
from evoduet_graph.evaluation import Evaluator, make_evaluator
from evoduet_graph.evaluation.base import SandboxedEvaluator
from evoduet_graph.llm.roles import check_roles, make_role_models
from evoduet_graph.llm.usage import UsageTracker
from evoduet_graph.population import Population, restore_population
from evoduet_graph.prompts import template_overrides
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.budget import budget_for
from evoduet_graph.rundir.events import EventLog
from evoduet_graph.rundir.prompts import PromptLog
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.scaffolds import check_scaffold
from evoduet_graph.search import Searcher, SearchUnavailableError, make_searcher
from evoduet_graph.search.cache import SearchCache
from evoduet_graph.search.database import SearchDatabase
from evoduet_graph.search.fixed import (
    DocumentSetError,
    grounding_source,
    load_documents,
    oracle_source,
)
from evoduet_graph.search.memory import TaskMemory, open_store, run_tag
from evoduet_graph.search.registry import check_backend_names
from evoduet_graph.task import Task

__all__ = [
    "build_context",
    "can_retrieve",
    "check_document_sets",
    "checked_config",
    "make_checked_searcher",
    "preflight",
    "validate_setup",
]


def checked_config(config: EvoDuetConfig, source: str | None = None) -> EvoDuetConfig:
    """``config`` checked against the registries, as a run uses it.

    The configuration names things that are registered elsewhere: the scaffold
    (`evoduet_graph.scaffolds.SCAFFOLDS`), the search backends
    (`evoduet_graph.search.registry`) and the model roles (`evoduet_graph.llm.roles`). Loading
    a configuration checks its shape only; this checks those names, once, when a run starts
    (before anything is written), and lets the scaffold choose ``population.kind`` where the
    configuration leaves it out. Idempotent. ``source`` (a file, "the command line") is named
    in the error message.

    Returns:
        ``config``, or a copy with ``population.kind`` filled in.

    Raises:
        ConfigError: an unknown scaffold, a population kind the scaffold does not run over, an
            unknown, repeated or empty search backend list, or a bad ``llm.roles`` entry (the
            message names the key and lists the valid names).
    """
    try:
        try:
            check_backend_names(config.retrieval.backend_names)
        except ValueError as exc:
            raise ConfigError(f"retrieval.backend: {exc}") from None
        check_roles(config.llm)
        return check_scaffold(config)
    except ConfigError as exc:
        if source is None:
            raise
        raise ConfigError(f"invalid configuration in {source}: {exc}") from None


def can_retrieve(config: EvoDuetConfig) -> bool:
    """Whether the run ever calls the search backend.

    A gate mode that can decide ``retrieve`` / ``look-up``, joint-level in-loop search, or online
    grounding. (The oracle baseline reads fixed documents and never searches.)
    """
    return (
        config.gate.mode not in ("never", "oracle")
        or config.joint_search.enabled
        or config.retrieval.grounding == "online"
    )


def validate_setup(config: EvoDuetConfig) -> None:
    """Fail at startup for configurations this build cannot run.

    Raises:
        ConfigError: a gate mode that can retrieve while no search backend is configured;
            a human review pause (``gate.review``, ``retrieval.review_queries``) with
            iterations in flight (an in-flight iteration runs outside the checkpointed
            graph, where an ``interrupt()`` cannot wait).
    """
    if config.max_iterations_in_flight > 1 and (
        config.gate.review or config.retrieval.review_queries
    ):
        raise ConfigError(
            f"max_iterations_in_flight={config.max_iterations_in_flight} runs iterations "
            "outside the checkpointed graph, where a review pause cannot wait: set "
            "max_iterations_in_flight: 1, or turn off gate.review / retrieval.review_queries"
        )
    if can_retrieve(config) and config.retrieval.backend == "none":
        who = (
            f"gate.mode={config.gate.mode!r} can decide to retrieve"
            if config.gate.mode not in ("never", "oracle")
            else "joint_search.enabled searches"
            if config.joint_search.enabled
            else "retrieval.grounding='online' searches"
        )
        raise ConfigError(
            f"{who}, but retrieval.backend is "
            "'none': retrieval is not available. Use gate.mode=never (--gate never) or "
            "configure a search backend (retrieval.backend: offline | tavily)"
        )


def check_document_sets(task: Task, config: EvoDuetConfig) -> None:
    """Read the fixed document sets a run needs, once, at startup.

    Read the fixed document sets a run needs (oracle documents, offline grounding) once,
    so a missing or malformed set fails at startup.

    Raises:
        ConfigError: the set cannot be read, naming the key, the path and the reason.
    """
    retrieval = config.retrieval
    sets = []
    if config.gate.mode == "oracle":
        sets.append(
            ("retrieval.oracle_documents", oracle_source(retrieval.oracle_documents, task.path))
        )
    if retrieval.grounding == "offline":
        sets.append(
            (
                "retrieval.grounding_documents",
                grounding_source(retrieval.grounding_documents, task.path),
            )
        )
    for key, path in sets:
        try:
            load_documents(path, source=key)
        except DocumentSetError as exc:
            raise ConfigError(f"{key}: {exc}") from None


def make_checked_searcher(task: Task, config: EvoDuetConfig) -> Searcher | None:
    """The configured search backend after its preflight, or None.

    The configured search backend after its preflight, or None when the gate never
    retrieves (docs/design.md §4: a run configured to retrieve fails at startup when its backend is
    unusable — never a silent closed-world run).

    Raises:
        ConfigError: the backend is unusable (no key, empty corpus, ...), with its reason.
    """
    validate_setup(config)
    if not can_retrieve(config):
        return None
    searcher = make_searcher(config.retrieval, task_dir=task.path)
    preflight(searcher, config)
    return searcher


def preflight(searcher: Searcher, config: EvoDuetConfig) -> None:
    """Run the backend's preflight.

    Raises:
        ConfigError: the backend reports itself unusable.
    """
    try:
        searcher.preflight()
    except SearchUnavailableError as exc:
        raise ConfigError(
            f"search backend {getattr(searcher, 'name', config.retrieval.backend)!r} "
            f"unavailable: {exc}"
        ) from None


def build_context(
    task: Task,
    config: EvoDuetConfig,
    run_dir: Path | None,
    *,
    llm: BaseChatModel | None = None,
    evaluator: Evaluator | None = None,
    searcher: Searcher | None = None,
    novelty: NoveltyFilter | None = None,
    role_llms: dict[str, BaseChatModel] | None = None,
) -> Context:
    """Assemble the runtime context for a run directory (``None``: in memory).

    The population is restored from the program store's snapshot and the search database
    from ``search_database.jsonl`` when they exist; with ``retrieval.use_search_database:
    false`` (stateless ablation) the search database lives in memory only (nothing written)
    and ``memory`` is neither recalled nor written. ``searcher`` defaults to the configured
    backend (checked by its preflight) when the gate can retrieve; ``novelty`` to the check
    ``config.novelty`` describes (`make_novelty_checker`; None when it is disabled);
    ``role_llms`` to the models ``llm.roles`` names (`make_role_models`).

    Raises:
        LLMConfigError / LocalModelError: the chat model cannot be built.
        ConfigError: a name the registries do not know (`checked_config`), the gate can
            retrieve but the search backend is unusable, a fixed document set (oracle,
            offline grounding) cannot be read, or ``novelty.embeddings`` cannot be loaded.
    """
    config = checked_config(config)
    check_document_sets(task, config)
    template_overrides(config.prompt.template_dir)  # a bad template fails here, not in a node
    if searcher is None:
        searcher = make_checked_searcher(task, config)
    store = ProgramStore(run_dir / layout.PROGRAMS if run_dir else ":memory:")
    population: Population
    population, _ = restore_population(store, config.population, seed=config.seed)
    if llm is None:  # looked up on the package at call time, so a replaced factory is used
        llm = evoduet_graph.llm.make_chat_model(config.llm, seed=config.seed)
    if role_llms is None:
        role_llms = make_role_models(config.llm, llm, seed=config.seed)
    if evaluator is None:
        evaluator = make_evaluator(task, config.evaluation)
    if run_dir is not None and isinstance(evaluator, SandboxedEvaluator):
        evaluator.protect(run_dir)  # also for Studio's contexts (docs/design.md §5)
    if novelty is None:
        novelty = make_novelty_checker(config.novelty, python=task.lang.is_python)
    events = EventLog(run_dir / layout.EVENTS if run_dir else None)
    stateful = config.retrieval.use_search_database
    search_db = SearchDatabase(
        run_dir / layout.SEARCH_DB
        if run_dir and stateful
        else None  # stateless retrieval (ablation): documents live in memory only
    )
    task_memory = None
    if config.memory and stateful:  # stateless retrieval neither recalls nor remembers
        task_memory = TaskMemory(open_store(config.memory), task.name, run_tag(run_dir))
        recalled = task_memory.recall_into(search_db)
        if recalled:
            events.emit(
                "memory", path=config.memory, records=recalled, documents=len(search_db.documents())
            )
    return Context(
        task=task,
        config=config,
        llm=llm,
        evaluator=evaluator,
        store=store,
        population=population,
        events=events,
        callbacks=[UsageTracker()],
        run_dir=run_dir,
        searcher=searcher,
        search_db=search_db,
        memory=task_memory,
        budget=budget_for(config, events),
        novelty=novelty,
        role_llms=role_llms,
        prompts=PromptLog(run_dir / layout.PROMPTS) if run_dir else None,
        search_cache=(
            SearchCache.for_run(run_dir, config.retrieval.cache_dir)
            if searcher is not None and config.retrieval.cache
            else None
        ),
    )

"""Python API: `run`, `resume`, `build_graph`, `build_context` (docs/design.md §2).

A run directory holds everything needed to inspect or resume a run::

    <run_dir>/config.yaml         the full EvoDuetConfig
    <run_dir>/run.json            task folder, its sha256 at run start, thread id, the
                                  configuration last applied (what a resume compares with)
    <run_dir>/checkpoints.sqlite  LangGraph SqliteSaver (WAL, synchronous=NORMAL)
    <run_dir>/programs.sqlite     program store (source, metrics, evaluations, population)
    <run_dir>/events.jsonl        one event per node execution
    <run_dir>/best_program.py     best program so far (best_program/ for a folder program)
    <run_dir>/best_program.json   its metrics, iteration, NDG and parent chain

The checks a run makes before anything is written and the assembly of its runtime context
live in `evoduet_graph.startup`; the steps that build and drive a run once it is checked (run
files, start events, streaming the graph, review pauses, the `RunResult`) live in
`evoduet_graph.driver`. This module runs both for `run` and `resume` and re-exports their
public names.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypedDict, Unpack

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import ValidationError

import evoduet_graph.llm
from evoduet_graph.candidates.novelty import make_novelty_checker
from evoduet_graph.config import ConfigError, EvoDuetConfig, graph_concurrency, load_config
from evoduet_graph.context import Context
from evoduet_graph.driver import (
    REVIEW_PREFIX,
    THREAD_ID,
    EventFn,
    ProgressFn,
    ReviewFn,
    RunResult,
    check_memory,
    close_inflight,
    drive,
    forward_index_progress,
    open_run,
    pin_base_url,
    program_entry,
    run_evaluator,
)
from evoduet_graph.errors import RunError
from evoduet_graph.evaluation import Evaluator
from evoduet_graph.graphs.outer import NodeFn, OuterStateGraph, build_outer_graph
from evoduet_graph.graphs.registry import split_nodes
from evoduet_graph.llm import LLMConfigError, parse_model_string
from evoduet_graph.llm.factory import check_model, unsent_message, unsent_settings
from evoduet_graph.llm.roles import configured_models, make_role_models
from evoduet_graph.prompts import template_overrides
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.continuation import acquire_lock, check_continuation, check_run_dir
from evoduet_graph.rundir.lock import RunDirLock
from evoduet_graph.rundir.rundir import RunDir, RunDirError
from evoduet_graph.search import Searcher
from evoduet_graph.startup import (
    build_context,
    can_retrieve,
    check_document_sets,
    checked_config,
    make_checked_searcher,
    preflight,
    validate_setup,
)
from evoduet_graph.task import Task, TaskError, load_task
from evoduet_graph.tasks.environment import check_toolchain
from evoduet_graph.tasks.languages import ToolchainError
from evoduet_graph.tasks.settings import apply_task_settings

__all__ = [
    "REVIEW_PREFIX",
    "THREAD_ID",
    "EventFn",
    "ProgressFn",
    "ReviewFn",
    "ResumeOptions",
    "RunResult",
    "build_context",
    "build_graph",
    "can_retrieve",
    "check_document_sets",
    "check_initial_program",
    "checked_config",
    "default_run_dir",
    "graph_concurrency",
    "make_checked_searcher",
    "open_checkpointer",
    "preflight",
    "program_entry",
    "resume",
    "run",
    "validate_model",
    "validate_setup",
]

logger = logging.getLogger(__name__)


def build_graph(nodes: dict[str, NodeFn] | None = None) -> OuterStateGraph:
    """The uncompiled outer graph; see `evoduet_graph.graphs.outer.build_outer_graph`.

    Args:
        nodes: replacements of nodes of either loop by name, one registry
            (`evoduet_graph.graphs.registry`): ``{"gate": my_gate, "search": my_search}``.

    Raises:
        UnknownNodeError: a name is no node of either loop (the message lists them).
    """
    return build_outer_graph(nodes)


def open_checkpointer(path: str | Path) -> SqliteSaver:
    """`SqliteSaver` on ``path`` with WAL and ``synchronous=NORMAL`` (docs/design.md §3)."""
    conn = sqlite3.connect(str(path), check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


def _resolve_config(config: EvoDuetConfig | str | Path | dict[str, Any] | None) -> EvoDuetConfig:
    if isinstance(config, EvoDuetConfig):
        return config
    if isinstance(config, dict):
        return _from_dict(config)
    return load_config(config)


def _from_dict(data: dict[str, Any]) -> EvoDuetConfig:
    try:
        return EvoDuetConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None


def validate_model(config: EvoDuetConfig) -> None:
    """The model preflight: every configured model's form, integration package and key.

    ``llm.model``, the ``llm.models`` members and the ``llm.roles`` models
    (`evoduet_graph.llm.factory.check_model`); no model is built, nothing is sent.

    Raises:
        ConfigError: ``llm.model: unknown model ...`` with the valid forms.
        LLMConfigError: a missing integration package (naming the extra) or key (naming the
            variable), in one line.
    """
    llm = config.llm
    try:
        if llm.models:
            for member in llm.models:
                parse_model_string(member.model)
        elif llm.model.strip().lower() == "task":
            raise LLMConfigError(
                "model 'task' needs model settings in the task folder's config.yaml "
                "(llm.models, or llm.primary_model / secondary_model); this task has none"
            )
        else:
            parse_model_string(llm.model)
    except LLMConfigError as exc:
        raise ConfigError(f"llm.model: {exc}") from None
    for cfg in configured_models(llm):
        check_model(cfg)


def check_initial_program(task: Task, config: EvoDuetConfig, evaluator: Evaluator) -> Any:
    """Evaluate the task's initial program before a new run starts.

    Returns:
        The `EvaluationOutcome` (the run caches it, so the program is not evaluated twice);
        None for a task without an initial program.

    Raises:
        TaskError: the initial program fails its own evaluation and
            ``config.allow_invalid_initial`` is false (CLI: ``--allow-invalid-initial``).
    """
    if not task.has_initial_program:
        return None  # the first iteration asks the model for a program (SkyDiscover)
    outcome = evaluator.evaluate(task.initial_program, program_id="initial")
    if not outcome.valid and not config.allow_invalid_initial:
        error = " ".join(str(outcome.error or "no valid score").split())[:500]
        try:  # the task's actual evaluator: evaluator.py, evaluator/evaluate.sh, ...
            evaluator_name = Path(task.evaluator_path).relative_to(task.path).as_posix()
        except ValueError:
            evaluator_name = Path(task.evaluator_path).name
        raise TaskError(
            f"task {task.name!r}: {task.program_label} fails its own evaluation "
            f"({error}); fix the initial program or {evaluator_name}, or start anyway with "
            "--allow-invalid-initial (allow_invalid_initial: true)"
        )
    return outcome


def default_run_dir(task: Task) -> Path:
    """``runs/<task name>-<YYYYmmdd-HHMMSS>`` (local time), relative to the working directory."""
    return Path("runs") / f"{task.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def run(
    task: Task | str | Path,
    config: EvoDuetConfig | str | Path | dict[str, Any] | None = None,
    *,
    llm: BaseChatModel | None = None,
    evaluator: Evaluator | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    run_dir: str | Path | None = None,
    iterations: int | None = None,
    progress: ProgressFn | None = None,
    nodes: dict[str, NodeFn] | None = None,
    searcher: Searcher | None = None,
    on_event: EventFn | None = None,
    review: ReviewFn | None = None,
) -> RunResult:
    """Run (or continue) an EvoDuet search on a task.

    Args:
        task: a `Task` or the path of an OpenEvolve task folder.
        config: an `EvoDuetConfig`, a YAML path, a dict, or None for the defaults.
        llm: a LangChain chat model; default: built from ``config.llm`` (``local``: embedded).
        evaluator: default: the sandboxed evaluator of the task that
            ``config.evaluation.executor`` names (`make_evaluator`: local, or Ray tasks).
        checkpointer: default: `SqliteSaver` on ``<run_dir>/checkpoints.sqlite``.
        run_dir: default ``runs/<task>-<timestamp>``; an existing run directory continues
            its run (same thread), up to ``iterations`` total iterations.
        iterations: total iterations; default ``config.iterations``.
        progress: callback ``(node, update)`` after every node of the outer graph.
        nodes: node replacements (ablations) of either loop by name, as in `build_graph`.
        searcher: search backend; default: ``config.retrieval.backend`` when the gate can
            retrieve (its preflight runs before the first iteration).
        on_event: callback for every live progress event (see `EventFn`).
        review: answers the graph's pauses for human review (``retrieval.review_queries``,
            ``gate.review``; see `evoduet_graph.nodes.review`): called with the pause's payload,
            returns the resume value (None keeps the proposal). None: a pause ends the call
            with ``stop_reason`` starting with `REVIEW_PREFIX`; the run waits in its checkpoint
            (answer it with `resume` and a ``review``, or in Studio).

    Returns:
        `RunResult` with the best program and the per-iteration history.

    The task config's own settings are folded into ``config`` first
    (`evoduet_graph.tasks.settings.apply_task_settings`; idempotent) and reported in the
    ``task_settings`` event; a missing compiler/interpreter the evaluator calls is a
    `TaskError` (`check_toolchain`).

    Every check that can fail on a bad task, configuration or model (task folder, config
    values, model string and key, search backend preflight, the initial program's own
    evaluation) runs before the run directory is created. The run directory is locked for
    the run's lifetime (`evoduet_graph.rundir.lock`); the sandbox's isolation is written to the
    events (``sandbox``, plus a ``warning`` for each limit this machine cannot enforce).

    Raises:
        TaskError: malformed task folder, or (new runs) the initial program fails its own
            evaluation while ``config.allow_invalid_initial`` is false.
        ConfigError: invalid or unavailable configuration (unknown model provider included;
            with ``evaluation.executor: ray``, a missing ray package or an unreachable
            cluster: `RayUnavailableError`).
        LLMConfigError / LocalModelError: the model cannot be built.
        RunError: another process is running or resuming the same run directory.
        UnknownNodeError: ``nodes`` names no node of either loop.
    """
    split_nodes(nodes)  # an unknown node name fails before anything is written
    task = task if isinstance(task, Task) else load_task(task)
    cfg = _resolve_config(config)
    if iterations is not None:
        cfg = cfg.with_overrides({"iterations": iterations})
    settings = apply_task_settings(task, cfg)  # idempotent: the CLI has applied it already
    cfg = checked_config(settings.config)
    searcher = _check_setup(task, cfg, evaluator, searcher, on_event)
    model_name = cfg.llm.model if llm is None else type(llm).__name__
    rdir = Path(run_dir) if run_dir is not None else default_run_dir(task)
    check_run_dir(rdir, task)
    if llm is None:
        cfg = pin_base_url(cfg)
    existing = (rdir / layout.PROGRAMS).exists()
    notes = check_continuation(rdir, cfg, task)
    for note in notes:
        logger.warning("resume: %s", note)
    lock = RunDirLock(rdir)
    if rdir.is_dir():  # an existing run: refuse before any slow work if another process has it
        acquire_lock(lock)
    # Everything that can fail on a bad task, config or model happens before the run
    # directory exists: a failed start leaves nothing behind but the error.
    if llm is None:
        validate_model(cfg)
    evaluator = run_evaluator(task, cfg, evaluator, rdir)
    initial = None
    if not (rdir / layout.PROGRAMS).exists():  # a new run: check the initial program
        initial = check_initial_program(task, cfg, evaluator)
    if llm is None:  # looked up on the package at call time, so a replaced factory is used
        llm = evoduet_graph.llm.make_chat_model(cfg.llm, seed=cfg.seed)
    # a role's model may fail to build (no key)
    role_llms = make_role_models(cfg.llm, llm, seed=cfg.seed)
    # loads embeddings: may fail on a bad config
    novelty = make_novelty_checker(cfg.novelty, python=task.lang.is_python)
    check_memory(cfg)
    rdir.mkdir(parents=True, exist_ok=True)
    rdir = rdir.resolve()
    acquire_lock(lock)
    with lock, ExitStack() as stack:
        if checkpointer is None:
            checkpointer = open_checkpointer(rdir / layout.CHECKPOINTS)
            stack.callback(checkpointer.conn.close)
        graph = build_outer_graph(nodes).compile(checkpointer=checkpointer)
        thread: RunnableConfig = {
            "configurable": {"thread_id": THREAD_ID},
            "recursion_limit": 20 * cfg.iterations + 100,
            "max_concurrency": graph_concurrency(cfg),
        }
        snapshot = graph.get_state(thread)
        # ``next`` lists only tasks still to run: a step whose tasks all finished (their
        # writes saved) but whose checkpoint was not written yet has next=() and tasks
        # left to commit; starting a new invocation then would drop that step.
        resuming = bool(snapshot.next or snapshot.tasks)
        ctx = open_run(
            task,
            cfg,
            rdir,
            model_name=model_name,
            resumed=resuming or existing,
            notes=notes,
            settings=settings,
            evaluator=evaluator,
            llm=llm,
            searcher=searcher,
            novelty=novelty,
            role_llms=role_llms,
        )
        stack.callback(ctx.store.close)
        stack.callback(close_inflight, ctx)
        if ctx.search_cache is not None:
            stack.callback(ctx.search_cache.close)
        if initial is not None:
            ctx.store.put_evaluation(task.initial_program, initial)
        if model_name == cfg.llm.model:  # built from the config: what it leaves out
            _report_unsent(ctx, cfg)
        graph_input = None if resuming else {"max_iterations": cfg.iterations}
        if resuming and snapshot.values.get("max_iterations") != cfg.iterations:
            ctx.max_iterations = cfg.iterations  # applied by `record` at the iteration's end
        return drive(graph, graph_input, thread, ctx, rdir, progress, on_event, review)


def _report_unsent(ctx: Context, cfg: EvoDuetConfig) -> None:
    """A ``warning`` event per configured model whose provider refuses some of its settings.

    The factory logged the same line when it built the model; the event keeps it in the run.
    """
    for model_cfg in configured_models(cfg.llm):
        dropped = unsent_settings(model_cfg)
        if dropped:
            message = unsent_message(model_cfg.model, dropped)
            ctx.events.emit("warning", node="llm", message=message)


def _check_setup(
    task: Task,
    cfg: EvoDuetConfig,
    evaluator: Evaluator | None,
    searcher: Searcher | None,
    on_event: EventFn | None,
) -> Searcher | None:
    """Check the configuration, document sets, toolchain and search backend of a run.

    Returns:
        The search backend to use: ``searcher`` (preflighted when the gate can retrieve),
        else the configured one (`make_checked_searcher`).
    """
    validate_setup(cfg)
    check_document_sets(task, cfg)
    template_overrides(cfg.prompt.template_dir)
    if evaluator is None:
        try:
            check_toolchain(task)
        except ToolchainError as exc:
            raise TaskError(str(exc)) from None
    if searcher is None:
        with forward_index_progress(on_event):
            return make_checked_searcher(task, cfg)
    if can_retrieve(cfg):
        preflight(searcher, cfg)
    return searcher


class ResumeOptions(TypedDict, total=False):
    """What `resume` passes on to `run`: the injections and callbacks of the run (see `run`)."""

    llm: BaseChatModel | None
    evaluator: Evaluator | None
    iterations: int | None
    progress: ProgressFn | None
    nodes: dict[str, NodeFn] | None
    searcher: Searcher | None
    on_event: EventFn | None
    review: ReviewFn | None


def resume(run_dir: str | Path, **options: Unpack[ResumeOptions]) -> RunResult:
    """Continue a run from its last checkpoint with the configuration it was started with.

    ``options`` are `run`'s keyword arguments of the same names (`ResumeOptions`). Pass the
    same ``llm`` / ``evaluator`` / ``nodes`` / ``searcher`` injections the run was started
    with (they are not stored in the run directory). A run that waits for a review pauses
    again at the same review (``review`` answers it).

    Raises:
        RunError: ``run_dir`` is not a run directory that can be rebuilt (`RunDir.open`).
    """
    try:
        opened = RunDir.open(run_dir, resumable=True)
    except RunDirError as exc:
        raise RunError(f"{run_dir}: {exc}") from None
    rdir = opened.path
    return run(opened.load_task(), rdir / layout.CONFIG, run_dir=rdir, **options)

"""The run driver behind `evoduet_graph.api.run` and `resume`.

`evoduet_graph.api.run` checks a task, configuration and model, then builds a run from the
steps here: the evaluator that protects the run directory (`run_evaluator`), the run's
``config.yaml`` and ``run.json`` (`write_run_files`), the ``run_start``, ``task_settings`` and
``sandbox`` events (`emit_run_start`, `report_task`, `report_sandbox`), and drives the compiled
outer graph to its end (`drive`): streaming its progress and custom events, answering pauses
for human review, and turning the final state into a `RunResult`. The public types of a run
(`RunResult`, the `ProgressFn` / `EventFn` / `ReviewFn` callbacks, `THREAD_ID`,
`REVIEW_PREFIX`) live here and are re-exported by `evoduet_graph.api`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langgraph.types import Command

from evoduet_graph.config import EvoDuetConfig
from evoduet_graph.context import Context
from evoduet_graph.evaluation import Evaluator, make_evaluator
from evoduet_graph.evaluation.base import SandboxedEvaluator
from evoduet_graph.evaluation.integrity import file_digests, folder_digest
from evoduet_graph.llm.roles import role_config
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.usage import history_from_events, iterations_of
from evoduet_graph.search.memory import open_store
from evoduet_graph.search.offline import index_progress
from evoduet_graph.startup import build_context
from evoduet_graph.task import Task
from evoduet_graph.tasks.environment import requirements_warning
from evoduet_graph.tasks.settings import TaskSettings

logger = logging.getLogger(__name__)

THREAD_ID = "evoduet"

ReviewFn = Callable[[dict[str, Any]], Any]
"""Answers a pause for human review: payload in, resume value out (`evoduet_graph.nodes.review`)."""

REVIEW_PREFIX = "waiting for review"
"""``stop_reason`` of a run that paused for a review nobody answered in this call."""

DURABILITY: Literal["sync"] = "sync"
"""LangGraph checkpoint durability of a run: each step's checkpoint is saved before the next
step starts. LangGraph's default (``async``) saves it in the background while the next step
runs, so a kill could lose a finished step's checkpoint *after* a later step had written the
run directory (programs, D_search records): the resume ran the finished step again against
those later writes (a gate re-run of iteration i saw iteration i's own look-up record, took
another decision and produced other candidates). With ``sync`` a kill loses only the step in
flight (docs/design.md §3), at the cost of one SQLite write per step on the graph's thread."""

ProgressFn = Callable[[str, dict[str, Any]], None]
"""Called after every node of the outer graph with ``(node_name, update)``."""

EventFn = Callable[[dict[str, Any]], None]
"""Called with every live progress event (LangGraph's custom stream, inner loop included):
``node_start`` / ``node`` (the ``events.jsonl`` record of a finished node), ``queries``,
``search``, ``new_best``, and ``index`` while an offline search index is built. Each is a
JSON-ready dict with ``event`` and ``time``; events from the inner loop carry
``"subgraph": "query_evolution"``. Used by the CLI's display and ``--json``."""


@dataclass
class RunResult:
    """Outcome of `run` / `resume`.

    Attributes:
        best_score: fitness of the best program (internal higher-is-better scale).
        best_program: its source code.
        best_id: its id in the program store.
        best_metrics: its evaluator metrics.
        metric_value: the task's reported metric (e.g. sum of radii) of the best program.
        ndg: Normalized Discovery Gain in percent, when the task declares reference scores.
        iterations: iterations completed.
        stop_reason: why the run stopped early, else None.
        history: one dict per completed iteration: ``iteration``, ``best_score``,
            ``gate_decision``, ``candidates`` (id, status, score, valid, error).
        run_dir: the run directory.
    """

    best_score: float | None
    best_program: str
    best_id: str | None
    best_metrics: dict[str, float]
    metric_value: float | None
    ndg: float | None
    iterations: int
    stop_reason: str | None
    history: list[dict[str, Any]] = field(default_factory=list)
    run_dir: Path | None = None


def report_task(ctx: Context, settings: TaskSettings) -> None:
    """Write the task's language, layout and settings in force to the events.

    Write the task's language, layout and the task config's settings in force (used /
    ignored) to the events, and warn about unmet ``requirements.txt`` entries.
    """
    task = ctx.task
    ctx.events.emit(
        "task_settings",
        language=task.language,
        program=task.program_file,
        layout=task.layout,
        evaluator=task.evaluator_kind,
        used=settings.used,
        ignored=settings.ignored,
    )
    for line in settings.lines():
        logger.info("%s", line)
    message = requirements_warning(task)
    if message:
        logger.warning("%s", message)
        ctx.events.emit("warning", node="task", message=message)


def report_sandbox(ctx: Context) -> None:
    """Write what the evaluation sandbox enforces to the events.

    Write what the evaluation sandbox enforces to the events (once per session) and warn
    about the limits this machine cannot enforce (no network namespace, no process limit).
    """
    if not isinstance(ctx.evaluator, SandboxedEvaluator):
        return
    isolation = ctx.evaluator.isolation
    ctx.events.emit("sandbox", **isolation.as_dict(), task_sha256=ctx.evaluator.task_sha256)
    for message in isolation.warnings():
        logger.warning("%s", message)
        ctx.events.emit("warning", node="sandbox", message=message)


def pin_base_url(cfg: EvoDuetConfig) -> EvoDuetConfig:
    """Pin ``llm.base_url`` from ``$OPENAI_BASE_URL`` for a hosted model without one.

    ``cfg`` with ``llm.base_url`` set from ``$OPENAI_BASE_URL`` for a hosted model that has
    none (``llm.model`` or an ``llm.roles`` model, which inherits it), so the run's
    ``config.yaml`` records the endpoint it used and a resume in another shell cannot send the
    prompts elsewhere.
    """
    env = os.environ.get("OPENAI_BASE_URL")
    hosted = cfg.llm.model.startswith("openai:") or any(
        role_config(cfg.llm, role).model.startswith("openai:") for role in cfg.llm.roles
    )
    if cfg.llm.base_url or not env or not hosted:
        return cfg
    return cfg.with_overrides({"llm.base_url": env})


def program_entry(task: Task) -> dict[str, str]:
    """The ``program`` entry of ``run.json``.

    ``run.json``'s ``program``: the absolute path of the evolved file (what ``--program``
    chose, so a resume evolves the same file); empty for a task without one.
    """
    if task.program_file is None:
        return {}
    return {"program": str((task.path / task.program_file).resolve())}


def close_inflight(ctx: Context) -> None:
    """Close the iterations in flight, if any were started."""
    if ctx.inflight is not None:
        ctx.inflight.close()


def run_evaluator(
    task: Task, cfg: EvoDuetConfig, evaluator: Evaluator | None, rdir: Path
) -> Evaluator:
    """``evaluator``, else the configured one; a sandboxed one protects ``rdir``."""
    if evaluator is None:
        evaluator = make_evaluator(task, cfg.evaluation)
    if isinstance(evaluator, SandboxedEvaluator):  # candidates must not write the run
        evaluator.protect(rdir)  # directory (docs/design.md §5)
    return evaluator


def check_memory(cfg: EvoDuetConfig) -> None:
    """Open and close the memory store: a path that is not a store fails here, not mid-run."""
    if cfg.memory:
        open_store(cfg.memory).conn.close()


def write_run_files(
    rdir: Path,
    task: Task,
    cfg: EvoDuetConfig,
    evaluator: Evaluator | None,
    *,
    thread_id: str | None = THREAD_ID,
    studio: bool = False,
) -> None:
    """Write the run's ``config.yaml`` and ``run.json`` (task digests, thread, config).

    A graph-input run (``studio``) is marked so: only its own thread may continue it
    (`evoduet_graph.rundir.continuation.check_graph_input_run_dir`).
    """
    (rdir / layout.CONFIG).write_text(cfg.to_yaml(), encoding="utf-8")
    task_sha = evaluator.task_sha256 if isinstance(evaluator, SandboxedEvaluator) else None
    (rdir / layout.RUN_META).write_text(
        json.dumps(
            {
                "task_dir": str(task.path),
                "task_sha256": task_sha if isinstance(task_sha, str) else folder_digest(task.path),
                "task_files": file_digests(task.path),
                "thread_id": thread_id,
                **({"studio": True} if studio else {}),
                **program_entry(task),
                "config": cfg.model_dump(mode="json"),
            },
            indent=2,
        ),
        encoding="utf-8",
    )


def open_run(
    task: Task,
    cfg: EvoDuetConfig,
    rdir: Path,
    *,
    model_name: str,
    resumed: bool | None,
    notes: list[str],
    settings: TaskSettings | None = None,
    thread_id: str | None = THREAD_ID,
    studio: bool = False,
    evaluator: Evaluator | None = None,
    **build: Any,
) -> Context:
    """Set up a checked run in its (created, locked) run directory: the one path of every run.

    `evoduet_graph.run` (and the CLI, which calls it) and the graph-input runs of Studio and
    ``graph.invoke`` (`evoduet_graph.graphs.studio_context`) all start here: the run's
    ``config.yaml`` and ``run.json`` (`write_run_files`), its `Context`
    (`evoduet_graph.startup.build_context`), then the ``run_start`` event, the task's settings
    (``task_settings``, when ``settings`` are given), one ``config_change`` event per resume
    note, and what the sandbox enforces (``sandbox``).

    Args:
        task: the loaded task.
        cfg: the checked configuration (`evoduet_graph.startup.checked_config`).
        rdir: the run directory, created and locked by the caller.
        model_name: the model named in ``run_start``.
        resumed: whether the run continues an earlier one; None: whether the program store
            already holds the initial program.
        notes: the resume notes of `evoduet_graph.rundir.continuation.check_continuation`.
        settings: the task config's settings in force (`apply_task_settings`), reported in
            ``task_settings``; None: not reported (graph-input runs do not apply them).
        thread_id: the LangGraph thread recorded in ``run.json``.
        studio: a graph-input run (Studio, the SDK, ``graph.invoke``).
        evaluator: the evaluator to use; default the configured one.
        **build: `build_context`'s injections (``llm``, ``searcher``, ``novelty``, ...).
    """
    write_run_files(rdir, task, cfg, evaluator, thread_id=thread_id, studio=studio)
    ctx = build_context(task, cfg, rdir, evaluator=evaluator, **build)
    if resumed is None:
        resumed = ctx.store.has_program("initial")
    emit_run_start(ctx, task, cfg, model_name, resumed=resumed, studio=studio)
    if settings is not None:
        report_task(ctx, settings)
    for note in notes:
        ctx.events.emit("config_change", message=note)
    report_sandbox(ctx)
    return ctx


def emit_run_start(
    ctx: Context,
    task: Task,
    cfg: EvoDuetConfig,
    model_name: str,
    *,
    resumed: bool,
    studio: bool = False,
) -> None:
    """Write the ``run_start`` event (with the role models when roles are configured)."""
    ctx.events.emit(
        "run_start",
        task=task.name,
        iterations=cfg.iterations,
        model=model_name,
        resumed=resumed,
        **({"studio": True} if studio else {}),
        **(
            {"roles": {r: role_config(cfg.llm, r).model for r in cfg.llm.roles}}
            if cfg.llm.roles
            else {}
        ),
    )


def drive(
    graph: Any,
    graph_input: Any,
    thread: Any,
    ctx: Context,
    rdir: Path,
    progress: ProgressFn | None,
    on_event: EventFn | None,
    review: ReviewFn | None,
) -> RunResult:
    """Stream the graph until it ends, answering review pauses with ``review``.

    Without ``review``, a pause ends the call (``stop_reason`` starts with `REVIEW_PREFIX`).
    """
    while True:
        _stream(graph, graph_input, thread, ctx, progress, on_event)
        snapshot = graph.get_state(thread)
        pending = _interrupts(snapshot)
        if not pending:
            break
        if review is None:
            # paused for a person: the checkpoint waits; Studio or a resume with a
            # ``review`` callback answers it
            ctx.events.emit(
                "run_end", iterations=iterations_of(snapshot.values), waiting_for_review=pending[0]
            )
            result = _result(ctx, snapshot.values, rdir)
            result.stop_reason = f"{REVIEW_PREFIX} ({pending[0].get('kind')})"
            return result
        answer = review(pending[0])
        graph_input = Command(resume=True if answer is None else answer)
    final = snapshot.values
    ctx.events.emit(
        "run_end",
        iterations=iterations_of(final),
        best_score=final.get("best_score"),
        stop_reason=final.get("stop_reason"),
    )
    return _result(ctx, final, rdir)


def _stream(
    graph: Any,
    graph_input: Any,
    thread: dict[str, Any],
    ctx: Context,
    progress: ProgressFn | None,
    on_event: EventFn | None,
) -> None:
    """Run the graph until it ends or pauses, forwarding progress and custom events.

    The nodes run in LangGraph's worker threads (the custom stream makes it use them), so a
    KeyboardInterrupt in this thread leaves the stream only once the nodes in flight have
    returned, a model call included; the CLI ends the process without waiting for them
    (`evoduet_graph.cli.interrupt`).
    """
    stream = graph.stream(
        graph_input,
        thread,
        context=ctx,
        stream_mode=["updates", "custom"],
        subgraphs=on_event is not None,  # the inner loop's progress events
        durability=DURABILITY,
    )
    for part in stream:
        namespace, mode, chunk = part if len(part) == 3 else ((), *part)
        if mode == "custom":
            if on_event is not None and isinstance(chunk, dict):
                if namespace:
                    chunk = {**chunk, "subgraph": str(namespace[0]).split(":")[0]}
                on_event(chunk)
        elif progress is not None and not namespace and isinstance(chunk, dict):
            for node, update in chunk.items():
                if node == "__interrupt__":
                    continue
                progress(node, update if isinstance(update, dict) else {})


def _interrupts(snapshot: Any) -> list[dict[str, Any]]:
    """The payloads of the graph's pending ``interrupt()`` calls (subgraphs included)."""
    values = [getattr(i, "value", None) for i in getattr(snapshot, "interrupts", ()) or ()]
    if not values:
        for task in getattr(snapshot, "tasks", ()) or ():
            values += [getattr(i, "value", None) for i in getattr(task, "interrupts", ()) or ()]
    return [v if isinstance(v, dict) else {"value": v} for v in values]


def forward_index_progress(on_event: EventFn | None) -> Any:
    """Forward an offline index build's progress to ``on_event`` (a no-op context without)."""
    if on_event is None:
        return nullcontext()
    return index_progress(on_event)


def _result(ctx: Context, final: dict[str, Any], rdir: Path) -> RunResult:
    best_id = final.get("best_id")
    row = ctx.store.get_program(best_id) if best_id else None
    metric_value = ctx.task.metric_value(row.metrics) if row else None
    history = history_from_events(rdir / layout.EVENTS)
    initial = final.get("initial_score")
    for entry in history:
        if entry.get("best_score") is None:
            entry["best_score"] = initial
    return RunResult(
        best_score=final.get("best_score"),
        best_program=(row.code or "") if row else "",
        best_id=best_id,
        best_metrics=row.metrics if row else {},
        metric_value=metric_value,
        ndg=ctx.task.ndg(metric_value) if metric_value is not None else None,
        iterations=iterations_of(final),
        stop_reason=final.get("stop_reason"),
        history=history,
        run_dir=rdir,
    )

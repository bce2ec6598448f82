"""``evoduet run`` and ``evoduet resume``: start or continue a run and show it.

The live display, ``--quiet`` or ``--json`` while the run goes, review pauses answered on the
terminal, the end-of-run summary, and the exit code of a run that stopped on failures.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from evoduet_graph import api
from evoduet_graph.api import (
    RunResult,
    can_retrieve,
    checked_config,
    default_run_dir,
    validate_model,
)
from evoduet_graph.cli.common import (
    _USER_ERRORS,
    JsonLinesOpt,
    QuietOpt,
    TaskDirArg,
    _check_run_dir,
    _CliError,
    _fail,
    _user_errors,
    app,
    console,
)
from evoduet_graph.cli.interrupt import interruptible
from evoduet_graph.config import ConfigError, load_config
from evoduet_graph.nodes.stop_rules import TARGET_PREFIX
from evoduet_graph.report.live import JsonLines, LiveDisplay
from evoduet_graph.report.markdown import write_report as write_report_files
from evoduet_graph.report.summary import GATE_DECISIONS, GATE_FALLBACK, run_summary
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.budget import STOP_PREFIX
from evoduet_graph.scaffolds import SCAFFOLDS
from evoduet_graph.search.database import SearchDatabase
from evoduet_graph.search.registry import backend_choices
from evoduet_graph.task import Task, TaskError, load_task
from evoduet_graph.tasks.environment import check_toolchain, requirements_warning
from evoduet_graph.tasks.languages import ToolchainError
from evoduet_graph.tasks.settings import apply_task_settings
from evoduet_graph.view.beside import ViewBesideRun, check_port


def _failed_stop(result: RunResult) -> bool:
    """Whether the run stopped on failures (not a budget stop or a reached ``stop_at_score``).

    `_exit_for_stop` exits 1.
    """
    return bool(result.stop_reason) and not str(result.stop_reason).startswith(
        (STOP_PREFIX, TARGET_PREFIX)
    )


def _summary(result: RunResult, elapsed: float, *, write_report: bool = False) -> None:
    """The end-of-run summary a newcomer reads.

    Iterations, best score and NDG, gate decisions by kind, queries issued, distinct documents, and
    where the report is (written first when ``write_report``).
    """
    rdir = result.run_dir
    figures = run_summary(rdir) if rdir is not None else None
    # soft_wrap: paths are printed whole, never broken at the terminal's width
    say = functools.partial(console.print, highlight=False, soft_wrap=True)
    # a failed stop gets no green "done": the error line `_exit_for_stop` prints follows
    head = "[bold yellow]stopped[/]" if _failed_stop(result) else "[bold green]done[/]"
    say(f"{head} in {elapsed:.1f} s — run directory: {rdir}")
    say(f"  iterations:      {result.iterations}")
    best = _num(result.best_score)
    if figures is not None and figures.initial_score is not None:
        best += f" (initial {_num(figures.initial_score)})"
    say(f"  best score:      {best}")
    if result.metric_value is not None:
        say(f"  metric value:    {_num(result.metric_value)}")
    if result.ndg is not None:
        say(f"  NDG:             {result.ndg:.2f}%")
    decisions = figures.gate_decisions if figures is not None else {}
    if decisions:
        shown = "  ".join(f"{d} {decisions.get(d, 0)}" for d in GATE_DECISIONS)
        if decisions.get(GATE_FALLBACK):  # the gate call failed / its reply was unusable
            shown += f"  {GATE_FALLBACK} (no decision) {decisions[GATE_FALLBACK]}"
        say(f"  gate decisions:  {shown}")
    queries = figures.search.queries if figures is not None else 0
    distinct_urls = figures.search.distinct_urls if figures is not None else 0
    task_docs = _task_documents(rdir) if rdir is not None else 0
    say(
        f"  search:          {queries} queries issued, "
        f"{distinct_urls} distinct documents returned "
        f"({task_docs} from the task's docs/)"
    )
    if rdir is not None:
        if write_report:
            try:
                path = write_report_files(rdir)["markdown_path"]
                say(f"  report:          {path}", markup=False)
            except (ImportError, OSError) as exc:
                say(
                    f"  report:          not written ({exc}); run `evoduet report {rdir}`",
                    markup=False,
                )
        else:
            say(
                f"  report:          `evoduet report {rdir}` writes "
                f"{rdir / 'report' / 'report.md'}",
                markup=False,
            )
    # a failure stop is printed once, as the error `_exit_for_stop` exits with
    if result.stop_reason and result.stop_reason.startswith((STOP_PREFIX, TARGET_PREFIX)):
        console.print("[yellow]stopped early:[/] ", end="")
        console.print(result.stop_reason, markup=False, highlight=False)


def _num(value: Any) -> str:
    """A score for the summary: six significant digits (``n/a`` when unknown)."""
    return f"{value:.6g}" if isinstance(value, int | float) else "n/a"


def _task_documents(rdir: Path) -> int:
    """Distinct documents of the run's search database from the task's ``docs/``.

    Distinct documents of the run's search database that come from the task's ``docs/``
    folder (offline backend ids ``file:docs/...``).
    """
    path = rdir / layout.SEARCH_DB
    if not path.is_file():
        return 0
    return sum(
        1 for d in SearchDatabase(path, fsync=False).documents() if d.url.startswith("file:docs/")
    )


def _result_json(result: RunResult, elapsed: float) -> dict[str, Any]:
    return {
        "event": "result",
        "run_dir": str(result.run_dir) if result.run_dir else None,
        "iterations": result.iterations,
        "best_id": result.best_id,
        "best_score": result.best_score,
        "metric_value": result.metric_value,
        "ndg": result.ndg,
        "stop_reason": result.stop_reason,
        "elapsed_s": round(elapsed, 3),
    }


def _run_with_display(
    fn: Any,
    shown: Task,
    total: int,
    quiet: bool,
    *,
    json_lines: bool = False,
    done: int = 0,
    write_report: bool = False,
    preamble: Sequence[str] = (),
    view: bool = False,
    view_port: int = 0,
    **kwargs: Any,
) -> None:
    """Run ``fn`` (api.run / api.resume) with the live display, ``--quiet`` or ``--json``.

    With ``view`` the page of ``evoduet view`` is served beside the run (on ``view_port``; 0:
    a free port) and its address shown in the live display (on stderr with ``--quiet`` /
    ``--json``); it stops when the run ends.

    Then the summary (`_summary`), after writing the report when ``write_report``.

    ``preamble`` lines (what the task is, the task config's settings in force) are printed
    when the run has started (its first progress event), with the live display only: a run
    refused at startup prints its one error line alone.

    Ctrl-C or SIGTERM ends the command within seconds, a model call in flight or not
    (`evoduet_graph.cli.interrupt`; the ``--view`` server is killed with it); ``evoduet resume``
    redoes the iteration that was in flight.
    """
    if quiet and json_lines:
        _fail("--quiet and --json exclude each other: --json prints events on stdout; pick one")
    start = time.perf_counter()
    sink = JsonLines() if json_lines else None
    reviewed = kwargs.pop("reviewed", False)
    if reviewed:
        _check_can_review(json_lines)
    server = _view_beside(kwargs["run_dir"], view_port) if view else None
    where = kwargs.get("run_dir") or "<run_dir>"
    with interruptible(f"resume with `evoduet resume {where}`") as guard:
        if server is not None:
            guard.at_hard_exit(server.kill)
        try:
            with LiveDisplay(
                shown, total, console=console, enabled=not (quiet or json_lines), done=done
            ) as display:
                on_event = sink.on_event if sink is not None else display.on_event
                pending = [] if (quiet or json_lines) else list(preamble)
                if server is not None:
                    server.on_url = functools.partial(_show_view_url, display)

                def forward(event: Any, target: Any = on_event) -> None:
                    while pending:
                        console.print(pending.pop(0), markup=False, highlight=False)
                    if server is not None:
                        server.poke()
                    target(event)

                if reviewed:
                    kwargs["review"] = lambda payload: _review_on_terminal(payload, display)
                result = fn(on_event=forward, **kwargs)
        except _user_errors() as exc:
            _fail(str(exc))
        finally:
            if server is not None:
                server.stop()
    if sink is not None:
        if write_report and result.run_dir is not None:
            write_report_files(result.run_dir)
        sink.write(_result_json(result, time.perf_counter() - start))
    else:
        _summary(result, time.perf_counter() - start, write_report=write_report)
    _exit_for_stop(result)


def _view_beside(run_dir: Path, port: int) -> ViewBesideRun:
    """The ``--view`` server of a run: ``evoduet view RUN_DIR`` in its own process.

    The port is checked now (a taken one fails before the run starts; 0 picks a free one);
    the server starts with the run's first progress event, when the run directory exists
    (`evoduet_graph.view.beside`). A server that cannot start is a warning: the run goes on.
    """
    host = "127.0.0.1"
    try:
        port = check_port(host, port)
    except OSError as exc:
        _fail(
            f"--view cannot listen on port {port}: {exc.strerror or exc}; "
            "pass another --view-port (0 picks a free one)"
        )

    def warn(message: str) -> None:
        console.print("[yellow]warning:[/] ", end="")
        console.print(message, markup=False, highlight=False)

    return ViewBesideRun(run_dir, host, port, on_url=lambda _url: None, on_error=warn)


def _show_view_url(display: LiveDisplay, url: str) -> None:
    """Show the page's address: a line of the live display, and a line of its own.

    The line of its own is printed without a live display, or when the output is not a
    terminal (there the live display prints only its last frame, after the page has stopped).
    """
    display.status.view_url = url
    if not display.enabled or not console.is_terminal:
        console.print(f"view: {url}", markup=False, highlight=False)


def _needs_review(cfg: Any) -> bool:
    return bool(cfg.retrieval.review_queries or cfg.gate.review)


def _check_can_review(json_lines: bool) -> None:
    """Refuse human review where nobody can answer on this terminal."""
    if json_lines:
        _fail(
            "retrieval.review_queries / gate.review ask on the terminal, which --json cannot "
            "do; drop --json, or review in Studio (see docs/studio.md)"
        )
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        _fail(
            "retrieval.review_queries / gate.review ask on the terminal, but stdin/stderr is "
            "not one; run in a terminal, set them to false, or review in Studio"
        )


def _review_on_terminal(payload: dict[str, Any], display: Any) -> Any:
    """Ask the person at the terminal to answer one review pause (`evoduet_graph.nodes.review`).

    Queries: Enter keeps the proposal; otherwise type the queries, separated by ``;``
    (``-`` alone skips this round's search). Gate: Enter keeps the decision; otherwise type
    ``no-op``, ``retrieve`` or ``look-up doc_000001 doc_000002``.
    """
    live = getattr(display, "live", None)
    if getattr(display, "enabled", False) and live is not None:
        live.stop()
    try:
        console.print()
        if payload.get("error"):
            console.print("[bold red]refused:[/] ", end="")
            console.print(payload["error"], markup=False, highlight=False)
        where = f"iteration {payload.get('iteration')}"
        if payload.get("kind") == "review_queries":
            console.print(
                f"[bold]review the queries[/] ({where}, round {payload.get('round')})",
                highlight=False,
            )
            if payload.get("knowledge_gap"):
                console.print(f"  gap: {payload['knowledge_gap']}", markup=False)
            for i, query in enumerate(payload.get("queries") or [], 1):
                console.print(f"  {i}. {query}", markup=False, highlight=False)
            answer = console.input(Text("queries (Enter: keep; a; b; c: replace; -: skip): "))
            answer = answer.strip()
            if not answer:
                return True
            if answer == "-":
                return []
            return [q.strip() for q in answer.split(";") if q.strip()]
        console.print(f"[bold]review the gate decision[/] ({where})", highlight=False)
        console.print(f"  decision: {payload.get('decision')}", markup=False)
        if payload.get("reason"):
            console.print(f"  reason: {payload['reason']}", markup=False, highlight=False)
        answer = console.input(Text("decision (Enter: keep; no-op | retrieve | look-up ID ...): "))
        words = answer.split()
        if not words:
            return True
        return {"decision": words[0], "document_ids": words[1:]}
    finally:
        if getattr(display, "enabled", False) and live is not None:
            live.start()


def _exit_for_stop(result: RunResult) -> None:
    """Exit 1 when the run stopped on failures (e.g. ``max_consecutive_failures``).

    The checkpoint is resumable, but the run did not do its work. A budget stop and a reached
    ``stop_at_score`` are clean ends.
    """
    if _failed_stop(result):
        _fail(f"the run stopped: {result.stop_reason}", code=1)


def _backend_option(value: str | None) -> str | list[str] | None:
    """``--backend a,b`` → ``["a", "b"]`` (one name stays a string)."""
    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    return names[0] if len(names) == 1 else names


ViewOpt = Annotated[
    bool,
    typer.Option(
        "--view", help="Serve the live page of the run (evoduet view) while it goes; docs/view.md."
    ),
]
ViewPortOpt = Annotated[int, typer.Option(help="Port of --view (0: a free one).")]


@app.command("run")
def run_cmd(
    task_dir: TaskDirArg,
    iterations: Annotated[int | None, typer.Option(help="Outer-loop iterations.")] = None,
    candidates: Annotated[int | None, typer.Option(help="Candidates per iteration (N).")] = None,
    iterations_in_flight: Annotated[
        int | None,
        typer.Option(
            help="Iterations run at once, each recorded when it finishes "
            "(max_iterations_in_flight; for hosted models)."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="`local` (embedded), `openai:<model>`, `<provider>:<model>` (anthropic, "
            "google_genai, ollama, bedrock_converse, mistralai, groq, ...), "
            "`python:<module>:<factory>`, or `task` (the task config's models, as a weighted "
            "ensemble)."
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    program: Annotated[
        Path | None,
        typer.Option(
            help="The file or folder to evolve (default: the task's initial_program.<ext> or "
            "initial_program/)."
        ),
    ] = None,
    gate: Annotated[
        str | None,
        typer.Option(
            help="Gate mode: llm (default, the method) | never (OpenEvolve baseline) | always "
            "| heuristic | stagnation | oracle."
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(help=f"Search backend(s), comma-separated: {backend_choices()}."),
    ] = None,
    stop_at_score: Annotated[
        float | None,
        typer.Option(help="End the run once the best program's metric reaches this value."),
    ] = None,
    memory: Annotated[
        Path | None,
        typer.Option(help="Long-term memory across runs of the task (a SQLite store file)."),
    ] = None,
    scaffold: Annotated[
        str | None,
        typer.Option(help=f"Scaffold (parent selection): {'|'.join(SCAFFOLDS)}."),
    ] = None,
    corpus: Annotated[
        list[Path] | None,
        typer.Option(help="Extra offline corpus folder (.md/.txt/.html/.pdf); repeatable."),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/...).")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file.")] = None,
    quiet: QuietOpt = False,
    json_lines: JsonLinesOpt = False,
    allow_invalid_initial: Annotated[
        bool,
        typer.Option(help="Start even if the initial program fails its own evaluation."),
    ] = False,
    report: Annotated[
        bool,
        typer.Option("--report", help="Write RUN_DIR/report/ (plots, report.md) at the end."),
    ] = False,
    view: ViewOpt = False,
    view_port: ViewPortOpt = 0,
) -> None:
    """Run an EvoDuet search on TASK_DIR and write a run directory.

    The LLM gate and the offline search backend are on by default; `--gate never` runs the
    OpenEvolve baseline.
    """
    try:
        # its warnings are printed below with the CLI's own; the task logger would repeat them
        task_logger = logging.getLogger("evoduet_graph.task")
        level = task_logger.level
        task_logger.setLevel(logging.ERROR)
        try:
            task = load_task(task_dir, program)
        finally:
            task_logger.setLevel(level)
        source = f"{config} with the command-line options" if config else "the command line"
        cfg = load_config(config).with_overrides(
            {
                "iterations": iterations,
                "candidates": candidates,
                "max_iterations_in_flight": iterations_in_flight,
                "llm.model": model,
                "seed": seed,
                "gate.mode": gate,
                "retrieval.backend": _backend_option(backend),
                "stop_at_score": stop_at_score,
                "memory": str(memory.expanduser().resolve()) if memory else None,
                "scaffold": scaffold,
                "retrieval.corpus": [str(p.resolve()) for p in corpus] if corpus else None,
                "allow_invalid_initial": True if allow_invalid_initial else None,
            },
            source=source,
        )
        settings = apply_task_settings(task, cfg)
        cfg = checked_config(settings.config, source)
        validate_model(cfg)
        check_toolchain(task)
    except _USER_ERRORS as exc:
        _fail(str(exc))
    except ToolchainError as exc:
        _fail(str(exc))
    out = out if out is not None else default_run_dir(task)
    if (out / layout.RUN_META).is_file():
        _fail(
            f"{out} already holds a run; continue it with `evoduet resume {out}` (it keeps that "
            "run's configuration; --iterations N raises the total), or choose a new --out"
        )
    warnings = list(task.warnings)
    requirements = requirements_warning(task)
    if requirements:
        warnings.append(requirements)
    if (corpus or backend) and not can_retrieve(cfg):
        warnings.append(
            "--corpus/--backend have no effect: this configuration never searches; "
            "use --gate llm|always|heuristic|stagnation"
        )
    for warning in warnings:
        console.print("[yellow]warning:[/] ", end="")
        console.print(warning, markup=False, highlight=False)
    preamble = [
        (
            f"task: {task.lang.display} program {task.program_label}, {task.layout} layout "
            f"({task.evaluator_kind} evaluator {task.evaluator_path.relative_to(task.path)})"
        ),
        *settings.lines(),
    ]
    _run_with_display(
        api.run,  # looked up at call time, so a replaced api.run is the one called
        task,
        cfg.iterations,
        quiet,
        json_lines=json_lines,
        write_report=report,
        task=task,
        config=cfg,
        run_dir=out,
        preamble=preamble,
        reviewed=_needs_review(cfg),
        view=view,
        view_port=view_port,
    )


@app.command("resume")
def resume_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory of a killed or finished run.")],
    quiet: QuietOpt = False,
    json_lines: JsonLinesOpt = False,
    iterations: Annotated[
        int | None, typer.Option(help="New total iteration count (default: unchanged).")
    ] = None,
    view: ViewOpt = False,
    view_port: ViewPortOpt = 0,
) -> None:
    """Continue a run from its last checkpoint with the same configuration."""
    try:
        task, total, done = _resume_target(run_dir, iterations)
        reviewed = _needs_review(load_config(run_dir / layout.CONFIG))
    except _USER_ERRORS as exc:
        _fail(f"cannot resume {run_dir}: {exc}")
    _run_with_display(
        api.resume,
        task,
        total,
        quiet,
        json_lines=json_lines,
        done=done,
        run_dir=run_dir,
        iterations=iterations,
        reviewed=reviewed,
        view=view,
        view_port=view_port,
    )


def _resume_target(run_dir: Path, iterations: int | None) -> tuple[Task, int, int]:
    """``(task, total iterations, iterations already completed)`` of a run to resume.

    Raises:
        _CliError: with a one-line reason and what to do.
    """
    rdir = _check_run_dir(run_dir, resumable=True)
    if rdir.studio:
        raise _CliError(
            "this run was started through the graph input (LangGraph Studio, the SDK or "
            "evoduet_graph.graph) and its checkpoints live with that caller (the dev server's "
            "thread); continue the thread there, or start a new run with `evoduet run`"
        )
    try:
        task = rdir.load_task()
    except TaskError as exc:
        task_dir = rdir.meta["task_dir"]
        raise _CliError(
            f"its task folder {task_dir} (from {layout.RUN_META}) cannot be loaded: {exc}; "
            f"restore the folder or correct task_dir in {run_dir / layout.RUN_META}"
        ) from None
    try:
        total = iterations or load_config(run_dir / layout.CONFIG).iterations
    except ConfigError as exc:
        raise _CliError(f"{exc}; fix {run_dir / 'config.yaml'}") from None
    done = rdir.completed_iterations()
    if total < done:
        given = f"--iterations {total}" if iterations else f"iterations: {total} in config.yaml"
        raise _CliError(
            f"{given} is below the {done} iterations the run has already "
            f"completed; pass a total of at least {done} (--iterations)"
        )
    return task, total, done

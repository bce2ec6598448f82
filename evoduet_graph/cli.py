"""The ``evoduet`` command: ``run``, ``resume``, ``eval`` and ``report`` (typer + rich)."""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from evoduet_graph.api import RunResult, can_retrieve
from evoduet_graph.config import ConfigError, load_config
from evoduet_graph.errors import UserError
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.rundir import RunDir, RunDirError
from evoduet_graph.search.registry import backend_choices
from evoduet_graph.task import Task, TaskError, load_task
from evoduet_graph.tasks.languages import ToolchainError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="EvoDuet: evolutionary program search with co-evolving search queries.",
)
console = Console(stderr=True)

_USER_ERRORS: tuple[type[Exception], ...] = (UserError,)
"""What the user can fix: one line on stderr and exit code 2 (`evoduet_graph.errors`)."""


def _user_errors() -> tuple[type[Exception], ...]:
    return _USER_ERRORS


def _failed_stop(result: RunResult) -> bool:
    """Whether the run stopped on failures (not a budget stop or a reached ``stop_at_score``).

    `_exit_for_stop` exits 1.
    """
    from evoduet_graph.nodes.stop_rules import TARGET_PREFIX
    from evoduet_graph.rundir.budget import STOP_PREFIX

    return bool(result.stop_reason) and not str(result.stop_reason).startswith(
        (STOP_PREFIX, TARGET_PREFIX)
    )


def _summary(result: RunResult, elapsed: float, *, write_report: bool = False) -> None:
    """The end-of-run summary a newcomer reads.

    Iterations, best score and NDG, gate decisions by kind, queries issued, distinct documents, and
    where the report is (written first when ``write_report``).
    """
    from evoduet_graph.nodes.stop_rules import TARGET_PREFIX
    from evoduet_graph.report.summary import GATE_DECISIONS, GATE_FALLBACK, run_summary
    from evoduet_graph.rundir.budget import STOP_PREFIX

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
            from evoduet_graph.report.markdown import write_report as write

            try:
                path = write(rdir)["markdown_path"]
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
    from evoduet_graph.search.database import SearchDatabase

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
    **kwargs: Any,
) -> None:
    """Run ``fn`` (api.run / api.resume) with the live display, ``--quiet`` or ``--json``.

    Then the summary (`_summary`), after writing the report when ``write_report``.

    ``preamble`` lines (what the task is, the task config's settings in force) are printed
    when the run has started (its first progress event), with the live display only: a run
    refused at startup prints its one error line alone.
    """
    from evoduet_graph.report.live import JsonLines, LiveDisplay

    if quiet and json_lines:
        _fail("--quiet and --json exclude each other: --json prints events on stdout; pick one")
    start = time.perf_counter()
    sink = JsonLines() if json_lines else None
    reviewed = kwargs.pop("reviewed", False)
    if reviewed:
        _check_can_review(json_lines)
    try:
        with LiveDisplay(
            shown, total, console=console, enabled=not (quiet or json_lines), done=done
        ) as display:
            on_event = sink.on_event if sink is not None else display.on_event
            pending = [] if (quiet or json_lines) else list(preamble)

            def forward(event: Any, target: Any = on_event) -> None:
                while pending:
                    console.print(pending.pop(0), markup=False, highlight=False)
                target(event)

            if reviewed:
                kwargs["review"] = lambda payload: _review_on_terminal(payload, display)
            result = fn(on_event=forward, **kwargs)
    except _user_errors() as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        where = kwargs.get("run_dir") or "<run_dir>"
        console.print(f"[yellow]interrupted[/]: resume with `evoduet resume {where}`")
        raise typer.Exit(130) from None
    if sink is not None:
        if write_report and result.run_dir is not None:
            from evoduet_graph.report.markdown import write_report as write

            write(result.run_dir)
        sink.write(_result_json(result, time.perf_counter() - start))
    else:
        _summary(result, time.perf_counter() - start, write_report=write_report)
    _exit_for_stop(result)


def _needs_review(cfg: Any) -> bool:
    return bool(cfg.retrieval.review_queries or cfg.gate.review)


def _check_can_review(json_lines: bool) -> None:
    """Refuse human review where nobody can answer on this terminal."""
    if json_lines:
        _fail(
            "retrieval.review_queries / gate.review ask on the terminal, which --json cannot "
            "do; drop --json, or review in Studio (see the README's Studio section)"
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


@app.command("run")
def run_cmd(
    task_dir: Annotated[
        Path, typer.Argument(help="Task folder (OpenEvolve or SkyDiscover layout).")
    ],
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
            help="`local` (embedded), `openai:<model>`, or `task` (the task config's models, "
            "as a weighted ensemble)."
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    program: Annotated[
        Path | None,
        typer.Option(help="The file to evolve (default: the folder's initial_program.<ext>)."),
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
        typer.Option(help="Scaffold (parent selection): openevolve|top_k|best_of_n|evox."),
    ] = None,
    corpus: Annotated[
        list[Path] | None,
        typer.Option(help="Extra offline corpus folder (.md/.txt/.html/.pdf); repeatable."),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/...).")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file.")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress display.")] = False,
    json_lines: Annotated[
        bool, typer.Option("--json", help="Progress events as JSON lines on stdout.")
    ] = False,
    allow_invalid_initial: Annotated[
        bool,
        typer.Option(help="Start even if the initial program fails its own evaluation."),
    ] = False,
    report: Annotated[
        bool,
        typer.Option("--report", help="Write RUN_DIR/report/ (plots, report.md) at the end."),
    ] = False,
) -> None:
    """Run an EvoDuet search on TASK_DIR and write a run directory.

    The LLM gate and the offline search backend are on by default; `--gate never` runs the
    OpenEvolve baseline.
    """
    from evoduet_graph.api import run

    try:
        # its warnings are printed below with the CLI's own; the task logger would repeat them
        task_logger = logging.getLogger("evoduet_graph.task")
        level = task_logger.level
        task_logger.setLevel(logging.ERROR)
        try:
            task = load_task(task_dir, program)
        finally:
            task_logger.setLevel(level)
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
            source=f"{config} with the command-line options" if config else "the command line",
        )
        from evoduet_graph.api import validate_model
        from evoduet_graph.tasks.environment import check_toolchain
        from evoduet_graph.tasks.settings import apply_task_settings

        settings = apply_task_settings(task, cfg)
        cfg = settings.config
        validate_model(cfg)
        check_toolchain(task)
    except _USER_ERRORS as exc:
        _fail(str(exc))
    except ToolchainError as exc:
        _fail(str(exc))
    from evoduet_graph.api import default_run_dir
    from evoduet_graph.rundir import layout

    out = out if out is not None else default_run_dir(task)
    if (out / layout.RUN_META).is_file():
        _fail(
            f"{out} already holds a run; continue it with `evoduet resume {out}` (it keeps that "
            "run's configuration; --iterations N raises the total), or choose a new --out"
        )
    from evoduet_graph.tasks.environment import requirements_warning

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
        run,
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
    )


@app.command("resume")
def resume_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory of a killed or finished run.")],
    iterations: Annotated[
        int | None, typer.Option(help="New total iteration count (default: unchanged).")
    ] = None,
    quiet: Annotated[bool, typer.Option(help="No progress display.")] = False,
    json_lines: Annotated[
        bool, typer.Option("--json", help="Progress events as JSON lines on stdout.")
    ] = False,
) -> None:
    """Continue a run from its last checkpoint with the same configuration."""
    from evoduet_graph.api import resume

    try:
        task, total, done = _resume_target(run_dir, iterations)
        reviewed = _needs_review(load_config(run_dir / layout.CONFIG))
    except _CliError as exc:
        _fail(f"cannot resume {run_dir}: {exc}")
    except _USER_ERRORS as exc:
        _fail(f"cannot resume {run_dir}: {exc}")
    _run_with_display(
        resume,
        task,
        total,
        quiet,
        json_lines=json_lines,
        done=done,
        run_dir=run_dir,
        iterations=iterations,
        reviewed=reviewed,
    )


class _CliError(UserError):
    """A user-facing error: one line saying what is wrong, where, and what to do."""


def _fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: <message>`` (one line, no markup) on stderr and exit with ``code``."""
    console.print("[bold red]error:[/] ", end="")
    console.print(" ".join(str(message).split()), markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _check_run_dir(run_dir: Path, *, resumable: bool = False) -> RunDir:
    """`RunDir.open`, its refusal raised as `_CliError`."""
    try:
        return RunDir.open(run_dir, resumable=resumable)
    except RunDirError as exc:
        raise _CliError(str(exc)) from None


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


@app.command("eval")
def eval_cmd(
    task_dir: Annotated[
        Path, typer.Argument(help="Task folder (OpenEvolve or SkyDiscover layout).")
    ],
    program: Annotated[
        Path | None, typer.Argument(help="Program to evaluate (default: initial program).")
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Timeout in seconds.")] = None,
) -> None:
    """Evaluate PROGRAM through the sandbox; print its metrics as one JSON object on stdout."""
    from evoduet_graph.evaluation import SandboxEvaluator
    from evoduet_graph.tasks.environment import check_toolchain, requirements_warning

    try:
        task = (
            load_task(task_dir, program) if program and program.is_file() else load_task(task_dir)
        )
        check_toolchain(task)
    except (TaskError, ToolchainError) as exc:
        _fail(str(exc))
    if program is None and not task.has_initial_program:
        _fail(
            f"task folder {task.path} has no initial program to evaluate; pass one: "
            f"evoduet eval {task_dir} PROGRAM"
        )
    requirements = requirements_warning(task)
    if requirements:
        console.print("[yellow]warning:[/] ", end="")
        console.print(requirements, markup=False, highlight=False)
    try:
        code = program.read_text(encoding="utf-8") if program else task.initial_program
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _fail(f"cannot read the program {program}: {reason}; pass a program file to evaluate")
    outcome = SandboxEvaluator(task, timeout_s=timeout, workers=1).evaluate(code, "eval")
    sys.stdout.write(outcome.model_dump_json() + "\n")
    raise typer.Exit(0 if outcome.valid else 1)


@app.command("report")
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory.")],
    out: Annotated[
        Path | None, typer.Option(help="Write the markdown here too (plot links adjusted).")
    ] = None,
    html: Annotated[
        bool,
        typer.Option("--html", help="Also write RUN_DIR/report/report.html (images inlined)."),
    ] = False,
    plots: Annotated[
        bool, typer.Option("--plots/--no-plots", help="Write PNG plots into RUN_DIR/report/.")
    ] = True,
) -> None:
    """Report a run: PNG plots, report.md (and report.html) in RUN_DIR/report/.

    Print the markdown (scores, gate decisions, queries by Δ, URLs, lineage of the best, LLM usage).
    """
    from evoduet_graph.report.markdown import report_markdown, write_report

    try:
        _check_run_dir(run_dir)
    except _CliError as exc:
        _fail(f"cannot report on {run_dir}: {exc}")
    written: dict[str, Any] = {}
    try:
        if plots or html:
            written = write_report(run_dir, html=html)
            text = written["markdown"]
        else:
            text = report_markdown(run_dir)
    except ImportError as exc:
        _fail(
            f"the report plots need matplotlib ({exc}); pip install matplotlib, or run "
            "`evoduet report --no-plots`"
        )
    except OSError as exc:
        _fail(
            f"cannot write the report into {run_dir / 'report'}: {exc.strerror or exc}; make the "
            "run directory writable, or use --no-plots to print the markdown only"
        )
    if out is not None:
        if written:
            from evoduet_graph.report.markdown import relink

            text_out = relink(text, written["plots"], out.parent)
        else:
            text_out = text
        try:
            out.write_text(text_out, encoding="utf-8")
        except OSError as exc:
            _fail(f"cannot write {out}: {exc.strerror or exc}; choose a writable --out path")
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if written:
        console.print(f"report written to {written['markdown_path'].parent}", highlight=False)
        for path in (written["markdown_path"], written["html_path"], *written["plots"].values()):
            if path is not None:
                console.print(f"  {path}", highlight=False, markup=False)


@app.command("compare")
def compare_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(help="Two or more run directories.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Folder for best.png, ndg.png, compare.md (default runs/compare-*)."),
    ] = None,
) -> None:
    """Compare runs in a table and in overlaid plots.

    Compare runs: print a table (task, gate, best score, NDG, LLM usage) and write overlaid
    best-so-far / NDG vs iteration plots.
    """
    from evoduet_graph.report.compare import compare_runs

    for run_dir in run_dirs:
        try:
            _check_run_dir(run_dir)
        except _CliError as exc:
            _fail(f"cannot compare {run_dir}: {exc}")
    folder = out or Path("runs") / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        result = compare_runs(list(run_dirs), out_dir=folder)
    except ImportError as exc:
        _fail(f"the comparison plots need matplotlib ({exc}); pip install matplotlib")
    except OSError as exc:
        _fail(f"cannot write the comparison into {folder}: {exc.strerror or exc}; pass --out DIR")
    sys.stdout.write(result["markdown"])
    console.print(f"comparison written to {folder}", highlight=False, markup=False)
    for path in (result["markdown_path"], *result["plots"].values()):
        console.print(f"  {path}", highlight=False, markup=False)


class GraphFormat(StrEnum):
    """The ``--format`` of ``evoduet graph``."""

    mermaid = "mermaid"
    png = "png"


class GraphLoop(StrEnum):
    """The ``--loop`` that ``evoduet graph`` draws."""

    outer = "outer"
    inner = "inner"


@app.command("graph")
def graph_cmd(
    xray: Annotated[
        bool, typer.Option("--xray", help="Draw the inner query loop inside `retrieve`.")
    ] = False,
    fmt: Annotated[
        GraphFormat, typer.Option("--format", help="mermaid (text) or png (Graphviz).")
    ] = GraphFormat.mermaid,
    loop: Annotated[GraphLoop, typer.Option(help="Which loop to draw.")] = GraphLoop.outer,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output file (mermaid default: stdout; png default: evoduet_<loop>.png)."
        ),
    ] = None,
) -> None:
    """Draw the LangGraph graphs: Mermaid text, or a PNG rendered locally with Graphviz."""
    from evoduet_graph.graphs.render import GraphRenderError, mermaid, png

    if fmt is GraphFormat.mermaid:
        text = mermaid(loop.value, xray=xray)
        if out is None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            return
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            _fail(f"cannot write {out}: {exc.strerror or exc}; choose a writable --out path")
    else:
        target = out or Path(f"evoduet_{loop.value}{'_xray' if xray else ''}.png")
        try:
            png(target, loop.value, xray=xray)
        except GraphRenderError as exc:
            _fail(str(exc))
        out = target
    console.print(f"wrote {out}", highlight=False, markup=False)


@app.command("bench")
def bench_cmd(
    out: Annotated[Path, typer.Option(help="Output folder (reused to resume).")],
    tasks: Annotated[
        str | None,
        typer.Option(help="Comma-separated task names (in ./tasks) or folders; default: all."),
    ] = None,
    iterations: Annotated[int, typer.Option(help="Iterations per run.")] = 10,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0,1,2",
    model: Annotated[
        str, typer.Option(help="`local` (served by llama.cpp on 127.0.0.1) or `openai:<model>`.")
    ] = "local",
    methods: Annotated[
        str,
        typer.Option(
            help="Comma-separated: evoduet, openevolve-mode, openevolve, evoduet-topk, "
            "evoduet-bestofn, evoduet-evox; a row of the ablation ladder (oracle, "
            "joint-search, stagnation, always, heuristic, rerank, no-query-evolution, "
            "no-search-database, select-relevance-novelty, grounding-offline, "
            "grounding-online, parallel-8); or a config: a YAML path or a file stem in "
            "configs/ (e.g. always_retrieve, scaffold_evox)."
        ),
    ] = "evoduet,openevolve-mode,openevolve",
    config: Annotated[
        Path | None, typer.Option(help="Base YAML config of our methods (and llm settings).")
    ] = None,
    openevolve_version: Annotated[
        str | None, typer.Option(help="OpenEvolve release to install (default: pinned).")
    ] = None,
    openevolve_venv: Annotated[
        Path | None, typer.Option(help="OpenEvolve's virtual environment (default: cache).")
    ] = None,
    openevolve_timeout: Annotated[
        float | None, typer.Option(help="Wall limit (s) of one OpenEvolve process.")
    ] = None,
) -> None:
    """Run every (task, method, seed), resumably; write results.csv, summary.md and plots."""
    import signal

    from evoduet_graph.bench import BenchError, BenchSettings, resolve_tasks, run_bench
    from evoduet_graph.bench.runner import parse_list

    def _terminate(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the bench like Ctrl-C: children are killed

    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread
        previous = None
    try:
        try:
            seed_list = [int(s) for s in parse_list(seeds)]
        except ValueError:
            raise BenchError(
                f"--seeds {seeds!r}: expected comma-separated integers, e.g. --seeds 0,1,2"
            ) from None
        settings = BenchSettings(
            tasks=resolve_tasks(parse_list(tasks) or None),
            out=out,
            methods=parse_list(methods),
            seeds=seed_list,
            iterations=iterations,
            model=model,
            config=load_config(config),
            openevolve_version=openevolve_version,
            openevolve_venv=openevolve_venv,
            openevolve_timeout_s=openevolve_timeout,
        )
        start = time.perf_counter()
        result = run_bench(settings, log=lambda msg: console.print(msg, markup=False))
    except (ValueError, UserError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: run the same command again to resume")
        raise typer.Exit(130) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    console.print(
        f"[bold green]bench done[/] in {time.perf_counter() - start:.1f} s: "
        f"{len(result.ran)} run, {len(result.skipped)} skipped, {len(result.failed)} failed"
    )
    for path in (result.results_csv, result.runs_csv, result.summary_md, *result.plots):
        console.print(f"  {path}")
    if result.summary_md is not None:
        sys.stdout.write(result.summary_md.read_text(encoding="utf-8"))
    if result.failed:
        raise typer.Exit(1)


def main() -> None:
    """Entry point of the ``evoduet`` console script."""
    app()


if __name__ == "__main__":
    main()

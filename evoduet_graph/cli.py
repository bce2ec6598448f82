"""The ``evoduet`` command: ``run``, ``resume``, ``eval`` and ``report`` (typer + rich)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Self

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evoduet_graph.api import RunError, RunResult
from evoduet_graph.config import ConfigError, load_config
from evoduet_graph.task import Task, TaskError, load_task

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="EvoDuet: evolutionary program search with co-evolving search queries.",
)
console = Console(stderr=True)

_USER_ERRORS: tuple[type[Exception], ...] = (TaskError, ConfigError, RunError)


def _user_errors() -> tuple[type[Exception], ...]:
    from evoduet_graph.llm import LLMConfigError, LocalModelError

    return (*_USER_ERRORS, LLMConfigError, LocalModelError)


class ProgressDisplay:
    """Live progress: iteration bar, gate decision, best score, NDG, elapsed time."""

    def __init__(self, task: Task, total: int, quiet: bool) -> None:
        self.task = task
        self.quiet = quiet
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            disable=quiet,
        )
        self.bar = self.progress.add_task(task.name, total=total, status="")
        self.best: float | None = None
        self.decision = ""
        self.node = ""
        self.iteration = 0

    def _status(self) -> str:
        parts = [f"node={self.node}"]
        if self.decision:
            parts.append(f"gate={self.decision}")
        if self.best is not None:
            parts.append(f"best={self.best:.6g}")
            ndg = self._ndg()
            if ndg is not None:
                parts.append(f"NDG={ndg:.1f}%")
        return "  ".join(parts)

    def _ndg(self) -> float | None:
        if self.task.metric == "combined_score" and self.best is not None:
            return self.task.ndg(self.best)
        return None

    def __call__(self, node: str, update: dict[str, Any]) -> None:
        self.node = node
        if update.get("gate_decision"):
            self.decision = update["gate_decision"]
        if update.get("best_score") is not None:
            self.best = update["best_score"]
        if node == "select":
            self.iteration = update.get("iteration", self.iteration)
        if node == "record":
            self.progress.update(self.bar, completed=self.iteration)
        self.progress.update(self.bar, status=self._status())

    def __enter__(self) -> Self:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]


def _summary(result: RunResult, elapsed: float) -> None:
    console.print(f"[bold green]done[/] in {elapsed:.1f} s — run directory: {result.run_dir}")
    console.print(f"  iterations: {result.iterations}   best score: {result.best_score}")
    if result.metric_value is not None:
        console.print(f"  metric value: {result.metric_value}")
    if result.ndg is not None:
        console.print(f"  NDG: {result.ndg:.2f}%")
    if result.stop_reason:
        console.print(f"[yellow]stopped early:[/] {result.stop_reason}")


def _run_with_display(fn: Any, shown: Task, total: int, quiet: bool, **kwargs: Any) -> None:
    start = time.perf_counter()
    try:
        with ProgressDisplay(shown, total, quiet) as display:
            result = fn(progress=display, **kwargs)
    except _user_errors() as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: resume with `evoduet resume <run_dir>`")
        raise typer.Exit(130) from None
    _summary(result, time.perf_counter() - start)


@app.command("run")
def run_cmd(
    task_dir: Annotated[Path, typer.Argument(help="OpenEvolve task folder.")],
    iterations: Annotated[int | None, typer.Option(help="Outer-loop iterations.")] = None,
    candidates: Annotated[int | None, typer.Option(help="Candidates per iteration (N).")] = None,
    model: Annotated[
        str | None, typer.Option(help="`local` (embedded) or `openai:<model>`.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    gate: Annotated[
        str | None, typer.Option(help="Gate mode: never|always|llm|heuristic|stagnation.")
    ] = None,
    backend: Annotated[
        str | None, typer.Option(help="Search backend: offline|tavily|none.")
    ] = None,
    corpus: Annotated[
        list[Path] | None,
        typer.Option(help="Extra offline corpus folder (.md/.txt/.html/.pdf); repeatable."),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/...).")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file.")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress display.")] = False,
) -> None:
    """Run an evolutionary search on TASK_DIR and write a run directory."""
    from evoduet_graph.api import run

    try:
        task = load_task(task_dir)
        cfg = load_config(config).with_overrides(
            {
                "iterations": iterations,
                "candidates": candidates,
                "llm.model": model,
                "seed": seed,
                "gate.mode": gate,
                "retrieval.backend": backend,
                "retrieval.corpus": [str(p.resolve()) for p in corpus] if corpus else None,
            }
        )
    except _USER_ERRORS as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    for warning in task.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    _run_with_display(run, task, cfg.iterations, quiet, task=task, config=cfg, run_dir=out)


@app.command("resume")
def resume_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory of a killed or finished run.")],
    iterations: Annotated[
        int | None, typer.Option(help="New total iteration count (default: unchanged).")
    ] = None,
    quiet: Annotated[bool, typer.Option(help="No progress display.")] = False,
) -> None:
    """Continue a run from its last checkpoint with the same configuration."""
    from evoduet_graph.api import RUN_FILE, resume

    try:
        meta = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
        task = load_task(meta["task_dir"])
        total = iterations or load_config(run_dir / "config.yaml").iterations
    except (OSError, ValueError, KeyError) as exc:
        console.print(f"[bold red]error:[/] cannot resume {run_dir}: {exc}")
        raise typer.Exit(2) from None
    _run_with_display(resume, task, total, quiet, run_dir=run_dir, iterations=iterations)


@app.command("eval")
def eval_cmd(
    task_dir: Annotated[Path, typer.Argument(help="OpenEvolve task folder.")],
    program: Annotated[
        Path | None, typer.Argument(help="Program to evaluate (default: initial program).")
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Timeout in seconds.")] = None,
) -> None:
    """Evaluate PROGRAM through the sandbox; print its metrics as one JSON object on stdout."""
    from evoduet_graph.evaluation import SandboxEvaluator

    try:
        task = load_task(task_dir)
        code = program.read_text(encoding="utf-8") if program else task.initial_program
    except (TaskError, OSError) as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    outcome = SandboxEvaluator(task, timeout_s=timeout, workers=1).evaluate(code, "eval")
    sys.stdout.write(outcome.model_dump_json() + "\n")
    raise typer.Exit(0 if outcome.valid else 1)


@app.command("report")
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="Run directory.")],
    out: Annotated[Path | None, typer.Option(help="Write the markdown here too.")] = None,
) -> None:
    """Print a markdown report of a run: decisions, queries, URLs, scores, LLM usage."""
    from evoduet_graph.report import report_markdown

    try:
        text = report_markdown(run_dir)
    except FileNotFoundError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    if out is not None:
        out.write_text(text, encoding="utf-8")
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


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
        str, typer.Option(help="Comma-separated: evoduet, openevolve-mode, openevolve.")
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
    from evoduet_graph.bench import BenchError, BenchSettings, resolve_tasks, run_bench
    from evoduet_graph.bench.runner import parse_list

    try:
        seed_list = [int(s) for s in parse_list(seeds)]
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
    except ValueError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    except (BenchError, *_user_errors()) as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: run the same command again to resume")
        raise typer.Exit(130) from None
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

"""``evoduet eval``: evaluate one program through the sandbox and print its metrics."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from evoduet_graph.cli.common import (
    TaskDirArg,
    _fail,
    app,
    console,
)
from evoduet_graph.evaluation import SandboxEvaluator
from evoduet_graph.task import TaskError, load_task
from evoduet_graph.tasks.environment import check_toolchain, requirements_warning
from evoduet_graph.tasks.languages import ToolchainError


@app.command("eval")
def eval_cmd(
    task_dir: TaskDirArg,
    program: Annotated[
        Path | None,
        typer.Argument(help="Program file or folder to evaluate (default: initial program)."),
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Timeout in seconds.")] = None,
) -> None:
    """Evaluate PROGRAM through the sandbox; print its metrics as one JSON object on stdout."""
    try:
        task = (
            load_task(task_dir, program)
            if program and (program.is_file() or program.is_dir())
            else load_task(task_dir)
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
        code = (
            program.read_text(encoding="utf-8")
            if program and not task.is_folder
            else task.initial_program  # a folder PROGRAM was packed by load_task
        )
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _fail(f"cannot read the program {program}: {reason}; pass a program file to evaluate")
    outcome = SandboxEvaluator(task, timeout_s=timeout, workers=1).evaluate(code, "eval")
    sys.stdout.write(outcome.model_dump_json() + "\n")
    raise typer.Exit(0 if outcome.valid else 1)

"""What every ``evoduet`` command shares: the typer app, the stderr console, one-line errors.

The options more than one command takes are declared here once (``TaskDirArg``, ``QuietOpt``,
``JsonLinesOpt``), so they read the same in every command's ``--help``.

A user error (`evoduet_graph.errors.UserError`) is printed as one ``error:`` line on stderr and
exits with code 2 (`_fail`); `_check_run_dir` turns a refused run directory into one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from evoduet_graph.errors import UserError
from evoduet_graph.rundir.rundir import RunDir, RunDirError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="EvoDuet: evolutionary program search with co-evolving search queries.",
)
console = Console(stderr=True, emoji=False)  # ":x:" in a message is text, not an emoji

TaskDirArg = Annotated[Path, typer.Argument(help="Task folder (OpenEvolve or SkyDiscover layout).")]
"""The ``TASK_DIR`` argument (``run``, ``eval``)."""

QuietOpt = Annotated[bool, typer.Option(help="No progress display.")]
"""``--quiet`` of the commands that show a run's progress (``run``, ``resume``)."""

JsonLinesOpt = Annotated[
    bool, typer.Option("--json", help="Progress events as JSON lines on stdout.")
]
"""``--json`` of the commands that show a run's progress (``run``, ``resume``)."""

_USER_ERRORS: tuple[type[Exception], ...] = (UserError,)
"""What the user can fix: one line on stderr and exit code 2 (`evoduet_graph.errors`)."""


def _user_errors() -> tuple[type[Exception], ...]:
    return _USER_ERRORS


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

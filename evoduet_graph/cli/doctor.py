"""``evoduet doctor``: can this machine run the embedded model and the sandbox?

The report (one line per check, with the command that fixes it) goes to stdout, or the findings
as one JSON object with ``--json``; a spinner on stderr while the checks run. Exit code 1 when
a check fails, 0 otherwise (warnings included). The checks are `evoduet_graph.doctor`'s.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from evoduet_graph import doctor as checks
from evoduet_graph.cli.common import app, console
from evoduet_graph.doctor import Finding

_STYLES = {"OK": "bold green", "WARN": "bold yellow", "FAIL": "bold red"}


def _render(findings: Sequence[Finding], out: Console) -> None:
    """One line per finding (status, check, what was found), its fix on the next.

    Lines are not broken (``soft_wrap``): paths and commands stay whole for copying.
    """
    width = max(len(f.name) for f in findings)
    for f in findings:
        line = Text(f"{f.status:<4}", style=_STYLES[f.status])
        line.append(f"  {f.name:<{width}}  ", style="bold")
        line.append(f.detail)
        out.print(line, soft_wrap=True)
        if f.fix:
            fix = Text(" " * (width + 8) + "fix: ", style="bold")
            fix.append(f.fix)
            out.print(fix, soft_wrap=True)
    counts = {s: sum(1 for f in findings if f.status == s) for s in _STYLES}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    verdict = "this machine cannot run EvoDuet as it is" if counts["FAIL"] else "ready"
    out.print(f"{summary}: {verdict}", highlight=False, markup=False, soft_wrap=True)


@app.command("doctor")
def doctor_cmd(
    quick: Annotated[
        bool,
        typer.Option(
            "--quick", help="Skip the model file's sha256 and the runtime probe (the slow checks)."
        ),
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="The findings as one JSON object on stdout.")
    ] = False,
) -> None:
    """Check whether this machine can run the embedded model and the sandbox; writes nothing.

    Checks the model runtime (a few tokens decoded in a child process), the model file, the
    sandbox (bubblewrap), the search index cache, disk and memory, and prints OK / WARN / FAIL
    with the command that fixes each. Exit code 1 when a check fails.
    """
    with console.status("checking the model runtime, the model file and the sandbox ..."):
        findings = checks.run_checks(quick=quick)
    code = checks.exit_code(findings)
    if json_out:
        payload = {"ok": code == 0, "findings": [f.as_dict() for f in findings]}
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        _render(findings, Console(emoji=False))
    raise typer.Exit(code)

"""``evoduet report`` and ``evoduet compare``: the report of a run, several runs side by side."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from evoduet_graph.cli.common import (
    _check_run_dir,
    _CliError,
    _fail,
    app,
    console,
)
from evoduet_graph.report.compare import compare_runs
from evoduet_graph.report.markdown import relink, report_markdown, write_report


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
        text_out = relink(text, written["plots"], out.parent) if written else text
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

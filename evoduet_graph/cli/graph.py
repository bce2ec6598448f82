"""``evoduet graph``: draw the outer or inner loop as Mermaid text or a PNG (Graphviz)."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from evoduet_graph.cli.common import (
    _fail,
    app,
    console,
)
from evoduet_graph.graphs.render import GraphRenderError, mermaid, png


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
        bool, typer.Option("--xray", help="Draw the inner query loop inside `query_evolution`.")
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

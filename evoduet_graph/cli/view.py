"""``evoduet view``: serve the live page of run directories (docs/view.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoduet_graph.cli.common import _fail, app, console
from evoduet_graph.view.app import bind, make_server, url_of
from evoduet_graph.view.data import Catalogue, ViewError

HostOpt = Annotated[
    str,
    typer.Option(help="Address to listen on (127.0.0.1: this machine only)."),
]
"""``--host`` of ``view`` and ``run --view``."""


@app.command("view")
def view_cmd(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(help="Run directories, or a bench output folder (compare mode)."),
    ],
    port: Annotated[int, typer.Option(help="Port (0: a free one).")] = 8765,
    host: HostOpt = "127.0.0.1",
) -> None:
    """Serve a live page of runs: evolution tree, knowledge timeline, curves, compare mode.

    The page updates while a run goes; it reads the run directories and never writes them.
    Its data is also served as JSON (docs/view.md). Stop it with Ctrl-C.
    """
    try:
        catalogue = Catalogue(list(run_dirs))
    except ViewError as exc:
        _fail(f"cannot view: {exc}")
    try:
        sock = bind(host, port)
    except OSError as exc:
        _fail(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; pass another --port "
            "(0 picks a free one)"
        )
    runs = ", ".join(s.label for s in catalogue.sources)
    console.print(f"evoduet view of {runs}", markup=False, highlight=False)
    # the address on stdout, alone on its line, for scripts (and the tests) to read
    typer.echo(f"serving on {url_of(sock)}")
    try:
        make_server(catalogue).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn handles SIGINT itself; a second one lands here
        pass
    finally:
        sock.close()

"""The ``evoduet`` command (typer + rich), one module per command group.

`evoduet_graph.cli.common` holds the typer ``app`` every command registers on, the stderr
console and the one-line errors; ``run`` / ``resume`` live in `evoduet_graph.cli.run`, ``eval``
in `evoduet_graph.cli.evaluate`, ``report`` / ``compare`` in `evoduet_graph.cli.report`, ``view`` in
`evoduet_graph.cli.view`,
``graph`` in `evoduet_graph.cli.graph`, ``bench`` in `evoduet_graph.cli.bench` and ``doctor``
in `evoduet_graph.cli.doctor`. `main` is the ``evoduet`` console script; ``python -m
evoduet_graph.cli`` runs it too.
"""

from __future__ import annotations

from evoduet_graph.cli.common import app

# The command modules register their commands on `app` when imported, in the order
# ``evoduet --help`` lists them.
# isort: off
from evoduet_graph.cli import run, evaluate, report, view, graph, bench, doctor  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``evoduet`` console script."""
    app()

"""Pictures of the two loops: Mermaid text and PNG (``evoduet graph``).

`mermaid` is LangGraph's own ``get_graph(xray=...).draw_mermaid()``. `png` renders the same
graph with Graphviz through ``get_graph().draw_png()`` — it needs `pygraphviz`, whose wheels
on PyPI bundle Graphviz itself, so it works offline with no system package and no browser
(LangGraph's ``draw_mermaid_png`` would need the mermaid.ink web service or a Chromium
download).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from evoduet_graph.errors import UserError
from evoduet_graph.graphs.inner import build_inner_graph
from evoduet_graph.graphs.outer import build_outer_graph

__all__ = ["GraphRenderError", "drawable", "mermaid", "png"]

Loop = Literal["outer", "inner"]


class GraphRenderError(UserError, RuntimeError):
    """A picture cannot be made here (e.g. pygraphviz is not installed); says what to do."""


def drawable(loop: Loop = "outer", *, xray: bool = False) -> Any:
    """LangGraph's drawable graph (``langchain_core.runnables.graph.Graph``) of a loop.

    Args:
        loop: ``outer`` (the solution loop; with ``xray`` the inner query-evolution loop is
            drawn inside ``query_evolution``) or ``inner`` (the query-evolution loop alone).
        xray: expand subgraphs.
    """
    if loop == "inner":
        return build_inner_graph().compile(name="query_evolution").get_graph(xray=xray)
    return build_outer_graph().compile(name="evoduet").get_graph(xray=xray)


def mermaid(loop: Loop = "outer", *, xray: bool = False) -> str:
    """Mermaid flowchart text of a loop (what docs/graphs.md shows)."""
    return str(drawable(loop, xray=xray).draw_mermaid())


def png(path: str | Path, loop: Loop = "outer", *, xray: bool = False) -> Path:
    """Render a loop to a PNG file with Graphviz (pygraphviz); returns the path.

    Raises:
        GraphRenderError: pygraphviz is not installed, or Graphviz failed.
    """
    try:
        import pygraphviz  # noqa: F401 - optional (the `dev` extra): PNG drawing only
    except ImportError:
        raise GraphRenderError(
            "--format png needs pygraphviz (its wheels include Graphviz): "
            "pip install pygraphviz, or pip install 'evoduet-graph[dev]'; "
            "or use --format mermaid"
        ) from None
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        drawable(loop, xray=xray).draw_png(str(out))
    except Exception as exc:  # noqa: BLE001 - Graphviz reports layout/IO errors broadly
        raise GraphRenderError(f"Graphviz could not render {out}: {exc}") from None
    return out

"""``evoduet view``: a live page of one or more run directories in the browser.

What OpenEvolve's visualizer shows (the evolution tree, each program's code, diff and prompts),
plus what only EvoDuet has: the gate's decisions and reasoning, the evolved queries, the
documents with their predicted scores and the realised Δ (docs/view.md).

`evoduet_graph.view.data` reads a run directory (never writing it) into the JSON the page
draws; `evoduet_graph.view.app` serves that JSON and the page's own static files (no CDN: every
asset ships in the package); `evoduet_graph.view.beside` runs ``evoduet view`` in its own
process beside a run (``evoduet run --view``). The page and its endpoints: docs/view.md.
"""

from __future__ import annotations

from evoduet_graph.view.app import make_app, make_server
from evoduet_graph.view.data import Catalogue, RunSource, ViewError

__all__ = ["Catalogue", "RunSource", "ViewError", "make_app", "make_server"]

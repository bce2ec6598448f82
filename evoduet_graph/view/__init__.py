"""``evoduet view``: a live page of one or more run directories in the browser.

`evoduet_graph.view.data` reads a run directory (never writing it) into the JSON the page
draws; `evoduet_graph.view.app` serves that JSON and the page's own static files (no CDN: every
asset ships in the package). The page and its endpoints: docs/view.md.
"""

from __future__ import annotations

from evoduet_graph.view.app import make_app, make_server
from evoduet_graph.view.data import Catalogue, RunSource, ViewError, sources_for

__all__ = ["Catalogue", "RunSource", "ViewError", "make_app", "make_server", "sources_for"]

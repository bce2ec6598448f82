"""The Starlette app behind ``evoduet view`` and ``evoduet run --view`` (docs/view.md).

Routes: ``/`` (the page), ``/static/...`` (its script and style, shipped in the package),
and the JSON endpoints:

* ``GET /api/runs`` — every run shown: label, version, task, iterations, best, notices;
* ``GET /api/runs/{n}/summary`` — the report's run summary;
* ``GET /api/runs/{n}/programs`` — the evolution tree (one compact node per program);
* ``GET /api/runs/{n}/programs/{id}`` — one program: code, diff, metrics, prompt and reply;
* ``GET /api/runs/{n}/timeline`` — the knowledge timeline, one entry per iteration;
* ``GET /api/runs/{n}/curves`` — best-so-far, NDG, predicted vs realised, LLM use per node;
* ``GET /api/compare`` — every run's comparison row and its best / NDG series.

``n`` is the run's index in ``/api/runs``. Endpoints read the run directories on each call
(cached by the files' version, `evoduet_graph.view.data.RunSource`) and never write them;
they run in Starlette's thread pool, so a slow read does not block the server.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from evoduet_graph.rundir.events import _jsonable
from evoduet_graph.view.data import Catalogue, RunSource

STATIC = Path(__file__).parent / "static"
"""The page's files: ``index.html``, ``view.js``, ``view.css`` (package data)."""


class _Json(JSONResponse):
    """JSON with every non-finite float (a NaN metric, an infinite Δ) as null.

    Starlette refuses NaN (``allow_nan=False``), and a browser's ``JSON.parse`` could not read it.
    """

    def render(self, content: Any) -> bytes:
        return super().render(_jsonable(content))


def _error(status: int, message: str) -> JSONResponse:
    return _Json({"error": message}, status_code=status)


def make_app(catalogue: Catalogue | list[RunSource]) -> Starlette:
    """The app serving a catalogue of runs (one run, several runs, or bench folders' runs).

    A plain list of `RunSource` is served as it is (nothing is added later).
    """

    def runs_now() -> list[RunSource]:
        return catalogue.refresh() if isinstance(catalogue, Catalogue) else list(catalogue)

    def source(request: Request) -> RunSource | JSONResponse:
        raw = request.path_params["run"]
        sources = runs_now()
        if not raw.isdigit() or int(raw) >= len(sources):
            return _error(404, f"no run {raw!r}: /api/runs lists runs 0..{len(sources) - 1}")
        return sources[int(raw)]

    def part(name: str) -> Any:
        def endpoint(request: Request) -> JSONResponse:
            src = source(request)
            if isinstance(src, JSONResponse):
                return src
            return _Json(getattr(src, name)())

        return endpoint

    def index(_request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    def runs(_request: Request) -> JSONResponse:
        return _Json({"runs": [{"id": i, **s.overview()} for i, s in enumerate(runs_now())]})

    def program(request: Request) -> JSONResponse:
        src = source(request)
        if isinstance(src, JSONResponse):
            return src
        pid = request.path_params["pid"]
        try:
            return _Json(src.program(pid))
        except KeyError:
            return _error(404, f"no program {pid!r} in {src.label}")

    def compare(_request: Request) -> JSONResponse:
        return _Json(
            {"runs": [{"id": i, "label": s.label, **s.compare()} for i, s in enumerate(runs_now())]}
        )

    routes = [
        Route("/", index),
        Route("/api/runs", runs),
        Route("/api/compare", compare),
        Route("/api/runs/{run}/summary", part("summary")),
        Route("/api/runs/{run}/programs", part("programs")),
        Route("/api/runs/{run}/programs/{pid}", program),
        Route("/api/runs/{run}/timeline", part("timeline")),
        Route("/api/runs/{run}/curves", part("curves")),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``port`` 0: a free port, read back from it).

    Raises:
        OSError: the address is taken or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """The page's address for a socket from `bind`."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def make_server(catalogue: Catalogue | list[RunSource]) -> uvicorn.Server:
    """A uvicorn server of `make_app` (quiet: warnings only; no access log)."""
    config = uvicorn.Config(
        make_app(catalogue), log_level="warning", access_log=False, lifespan="off"
    )
    return uvicorn.Server(config)

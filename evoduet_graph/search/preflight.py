"""Startup checks shared by the search backends: package, key, reachable URL (docs/design.md §4).

Each check raises `SearchUnavailableError` with one line that says what to install, set or
start; a run that can retrieve calls its backend's ``preflight`` before the first iteration.
"""

from __future__ import annotations

import importlib.util
import os
import urllib.error
import urllib.request
from collections.abc import Callable

from evoduet_graph.search.base import SearchUnavailableError

PROBE_TIMEOUT_S = 5.0
"""Seconds the reachability probe waits for an answer."""


def require_package(module: str, *, backend: str, extra: str) -> None:
    """Raise unless ``module`` is importable.

    Raises:
        SearchUnavailableError: ``<backend> needs the Python package <module>: pip install
            'evoduet-graph[<extra>]'``.
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise SearchUnavailableError(
            f"backend {backend!r} needs the Python package {module!r}: "
            f"pip install 'evoduet-graph[{extra}]'"
        )


def require_key(env: str, *, backend: str) -> str:
    """The value of ``$env``.

    Raises:
        SearchUnavailableError: the variable is unset or empty.
    """
    value = os.environ.get(env, "").strip()
    if not value:
        raise SearchUnavailableError(
            f"backend {backend!r} needs an API key: {env} is not set; set it or pick another "
            "retrieval.backend"
        )
    return value


def require_reachable(url: str, *, backend: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise unless an HTTP request to ``url`` gets any answer within ``timeout_s``.

    Any HTTP status counts as reachable (an API root often answers 4xx to a bare GET; the key
    is checked by the first search); only a connection failure or a timeout fails.

    Raises:
        SearchUnavailableError: ``<backend>: cannot reach <url> (<reason>)``.
    """
    if not url.startswith(("http://", "https://")):
        raise SearchUnavailableError(
            f"backend {backend!r}: {url!r} is not an http(s) URL; give the instance's address, "
            "e.g. http://localhost:8888"
        )
    request = urllib.request.Request(url, method="GET", headers={"User-Agent": "evoduet-graph"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SearchUnavailableError(
            f"backend {backend!r} cannot reach {url} ({reason}); check the network or the "
            "URL, or pick another retrieval.backend"
        ) from None


def backend_checks(
    backend: str, *, package: str, url: str, key_env: str | None = None
) -> list[Callable[[], object]]:
    """The usual preflight of a web backend, in order: package, key (if any), reachable URL.

    Args:
        backend: the backend name (the extra is named after it).
        package: the module the backend imports.
        url: the URL the reachability probe asks.
        key_env: the environment variable holding the API key, None for a keyless backend.

    Returns:
        The checks, for `LangChainSearcher`'s ``checks``.
    """
    checks: list[Callable[[], object]] = [
        lambda: require_package(package, backend=backend, extra=backend)
    ]
    if key_env is not None:
        checks.append(lambda: require_key(key_env, backend=backend))
    checks.append(lambda: require_reachable(url, backend=backend))
    return checks

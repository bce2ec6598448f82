"""The project's exception base: every error the package raises on purpose derives from
`EvoDuetError`.

`UserError` is the branch for what the user can fix (a bad task folder, configuration, run
directory or plugin spec): the CLI prints its one-line message and exits with code 2. Other
`EvoDuetError` subclasses are the run's own failures (a model that cannot be reached, a broken
sandbox). Each subclass keeps the built-in base it had before (``ValueError``,
``RuntimeError``, ``LookupError``), so existing ``except ValueError`` handlers still catch it.
"""

from __future__ import annotations

__all__ = ["EvoDuetError", "RunError", "UserError"]


class EvoDuetError(Exception):
    """Base of every exception the package raises on purpose."""


class UserError(EvoDuetError):
    """Something the user can fix; the CLI prints the message and exits with code 2."""


class RunError(UserError, RuntimeError):
    """A run cannot start or resume (bad run directory, unavailable backend, ...)."""

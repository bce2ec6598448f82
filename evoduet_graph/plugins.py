"""Load a user's object from a ``<module>:<attribute>`` spec (one home for plugin imports).

Used by the ``langchain:<module>:<factory>`` search backend and by ``novelty.embeddings``; the
attribute is an object or a factory called with no arguments.
"""

from __future__ import annotations

import importlib
import keyword
from typing import Any

from evoduet_graph.errors import UserError


class PluginError(UserError, ValueError):
    """A plugin spec is malformed, does not import, or its factory fails."""


def import_attribute(spec: str, *, what: str, example: str) -> Any:
    """The attribute ``spec`` (``package.module:attribute``) names, imported.

    Args:
        spec: ``<module>:<attribute>``; the module is imported from ``sys.path`` (the working
            directory included when Python was started there).
        what: the setting the spec comes from, for the error message (e.g. ``retrieval.backend``).
        example: a well-formed spec shown in the error message.

    Returns:
        The attribute itself (not called).

    Raises:
        PluginError: a malformed spec or a failed import, one line naming ``what``.
    """
    module_name, sep, attr = spec.partition(":")
    parts = [*module_name.split("."), attr]
    if not sep or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        raise PluginError(f"{what}={spec!r}: use <module>:<attribute>, e.g. {example}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"{what}={spec!r} does not import: {type(exc).__name__}: {exc}") from None


def build_plugin(
    target: Any,
    *,
    kinds: tuple[type, ...],
    what: str,
    spec: str,
    label: str | None = None,
    error: type[Exception] = PluginError,
) -> Any:
    """``target`` when it is an instance of one of ``kinds``, else ``target()``, checked.

    Args:
        target: the imported attribute (an instance or a no-argument factory).
        kinds: the accepted types.
        what: the setting the spec comes from, for the error message.
        spec: the spec as written, for the error message.
        label: how the message names ``kinds`` (default: their class names).
        error: the exception class raised (the caller's own configuration error).

    Returns:
        The instance, checked to be one of ``kinds``.

    Raises:
        PluginError: (or ``error``) the factory raised, or returned none of ``kinds``.
    """
    names = label or _names(kinds)
    if isinstance(target, kinds):
        return target
    if not callable(target):
        raise error(f"{what}={spec!r} is neither {names} nor a factory of one")
    try:
        result = target()
    except Exception as exc:  # noqa: BLE001 - any factory failure is a configuration error
        raise error(f"{what}={spec!r}: the factory failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(result, kinds):
        raise error(f"{what}={spec!r} returned {type(result).__name__}, not {names}")
    return result


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in kinds)

"""One exception base for every error the package raises on purpose.

One exception base: every error the package raises on purpose is an `EvoDuetError`, and
what the user can fix is a `UserError`, which the CLI turns into one line and exit code 2.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from typer.testing import CliRunner

import evoduet_graph
from evoduet_graph.errors import EvoDuetError, UserError
from tests.conftest import SMOKE_TASK

# the sandbox's child-process script imports nothing from the package, on purpose
STANDALONE = {"evoduet_graph.evaluation.runner"}


def _package_exceptions() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(evoduet_graph.__path__, "evoduet_graph."):
        if info.name in STANDALONE:
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and not obj.__name__.startswith("_")
            ):
                found.append(obj)
    return found


def test_every_package_exception_derives_from_the_one_base() -> None:
    classes = _package_exceptions()
    assert len(classes) >= 20
    stray = [f"{c.__module__}.{c.__name__}" for c in classes if not issubclass(c, EvoDuetError)]
    assert stray == []


@pytest.mark.parametrize(
    "name",
    ["TaskError", "ConfigError", "RunError", "LLMConfigError", "DocumentSetError", "PluginError"],
)
def test_user_fixable_errors_are_user_errors(name: str) -> None:
    by_name = {c.__name__: c for c in _package_exceptions()}
    assert issubclass(by_name[name], UserError)


def test_the_cli_turns_a_user_error_into_exit_code_2(monkeypatch) -> None:
    from evoduet_graph import api
    from evoduet_graph.cli import app
    from evoduet_graph.plugins import PluginError

    def broken(*_args, **_kwargs):
        raise PluginError("langchain:nope:make does not import")

    monkeypatch.setattr(api, "run", broken)
    result = CliRunner().invoke(app, ["run", str(SMOKE_TASK), "--iterations", "1", "--quiet"])
    assert result.exit_code == 2, result.output
    assert "langchain:nope:make does not import" in result.output

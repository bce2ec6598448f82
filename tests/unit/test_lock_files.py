"""The lock files are what pyproject.toml asks for, and what this environment runs.

``make run`` installs ``requirements/run.lock`` and ``make test`` / ``.ci/run``
``requirements/dev.lock`` (``make lock`` regenerates both from pyproject.toml's ranges).
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

LOCKS = {
    "run.lock": ("local", "build"),
    "dev.lock": ("local", "bench", "build", "dev", "ray"),
}


def _pins(name: str) -> dict[str, tuple[str, Requirement]]:
    """``canonical name -> (version, requirement line)`` of a lock file."""
    pins = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        if not line or line[0] in " #-":
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", line
        pins[canonicalize_name(req.name)] = (spec.version, req)
    return pins


def _asked(extras: tuple[str, ...]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_requirement_of_pyproject_is_pinned_within_its_range(lock):
    pins = _pins(lock)
    wrong = []
    for req in _asked(LOCKS[lock]):
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None:
            wrong.append(f"{req}: not in requirements/{lock}")
        elif not req.specifier.contains(pinned[0], prereleases=True):
            wrong.append(f"{req}: requirements/{lock} pins {pinned[0]}")
    assert not wrong, "pyproject.toml and the lock disagree; run `make lock`:\n" + "\n".join(wrong)


def test_the_run_lock_is_the_dev_lock_at_the_same_versions():
    dev = _pins("dev.lock")
    differ = {
        name: (version, dev.get(name, ("missing",))[0])
        for name, (version, _) in _pins("run.lock").items()
        if dev.get(name, ("missing",))[0] != version
    }
    assert not differ, f"run.lock vs dev.lock: {differ}; run `make lock`"


def test_this_environment_runs_the_locked_versions():
    """What the suite runs is what `make run` and `make test` install."""
    differ = {}
    for name, (version, req) in _pins("dev.lock").items():
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = "missing"
        if canonicalize_name(installed) != canonicalize_name(version):
            differ[name] = (version, installed)
    assert not differ, f"locked vs installed: {differ}; reinstall with `make test`"


def test_the_lock_headers_name_the_command_that_made_them():
    makefile = (ROOT / "Makefile").read_text()
    for name in LOCKS:
        header = (ROOT / "requirements" / name).read_text().splitlines()[1]
        assert "uv pip compile pyproject.toml" in header
        extras = re.findall(r"--extra (\w+)", header)
        assert tuple(sorted(extras)) == tuple(sorted(LOCKS[name])), header
    assert "uv pip compile" in makefile

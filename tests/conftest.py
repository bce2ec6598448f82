"""Shared fixtures: bundled task paths, scripted diffs for the smoke task."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SMOKE_TASK = ROOT / "tasks" / "smoke_polygon_area"
CIRCLE_TASK = ROOT / "tasks" / "circle_packing_26"


def load_script(path: Path) -> ModuleType:
    """Import a repository script (``benchmarks/``, ``scripts/``) as a module named by its stem.

    Registered in ``sys.modules`` before it runs, so its dataclasses resolve their own module.
    """
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def diff(search: str, replace: str) -> str:
    """A model answer holding one SEARCH/REPLACE block."""
    return (
        f"Here is my improvement.\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"
    )


RADIUS_UP = diff(
    "    radius = 0.6  # distance of every point from the origin (at most 1.0 is allowed)",
    "    radius = 1.0  # distance of every point from the origin (at most 1.0 is allowed)",
)
SPREAD_UP = diff(
    "    spread = np.pi  # angle covered by the points, in radians (a full turn is 2 * np.pi)",
    "    spread = 2 * np.pi  # full turn",
)
BAD_DIFF = diff("    this line does not exist", "    nor does this one")
GARBAGE = "I am sorry, I cannot help with that. ~~~ {not json} ~~~"
OUT_OF_DISK = diff(
    "    radius = 0.6  # distance of every point from the origin (at most 1.0 is allowed)",
    "    radius = 1.5",
)


@pytest.fixture
def smoke_task_dir() -> Path:
    return SMOKE_TASK


@pytest.fixture
def circle_task_dir() -> Path:
    return CIRCLE_TASK

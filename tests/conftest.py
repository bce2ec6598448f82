"""Shared fixtures: bundled task paths, scripted diffs for the smoke task."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SMOKE_TASK = ROOT / "tasks" / "smoke_polygon_area"
CIRCLE_TASK = ROOT / "tasks" / "circle_packing_26"


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

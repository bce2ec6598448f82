"""NDG (docs/design.md §6): (best - initial) / (reference - initial) * 100 on the task's own scale.

For minimisation numerator and denominator are both negative when the best improves, so the
same formula gives a positive NDG. Not clipped above 100: 0 at the initial program, 100 at the
reference, more than 100 beyond it, negative below the initial program; None when unknown.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from evoduet_graph.task import Task, load_task

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def make_task(**kw: object) -> Task:
    base = {
        "name": "t",
        "path": Path("/tmp/t"),
        "initial_program": "",
        "evaluator_path": Path("/tmp/t/evaluator.py"),
        "instruction": "x",
    }
    return Task.model_validate({**base, **kw})


def expected_ndg(best: float, initial: float, reference: float) -> float:
    return (best - initial) / (reference - initial) * 100.0


# ---------------------------------------------------------------- maximisation


def test_max_anchor_points() -> None:
    task = make_task(direction="max", initial_score=0.5, sota_score=2.5)
    assert task.ndg(0.5) == 0.0
    assert task.ndg(2.5) == 100.0
    assert task.ndg(1.5) == 50.0


def test_max_beyond_reference_is_not_clipped() -> None:
    task = make_task(direction="max", initial_score=0.5, sota_score=2.5)
    assert task.ndg(3.5) == pytest.approx(150.0)
    assert task.ndg(2.5 + 1e-9) > 100.0


def test_max_below_initial_is_negative() -> None:
    task = make_task(direction="max", initial_score=0.5, sota_score=2.5)
    assert task.ndg(0.0) == pytest.approx(-25.0)


# ---------------------------------------------------------------- minimisation


def test_min_anchor_points() -> None:
    # Both numerator and denominator are negative: (200 - 329) / (37 - 329) > 0.
    task = make_task(direction="min", initial_score=329.0, sota_score=37.0)
    assert task.ndg(329.0) == 0.0
    assert task.ndg(37.0) == 100.0
    assert task.ndg(183.0) == pytest.approx(50.0)
    assert task.ndg(200.0) == pytest.approx(expected_ndg(200.0, 329.0, 37.0))
    assert task.ndg(200.0) > 0


def test_min_beyond_reference_is_not_clipped() -> None:
    task = make_task(direction="min", initial_score=329.0, sota_score=37.0)
    assert task.ndg(35.0) == pytest.approx(expected_ndg(35.0, 329.0, 37.0))
    assert task.ndg(35.0) > 100.0


def test_min_worse_than_initial_is_negative() -> None:
    task = make_task(direction="min", initial_score=329.0, sota_score=37.0)
    assert task.ndg(475.0) == pytest.approx(-50.0)


def test_min_with_negative_scale() -> None:
    """Energies below zero (Lennard-Jones): lower is better, the formula is unchanged."""
    task = make_task(direction="min", initial_score=-36.0, sota_score=-44.0)
    assert task.ndg(-36.0) == 0.0
    assert task.ndg(-40.0) == pytest.approx(50.0)
    assert task.ndg(-44.0) == pytest.approx(100.0)
    assert task.ndg(-48.0) == pytest.approx(150.0)
    assert task.ndg(-32.0) == pytest.approx(-50.0)


# ---------------------------------------------------------------- unknown


@pytest.mark.parametrize("direction", ["max", "min"])
@pytest.mark.parametrize(
    ("initial", "reference", "value"),
    [
        (None, 3.0, 1.0),
        (1.0, None, 1.0),
        (None, None, 1.0),
        (2.0, 2.0, 1.0),  # no span: undefined
        (1.0, 3.0, math.nan),
        (1.0, 3.0, math.inf),
    ],
)
def test_unknown_is_none(
    direction: str, initial: float | None, reference: float | None, value: float
) -> None:
    task = make_task(direction=direction, initial_score=initial, sota_score=reference)
    assert task.ndg(value) is None


# ---------------------------------------------------------------- bundled tasks


@pytest.mark.parametrize(
    ("name", "direction", "beyond"),
    [
        ("labs_27", "min", 36.0),
        ("lennard_jones_13", "min", -45.0),
        ("pressure_vessel", "min", 6000.0),
        ("heilbronn_triangle_11", "max", 0.04),
        ("circle_packing_26", "max", 2.7),
        ("lennard_jones_10", "min", -29.0),
        ("heilbronn_triangle_7", "max", 0.1),
        ("circle_packing_10", "max", 1.6),
    ],
)
def test_bundled_task_ndg(name: str, direction: str, beyond: float) -> None:
    task = load_task(TASKS / name)
    assert task.direction == direction
    initial, reference = task.initial_score, task.sota_score
    assert initial is not None and reference is not None
    assert task.ndg(initial) == pytest.approx(0.0, abs=1e-12)
    assert task.ndg(reference) == pytest.approx(100.0)
    halfway = (initial + reference) / 2
    assert task.ndg(halfway) == pytest.approx(50.0)
    assert task.ndg(beyond) == pytest.approx(expected_ndg(beyond, initial, reference))
    assert task.ndg(beyond) > 100.0

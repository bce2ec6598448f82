"""Bundled tasks reproduce their initial score and reject invalid solutions.

Bundled tasks: the initial program reproduces task.yaml's initial_score, and the evaluators
reject invalid solutions (they check the solution themselves, never trusting reported sums).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from evoduet_graph.evaluation import EvaluationOutcome, SandboxEvaluator
from evoduet_graph.task import Task, load_task

TASKS = Path(__file__).resolve().parents[2] / "tasks"
BUNDLED = sorted(p.name for p in TASKS.iterdir() if (p / "evaluator.py").is_file())


# Reduced instances of bundled problems, sized for a 1.5B model on a 2-core CPU (references:
# benchmarks/task_references.py).
SMALL_TASKS = ("lennard_jones_10", "circle_packing_10", "heilbronn_triangle_7")


@pytest.fixture(scope="module")
def circle_task() -> Task:
    return load_task(TASKS / "circle_packing_26")


@pytest.fixture(scope="module")
def smoke_task() -> Task:
    return load_task(TASKS / "smoke_polygon_area")


def test_expected_tasks_are_bundled() -> None:
    assert {"circle_packing_26", "smoke_polygon_area"} <= set(BUNDLED)
    assert set(SMALL_TASKS) <= set(BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_initial_program_reproduces_initial_score(name: str) -> None:
    task = load_task(TASKS / name)
    assert task.initial_score is not None and task.sota_score is not None
    assert task.has_evolve_blocks
    outcome = SandboxEvaluator(task).evaluate(task.initial_program, "initial")
    assert outcome.valid, outcome.error
    value = task.metric_value(outcome.metrics)
    assert value is not None
    assert math.isclose(value, task.initial_score, rel_tol=0, abs_tol=1e-9)
    assert task.ndg(value) == pytest.approx(0.0, abs=1e-6)
    assert outcome.elapsed_s < task.timeout_s


def test_smoke_task_is_fast(smoke_task: Task) -> None:
    outcome = SandboxEvaluator(smoke_task).evaluate(smoke_task.initial_program)
    assert outcome.valid
    assert outcome.elapsed_s < 2.0  # evaluator itself < 0.5 s; the rest is interpreter start-up


# ---------------------------------------------------------------- circle packing

CIRCLE_HEADER = "import numpy as np\n\n"


def circle_program(body: str) -> str:
    """A candidate whose run_packing() returns (centers, radii, reported) built by ``body``."""
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return f"{CIRCLE_HEADER}def run_packing():\n{lines}\n    return centers, radii, reported\n"


# 25 tangent circles of radius 0.1 on a 5x5 grid + a 26th circle of radius 0 in a corner gap.
GRID = """
xs = np.arange(5) * 0.2 + 0.1
centers = np.array([[x, y] for x in xs for y in xs] + [[0.0, 0.0]])
radii = np.array([0.1] * 25 + [0.0])
reported = 100.0
"""


def evaluate_all(task: Task, codes: list[str], **kw: object) -> list[EvaluationOutcome]:
    return SandboxEvaluator(task, workers=2, **kw).evaluate_many(codes)  # type: ignore[arg-type]


def test_circle_valid_packing_is_scored_by_its_true_sum(circle_task: Task) -> None:
    (outcome,) = evaluate_all(circle_task, [circle_program(GRID)])
    assert outcome.valid, outcome.error
    assert outcome.metrics["sum_radii"] == pytest.approx(2.5)  # not the reported 100
    assert outcome.score == pytest.approx(2.5)
    assert outcome.metrics["validity"] == 1.0
    assert outcome.metrics["target_ratio"] == pytest.approx(2.5 / 2.635983)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ("centers[1] = centers[0] + [0.1, 0.0]", "overlap"),
        ("radii[12] += 1e-9", "overlap"),  # interior circle, tangent to 4 others
        ("centers[0] = [0.05, 0.5]", "outside the unit square"),
        ("radii[25] = 0.01", "outside the unit square"),
        ("radii = radii[:25]", "radii must have shape (26,)"),
        ("centers = centers[:, :1]", "centers must have shape (26, 2)"),
        ("centers[3, 0] = np.nan", "NaN"),
        ("radii[4] = np.inf", "NaN or inf"),
        ("radii[25] = -0.01", "negative radius"),
    ],
)
def test_circle_invalid_packings_are_rejected(
    circle_task: Task, change: str, fragment: str
) -> None:
    (outcome,) = evaluate_all(circle_task, [circle_program(GRID + change + "\n")])
    assert not outcome.valid
    assert outcome.score == 0.0
    assert fragment in (outcome.error or ""), outcome.error
    assert outcome.metrics.get("validity") == 0.0


def test_circle_candidate_crash_is_invalid(circle_task: Task) -> None:
    code = CIRCLE_HEADER + "def run_packing():\n    return 1 / 0\n"
    (outcome,) = evaluate_all(circle_task, [code])
    assert not outcome.valid
    assert "ZeroDivisionError" in (outcome.error or "")


def test_circle_cascade(circle_task: Task) -> None:
    good, bad = evaluate_all(
        circle_task,
        [circle_task.initial_program, circle_program(GRID + "radii[0] = 0.5\n")],
        cascade=True,
    )
    assert good.valid and good.stage == 2
    assert good.metrics["sum_radii"] == pytest.approx(circle_task.initial_score, abs=1e-9)
    assert not bad.valid and bad.stage == 1


# ---------------------------------------------------------------- circle_packing_10

CP10_BEST = 1.591013

# 9 tangent circles of radius 1/6 on a 3x3 grid + a 10th circle of radius 0 in a corner gap.
GRID_10 = """
xs = (np.arange(3) + 0.5) / 3
centers = np.array([[x, y] for x in xs for y in xs] + [[0.0, 0.0]])
radii = np.array([1 / 6] * 9 + [0.0])
reported = 100.0
"""


def test_circle_10_valid_packing_is_scored_by_its_true_sum() -> None:
    task = load_task(TASKS / "circle_packing_10")
    (outcome,) = evaluate_all(task, [circle_program(GRID_10)])
    assert outcome.valid, outcome.error
    assert outcome.metrics["sum_radii"] == pytest.approx(1.5)  # not the reported 100
    assert outcome.score == pytest.approx(1.5 / CP10_BEST)  # normalised: 1.0 at the reference
    assert outcome.metrics["target_ratio"] == pytest.approx(1.5 / CP10_BEST)
    initial = task.initial_score
    assert initial is not None and task.sota_score == CP10_BEST
    assert task.ndg(1.5) == pytest.approx((1.5 - initial) / (CP10_BEST - initial) * 100)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ("centers[1] = centers[0] + [0.1, 0.0]", "overlap"),
        ("radii[4] += 1e-9", "overlap"),  # the middle circle, tangent to 4 others
        ("radii[4] += 1e-13", None),  # within the 1e-12 tolerance
        ("centers[0] = [0.1, 0.5]", "outside the unit square"),
        ("radii[9] = 0.01", "outside the unit square"),
        ("radii = radii[:9]", "radii must have shape (10,)"),
        ("centers = np.vstack([centers, [[0.5, 0.5]]])", "centers must have shape (10, 2)"),
        ("centers[3, 0] = np.nan", "NaN"),
        ("radii[4] = np.inf", "NaN or inf"),
        ("radii[9] = -0.01", "negative radius"),
    ],
)
def test_circle_10_invalid_packings_are_rejected(change: str, fragment: str | None) -> None:
    task = load_task(TASKS / "circle_packing_10")
    (outcome,) = evaluate_all(task, [circle_program(GRID_10 + change + "\n")])
    if fragment is None:
        assert outcome.valid, outcome.error
        return
    assert not outcome.valid
    assert outcome.score == 0.0
    assert fragment in (outcome.error or ""), outcome.error
    assert outcome.metrics.get("validity") == 0.0


# ---------------------------------------------------------------- small instances


@pytest.mark.parametrize("name", SMALL_TASKS)
def test_small_task_metadata(name: str) -> None:
    task = load_task(TASKS / name)
    assert task.name == name and task.warnings == [] and task.has_evolve_blocks
    assert task.timeout_s == 60
    assert task.sota_source and "task_references.py" in task.sota_source
    assert task.initial_score is not None and task.sota_score is not None
    assert (task.sota_score > task.initial_score) == (task.direction == "max")
    assert f"{task.sota_score:g}"[:6] in task.instruction  # the prompt states the reference
    assert len(task.instruction.split()) < 250  # every prompt token costs time on a CPU
    assert len(task.initial_program.splitlines()) <= 35
    config = yaml.safe_load((TASKS / name / "config.yaml").read_text(encoding="utf-8"))
    assert config["diff_based_evolution"] is True


# One obvious edit of each initial program, as a small model would make it, and the score it
# must at least reach: the tasks have a ladder (initial < edit < reference).
OBVIOUS_EDITS = {
    "lennard_jones_10": [("for _ in range(10):", "for _ in range(100):", 0.93)],
    "circle_packing_10": [
        ("0.5 + 0.3 * np.stack", "0.5 + 0.35 * np.stack", 0.68),
        ("0.5 + 0.3 * np.stack", "0.5 + 0.4 * np.stack", 0.85),
    ],
    "heilbronn_triangle_7": [("for _ in range(30):", "for _ in range(300):", 0.45)],
}


@pytest.mark.parametrize("name", SMALL_TASKS)
def test_small_task_obvious_edits_improve_without_reaching_the_reference(name: str) -> None:
    task = load_task(TASKS / name)
    edits = [task.initial_program.replace(old, new) for old, new, _ in OBVIOUS_EDITS[name]]
    assert all(code != task.initial_program for code in edits)
    base, *edited = evaluate_all(task, [task.initial_program, *edits])
    assert base.valid, base.error
    for outcome, (_, _, at_least) in zip(edited, OBVIOUS_EDITS[name], strict=True):
        assert outcome.valid, outcome.error
        assert base.score < at_least <= outcome.score < 0.99


# ---------------------------------------------------------------- smoke task


def smoke_program(body: str) -> str:
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return f"import numpy as np\n\ndef run():\n{lines}\n    return points\n"


REGULAR = """
angles = np.linspace(0.0, 2 * np.pi, 12, endpoint=False)
points = np.stack([np.cos(angles), np.sin(angles)], axis=1)
"""


def test_smoke_optimum_reaches_sota(smoke_task: Task) -> None:
    shuffled = REGULAR + "points = points[[0, 5, 2, 7, 4, 9, 6, 11, 8, 1, 10, 3]]\n"
    outcomes = evaluate_all(smoke_task, [smoke_program(REGULAR), smoke_program(shuffled)])
    for outcome in outcomes:
        assert outcome.valid, outcome.error
        assert outcome.metrics["area"] == pytest.approx(3.0)
        assert outcome.score == pytest.approx(1.0)
        assert smoke_task.ndg(outcome.metrics["area"]) == pytest.approx(100.0)


def test_smoke_obvious_edit_improves(smoke_task: Task) -> None:
    """The improvement path a small model can find with one SEARCH/REPLACE edit."""
    wider = smoke_task.initial_program.replace("spread = np.pi ", "spread = 2 * np.pi ")
    bigger = smoke_task.initial_program.replace("radius = 0.6 ", "radius = 1.0 ")
    assert wider != smoke_task.initial_program and bigger != smoke_task.initial_program
    base, w, b = evaluate_all(smoke_task, [smoke_task.initial_program, wider, bigger])
    assert base.valid and w.valid and b.valid
    assert w.score > base.score and b.score > base.score


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ("points = points * 1.001", "outside the unit disk"),
        ("points = points[:11]", "shape (12, 2)"),
        ("points[0, 0] = np.nan", "NaN"),
        ("points = 'not points'", "numeric"),
    ],
)
def test_smoke_invalid_points_are_rejected(smoke_task: Task, change: str, fragment: str) -> None:
    (outcome,) = evaluate_all(smoke_task, [smoke_program(REGULAR + change + "\n")])
    assert not outcome.valid and outcome.score == 0.0
    assert fragment in (outcome.error or ""), outcome.error

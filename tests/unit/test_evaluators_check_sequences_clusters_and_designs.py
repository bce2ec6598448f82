"""Bundled task evaluators check sequences, clusters, designs and triangles.

Tasks: labs_27, lennard_jones_13, pressure_vessel, heilbronn_triangle_11, and the reduced
instances lennard_jones_10 and heilbronn_triangle_7.

Each evaluator checks the construction itself (never trusting a reported number): invalid
constructions score 0 with a clear error, and small hand-made valid constructions get exactly
the value computed independently here, with plain Python loops and closed forms. Every candidate
runs through `SandboxEvaluator`, as in a real run. (The initial programs reproducing
``initial_score`` is checked for every bundled task in test_tasks_bundled.py.)
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from evoduet_graph.evaluation import EvaluationOutcome, SandboxEvaluator
from evoduet_graph.task import Task, load_task

TASKS = Path(__file__).resolve().parents[2] / "tasks"
BATCH_B = (
    "labs_27",
    "lennard_jones_13",
    "pressure_vessel",
    "heilbronn_triangle_11",
    "lennard_jones_10",
    "heilbronn_triangle_7",
)


def _load(name: str) -> Task:
    return load_task(TASKS / name)


def program(entry: str, body: str) -> str:
    """A candidate whose ``entry()`` runs ``body`` and returns the variable ``value``."""
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return f"import numpy as np\n\n\ndef {entry}():\n{lines}\n    return value\n"


def run_one(task: Task, code: str) -> EvaluationOutcome:
    return SandboxEvaluator(task, workers=1).evaluate(code)


def assert_rejected(outcome: EvaluationOutcome, fragment: str) -> None:
    assert not outcome.valid, outcome.metrics
    assert outcome.score == 0.0
    assert fragment in (outcome.error or ""), outcome.error
    assert outcome.metrics.get("validity") == 0.0


# ---------------------------------------------------------------- metadata


@pytest.mark.parametrize("name", BATCH_B)
def test_task_metadata(name: str) -> None:
    task = _load(name)
    assert task.warnings == []
    assert task.has_evolve_blocks
    assert 30 <= task.timeout_s <= 60
    assert task.initial_score is not None and task.sota_score is not None and task.sota_source
    # The initial program is strictly worse than the reference, in the task's direction.
    if task.direction == "min":
        assert task.sota_score < task.initial_score
    else:
        assert task.sota_score > task.initial_score
    assert task.ndg(task.initial_score) == pytest.approx(0.0, abs=1e-9)
    assert task.ndg(task.sota_score) == pytest.approx(100.0)
    assert f"{task.sota_score:g}"[:6] in task.instruction  # the prompt states the reference


@pytest.mark.parametrize("name", BATCH_B)
def test_initial_program_is_fast_and_valid(name: str) -> None:
    task = _load(name)
    outcome = run_one(task, task.initial_program)
    assert outcome.valid, outcome.error
    assert 0.0 < outcome.score < 1.0
    assert outcome.elapsed_s < 10.0


def test_candidate_crash_is_invalid() -> None:
    task = _load("labs_27")
    outcome = run_one(task, "def run_sequence():\n    return 1 / 0\n")
    assert not outcome.valid and outcome.score == 0.0
    assert "ZeroDivisionError" in (outcome.error or "")


# ---------------------------------------------------------------- labs_27


def labs_energy_by_hand(seq: list[int]) -> int:
    n = len(seq)
    total = 0
    for k in range(1, n):
        c = 0
        for i in range(n - k):
            c += seq[i] * seq[i + k]
        total += c * c
    return total


# A skew-symmetric length-27 sequence of energy 37 (found by our own search over the 2^14
# skew-symmetric sequences; 37 is the proven optimum for N = 27).
LABS_OPTIMUM = "---++++---+---+---+--+-++-+"


def _signs(text: str) -> list[int]:
    return [1 if ch == "+" else -1 for ch in text]


def test_labs_optimum_scores_one() -> None:
    task = _load("labs_27")
    seq = _signs(LABS_OPTIMUM)
    assert labs_energy_by_hand(seq) == 37
    code = program("run_sequence", f"value = {seq!r}\nreported = 0")
    outcome = run_one(task, code)
    assert outcome.valid, outcome.error
    assert outcome.metrics["energy"] == 37.0
    assert outcome.score == pytest.approx(1.0)
    assert outcome.metrics["merit_factor"] == pytest.approx(27**2 / 74)
    assert task.ndg(outcome.metrics["energy"]) == pytest.approx(100.0)


def test_labs_alternating_and_float_entries() -> None:
    """+-+-...: C_k = (-1)^k (27 - k), so E = 1^2 + ... + 26^2 = 26 * 27 * 53 / 6 = 6201."""
    task = _load("labs_27")
    seq = [(-1) ** i for i in range(27)]
    assert labs_energy_by_hand(seq) == 26 * 27 * 53 // 6 == 6201
    code = program("run_sequence", "value = np.array([(-1.0) ** i for i in range(27)])")
    outcome = run_one(task, code)
    assert outcome.valid, outcome.error
    assert outcome.metrics["energy"] == 6201.0
    assert outcome.score == pytest.approx(37 / 6201)


def test_labs_tuple_of_ints() -> None:
    task = _load("labs_27")
    seq = _signs("+-++--+++-+--+-+++---+-+--+")
    code = program("run_sequence", f"value = tuple({seq!r})")
    outcome = run_one(task, code)
    assert outcome.valid, outcome.error
    assert outcome.metrics["energy"] == float(labs_energy_by_hand(seq))


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("value = [1] * 26", "shape (27,)"),
        ("value = [[1] * 27]", "shape (27,)"),
        ("value = [1] * 26 + [0]", "entry 26 is 0.0; every entry must be +1 or -1"),
        ("value = [1] * 26 + [2]", "every entry must be +1 or -1"),
        ("value = [0.5] + [1] * 26", "entry 0 is 0.5"),
        ("value = [1.0] * 26 + [float('nan')]", "NaN or inf"),
        ("value = np.ones(27, dtype=bool)", "booleans"),
        ("value = '+' * 27", "list or numpy array"),
        ("value = None", "list or numpy array"),
        ("value = ['a'] * 27", "not an array of real numbers (dtype <U1)"),
        ("value = ['1'] * 27", "not an array of real numbers"),  # no silent str -> float
        ("value = [1 + 1j] * 27", "not an array of real numbers (dtype complex128)"),
        ("value = [1] * 26 + [None]", "not an array of real numbers (dtype object)"),
        ("value = [[1, -1], [1]]", "not an array of real numbers"),
    ],
)
def test_labs_invalid_sequences_are_rejected(body: str, fragment: str) -> None:
    assert_rejected(run_one(_load("labs_27"), program("run_sequence", body)), fragment)


def test_labs_missing_entry_point() -> None:
    outcome = run_one(_load("labs_27"), program("construct_sequence", "value = [1] * 27"))
    assert_rejected(outcome, "no run_sequence() function")


# ---------------------------------------------------------------- lennard_jones_13

R_MIN = 2 ** (1 / 6)  # minimum of the pair potential, where it equals -1


def lj_energy_by_hand(points: list[list[float]]) -> float:
    total = 0.0
    for i in range(len(points)):
        for j in range(i + 1, len(points)):
            r = math.dist(points[i], points[j])
            total += 4.0 * (r**-12 - r**-6)
    return total


def _dimers() -> list[list[float]]:
    """Six dimers at r = 2^(1/6), 50 apart, plus a lone atom: E = -6 + (tiny far terms)."""
    points: list[list[float]] = []
    for d in range(6):
        points += [[50.0 * d, 0.0, 0.0], [50.0 * d + R_MIN, 0.0, 0.0]]
    return points + [[0.0, 50.0, 0.0]]


def _icosahedron(radius: float) -> list[list[float]]:
    """Centre + 12 vertices of a regular icosahedron at distance ``radius`` from it."""
    phi = (1 + math.sqrt(5)) / 2
    verts = []
    for a, b in itertools.product((-1.0, 1.0), repeat=2):
        verts += [[0.0, a, b * phi], [a, b * phi, 0.0], [b * phi, 0.0, a]]
    scale = radius / math.hypot(1.0, phi)
    return [[0.0, 0.0, 0.0]] + [[scale * c for c in v] for v in verts]


def _best_icosahedron() -> list[list[float]]:
    """LJ13's minimum is a perfect icosahedron; golden-section search on its one size."""
    lo, hi = 1.0, 1.2
    g = (math.sqrt(5) - 1) / 2
    for _ in range(200):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if lj_energy_by_hand(_icosahedron(a)) < lj_energy_by_hand(_icosahedron(b)):
            hi = b
        else:
            lo = a
    return _icosahedron((lo + hi) / 2)


def test_lj_dimers_energy() -> None:
    task = _load("lennard_jones_13")
    points = _dimers()
    expected = lj_energy_by_hand(points)
    assert expected == pytest.approx(-6.0, abs=1e-6)  # -1 per dimer at r = 2^(1/6)
    outcome = run_one(task, program("run_cluster", f"value = {points!r}"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["energy"] == pytest.approx(expected, rel=1e-12)
    assert outcome.score == pytest.approx(expected / -44.326801, rel=1e-12)
    assert outcome.metrics["min_distance"] == pytest.approx(R_MIN)


def test_lj_icosahedron_reaches_reference() -> None:
    task = _load("lennard_jones_13")
    points = _best_icosahedron()
    expected = lj_energy_by_hand(points)
    assert expected == pytest.approx(-44.326801, abs=1e-6)  # Cambridge Cluster Database
    outcome = run_one(task, program("run_cluster", f"value = np.array({points!r})"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["energy"] == pytest.approx(expected, rel=1e-12)
    assert outcome.score == pytest.approx(1.0, abs=1e-7)
    assert task.ndg(outcome.metrics["energy"]) == pytest.approx(100.0, abs=1e-4)


def test_lj_repulsive_cluster_is_valid_but_scores_zero() -> None:
    task = _load("lennard_jones_13")
    points = [[0.5 * i, 0.0, 0.0] for i in range(13)]  # neighbours at r = 0.5: E > 0
    expected = lj_energy_by_hand(points)
    assert expected > 0
    outcome = run_one(task, program("run_cluster", f"value = {points!r}"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["energy"] == pytest.approx(expected, rel=1e-12)
    assert outcome.score == 0.0


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("value = np.zeros((12, 3))", "shape (13, 3)"),
        ("value = np.arange(26.0).reshape(13, 2)", "shape (13, 3)"),
        ("value = np.arange(39.0).reshape(13, 3)\nvalue[4, 1] = np.nan", "NaN or inf"),
        ("value = np.arange(39.0).reshape(13, 3)\nvalue[0, 0] = np.inf", "NaN or inf"),
        ("value = np.arange(39.0).reshape(13, 3)\nvalue[7] = value[3]", "atoms 3 and 7 coincide"),
        (
            "value = np.arange(39.0).reshape(13, 3)\nvalue[7] = value[3] + 1e-9",
            "atoms must be distinct",
        ),
        ("value = np.arange(39.0).reshape(13, 3)\nvalue[5, 2] = 1e4", "atom 5 has a coordinate"),
        ("value = np.ones((13, 3), dtype=bool)", "booleans"),
        ("value = 'atoms'", "array of shape (13, 3)"),
        ("value = [[0.0, 0.0]] * 13", "shape (13, 3)"),
        ("value = np.zeros((13, 3), dtype=complex)", "not an array of real numbers"),
    ],
)
def test_lj_invalid_clusters_are_rejected(body: str, fragment: str) -> None:
    assert_rejected(run_one(_load("lennard_jones_13"), program("run_cluster", body)), fragment)


# ---------------------------------------------------------------- lennard_jones_10

LJ10_BEST = -28.422532  # Cambridge Cluster Database, LJ10


def test_lj10_dimers_energy() -> None:
    """Five dimers at r = 2^(1/6), 50 apart: E = -5 + (tiny far terms)."""
    task = _load("lennard_jones_10")
    points = _dimers()[:10]
    expected = lj_energy_by_hand(points)
    assert expected == pytest.approx(-5.0, abs=1e-6)
    outcome = run_one(task, program("run_cluster", f"value = {points!r}"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["energy"] == pytest.approx(expected, rel=1e-12)
    assert outcome.score == pytest.approx(expected / LJ10_BEST, rel=1e-12)
    assert outcome.metrics["min_distance"] == pytest.approx(R_MIN)


def test_lj10_multistart_minimisation_reaches_reference() -> None:
    """A candidate running seeded multi-start L-BFGS-B finds the database minimum."""
    body = """
from scipy.optimize import minimize

def f(x):
    p = x.reshape(10, 3)
    d = p[:, None, :] - p[None, :, :]
    r2 = np.sum(d**2, axis=-1) + np.diag(np.full(10, np.inf))
    inv6 = r2**-3
    g = np.sum(((-48.0 * inv6**2 + 24.0 * inv6) / r2)[:, :, None] * d, axis=1)
    return 2.0 * np.sum(inv6**2 - inv6), g.ravel()

runs = []
for seed in range(40):
    rng = np.random.default_rng(seed)
    x0 = np.array([[i % 3, (i // 3) % 3, i // 9] for i in range(10)]) * 1.1
    x0 = x0 + rng.uniform(-0.3, 0.3, (10, 3))
    runs.append(minimize(f, x0.ravel(), jac=True, method="L-BFGS-B"))
value = min(runs, key=lambda r: r.fun).x.reshape(10, 3)
"""
    task = _load("lennard_jones_10")
    outcome = run_one(task, program("run_cluster", body))
    assert outcome.valid, outcome.error
    assert outcome.metrics["energy"] == pytest.approx(LJ10_BEST, abs=1e-6)
    assert outcome.score == pytest.approx(1.0, abs=1e-7)
    assert task.ndg(outcome.metrics["energy"]) == pytest.approx(100.0, abs=1e-4)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("value = np.zeros((13, 3))", "shape (10, 3)"),
        ("value = np.arange(20.0).reshape(10, 2)", "shape (10, 3)"),
        ("value = np.arange(30.0).reshape(10, 3)\nvalue[4, 1] = np.nan", "NaN or inf"),
        ("value = np.arange(30.0).reshape(10, 3)\nvalue[7] = value[3]", "atoms 3 and 7 coincide"),
        ("value = np.arange(30.0).reshape(10, 3)\nvalue[5, 2] = -1e4", "atom 5 has a coordinate"),
        ("value = np.ones((10, 3), dtype=bool)", "booleans"),
        ("value = None", "array of shape (10, 3)"),
        ("value = [['0', '0', '0']] * 10", "not an array of real numbers"),
    ],
)
def test_lj10_invalid_clusters_are_rejected(body: str, fragment: str) -> None:
    assert_rejected(run_one(_load("lennard_jones_10"), program("run_cluster", body)), fragment)


# ---------------------------------------------------------------- pressure_vessel


def vessel_cost_by_hand(x1: float, x2: float, x3: float, x4: float) -> float:
    shell = 0.6224 * x1 * x3 * x4
    heads = 1.7781 * x2 * x3 * x3
    return shell + heads + 3.1661 * x1 * x1 * x4 + 19.84 * x1 * x1 * x3


def _optimum() -> tuple[float, float, float, float]:
    """The known optimum: x1 = 13/16, x2 = 7/16; g1 and g3 active."""
    x1, x2 = 13 / 16, 7 / 16
    x3 = x1 / 0.0193
    x4 = (1296000 - 4 / 3 * math.pi * x3**3) / (math.pi * x3**2)
    return x1, x2, x3, x4


def test_vessel_optimum_scores_one() -> None:
    task = _load("pressure_vessel")
    design = _optimum()
    expected = vessel_cost_by_hand(*design)
    assert expected == pytest.approx(6059.714335, abs=1e-6)  # Yang et al. (2013)
    outcome = run_one(task, program("run_design", f"value = {list(design)!r}"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["cost"] == pytest.approx(expected, rel=1e-12)
    assert outcome.score == pytest.approx(1.0, abs=1e-9)
    assert task.ndg(outcome.metrics["cost"]) == pytest.approx(100.0, abs=1e-6)


def test_vessel_conservative_design() -> None:
    task = _load("pressure_vessel")
    design = (1.125, 0.625, 55.0, 80.0)  # 18/16 and 10/16 inch plates
    expected = vessel_cost_by_hand(*design)
    outcome = run_one(task, program("run_design", f"value = np.array({list(design)!r})"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["cost"] == pytest.approx(expected, rel=1e-12)
    assert outcome.score == pytest.approx(6059.714335048436 / expected, rel=1e-12)
    assert outcome.metrics["g1"] == pytest.approx(-1.125 + 0.0193 * 55.0)


def test_vessel_thickness_within_grid_tolerance_is_snapped() -> None:
    task = _load("pressure_vessel")
    x1, x2, x3, x4 = _optimum()
    code = program("run_design", f"value = ({x1 - 5e-10!r}, {x2 - 5e-10!r}, {x3!r}, {x4!r})")
    outcome = run_one(task, code)
    assert outcome.valid, outcome.error
    assert outcome.metrics["cost"] == pytest.approx(vessel_cost_by_hand(x1, x2, x3, x4), rel=1e-15)


@pytest.mark.parametrize(
    ("design", "fragment"),
    [
        ("(0.8, 0.4375, 40.0, 200.0)", "x1 (shell thickness) = 0.8 is not a whole multiple"),
        ("(0.8125, 0.4375 + 1e-6, 40.0, 200.0)", "x2 (head thickness)"),
        ("(0.0, 0.4375, 40.0, 200.0)", "outside the bounds [1 * 0.0625, 99 * 0.0625]"),
        ("(100 * 0.0625, 0.4375, 40.0, 200.0)", "x1 (shell thickness) = 100 * 0.0625"),
        ("(0.8125, 0.4375, 9.9, 200.0)", "x3 (radius) = 9.9 is outside the bounds [10, 200]"),
        ("(0.8125, 0.4375, 40.0, 200.5)", "x4 (length) = 200.5 is outside"),
        ("(0.75, 0.4375, 42.0, 200.0)", "constraint g1 violated"),
        ("(0.8125, 0.375, 42.0, 200.0)", "constraint g2 violated"),
        ("(0.8125, 0.4375, 42.0, 150.0)", "constraint g3 violated"),
        ("(0.8125, 0.4375, 40.0)", "shape (4,)"),
        ("(0.8125, 0.4375, float('nan'), 200.0)", "NaN or inf"),
        ("np.array([True, True, True, True])", "booleans"),
        ("'0.8125 0.4375 42 177'", "4 numbers"),
        ("['0.8125', '0.4375', '42', '177']", "not an array of real numbers"),
    ],
)
def test_vessel_invalid_designs_are_rejected(design: str, fragment: str) -> None:
    outcome = run_one(_load("pressure_vessel"), program("run_design", f"value = {design}"))
    assert_rejected(outcome, fragment)


def test_vessel_volume_just_short_is_rejected() -> None:
    x1, x2, x3, x4 = _optimum()
    code = program("run_design", f"value = ({x1!r}, {x2!r}, {x3!r}, {x4 - 1e-6!r})")
    assert_rejected(run_one(_load("pressure_vessel"), code), "constraint g3 violated")


# ---------------------------------------------------------------- heilbronn_triangle_11

H = math.sqrt(3) / 2
AREA_T = math.sqrt(3) / 4


def min_area_by_hand(points: list[list[float]]) -> float:
    best = math.inf
    for a, b, c in itertools.combinations(points, 3):
        area = abs((b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1])) / 2
        best = min(best, area)
    return best / AREA_T


def _circle_points(radius: float) -> list[list[float]]:
    cx, cy = 0.5, math.sqrt(3) / 6
    angles = [math.pi / 2 + 2 * math.pi * i / 11 for i in range(11)]
    return [[cx + radius * math.cos(t), cy + radius * math.sin(t)] for t in angles]


def test_heilbronn_incircle_closed_form() -> None:
    """11 evenly spaced points on a circle of radius r give the closed-form smallest area.

    The smallest triangle joins three consecutive points: area r^2 sin(t) (1 - cos(t)) with
    t = 2 pi / 11.
    """
    task = _load("heilbronn_triangle_11")
    r = math.sqrt(3) / 6  # the inscribed circle
    t = 2 * math.pi / 11
    expected = r * r * math.sin(t) * (1 - math.cos(t)) / AREA_T
    assert min_area_by_hand(_circle_points(r)) == pytest.approx(expected, rel=1e-12)
    outcome = run_one(task, program("run_points", f"value = {_circle_points(r)!r}"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["min_area"] == pytest.approx(expected, rel=1e-12)
    assert outcome.score == pytest.approx(expected / 0.036529889880030156, rel=1e-12)
    assert outcome.metrics["min_area"] == pytest.approx(task.initial_score, rel=1e-12)


def test_heilbronn_points_on_the_boundary_are_allowed() -> None:
    task = _load("heilbronn_triangle_11")
    # The three vertices (on the boundary) and eight interior points, no three collinear.
    points = [[0.0, 0.0], [1.0, 0.0], [0.5, H], [0.3, 0.05], [0.3, 0.3], [0.75, 0.2]]
    points += [[0.35, 0.2], [0.62, 0.12], [0.5, 0.45], [0.42, 0.33], [0.61, 0.3]]
    expected = min_area_by_hand(points)
    assert expected > 0
    outcome = run_one(task, program("run_points", f"value = np.array({points!r})"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["min_area"] == pytest.approx(expected, rel=1e-12)


def test_heilbronn_collinear_points_score_zero() -> None:
    task = _load("heilbronn_triangle_11")
    points = _circle_points(0.2)[:8] + [[0.2, 0.0], [0.5, 0.0], [0.9, 0.0]]  # 3 on the base
    outcome = run_one(task, program("run_points", f"value = {points!r}"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["min_area"] == 0.0 and outcome.score == 0.0


def test_heilbronn_tolerance_is_1e_12() -> None:
    task = _load("heilbronn_triangle_11")
    inside = _circle_points(0.2)[:10] + [[0.5, -5e-13]]
    outside = _circle_points(0.2)[:10] + [[0.5, -5e-12]]
    ok = run_one(task, program("run_points", f"value = {inside!r}"))
    assert ok.valid, ok.error
    assert_rejected(run_one(task, program("run_points", f"value = {outside!r}")), "point 10")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ("value[3] = [1.1, 0.0]", "point 3 at (1.1, 0.0) is outside the triangle"),
        ("value[0] = [0.2, 0.5]", "point 0 at (0.2, 0.5) is outside"),  # left of the left edge
        ("value[5] = [0.9, 0.3]", "point 5"),  # right of the right edge
        ("value = value[:10]", "shape (11, 2)"),
        ("value = np.array(value)[:, :1]", "shape (11, 2)"),
        ("value[2][1] = float('nan')", "NaN or inf"),
        ("value = np.ones((11, 2), dtype=bool)", "booleans"),
        ("value = 'points'", "array of shape (11, 2)"),
        ("value = [[0.5, 0.2]] * 10 + [[0.5, None]]", "not an array of real numbers"),
    ],
)
def test_heilbronn_invalid_points_are_rejected(change: str, fragment: str) -> None:
    body = f"value = {_circle_points(0.2)!r}\n{change}"
    outcome = run_one(_load("heilbronn_triangle_11"), program("run_points", body))
    assert_rejected(outcome, fragment)


# ---------------------------------------------------------------- heilbronn_triangle_7

H7_BEST = 0.097222222222  # benchmarks/task_references.py; 7/72


def _circle_points_7(radius: float) -> list[list[float]]:
    cx, cy = 0.5, math.sqrt(3) / 6
    angles = [math.pi / 2 + 2 * math.pi * i / 7 for i in range(7)]
    return [[cx + radius * math.cos(t), cy + radius * math.sin(t)] for t in angles]


def test_heilbronn7_incircle_closed_form() -> None:
    """7 evenly spaced points on the inscribed circle: smallest area r^2 sin(t) (1 - cos(t))."""
    task = _load("heilbronn_triangle_7")
    r = math.sqrt(3) / 6
    t = 2 * math.pi / 7
    expected = r * r * math.sin(t) * (1 - math.cos(t)) / AREA_T
    assert min_area_by_hand(_circle_points_7(r)) == pytest.approx(expected, rel=1e-12)
    outcome = run_one(task, program("run_points", f"value = {_circle_points_7(r)!r}"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["min_area"] == pytest.approx(expected, rel=1e-12)
    assert outcome.score == pytest.approx(expected / H7_BEST, rel=1e-12)


def test_heilbronn7_reference_configuration_scores_one() -> None:
    """Two points on each edge and one at the centre: nine smallest triangles of area 7/72."""
    task = _load("heilbronn_triangle_7")
    points = [[1 / 12, H / 6], [1 / 4, 0.0], [5 / 6, 0.0], [7 / 8, H / 4], [7 / 12, 5 * H / 6]]
    points += [[3 / 8, 3 * H / 4], [1 / 2, H / 3]]
    assert min_area_by_hand(points) == pytest.approx(7 / 72, rel=1e-12)
    outcome = run_one(task, program("run_points", f"value = {points!r}"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["min_area"] == pytest.approx(7 / 72, rel=1e-12)
    assert outcome.score == pytest.approx(1.0, abs=1e-9)
    assert task.ndg(outcome.metrics["min_area"]) == pytest.approx(100.0, abs=1e-6)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ("value[3] = [1.1, 0.0]", "point 3 at (1.1, 0.0) is outside the triangle"),
        ("value[0] = [0.2, 0.5]", "point 0 at (0.2, 0.5) is outside"),
        ("value[6] = [0.5, -5e-12]", "point 6"),
        ("value = value[:6]", "shape (7, 2)"),
        ("value = value + [[0.5, 0.3]] * 4", "shape (7, 2)"),
        ("value[2][1] = float('inf')", "NaN or inf"),
        ("value = np.zeros((7, 2), dtype=bool)", "booleans"),
        ("value = {'points': value}", "array of shape (7, 2)"),
    ],
)
def test_heilbronn7_invalid_points_are_rejected(change: str, fragment: str) -> None:
    body = f"value = {_circle_points_7(0.2)!r}\n{change}"
    outcome = run_one(_load("heilbronn_triangle_7"), program("run_points", body))
    assert_rejected(outcome, fragment)


def test_heilbronn7_collinear_points_score_zero() -> None:
    task = _load("heilbronn_triangle_7")
    points = _circle_points_7(0.2)[:4] + [[0.2, 0.0], [0.5, 0.0], [0.9, 0.0]]  # 3 on the base
    outcome = run_one(task, program("run_points", f"value = {points!r}"))
    assert outcome.valid, outcome.error
    assert outcome.metrics["min_area"] == 0.0 and outcome.score == 0.0

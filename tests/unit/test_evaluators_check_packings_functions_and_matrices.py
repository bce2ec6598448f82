"""Bundled task evaluators check packings, step functions, sets and matrices.

Tasks: circle_packing_32, erdos_min_overlap, autocorrelation_c3, sums_diffs,
hadamard_29.

Each evaluator checks the construction itself: invalid constructions are rejected with a clear
error (through the real sandbox), and small hand-made constructions get the value computed here
by hand. The initial programs are covered by test_tasks_bundled.py (initial_score).
"""

from __future__ import annotations

import importlib.util
import itertools
import math
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from evoduet_graph.evaluation import EvaluationOutcome, SandboxEvaluator
from evoduet_graph.task import Task, load_task

TASKS = Path(__file__).resolve().parents[2] / "tasks"
BATCH_A = (
    "circle_packing_32",
    "erdos_min_overlap",
    "autocorrelation_c3",
    "sums_diffs",
    "hadamard_29",
)


def load_evaluator(name: str) -> ModuleType:
    """Import tasks/<name>/evaluator.py directly (for its helper functions)."""
    spec = importlib.util.spec_from_file_location(f"bundled_{name}", TASKS / name / "evaluator.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def program(body: str, entry: str = "run_code") -> str:
    """A candidate whose ``entry()`` runs ``body`` and returns its variable ``result``."""
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return f"import numpy as np\n\n\ndef {entry}():\n{lines}\n    return result\n"


def run_all(
    name: str, bodies: dict[str, str], entry: str = "run_code"
) -> dict[str, EvaluationOutcome]:
    """Evaluate several candidates of one task in the sandbox (2 at a time)."""
    task = load_task(TASKS / name)
    keys = list(bodies)
    outcomes = SandboxEvaluator(task, workers=2).evaluate_many(
        [program(bodies[k], entry) for k in keys], ids=keys
    )
    return dict(zip(keys, outcomes, strict=True))


def assert_invalid(outcome: EvaluationOutcome, fragment: str) -> None:
    assert not outcome.valid
    assert outcome.score == 0.0
    assert fragment in (outcome.error or ""), outcome.error


@pytest.mark.parametrize("name", BATCH_A)
def test_task_metadata(name: str) -> None:
    task = load_task(TASKS / name)
    assert task.name == name
    assert not task.warnings
    assert task.has_evolve_blocks
    assert 30 <= task.timeout_s <= 60
    assert task.sota_source and "SimpleTES" in task.sota_source
    assert task.metric in task.instruction and "EVOLVE-BLOCK" in task.instruction
    assert task.initial_score is not None and task.sota_score is not None
    better = task.sota_score > task.initial_score
    assert better == (task.direction == "max")


# ---------------------------------------------------------------- circle_packing_32

GRID_8X4 = """
xs = (np.arange(8) + 0.5) / 8
ys = (np.arange(4) + 0.5) / 4
centers = np.array([[x, y] for y in ys for x in xs])
radii = np.full(32, 1 / 16)
result = (centers, radii, 100.0)
"""

CIRCLE_CASES = {
    "valid": (GRID_8X4, None),
    "overlap": (GRID_8X4 + "centers[1] = centers[0] + [0.1, 0.0]\n", "overlap"),
    "tangent_plus": (GRID_8X4 + "radii[9] += 1e-9\n", "overlap"),
    "outside": (GRID_8X4 + "centers[0] = [0.05, 0.125]\n", "outside the unit square"),
    "few": (GRID_8X4 + "result = (centers[:31], radii[:31], 1.0)\n", "shape (32, 2)"),
    "nan": (GRID_8X4 + "centers[3, 1] = np.nan\n", "NaN"),
    "negative": (GRID_8X4 + "radii[5] = -0.01\n", "negative radius"),
    "text": (GRID_8X4 + "result = (centers, ['r'] * 32, 1.0)\n", "real numbers"),
    "not_tuple": ("result = 2.0\n", "must return (centers, radii, sum_radii)"),
}


@pytest.fixture(scope="module")
def circle_outcomes() -> dict[str, EvaluationOutcome]:
    return run_all(
        "circle_packing_32", {k: body for k, (body, _) in CIRCLE_CASES.items()}, "run_packing"
    )


def test_circle32_valid_grid_scores_its_true_sum(
    circle_outcomes: dict[str, EvaluationOutcome],
) -> None:
    outcome = circle_outcomes["valid"]
    assert outcome.valid, outcome.error
    assert outcome.metrics["sum_radii"] == 2.0  # 32 * 1/16, not the reported 100
    assert outcome.score == pytest.approx(2.0 / 2.939573, rel=1e-15)


@pytest.mark.parametrize("case", [k for k in CIRCLE_CASES if k != "valid"])
def test_circle32_invalid_packings_are_rejected(
    circle_outcomes: dict[str, EvaluationOutcome], case: str
) -> None:
    outcome = circle_outcomes[case]
    assert_invalid(outcome, CIRCLE_CASES[case][1] or "")
    assert outcome.metrics.get("validity") == 0.0


def test_circle32_check_packing_on_a_36_grid_minus_4() -> None:
    ev = load_evaluator("circle_packing_32")
    cells = [(i, j) for i in range(6) for j in range(6)][:32]
    centers = np.array([[(i + 0.5) / 6, (j + 0.5) / 6] for i, j in cells])
    radii = np.full(32, 1 / 12)
    assert ev.check_packing(centers, radii) is None
    assert float(np.sum(radii)) == pytest.approx(32 / 12, abs=1e-12)
    radii[0] = 1 / 12 + 1e-9
    assert "outside the unit square" in ev.check_packing(centers, radii)


# ---------------------------------------------------------------- erdos_min_overlap

ERDOS_CASES = {
    "half_mass_left": ("result = [1.0, 1.0, 0.0, 0.0]", None),
    "middle": ("result = np.array([0.0, 1.0, 1.0, 0.0])", None),
    "rescaled": ("result = np.full(4, 0.25)", None),
    "above_one": ("result = np.array([1.2, 0.8, 0.0, 0.0])", "outside [0, 1]"),
    "negative": ("result = np.array([1.0, 1.0, 0.5, -0.5])", "outside [0, 1]"),
    "nan": ("result = np.array([1.0, np.nan, 0.5, 0.5])", "NaN"),
    "rescale_overflows": ("result = np.array([1.0, 0.5, 0.0, 0.0])", "rescaling h"),
    "zero": ("result = np.zeros(10)", "sum(h) is 0"),
    "two_d": ("result = np.full((2, 4), 0.5)", "1-D"),
    "too_short": ("result = [1.0]", "between 2 and 65536"),
    "text": ("result = ['a', 'b']", "real numbers"),
}


@pytest.fixture(scope="module")
def erdos_outcomes() -> dict[str, EvaluationOutcome]:
    return run_all("erdos_min_overlap", {k: body for k, (body, _) in ERDOS_CASES.items()})


def test_erdos_hand_made_step_functions(erdos_outcomes: dict[str, EvaluationOutcome]) -> None:
    # h = 1 on [0, 1], 0 on [1, 2]: shifting by k = 1 puts all of h over 1 - h = 1 -> C5 = 1.
    left = erdos_outcomes["half_mass_left"]
    assert left.valid, left.error
    assert left.metrics["c5"] == 1.0
    assert left.score == pytest.approx(0.380868, rel=1e-15)
    # h = 1 on [0.5, 1.5]: every shift overlaps 1 - h on at most one step of width 1/2.
    middle = erdos_outcomes["middle"]
    assert middle.valid and middle.metrics["c5"] == 0.5
    # sum(h) = 1 != n/2 = 2: rescaled by 2 to the constant 1/2, C5 = 1/2.
    rescaled = erdos_outcomes["rescaled"]
    assert rescaled.valid and rescaled.metrics["c5"] == 0.5
    assert rescaled.metrics["scale"] == 2.0


@pytest.mark.parametrize("case", [k for k, (_, frag) in ERDOS_CASES.items() if frag])
def test_erdos_invalid_functions_are_rejected(
    erdos_outcomes: dict[str, EvaluationOutcome], case: str
) -> None:
    outcome = erdos_outcomes[case]
    assert_invalid(outcome, ERDOS_CASES[case][1])
    assert "c5" not in outcome.metrics


def test_erdos_c5_matches_brute_force() -> None:
    ev = load_evaluator("erdos_min_overlap")
    h = np.array([0.9, 0.7, 0.1, 0.3, 0.0, 1.0, 0.6, 0.4])  # sum 4 = n/2
    n = h.size
    best = max(
        sum(h[i] * (1.0 - h[i + k]) for i in range(n) if 0 <= i + k < n) for k in range(-(n - 1), n)
    )
    assert ev.compute_c5(h) == pytest.approx(best * 2.0 / n, rel=1e-14)
    values, scale, problem = ev.normalise_heights(h)
    assert problem is None and scale == 1.0 and np.array_equal(values, h)


# ---------------------------------------------------------------- autocorrelation_c3

C3_CASES = {
    "constant": ("result = np.ones(3)", None),
    "ramp": ("result = [1, 2]", None),
    "huge": ("result = np.array([1e200, 2e200])", None),
    "signed": ("result = np.array([1.0, -1.0, 1.0])", None),
    "zero_sum": ("result = np.array([1.0, -1.0])", "numerically zero"),
    "all_zero": ("result = np.zeros(5)", "all heights are 0"),
    "inf": ("result = np.array([1.0, np.inf])", "NaN or inf"),
    "two_d": ("result = np.ones((3, 3))", "1-D"),
    "empty": ("result = np.array([])", "between 1 and 65536"),
    "bool": ("result = np.ones(4, dtype=bool)", "real numbers"),
}


@pytest.fixture(scope="module")
def c3_outcomes() -> dict[str, EvaluationOutcome]:
    return run_all("autocorrelation_c3", {k: body for k, (body, _) in C3_CASES.items()})


def test_c3_hand_made_functions(c3_outcomes: dict[str, EvaluationOutcome]) -> None:
    # f = 1 on n = 3 steps (dx = 1/6): max f*f = 3 -> C3 = 3 * dx / (3 * dx)^2 = 2.
    assert c3_outcomes["constant"].metrics["c3"] == pytest.approx(2.0, rel=1e-15)
    # f = (1, 2), dx = 1/4: f*f = (1, 4, 4), sum 3 -> C3 = 4 * 1/4 / (3/4)^2 = 16/9.
    assert c3_outcomes["ramp"].metrics["c3"] == pytest.approx(16 / 9, rel=1e-15)
    assert c3_outcomes["ramp"].score == pytest.approx(1.453675 / (16 / 9), rel=1e-15)
    # Scale invariance, without overflow for huge values.
    assert c3_outcomes["huge"].metrics["c3"] == pytest.approx(16 / 9, rel=1e-15)
    # f = (1, -1, 1), dx = 1/6: f*f = (1, -2, 3, -2, 1), sum 1 -> C3 = 3 * 6 = 18.
    assert c3_outcomes["signed"].metrics["c3"] == pytest.approx(18.0, rel=1e-15)
    assert all(c3_outcomes[k].valid for k in ("constant", "ramp", "huge", "signed"))


@pytest.mark.parametrize("case", [k for k, (_, frag) in C3_CASES.items() if frag])
def test_c3_invalid_functions_are_rejected(
    c3_outcomes: dict[str, EvaluationOutcome], case: str
) -> None:
    outcome = c3_outcomes[case]
    assert_invalid(outcome, C3_CASES[case][1])
    assert "c3" not in outcome.metrics


def test_c3_is_above_one_for_any_valid_function() -> None:
    ev = load_evaluator("autocorrelation_c3")
    rng = np.random.default_rng(7)
    for _ in range(20):
        f, problem = ev.check_heights(rng.normal(size=int(rng.integers(1, 50))) + 0.3)
        if problem is None:
            n = f.size
            assert ev.compute_c3(f) >= 2 * n / (2 * n - 1) - 1e-12


# ---------------------------------------------------------------- sums_diffs

CONWAY = [0, 2, 3, 4, 7, 11, 12, 14]  # Conway's MSTD set: |A+A| = 26, |A-A| = 25

SD_CASES = {
    "small": ("result = [0, 1, 3]", None),
    "duplicates_floats": ("result = (3.0, 0, 1, 1, np.int64(3))", None),
    "conway": (f"result = np.array({CONWAY})", None),
    "single": ("result = [5, 5, 5]", "between 2 and 512"),
    "empty": ("result = []", "between 2 and 512"),
    "too_many": ("result = list(range(513))", "got 513"),
    "fraction": ("result = [0, 1, 2.5]", "is not an integer"),
    "boolean": ("result = [True, 0, 3]", "is not an integer"),
    "out_of_range": ("result = [0, 2_000_000]", "outside [-1000000, 1000000]"),
    "nan": ("result = [0.0, float('nan')]", "is not an integer"),
    "wrong_type": ("result = 'abc'", "must return a list"),
}


@pytest.fixture(scope="module")
def sd_outcomes() -> dict[str, EvaluationOutcome]:
    return run_all("sums_diffs", {k: body for k, (body, _) in SD_CASES.items()})


def test_sums_diffs_hand_made_sets(sd_outcomes: dict[str, EvaluationOutcome]) -> None:
    # A = {0, 1, 3}: A+A = {0,1,2,3,4,6} (6), A-A = {-3..3} (7).
    expected = math.log(6 / 3) / math.log(7 / 3)
    for key in ("small", "duplicates_floats"):
        outcome = sd_outcomes[key]
        assert outcome.valid, outcome.error
        assert outcome.metrics["c_ratio"] == pytest.approx(expected, rel=1e-15)
        assert outcome.metrics["set_size"] == 3.0
        assert (outcome.metrics["sumset_size"], outcome.metrics["diffset_size"]) == (6.0, 7.0)
    assert sd_outcomes["small"].score == pytest.approx(expected / 1.144887, rel=1e-15)
    conway = sd_outcomes["conway"]
    assert (conway.metrics["sumset_size"], conway.metrics["diffset_size"]) == (26.0, 25.0)
    assert conway.metrics["c_ratio"] == pytest.approx(math.log(26 / 8) / math.log(25 / 8))
    assert conway.metrics["c_ratio"] > 1.0


@pytest.mark.parametrize("case", [k for k, (_, frag) in SD_CASES.items() if frag])
def test_sums_diffs_invalid_sets_are_rejected(
    sd_outcomes: dict[str, EvaluationOutcome], case: str
) -> None:
    outcome = sd_outcomes[case]
    assert_invalid(outcome, SD_CASES[case][1])
    assert outcome.metrics.get("c_ratio") == 0.0


# ---------------------------------------------------------------- hadamard_29


def leibniz_det(m: list[list[int]]) -> int:
    """Determinant by the permutation expansion (small matrices only)."""
    n = len(m)
    total = 0
    for perm in itertools.permutations(range(n)):
        inversions = sum(perm[i] > perm[j] for i in range(n) for j in range(i + 1, n))
        term = (-1) ** inversions
        for i in range(n):
            term *= m[i][perm[i]]
        total += term
    return total


def sylvester(k: int) -> list[list[int]]:
    h = [[1]]
    for _ in range(k):
        h = [row + row for row in h] + [row + [-v for v in row] for row in h]
    return h


def paley_i_plus_q() -> list[list[int]]:
    """I + Q for the Jacobsthal matrix Q of GF(29); |det| = 28^14 (eigenvalues 1, 1 +- sqrt 29)."""
    p = 29
    residues = {x * x % p for x in range(1, p)}
    chi = [0] + [1 if r in residues else -1 for r in range(1, p)]
    return [[1 if i == j else chi[(j - i) % p] for j in range(p)] for i in range(p)]


def test_exact_determinant_small_matrices() -> None:
    det = load_evaluator("hadamard_29").exact_determinant
    assert det([]) == 1
    assert det([[-1]]) == -1
    assert det([[1, 1], [1, -1]]) == -2
    assert det([[0, 1], [1, 0]]) == -1  # needs a pivot swap
    assert det([[1, 1, 1], [1, 1, 1], [1, -1, 1]]) == 0
    assert abs(det(sylvester(2))) == 4**2
    assert abs(det(sylvester(3))) == 8**4
    assert abs(det(sylvester(4))) == 16**8
    rng = np.random.default_rng(3)
    for n in range(1, 7):
        for _ in range(5):
            m = rng.choice([-1, 1], size=(n, n)).tolist()
            assert det(m) == leibniz_det(m)
        m = rng.integers(-5, 6, size=(n, n)).tolist()
        assert det(m) == leibniz_det(m)


def test_exact_determinant_of_29x29_paley_matrix() -> None:
    det = load_evaluator("hadamard_29").exact_determinant
    m = paley_i_plus_q()
    assert abs(det(m)) == 28**14
    swapped = [m[1], m[0]] + m[2:]
    assert det(swapped) == -det(m)
    assert det(m[:28] + [m[0]]) == 0


PALEY = f"result = np.array({paley_i_plus_q()}, dtype=float)"

HADAMARD_CASES = {
    "paley": (PALEY, None),
    "small": ("result = np.ones((28, 28))", "shape (29, 29)"),
    "zero_entry": (PALEY + "\nresult[3, 4] = 0", "entry (3, 4)"),
    "half_entry": (PALEY + "\nresult[0, 0] = 0.999999", "is not +1 or -1"),
    "nan": (PALEY + "\nresult[5, 6] = np.nan", "is not +1 or -1"),
    "boolean": ("result = np.ones((29, 29), dtype=bool)", "booleans"),
    "singular": (PALEY + "\nresult[1] = result[0]", "singular"),
    "text": ("result = [['+'] * 29] * 29", "real numbers"),
}


@pytest.fixture(scope="module")
def hadamard_outcomes() -> dict[str, EvaluationOutcome]:
    return run_all("hadamard_29", {k: body for k, (body, _) in HADAMARD_CASES.items()})


def test_hadamard_paley_matrix_scores_exactly(
    hadamard_outcomes: dict[str, EvaluationOutcome],
) -> None:
    outcome = hadamard_outcomes["paley"]
    assert outcome.valid, outcome.error
    # 28^14 / (2^28 * 342 * 7^12) = 7^2 / 342 = 49 / 342.
    assert Fraction(28**14, 1270698346568170340352) == Fraction(49, 342)
    assert outcome.metrics["det_ratio"] == 49 / 342
    assert outcome.score == 49 / 342
    assert outcome.metrics["det_over_2_28"] == float(7**14)


@pytest.mark.parametrize("case", [k for k, (_, frag) in HADAMARD_CASES.items() if frag])
def test_hadamard_invalid_matrices_are_rejected(
    hadamard_outcomes: dict[str, EvaluationOutcome], case: str
) -> None:
    outcome = hadamard_outcomes[case]
    assert_invalid(outcome, HADAMARD_CASES[case][1])
    assert outcome.metrics.get("det_ratio") == 0.0


def test_initial_programs_are_deterministic_and_fast() -> None:
    """Second run of every initial program reports the same metric (and well within budget)."""
    for name in BATCH_A:
        task: Task = load_task(TASKS / name)
        outcome = SandboxEvaluator(task).evaluate(task.initial_program)
        assert outcome.valid, (name, outcome.error)
        assert task.metric_value(outcome.metrics) == task.initial_score
        assert outcome.elapsed_s < 10.0

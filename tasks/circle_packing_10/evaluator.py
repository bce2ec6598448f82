"""Evaluator for packing 10 circles in the unit square (OpenEvolve task format).

A smaller instance of ``circle_packing_26``, sized for a small model on a CPU; the checks are
the same. ``evaluate(program_path)`` imports the candidate, calls ``run_packing()`` and checks
the returned packing itself; the sum the program reports is never trusted. A packing is valid
when

- ``centers`` has shape (10, 2) and ``radii`` shape (10,), all values finite;
- every radius is >= 0;
- every circle lies inside [0, 1]^2 (tolerance 1e-12);
- no two circles overlap: dist(c_i, c_j) >= r_i + r_j - 1e-12.

We know of no published value for 10 circles; the reference, BEST_KNOWN, is the best sum found
by our own multi-start SLSQP optimisation (benchmarks/task_references.py).

Metrics of a valid packing: ``sum_radii``, ``target_ratio`` (sum / BEST_KNOWN), ``validity`` =
1.0 and ``combined_score`` = sum / BEST_KNOWN (1.0 at the reference). An invalid packing scores
``combined_score`` = 0.0 with an ``error`` string naming the first violated constraint.
"""

import importlib.util
import sys
import uuid

import numpy as np

N_CIRCLES = 10
BEST_KNOWN = 1.591013  # our own multi-start SLSQP (benchmarks/task_references.py)
TOL = 1e-12


def _load_program(program_path):
    name = f"candidate_program_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _run(program_path):
    """Import the program and call run_packing(); returns (centers, radii) as float arrays."""
    module = _load_program(program_path)
    if not hasattr(module, "run_packing"):
        raise AttributeError("the program defines no run_packing() function")
    result = module.run_packing()
    if not isinstance(result, (tuple, list)) or len(result) < 2:
        raise TypeError(
            f"run_packing() must return (centers, radii, sum_radii), got {type(result).__name__}"
        )
    try:
        centers = np.asarray(result[0], dtype=float)
        radii = np.asarray(result[1], dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"centers/radii are not numeric arrays: {exc}") from None
    return centers, radii


def check_packing(centers, radii):
    """Return None for a valid packing, else a message naming the first violation."""
    if centers.shape != (N_CIRCLES, 2):
        return f"centers must have shape ({N_CIRCLES}, 2), got {centers.shape}"
    if radii.shape != (N_CIRCLES,):
        return f"radii must have shape ({N_CIRCLES},), got {radii.shape}"
    if not np.all(np.isfinite(centers)):
        return "centers contain NaN or inf"
    if not np.all(np.isfinite(radii)):
        return "radii contain NaN or inf"
    if np.any(radii < 0):
        i = int(np.argmin(radii))
        return f"circle {i} has negative radius {radii[i]!r}"
    low = np.min(centers - radii[:, None], axis=1)
    high = np.max(centers + radii[:, None], axis=1)
    outside = np.where((low < -TOL) | (high > 1.0 + TOL))[0]
    if outside.size:
        i = int(outside[0])
        return (
            f"circle {i} at ({centers[i, 0]:.6f}, {centers[i, 1]:.6f}) with radius "
            f"{radii[i]:.6f} is outside the unit square"
        )
    diff = centers[:, None, :] - centers[None, :, :]
    dist = np.sqrt(np.sum(diff**2, axis=-1))
    rows, cols = np.triu_indices(N_CIRCLES, k=1)
    gap = dist[rows, cols] - (radii[rows] + radii[cols])
    bad = np.where(gap < -TOL)[0]
    if bad.size:
        k = int(bad[np.argmin(gap[bad])])
        i, j = int(rows[k]), int(cols[k])
        return (
            f"circles {i} and {j} overlap: distance {dist[i, j]:.9f} < r_{i} + r_{j} = "
            f"{radii[i] + radii[j]:.9f}"
        )
    return None


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "sum_radii": 0.0, "error": reason}


def evaluate(program_path):
    """Full evaluation: validate the packing and score it by its sum of radii.

    Exceptions raised by the program propagate (the caller records the traceback).
    """
    centers, radii = _run(program_path)
    problem = check_packing(centers, radii)
    if problem is not None:
        return _invalid(problem)
    total = float(np.sum(radii))
    return {
        "sum_radii": total,
        "target_ratio": total / BEST_KNOWN,
        "validity": 1.0,
        "combined_score": total / BEST_KNOWN,
    }


def evaluate_stage1(program_path):
    """Cascade stage 1: the packing must be valid (same checks as evaluate)."""
    centers, radii = _run(program_path)
    problem = check_packing(centers, radii)
    if problem is not None:
        return _invalid(problem)
    total = float(np.sum(radii))
    return {"validity": 1.0, "sum_radii": total, "combined_score": total / BEST_KNOWN}


def evaluate_stage2(program_path):
    """Cascade stage 2: the full evaluation."""
    return evaluate(program_path)

"""Evaluator for packing 32 circles in the unit square (OpenEvolve task format).

``evaluate(program_path)`` imports the candidate, calls ``run_packing()`` and checks the returned
packing itself; the sum the program reports is never trusted. A packing is valid when

- ``centers`` has shape (32, 2) and ``radii`` shape (32,), all values finite real numbers;
- every radius is >= 0;
- every circle lies inside [0, 1]^2: r_i <= x_i <= 1 - r_i and r_i <= y_i <= 1 - r_i
  (tolerance 1e-12);
- no two circles overlap: dist(c_i, c_j) >= r_i + r_j - 1e-12.

These are the validity rules of circle_packing_26 with N = 32.

Metrics of a valid packing: ``sum_radii`` (the reported quantity, higher is better),
``validity`` = 1.0 and ``combined_score`` = sum_radii / 2.939573 (the best known sum, so 1.0
means matching it). An invalid packing scores ``combined_score`` = 0.0, ``sum_radii`` = 0.0,
``validity`` = 0.0 and an ``error`` naming the first violated constraint. Exceptions raised by
the program itself propagate (the sandbox records the traceback).
"""

import importlib.util
import sys
import uuid

import numpy as np

N_CIRCLES = 32
# Best known sum of radii for 32 circles: 2.939573 (SimpleTES, 2025/26; AlphaEvolve reported
# 2.937 in 2025).
BEST_KNOWN = 2.939573
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


def _as_real_array(value, what):
    """``value`` as a float ndarray, or an error message (booleans/complex/objects rejected)."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        return None, f"{what} is not an array of numbers: {exc}"
    if raw.dtype.kind not in "iuf":
        return None, f"{what} must hold real numbers, got dtype {raw.dtype}"
    return raw.astype(float), None


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
            f"circles {i} and {j} overlap: distance {dist[i, j]:.12f} < r_{i} + r_{j} = "
            f"{radii[i] + radii[j]:.12f}"
        )
    return None


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "sum_radii": 0.0, "error": reason}


def evaluate(program_path):
    """Validate the packing returned by ``run_packing()`` and score it by its sum of radii."""
    module = _load_program(program_path)
    if not callable(getattr(module, "run_packing", None)):
        return _invalid("the program defines no run_packing() function")
    result = module.run_packing()
    if not isinstance(result, (tuple, list)) or len(result) < 2:
        return _invalid(
            f"run_packing() must return (centers, radii, sum_radii), got {type(result).__name__}"
        )
    centers, problem = _as_real_array(result[0], "centers")
    if problem is None:
        radii, problem = _as_real_array(result[1], "radii")
    if problem is None:
        problem = check_packing(centers, radii)
    if problem is not None:
        return _invalid(problem)
    total = float(np.sum(radii))
    return {
        "sum_radii": total,
        "validity": 1.0,
        "combined_score": total / BEST_KNOWN,
    }

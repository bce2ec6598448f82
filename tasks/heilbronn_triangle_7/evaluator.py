"""Evaluator of the Heilbronn problem for 7 points in a triangle (OpenEvolve task format).

A smaller instance of ``heilbronn_triangle_11``, sized for a small model on a CPU; the setting
and the checks are the same. The container is the equilateral triangle T with vertices (0, 0),
(1, 0), (1/2, sqrt(3)/2); points may lie inside T or on its boundary. The score of a
configuration is the smallest area of a triangle formed by any three of the 7 points (all
C(7, 3) = 35 triples) divided by the area of T (sqrt(3)/4), i.e. the value for a container of
unit area. The reference, BEST_MIN_AREA, is the best value found by our own multi-start SLSQP
optimisation (benchmarks/task_references.py); it agrees with 7/72 to 1e-12.

``evaluate(program_path)`` imports the candidate, calls ``run_points()`` and checks the points
itself. A configuration is valid when

- the points form a numeric array of shape (7, 2) (not booleans), all values finite;
- every point lies in T up to 1e-12: its signed distance to each of the three edge lines is
  >= -1e-12 (distances y, (sqrt(3) x - y) / 2 and (sqrt(3) (1 - x) - y) / 2).

Coincident or collinear points are valid but make the minimum area 0.

Metrics of a valid configuration: ``min_area`` (normalised minimum triangle area, higher is
better), ``validity`` = 1.0 and ``combined_score`` = min_area / BEST_MIN_AREA (1.0 at the
reference). An invalid configuration scores ``combined_score`` = 0.0 with an ``error`` naming
the problem. Exceptions raised by the program itself propagate (the caller records the
traceback).
"""

import importlib.util
import itertools
import math
import sys
import uuid

import numpy as np

N_POINTS = 7
SQRT3 = math.sqrt(3.0)
TRIANGLE_AREA = SQRT3 / 4.0
BEST_MIN_AREA = 0.097222222222  # our own multi-start SLSQP (benchmarks/task_references.py)
TOL = 1e-12
_TRIPLES = np.array(list(itertools.combinations(range(N_POINTS), 3)))


def _load_program(program_path):
    name = f"heilbronn_candidate_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "error": reason}


def to_points(value):
    """Convert a returned value to a float array of shape (7, 2), or return an error string."""
    if isinstance(value, (str, bytes, dict)) or value is None:
        return f"points must be an array of shape ({N_POINTS}, 2), got {type(value).__name__}"
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        return f"points are not an array of real numbers: {exc}"
    if raw.dtype == bool:
        return "points hold booleans, not coordinates"
    if raw.dtype.kind not in "iuf":
        return f"points are not an array of real numbers (dtype {raw.dtype})"
    pts = raw.astype(float)
    if pts.shape != (N_POINTS, 2):
        return f"points must have shape ({N_POINTS}, 2), got {pts.shape}"
    if not np.all(np.isfinite(pts)):
        return "points contain NaN or inf"
    return pts


def edge_distances(pts):
    """Signed distances (n, 3) of points to the lines of T's edges; >= 0 inside T."""
    x, y = pts[:, 0], pts[:, 1]
    return np.stack([y, (SQRT3 * x - y) / 2.0, (SQRT3 * (1.0 - x) - y) / 2.0], axis=1)


def min_triangle_area(pts):
    """Smallest area of a triangle with vertices among the points (absolute, not normalised)."""
    a, b, c = pts[_TRIPLES[:, 0]], pts[_TRIPLES[:, 1]], pts[_TRIPLES[:, 2]]
    cross = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    return float(np.min(np.abs(cross)) / 2.0)


def evaluate(program_path):
    """Validate the program's points and score their smallest triangle."""
    module = _load_program(program_path)
    if not callable(getattr(module, "run_points", None)):
        return _invalid("the program defines no run_points() function")
    pts = to_points(module.run_points())
    if isinstance(pts, str):
        return _invalid(pts)
    dist = edge_distances(pts)
    worst = np.min(dist, axis=1)
    outside = np.where(worst < -TOL)[0]
    if outside.size:
        i = int(outside[np.argmin(worst[outside])])
        return _invalid(
            f"point {i} at ({float(pts[i, 0])!r}, {float(pts[i, 1])!r}) is outside the triangle "
            f"with vertices (0, 0), (1, 0), (0.5, sqrt(3)/2) (distance {-worst[i]:.3g} beyond an "
            "edge)"
        )
    min_area = min_triangle_area(pts) / TRIANGLE_AREA
    return {
        "min_area": min_area,
        "validity": 1.0,
        "combined_score": min_area / BEST_MIN_AREA,
    }

"""Evaluator of the smoke task: 12 points in the unit disk, maximise their convex hull's area.

``evaluate(program_path)`` imports the program, calls ``run()`` and checks the points itself:
shape (12, 2), finite, every point inside the closed unit disk (tolerance 1e-9). The area of
the convex hull (order of the points does not matter) is the metric ``area``; its maximum is
the regular 12-gon inscribed in the unit circle, area 6 * sin(pi / 6) = 3.0, so
``combined_score`` = area / 3.0 lies in [0, 1]. Invalid points score 0 with an ``error``.
"""

import importlib.util
import sys
import uuid

import numpy as np

N_POINTS = 12
MAX_AREA = 3.0  # regular 12-gon inscribed in the unit circle
TOL = 1e-9


def _load_program(program_path):
    name = f"smoke_program_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def hull_area(points):
    """Area of the convex hull of 2-D points (Andrew's monotone chain + shoelace)."""
    pts = sorted(set(map(tuple, points.tolist())))
    if len(pts) < 3:
        return 0.0

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    hull = lower[:-1] + upper[:-1]
    area = 0.0
    for (x1, y1), (x2, y2) in zip(hull, hull[1:] + hull[:1]):
        area += x1 * y2 - x2 * y1
    return abs(area) / 2.0


def _invalid(reason):
    return {"combined_score": 0.0, "area": 0.0, "error": reason}


def evaluate(program_path):
    """Validate the points and score the area of their convex hull."""
    module = _load_program(program_path)
    if not hasattr(module, "run"):
        return _invalid("the program defines no run() function")
    try:
        points = np.asarray(module.run(), dtype=float)
    except (TypeError, ValueError) as exc:
        return _invalid(f"run() did not return numeric points: {exc}")
    if points.shape != (N_POINTS, 2):
        return _invalid(f"points must have shape ({N_POINTS}, 2), got {points.shape}")
    if not np.all(np.isfinite(points)):
        return _invalid("points contain NaN or inf")
    norms = np.sqrt(np.sum(points**2, axis=1))
    if np.any(norms > 1.0 + TOL):
        i = int(np.argmax(norms))
        return _invalid(f"point {i} is outside the unit disk (distance {norms[i]:.6f} > 1)")
    area = hull_area(points)
    return {"area": area, "combined_score": area / MAX_AREA}

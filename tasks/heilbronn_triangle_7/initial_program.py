"""Heilbronn problem in a triangle: 7 points whose smallest triangle is as large as possible."""

import itertools

import numpy as np

N_POINTS = 7
TRIANGLE = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3.0) / 2.0]])  # side 1


# EVOLVE-BLOCK-START
def min_area(points):
    """Smallest area of a triangle formed by any three of the points."""
    triples = itertools.combinations(points, 3)
    return min(abs(np.linalg.det(np.column_stack([t, np.ones(3)]))) / 2 for t in triples)


def construct_points():
    """Seeded random points in TRIANGLE, improved by a short random local search."""
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(3), N_POINTS)  # barycentric coordinates: always inside
    best = min_area(weights @ TRIANGLE)
    for _ in range(30):
        trial, i = weights.copy(), rng.integers(N_POINTS)
        trial[i] = np.abs(trial[i] + rng.normal(0.0, 0.05, 3))
        trial[i] /= trial[i].sum()
        if min_area(trial @ TRIANGLE) > best:  # keep a move only when it helps
            weights, best = trial, min_area(trial @ TRIANGLE)
    return weights @ TRIANGLE


# EVOLVE-BLOCK-END
def run_points():
    """Entry point called by the evaluator: the points, ndarray (7, 2)."""
    return construct_points()

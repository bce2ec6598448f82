"""Heilbronn problem in a triangle: place 11 points in an equilateral triangle so that the
smallest triangle formed by any three of them is as large as possible."""

import numpy as np

N_POINTS = 11
# The container: the equilateral triangle with these vertices (side 1, area sqrt(3)/4).
TRIANGLE = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3.0) / 2.0]])


# EVOLVE-BLOCK-START
def construct_points():
    """Return 11 points inside (or on the boundary of) the triangle TRIANGLE.

    Baseline: the points are evenly spaced on the triangle's inscribed circle (no three points
    of a circle are collinear, so every triangle has positive area).

    Returns:
        ndarray of shape (11, 2) with the (x, y) coordinates.
    """
    centre = TRIANGLE.mean(axis=0)  # the incentre of an equilateral triangle
    radius = np.sqrt(3.0) / 6.0  # inradius of the side-1 equilateral triangle
    angles = np.pi / 2 + 2 * np.pi * np.arange(N_POINTS) / N_POINTS
    return centre + radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)


# EVOLVE-BLOCK-END


def run_points():
    """Entry point called by the evaluator: the points, ndarray (11, 2)."""
    return construct_points()


if __name__ == "__main__":
    from itertools import combinations

    p = np.asarray(run_points(), dtype=float)
    smallest = min(
        abs((b[0] - a[0]) * (c[1] - a[1]) - (c[0] - a[0]) * (b[1] - a[1])) / 2
        for a, b, c in combinations(p, 3)
    )
    print(f"min area / triangle area: {smallest / (np.sqrt(3) / 4):.9f}")

"""Choose 12 points in the unit disk so that their convex hull has the largest possible area."""

import numpy as np

N_POINTS = 12


# EVOLVE-BLOCK-START
def make_points():
    """Return the 12 points as an ndarray of shape (12, 2); each must satisfy x^2 + y^2 <= 1."""
    radius = 0.6  # distance of every point from the origin (at most 1.0 is allowed)
    spread = np.pi  # angle covered by the points, in radians (a full turn is 2 * np.pi)
    angles = np.linspace(0.0, spread, N_POINTS, endpoint=False)
    return np.stack([radius * np.cos(angles), radius * np.sin(angles)], axis=1)


# EVOLVE-BLOCK-END


def run():
    """Entry point called by the evaluator: the points, ndarray (12, 2)."""
    return make_points()


if __name__ == "__main__":
    print(run())

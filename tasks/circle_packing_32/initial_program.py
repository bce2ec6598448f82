"""Pack 32 non-overlapping circles in the unit square, maximising the sum of their radii."""

import numpy as np

N_CIRCLES = 32


# EVOLVE-BLOCK-START
def construct_packing():
    """Place the 32 circles on a regular 8 x 4 grid of cells.

    Returns:
        centers: ndarray (32, 2), circle centres (x, y) in [0, 1]^2.
        radii: ndarray (32,), radii >= 0.
        sum_radii: float, the sum of the radii.
    """
    columns, rows = 8, 4
    xs = (np.arange(columns) + 0.5) / columns
    ys = (np.arange(rows) + 0.5) / rows
    centers = np.array([[x, y] for y in ys for x in xs])
    radii = compute_radii(centers)
    return centers, radii, float(np.sum(radii))


def compute_radii(centers):
    """Safe radii for fixed centres: the distance to the nearest border, capped at half the
    distance to the nearest other centre (so no two circles can overlap).

    Args:
        centers: ndarray (n, 2) of centres inside the unit square.

    Returns:
        ndarray (n,) of radii.
    """
    border = np.min(np.hstack([centers, 1.0 - centers]), axis=1)
    diff = centers[:, None, :] - centers[None, :, :]
    dist = np.sqrt(np.sum(diff**2, axis=-1))
    np.fill_diagonal(dist, np.inf)
    return np.minimum(border, dist.min(axis=1) / 2.0)


# EVOLVE-BLOCK-END


def run_packing():
    """Entry point called by the evaluator: (centers (32, 2), radii (32,), sum_radii)."""
    centers, radii, sum_radii = construct_packing()
    return centers, radii, sum_radii


if __name__ == "__main__":
    _, _, total = run_packing()
    print(f"sum of radii: {total:.6f}")

"""Pack 26 non-overlapping circles in the unit square, maximising the sum of their radii."""

import numpy as np

N_CIRCLES = 26


def compute_max_radii(centers):
    """Largest radii for fixed centres: clip to the borders, then shrink overlapping pairs.

    Args:
        centers: ndarray (n, 2) of centres inside the unit square.

    Returns:
        ndarray (n,) of radii such that no circle leaves the square and no two overlap.
    """
    n = centers.shape[0]
    # Each circle may extend at most to the nearest border.
    radii = np.min(np.hstack([centers, 1.0 - centers]), axis=1)
    # Scale each overlapping pair down proportionally; radii only shrink, so pairs fixed
    # earlier stay fixed.
    for i in range(n):
        for j in range(i + 1, n):
            dist = np.sqrt(np.sum((centers[i] - centers[j]) ** 2))
            if radii[i] + radii[j] > dist:
                scale = dist / (radii[i] + radii[j])
                radii[i] *= scale
                radii[j] *= scale
    return radii


# EVOLVE-BLOCK-START
def construct_packing():
    """Place 26 circles on concentric rings around the centre of the unit square.

    Returns:
        centers: ndarray (26, 2), circle centres (x, y) in [0, 1]^2.
        radii: ndarray (26,), radii >= 0.
        sum_radii: float, the sum of the radii.
    """
    centers = np.zeros((N_CIRCLES, 2))
    centers[0] = [0.5, 0.5]  # one circle in the centre
    # Inner ring: 8 circles at distance 0.3 from the centre.
    for i in range(8):
        angle = 2 * np.pi * i / 8
        centers[1 + i] = [0.5 + 0.3 * np.cos(angle), 0.5 + 0.3 * np.sin(angle)]
    # Outer ring: 17 circles at distance 0.7 (pulled back inside the square below).
    for i in range(17):
        angle = 2 * np.pi * i / 17
        centers[9 + i] = [0.5 + 0.7 * np.cos(angle), 0.5 + 0.7 * np.sin(angle)]
    centers = np.clip(centers, 0.01, 0.99)
    radii = compute_max_radii(centers)
    return centers, radii, float(np.sum(radii))


# EVOLVE-BLOCK-END


def run_packing():
    """Entry point called by the evaluator: (centers (26, 2), radii (26,), sum_radii)."""
    centers, radii, sum_radii = construct_packing()
    return centers, radii, sum_radii


if __name__ == "__main__":
    _, _, total = run_packing()
    print(f"sum of radii: {total:.6f}")

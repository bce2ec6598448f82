"""Pack 10 non-overlapping circles in the unit square, maximising the sum of their radii."""

import numpy as np

N_CIRCLES = 10


def compute_max_radii(centers):
    """Valid radii for fixed centres: clip to the borders, then shrink each overlapping pair."""
    radii = np.min(np.hstack([centers, 1.0 - centers]), axis=1)
    for i in range(len(centers)):
        for j in range(i + 1, len(centers)):
            dist = np.linalg.norm(centers[i] - centers[j])
            if radii[i] + radii[j] > dist:
                radii[[i, j]] *= dist / (radii[i] + radii[j])
    return radii


# EVOLVE-BLOCK-START
def construct_packing():
    """One circle in the centre and 9 on a ring of radius 0.3 around it; radii from the helper.

    Returns (centers ndarray (10, 2), radii ndarray (10,), sum of the radii).
    """
    angles = 2 * np.pi * np.arange(N_CIRCLES - 1) / (N_CIRCLES - 1)
    ring = 0.5 + 0.3 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    centers = np.clip(np.vstack([[0.5, 0.5], ring]), 0.01, 0.99)
    radii = compute_max_radii(centers)
    return centers, radii, float(np.sum(radii))


# EVOLVE-BLOCK-END
def run_packing():
    """Entry point called by the evaluator: (centers (10, 2), radii (10,), sum_radii)."""
    return construct_packing()

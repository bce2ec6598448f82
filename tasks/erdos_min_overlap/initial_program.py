"""Erdős minimum overlap: a step function h on [0, 2] with values in [0, 1] and integral 1
whose largest overlap max_k ∫ h(x) (1 - h(x + k)) dx is as small as possible."""

import numpy as np


# EVOLVE-BLOCK-START
def construct_step_function():
    """Baseline: the constant function h = 1/2 on [0, 2], sampled on 400 equal steps.

    Its worst shift is k = 0, where the overlap is ∫ 1/2 * 1/2 dx over [0, 2] = 0.5.

    Returns:
        ndarray (n,) of heights in [0, 1] with sum n / 2 (2 <= n <= 65536).
    """
    n = 400
    return np.full(n, 0.5)


# EVOLVE-BLOCK-END


def run_code():
    """Entry point called by the evaluator: the n heights of h."""
    return construct_step_function()


if __name__ == "__main__":
    h = np.asarray(run_code(), dtype=float)
    c5 = np.max(np.correlate(h, 1.0 - h, mode="full")) * 2.0 / h.size
    print(f"C5 = {c5:.6f}")

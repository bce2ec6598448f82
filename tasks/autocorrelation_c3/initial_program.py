"""Third autocorrelation inequality: a step function f on [-1/4, 1/4] (signed values allowed)
minimising C3 = max_t |(f * f)(t)| / (∫ f)^2."""

import numpy as np


# EVOLVE-BLOCK-START
def construct_function():
    """Baseline: the constant function f = 1 on [-1/4, 1/4], sampled on 400 equal steps.

    Its autoconvolution is a triangle of height 1/2 at t = 0 and ∫ f = 1/2, so C3 = 2.

    Returns:
        ndarray (n,) of finite real heights with a nonzero sum (1 <= n <= 65536).
    """
    n = 400
    return np.ones(n)


# EVOLVE-BLOCK-END


def run_code():
    """Entry point called by the evaluator: the n heights of f."""
    return construct_function()


if __name__ == "__main__":
    f = np.asarray(run_code(), dtype=float)
    dx = 0.5 / f.size
    c3 = np.max(np.abs(np.convolve(f, f))) * dx / (np.sum(f) * dx) ** 2
    print(f"C3 = {c3:.6f}")

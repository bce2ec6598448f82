"""Find a 29 x 29 matrix with entries +1 / -1 whose determinant is as large as possible."""

import numpy as np

N = 29


# EVOLVE-BLOCK-START
def construct_matrix():
    """Paley-type baseline: I + Q, where Q is the Jacobsthal matrix of the prime 29.

    Q[i, j] = legendre(j - i mod 29) (0 on the diagonal), so I + Q has every entry +1 or -1.
    Q is symmetric with Q @ Q = 29 I - J and Q @ 1 = 0, hence |det(I + Q)| = 28^14.

    Returns:
        ndarray (29, 29) of ints, every entry +1 or -1.
    """
    squares = {(x * x) % N for x in range(1, N)}
    chi = np.array([0] + [1 if r in squares else -1 for r in range(1, N)])
    idx = np.arange(N)
    jacobsthal = chi[(idx[None, :] - idx[:, None]) % N]
    return np.eye(N, dtype=int) + jacobsthal


# EVOLVE-BLOCK-END


def run_code():
    """Entry point called by the evaluator: the 29 x 29 matrix of +1 / -1 entries."""
    return construct_matrix()


if __name__ == "__main__":
    matrix = run_code()
    sign, logdet = np.linalg.slogdet(matrix.astype(float))
    print(f"log|det| (float, for information only): {logdet:.6f}")

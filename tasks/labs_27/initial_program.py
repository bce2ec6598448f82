"""Find a +-1 sequence of length 27 with low aperiodic autocorrelation energy (LABS problem)."""

import numpy as np

N = 27


# EVOLVE-BLOCK-START
def construct_sequence():
    """Return a sequence of 27 entries, each +1 or -1, with a small autocorrelation energy.

    The energy is E = sum_{k=1}^{26} C_k^2 with C_k = sum_i s_i * s_{i+k}; lower is better.
    This baseline is a random sequence drawn with a fixed seed (deterministic).

    Returns:
        ndarray of shape (27,) with integer entries in {-1, +1}.
    """
    rng = np.random.default_rng(2024)
    return rng.choice(np.array([-1, 1]), size=N)


# EVOLVE-BLOCK-END


def run_sequence():
    """Entry point called by the evaluator: the sequence, shape (27,), entries +1 or -1."""
    return construct_sequence()


if __name__ == "__main__":
    s = np.asarray(run_sequence())
    energy = sum(int(np.dot(s[: N - k], s[k:])) ** 2 for k in range(1, N))
    print(f"energy: {energy}")

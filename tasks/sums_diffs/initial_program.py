"""Find a finite set of integers A with many sums and few differences."""


# EVOLVE-BLOCK-START
def construct_set():
    """Baseline: the arithmetic progression {0, 1, ..., 31}.

    For an arithmetic progression |A + A| = |A - A| = 2|A| - 1, so c(A) = 1 exactly.

    Returns:
        list of distinct ints (2 <= len <= 512, each in [-1_000_000, 1_000_000]).
    """
    return list(range(32))


# EVOLVE-BLOCK-END


def run_code():
    """Entry point called by the evaluator: the set A as a list of integers."""
    return construct_set()


if __name__ == "__main__":
    import math

    a = sorted(set(run_code()))
    sums = {x + y for x in a for y in a}
    diffs = {x - y for x in a for y in a}
    print(f"c(A) = {math.log(len(sums) / len(a)) / math.log(len(diffs) / len(a)):.6f}")

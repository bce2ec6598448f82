"""Turns the kernel's weight into the value the evaluator scores."""

# EVOLVE-BLOCK-START
SCALE = 1.0


def combine(weight):
    return SCALE * weight


# EVOLVE-BLOCK-END

"""Design the cheapest pressure vessel with hemispherical heads (mixed discrete problem)."""

import numpy as np

PLATE = 0.0625  # thicknesses come in whole multiples of 1/16 inch


# EVOLVE-BLOCK-START
def design_vessel():
    """Return the design (x1, x2, x3, x4) in inches.

    x1 = shell thickness and x2 = head thickness, each a whole multiple k * 0.0625 with
    k in 1..99; x3 = inner radius and x4 = length of the cylindrical section, each in [10, 200].

    Baseline: a conservative feasible design (thick plates, generous volume).
    """
    x1 = 20 * PLATE  # 1.25
    x2 = 12 * PLATE  # 0.75
    x3 = 50.0
    x4 = 150.0
    return np.array([x1, x2, x3, x4])


# EVOLVE-BLOCK-END


def run_design():
    """Entry point called by the evaluator: the design (x1, x2, x3, x4)."""
    return design_vessel()


if __name__ == "__main__":
    x1, x2, x3, x4 = run_design()
    cost = 0.6224 * x1 * x3 * x4 + 1.7781 * x2 * x3**2 + 3.1661 * x1**2 * x4 + 19.84 * x1**2 * x3
    print(f"cost: {cost:.6f}")

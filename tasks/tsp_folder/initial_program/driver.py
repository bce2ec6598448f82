"""TSP solver entry point: reads the cities, builds and improves a tour, prints it.

Input (stdin): a JSON object {"points": [[x, y], ...], "time_limit_s": seconds}.
Output (stdout): a JSON list, the order in which the tour visits the city indices.
"""

import json
import sys
import time

from geometry import distance_matrix, tour_length
from heuristics import construct, improve


# EVOLVE-BLOCK-START
def solve(dist, deadline):
    """Build one tour, then improve it until the deadline."""
    tour = construct(dist)
    tour = improve(tour, dist, deadline)
    return tour
# EVOLVE-BLOCK-END


def main():
    data = json.load(sys.stdin)
    points = [tuple(p) for p in data["points"]]
    start = time.monotonic()
    deadline = start + 0.8 * float(data.get("time_limit_s", 5.0))
    dist = distance_matrix(points)
    tour = solve(dist, deadline)
    print(json.dumps([int(c) for c in tour]))
    print(f"tour length {tour_length(tour, dist):.6f}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Tour construction and improvement heuristics of the TSP solver.

`construct(dist)` builds a first tour; `improve(tour, dist, deadline)` may shorten it until the
time given by `deadline` (a `time.monotonic()` value). Both return a list holding every city
index exactly once.
"""

import time

# EVOLVE-BLOCK-START
def construct(dist):
    """Nearest neighbour from city 0: always go to the closest unvisited city."""
    n = len(dist)
    tour = [0]
    unvisited = set(range(1, n))
    while unvisited:
        last = tour[-1]
        nxt = min(unvisited, key=lambda j: dist[last][j])
        tour.append(nxt)
        unvisited.remove(nxt)
    return tour


def improve(tour, dist, deadline):
    """No improvement yet: return the tour as it is."""
    return list(tour)
# EVOLVE-BLOCK-END

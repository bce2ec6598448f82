"""Distances and tour lengths (read-only helpers of the TSP solver)."""

import math


def distance_matrix(points):
    """Euclidean distances between all pairs of points, as a list of lists."""
    n = len(points)
    dist = [[0.0] * n for _ in range(n)]
    for i in range(n):
        xi, yi = points[i]
        for j in range(i + 1, n):
            d = math.hypot(xi - points[j][0], yi - points[j][1])
            dist[i][j] = dist[j][i] = d
    return dist


def tour_length(tour, dist):
    """Length of the closed tour (it returns to its first city)."""
    return sum(dist[tour[i - 1]][tour[i]] for i in range(len(tour)))

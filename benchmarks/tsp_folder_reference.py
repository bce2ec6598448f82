"""Reference tour length of ``tasks/tsp_folder``: our own 2-opt + Or-opt local search.

The reference (``sota_score`` in its ``task.yaml``) is what a plain local search of the kind
its ``docs/`` describe reaches: nearest neighbour from every start city, each improved by
2-opt (reverse a segment when the two new edges are shorter) and Or-opt (move a segment of
1-3 cities, possibly reversed, to a better place) until neither finds an improving move; the
shortest tour counts. It is measured by the task's own evaluator: the best tour is written
into a copy of the initial program folder whose ``solve`` returns it, so the printed value is
what a program printing that tour scores. The initial program is measured the same way.

Run (a few seconds)::

    .venv/bin/python benchmarks/tsp_folder_reference.py [--starts 100]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import shutil
import tempfile
import time
from pathlib import Path

TASK = Path(__file__).resolve().parent.parent / "tasks" / "tsp_folder"


def load_evaluator():
    spec = importlib.util.spec_from_file_location("tsp_folder_evaluator", TASK / "evaluator.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def length(tour: list[int], dist: list[list[float]]) -> float:
    return sum(dist[tour[i - 1]][tour[i]] for i in range(len(tour)))


def nearest_neighbour(dist: list[list[float]], start: int) -> list[int]:
    n = len(dist)
    tour, left = [start], set(range(n)) - {start}
    while left:
        nxt = min(left, key=lambda j: dist[tour[-1]][j])
        tour.append(nxt)
        left.remove(nxt)
    return tour


def two_opt(tour: list[int], dist: list[list[float]]) -> tuple[list[int], bool]:
    n, improved_any = len(tour), False
    improved = True
    while improved:
        improved = False
        for i in range(n - 1):
            a, b = tour[i], tour[i + 1]
            for j in range(i + 2, n if i > 0 else n - 1):
                c, d = tour[j], tour[(j + 1) % n]
                if dist[a][c] + dist[b][d] < dist[a][b] + dist[c][d] - 1e-12:
                    tour[i + 1 : j + 1] = reversed(tour[i + 1 : j + 1])
                    a, b = tour[i], tour[i + 1]
                    improved = improved_any = True
    return tour, improved_any


def or_opt(tour: list[int], dist: list[list[float]]) -> tuple[list[int], bool]:
    n, improved_any = len(tour), False
    improved = True
    while improved:
        improved = False
        for size in (1, 2, 3):
            for i in range(n):
                seg = [tour[(i + k) % n] for k in range(size)]
                prev, nxt = tour[(i - 1) % n], tour[(i + size) % n]
                removed = dist[prev][seg[0]] + dist[seg[-1]][nxt] - dist[prev][nxt]
                rest = [c for c in tour if c not in seg]
                best, where, rev = 1e-12, None, False
                for k in range(len(rest)):
                    p, q = rest[k], rest[(k + 1) % len(rest)]
                    for reverse in (False, True):
                        s0, s1 = (seg[-1], seg[0]) if reverse else (seg[0], seg[-1])
                        gain = removed - (dist[p][s0] + dist[s1][q] - dist[p][q])
                        if gain > best:
                            best, where, rev = gain, k, reverse
                if where is not None:
                    piece = list(reversed(seg)) if rev else seg
                    tour = rest[: where + 1] + piece + rest[where + 1 :]
                    improved = improved_any = True
    return tour, improved_any


def local_search(tour: list[int], dist: list[list[float]]) -> list[int]:
    while True:
        tour, a = two_opt(tour, dist)
        tour, b = or_opt(tour, dist)
        if not (a or b):
            return tour


def evaluate_tour(evaluator, tour: list[int] | None) -> dict:
    """The evaluator's metrics of the initial program folder, or of one that prints ``tour``."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "program"
        shutil.copytree(TASK / "initial_program", folder)
        if tour is not None:
            driver = folder / "driver.py"
            text = driver.read_text()
            start = text.index("# EVOLVE-BLOCK-START")
            end = text.index("# EVOLVE-BLOCK-END")
            driver.write_text(
                text[:start]
                + f"# EVOLVE-BLOCK-START\ndef solve(dist, deadline):\n    return {tour!r}\n"
                + text[end:]
            )
        return evaluator.evaluate(str(folder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=100, help="nearest-neighbour start cities")
    args = parser.parse_args()
    evaluator = load_evaluator()
    points = evaluator.cities()
    n = len(points)
    dist = [[math.dist(points[i], points[j]) for j in range(n)] for i in range(n)]
    t0 = time.monotonic()
    best: list[int] | None = None
    for start in range(min(args.starts, n)):
        tour = local_search(nearest_neighbour(dist, start), dist)
        if best is None or length(tour, dist) < length(best, dist):
            best = tour
    assert best is not None
    initial = evaluate_tour(evaluator, None)
    reference = evaluate_tour(evaluator, best)
    print(f"initial program: tour_length {initial['tour_length']:.6f}")
    print(
        f"reference (2-opt + Or-opt from {min(args.starts, n)} nearest-neighbour starts, "
        f"{time.monotonic() - t0:.1f} s): tour_length {reference['tour_length']:.6f}"
    )
    print(f"ratio reference / initial: {reference['tour_length'] / initial['tour_length']:.4f}")


if __name__ == "__main__":
    main()

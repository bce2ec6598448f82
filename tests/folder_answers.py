"""Scripted model answers for the folder-program tests (tsp_folder, folder_mixed_c).

Each answer edits two files of the folder at once: a per-file rewrite of one file and a
SEARCH/REPLACE block (or a second rewrite) for the other, so a child differs from its parent in
two files. ``k`` makes every answer different (no two children have the same code).
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT

TSP_TASK = ROOT / "tasks" / "tsp_folder"
MIXED_TASK = ROOT / "tests" / "data" / "folder_mixed_c"

_HEURISTICS_HEAD = (
    (TSP_TASK / "initial_program" / "heuristics.py").read_text().split("# EVOLVE-BLOCK-START")[0]
)

_TWO_OPT = '''# EVOLVE-BLOCK-START
MAX_PASSES = {k}


def construct(dist):
    """Nearest neighbour from city 0."""
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
    """2-opt: reverse a segment while that shortens the tour (at most MAX_PASSES passes)."""
    tour = list(tour)
    n = len(tour)
    for _ in range(MAX_PASSES):
        better = False
        for i in range(n - 1):
            for j in range(i + 2, n if i > 0 else n - 1):
                a, b, c, d = tour[i], tour[i + 1], tour[j], tour[(j + 1) % n]
                if dist[a][c] + dist[b][d] < dist[a][b] + dist[c][d] - 1e-12:
                    tour[i + 1 : j + 1] = reversed(tour[i + 1 : j + 1])
                    better = True
        if not better or time.monotonic() > deadline:
            break
    return tour
# EVOLVE-BLOCK-END
'''


def tsp_two_files(k: int) -> str:
    """Rewrite heuristics.py (2-opt, ``k`` passes) and tag driver.py's solve with a diff."""
    return (
        f"Use 2-opt with {k} passes and mark the driver.\n\n"
        "### File: heuristics.py\n```python\n"
        + _HEURISTICS_HEAD
        + _TWO_OPT.format(k=k)
        + "```\n\n### File: driver.py\n<<<<<<< SEARCH\ndef solve(dist, deadline):\n=======\n"
        f"def solve(dist, deadline):\n    # variant {k}\n>>>>>>> REPLACE\n"
    )


OUTSIDE = "### File: ../evil.py\n```python\nprint('outside')\n```\n"


def mixed_two_files(k: int) -> str:
    """Rewrite kernel.c (weight 1 + k) and combine.py (scale k) in one answer."""
    kernel = (MIXED_TASK / "initial_program" / "kernel.c").read_text()
    combine = (MIXED_TASK / "initial_program" / "combine.py").read_text()
    return (
        "### File: kernel.c\n```c\n"
        + kernel.replace("return 1.0;", f"return {1 + k}.0;")
        + "```\n### File: combine.py\n```python\n"
        + combine.replace("SCALE = 1.0", f"SCALE = {k}.5")
        + "```\n"
    )


def initial_files(task: Path) -> list[str]:
    return sorted(p.name for p in (task / "initial_program").iterdir())

"""Evaluator of the folder TSP task: the program is a folder (driver.py + heuristics.py + geometry.py).

``evaluate(program_path)`` receives the candidate *folder*. It runs ``python driver.py`` in
that folder (working directory: the folder, 10 s limit) with 100 cities on stdin (uniform in the
unit square, a fixed seed, generated here), reads the tour the program prints (a JSON list of
city indices) and checks it: every city exactly once. The tour length is measured here, never
taken from the program.

Metrics of a valid tour: ``tour_length`` (lower is better), ``validity`` = 1.0 and
``combined_score`` = REFERENCE / tour_length (1.0 at our own 2-opt + Or-opt reference). A
program that crashes, times out or prints an invalid tour scores ``combined_score`` = 0.0
with an ``error`` naming the problem (its stderr in ``stderr``).
"""

import json
import math
import os
import random
import subprocess
import sys

CITIES = 100
SEED = 20240607
TIME_LIMIT_S = 5.0
RUN_TIMEOUT_S = 10
REFERENCE = 7.922275  # our own 2-opt + Or-opt local search (task.yaml sota_score)


def cities():
    rng = random.Random(SEED)
    return [(rng.random(), rng.random()) for _ in range(CITIES)]


def tour_length(points, tour):
    return sum(
        math.hypot(
            points[tour[i - 1]][0] - points[tour[i]][0], points[tour[i - 1]][1] - points[tour[i]][1]
        )
        for i in range(len(tour))
    )


def _fail(reason, stderr=""):
    result = {"combined_score": 0.0, "validity": 0.0, "error": reason}
    if stderr:
        result["stderr"] = stderr[-4000:]
    return result


def check_tour(tour):
    """None for a valid tour of CITIES cities, else the reason it is not one."""
    if not isinstance(tour, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) for c in tour
    ):
        return "the output is not a JSON list of integers"
    if len(tour) != CITIES:
        return f"the tour visits {len(tour)} cities, expected {CITIES}"
    if sorted(tour) != list(range(CITIES)):
        return "the tour must visit every city index 0..99 exactly once"
    return None


def evaluate(program_path):
    folder = os.path.abspath(program_path)
    driver = os.path.join(folder, "driver.py")
    if not os.path.isfile(driver):
        return _fail(f"the program folder has no driver.py ({os.listdir(folder)})")
    points = cities()
    request = json.dumps({"points": points, "time_limit_s": TIME_LIMIT_S})
    try:
        run = subprocess.run(
            [sys.executable, driver],
            input=request,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            cwd=folder,
        )
    except subprocess.TimeoutExpired:
        return _fail(f"the program ran longer than {RUN_TIMEOUT_S} s")
    if run.returncode != 0:
        return _fail(f"driver.py exited with code {run.returncode}", run.stderr)
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    try:
        tour = json.loads(lines[-1]) if lines else None
    except ValueError:
        return _fail(f"the last output line is not JSON: {lines[-1][:200]!r}", run.stderr)
    problem = check_tour(tour)
    if problem is not None:
        return _fail(problem, run.stderr)
    length = tour_length(points, tour)
    return {"tour_length": length, "validity": 1.0, "combined_score": REFERENCE / length}

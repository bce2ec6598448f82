"""Best-so-far curves of a bench's runs against iterations and model compute.

A run's `IterationPoint` list gives, after each iteration, the metric of its best program by
fitness so far with the LLM calls, tokens and wall seconds spent up to then (cumulative). A
curve against one of those axes is a step function: the best so far holds until the next
point. Two uses:

* `seed_band`: the seeds of one method on one common axis, for the bench's plots: the mean
  and the lowest and highest seed at every x where all seeds are observed (up to the end of the
  seed that spent least).
* `best_at`: a run's best so far at a given budget of compute, for the summary's
  equal-compute table: does a method that spends more per iteration (a retrieve costs several
  model calls) find better programs for the same tokens or seconds, or only for the same
  number of iterations?
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from evoduet_graph.bench.common import IterationPoint

__all__ = ["AXES", "Axis", "SeedBand", "axis_value", "best_at", "curve", "seed_band"]

Axis = Literal["iteration", "tokens", "wall_s"]
AXES: tuple[Axis, ...] = ("iteration", "tokens", "wall_s")


def axis_value(point: IterationPoint, axis: Axis) -> float | None:
    """The point's position on ``axis`` (None when unknown: a wall time not recorded)."""
    if axis == "iteration":
        return float(point.iteration)
    if axis == "tokens":
        return float(point.tokens)
    return point.wall_s


def curve(points: Sequence[IterationPoint], axis: Axis) -> list[tuple[float, float]]:
    """``(x, best so far)`` of a run on ``axis``, skipping points without a best or an x.

    Cumulative figures never fall, so x is non-decreasing; where two points share an x (an
    iteration that used no model call), the later one's best is the value there.
    """
    out: list[tuple[float, float]] = []
    for p in points:
        x = axis_value(p, axis)
        if x is None or p.best is None:
            continue
        if out and out[-1][0] == x:
            out[-1] = (x, p.best)
        else:
            out.append((x, p.best))
    return out


def _step(xy: Sequence[tuple[float, float]], x: float) -> float | None:
    """The step function through ``xy`` at ``x`` (None before its first point)."""
    i = bisect.bisect_right([px for px, _ in xy], x) - 1
    return xy[i][1] if i >= 0 else None


def best_at(points: Sequence[IterationPoint], axis: Axis, budget: float) -> float | None:
    """A run's best so far once it had spent ``budget`` on ``axis`` (None before its first)."""
    return _step(curve(points, axis), budget)


@dataclass(frozen=True)
class SeedBand:
    """Several seeds' step curves on one common grid.

    Attributes:
        xs: every x at which one of the seeds changes, up to the smallest last x of the seeds
            (so every seed is observed at every x).
        mean: the seeds' mean best so far at each x.
        low: the lowest seed's value at each x.
        high: the highest seed's value at each x.
    """

    xs: list[float]
    mean: list[float]
    low: list[float]
    high: list[float]


def seed_band(curves: Sequence[Sequence[tuple[float, float]]]) -> SeedBand:
    """Mean and range over seeds of step curves (`curve`) whose x grids differ.

    Empty when a curve is empty; an x before some seed's first point is left out.
    """
    if not curves or any(not c for c in curves):
        return SeedBand([], [], [], [])
    end = min(c[-1][0] for c in curves)
    grid = sorted({x for c in curves for x, _ in c if x <= end})
    rows = []
    for x in grid:
        values = [_step(c, x) for c in curves]
        known = [v for v in values if v is not None]
        if len(known) == len(values):
            rows.append((x, statistics.fmean(known), min(known), max(known)))
    if not rows:
        return SeedBand([], [], [], [])
    xs, mean, low, high = (list(col) for col in zip(*rows, strict=True))
    return SeedBand(xs, mean, low, high)

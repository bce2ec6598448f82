"""Shared types and arithmetic of the bench methods.

Shared types of the bench: the model endpoint, a method's outcome, and the arithmetic that
every method's figures go through (the run's best program by fitness, floored NDG, wall time over
resumed sessions), so the three methods are scored by the same code.
"""

from __future__ import annotations

import bisect
import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

import evoduet_graph
from evoduet_graph import Task, UserError

__all__ = [
    "Endpoint",
    "Explored",
    "IterationPoint",
    "IterationSeries",
    "MethodOutcome",
    "Session",
    "best_by_fitness",
    "bundled_tasks_dir",
    "cumulative_wall",
    "floored_ndg",
    "fmt",
    "total_wall",
    "write_json",
]


@dataclass(frozen=True)
class Endpoint:
    """The OpenAI-compatible endpoint every method of a bench talks to.

    Attributes:
        model: the model name sent in requests (the llama.cpp server's alias for the embedded
            model, else e.g. ``gpt-4o-mini``).
        base_url: the OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``); None means
            OpenAI's default.
        api_key_env: environment variable holding the key; None for a keyless local server.
        temperature: sampling temperature of every call.
        max_tokens: completion token limit per call.
        timeout_s: per-request timeout in seconds.
        max_retries: retries of a failed request.
        local: True when ``base_url`` is the bench's own llama.cpp server.
        diff_based: the edit format every method asks for: True (SEARCH/REPLACE diffs), False
            (full rewrites), None (each task's own ``diff_based_evolution`` setting).
    """

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.7
    max_tokens: int = 1024
    timeout_s: float = 300.0
    max_retries: int = 3
    local: bool = False
    diff_based: bool | None = None


@dataclass
class Session:
    """One invocation of a method on a run directory (a killed one has no ``end``).

    Attributes:
        start: unix time the method started working.
        end: unix time it returned or raised; None when the process was killed.
    """

    start: float
    end: float | None = None


@dataclass
class IterationPoint:
    """Figures of a run after ``iteration`` iterations (0 = the initial program only).

    Attributes:
        iteration: completed iterations.
        best: the task metric of the best program by fitness explored so far (the initial
            program included; `best_by_fitness`), on the task's own scale; None if none is
            valid.
        llm_calls: LLM calls so far (cumulative).
        tokens: prompt + completion tokens so far (cumulative).
        wall_s: wall-clock seconds so far (cumulative over resumed sessions); None if unknown.
    """

    iteration: int
    best: float | None
    llm_calls: int = 0
    tokens: int = 0
    wall_s: float | None = None


@dataclass
class MethodOutcome:
    """What one (task, method, seed) run produced, in the bench's common terms.

    Attributes:
        iterations: iterations completed.
        initial: the task metric of the initial program (evaluated by our sandbox).
        best: the task metric of the best program by fitness over every program explored,
            the initial one included (`best_by_fitness`).
        best_code: source of the program that reached ``best`` (None when unknown).
        points: one `IterationPoint` per completed iteration, 0..``iterations``.
        llm_calls: total LLM calls.
        tokens: total tokens.
        wall_s: total wall seconds of the method (sum over its sessions).
        notes: remarks worth showing (e.g. "OpenEvolve produced no candidate program").
        details: method-specific extras (JSON-ready), kept in ``bench_run.json``.
    """

    iterations: int
    initial: float | None
    best: float | None
    best_code: str | None = None
    points: list[IterationPoint] = field(default_factory=list)
    llm_calls: int = 0
    tokens: int = 0
    wall_s: float | None = None
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``bench_run.json`` stores under ``outcome``)."""
        return asdict(self)

    @classmethod
    def from_series(
        cls,
        series: IterationSeries,
        *,
        initial: float | None,
        best: float | None,
        best_code: str | None,
        notes: list[str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> MethodOutcome:
        """The outcome of a method from its per-iteration series (one home for every method).

        Args:
            series: the run's per-iteration figures.
            initial: the initial program's metric.
            best: the best metric.
            best_code: the best program's source.
            notes: remarks worth showing.
            details: method-specific extras.

        Returns:
            The outcome; totals are the last point's (`iteration_points`), wall time the
            sessions' total (`total_wall`).
        """
        points = iteration_points(series)
        return cls(
            iterations=series.iterations,
            initial=initial,
            best=best,
            best_code=best_code,
            points=points,
            llm_calls=points[-1].llm_calls if points else 0,
            tokens=points[-1].tokens if points else 0,
            wall_s=total_wall(series.sessions, series.stamps.values()),
            notes=notes if notes is not None else [],
            details=details if details is not None else {},
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MethodOutcome:
        """Inverse of `to_json`, every field's type checked (keys it does not know are left).

        Raises:
            pydantic.ValidationError: a field of the wrong type (``best: "abc"``, ``points:
                5``), named in the message.
        """
        return TypeAdapter(MethodOutcome).validate_python(data)


@dataclass(frozen=True)
class Explored:
    """One valid program a run explored, as the bench scores it.

    Attributes:
        iteration: the iteration that made it (0: the initial program).
        fitness: the evaluator's score (``combined_score``; higher is better).
        metric: the task's reported metric (``Task.metric_value``).
        code: its source, when the method keeps it.
    """

    iteration: int
    fitness: float
    metric: float
    code: str | None = None


def best_by_fitness(
    programs: Iterable[Explored], iterations: int
) -> tuple[list[float | None], Explored | None]:
    """A run's best program and its metric after each iteration: the one definition for NDG.

    A run's best program is its valid program of highest fitness, the earliest among equals,
    the initial program included: the program the run delivers (``best_program.*``, the
    population's best), whose metric the run report and ``compare`` turn into NDG. The bench
    scores every method by the same rule, so NDG is never the metric of a program the run did
    not choose. (OpenEvolve, too, reports the metrics of its best program by fitness.)

    Args:
        programs: valid programs in the order they were made (iteration, then candidate).
        iterations: the last iteration of the curve.

    Returns:
        The metric of the best program so far after each iteration ``0..iterations`` (None
        until a valid program exists) and the best program (None when there is none).
    """
    best: Explored | None = None
    by_iteration: dict[int, list[Explored]] = {}
    for program in programs:
        if 0 <= program.iteration <= iterations and math.isfinite(program.fitness):
            by_iteration.setdefault(program.iteration, []).append(program)
    curve: list[float | None] = []
    for it in range(iterations + 1):
        for program in by_iteration.get(it, []):
            if best is None or program.fitness > best.fitness:
                best = program
        curve.append(best.metric if best is not None else None)
    return curve, best


def floored_ndg(task: Task, best: float | None) -> float | None:
    """NDG of ``best`` in percent, floored at 0 (never below the initial program).

    ``(best − initial) / (reference − initial) × 100`` on the task's own scale (`Task.ndg`,
    docs/design.md §6), then ``max(0, ·)``: the bench scores the best over every program explored,
    the initial one included, so a run that never improves scores 0, not a negative value.

    Returns:
        None when ``best`` is None or the task declares no initial/reference score.
    """
    if best is None:
        return None
    value = task.ndg(best)
    return None if value is None else max(0.0, value)


def _session_durations(sessions: list[Session], stamps: list[float]) -> list[float]:
    """Duration of each session; a killed session lasts until its last stamp."""
    starts = [s.start for s in sessions]
    out = []
    for i, session in enumerate(sessions):
        if session.end is not None:
            out.append(max(0.0, session.end - session.start))
            continue
        upper = starts[i + 1] if i + 1 < len(starts) else math.inf
        inside = [t for t in stamps if session.start <= t < upper]
        out.append(max(0.0, max(inside) - session.start) if inside else 0.0)
    return out


def cumulative_wall(sessions: list[Session], stamps: dict[int, float]) -> dict[int, float]:
    """Cumulative wall seconds at each iteration's completion time, over resumed sessions.

    Args:
        sessions: the method's sessions (any order; sorted by start here).
        stamps: unix time each iteration completed (its latest record if it ran twice).

    Returns:
        ``{iteration: seconds}``: the durations of the earlier sessions plus the time since
        the start of the session in which the iteration completed. Iterations whose time lies
        before the first session are left out.
    """
    ordered = sorted(sessions, key=lambda s: s.start)
    if not ordered:
        return {}
    durations = _session_durations(ordered, list(stamps.values()))
    starts = [s.start for s in ordered]
    before = [sum(durations[:i]) for i in range(len(ordered))]
    out: dict[int, float] = {}
    for it, t in stamps.items():
        k = bisect.bisect_right(starts, t) - 1
        if k < 0:
            continue
        out[it] = before[k] + max(0.0, t - starts[k])
    return out


def total_wall(sessions: list[Session], stamps: Iterable[float] = ()) -> float | None:
    """Total wall seconds of all sessions (a killed one counts until its last stamp)."""
    ordered = sorted(sessions, key=lambda s: s.start)
    if not ordered:
        return None
    return sum(_session_durations(ordered, list(stamps)))


@dataclass(frozen=True)
class IterationSeries:
    """The per-iteration figures of one method run, as its driver collected them.

    Attributes:
        curve: best so far per iteration, 0..``iterations``.
        calls_by_it: LLM calls per iteration.
        tokens_by_it: tokens per iteration.
        sessions: the method's sessions (for wall time).
        stamps: the end time of each iteration.
        iterations: iterations completed.
    """

    curve: list[float | None]
    calls_by_it: dict[int, int]
    tokens_by_it: dict[int, int]
    sessions: list[Session]
    stamps: dict[int, float]
    iterations: int


def iteration_points(series: IterationSeries) -> list[IterationPoint]:
    """Cumulative per-iteration figures of a run.

    Cumulative per-iteration figures 0..``iterations`` (best so far, LLM calls, tokens,
    wall seconds over all sessions). Usage recorded past the last iteration counts in the last
    point; the last point's wall time is at least the runs' total.
    """
    curve, calls_by_it, tokens_by_it = series.curve, series.calls_by_it, series.tokens_by_it
    sessions, stamps, iterations = series.sessions, series.stamps, series.iterations
    walls = cumulative_wall(sessions, stamps)
    total = total_wall(sessions, stamps.values())
    points: list[IterationPoint] = []
    calls = tokens = 0
    wall: float | None = 0.0 if sessions else None
    for it in range(iterations + 1):
        calls += calls_by_it.get(it, 0)
        tokens += tokens_by_it.get(it, 0)
        wall = walls.get(it, wall)
        points.append(IterationPoint(it, curve[it], calls, tokens, wall))
    calls += sum(v for k, v in calls_by_it.items() if k > iterations)
    tokens += sum(v for k, v in tokens_by_it.items() if k > iterations)
    if points:
        points[-1].llm_calls, points[-1].tokens = calls, tokens
        if total is not None:
            points[-1].wall_s = max(points[-1].wall_s or 0.0, total)
    return points


LogFn = Callable[[str], None]


def bundled_tasks_dir() -> Path:
    """The repository's ``tasks/`` folder (the bundled tasks)."""
    return Path(evoduet_graph.__file__).resolve().parent.parent / "tasks"


class BenchError(UserError, RuntimeError):
    """The bench cannot start (bad task, unknown method, missing dependency, dead server)."""


def fmt(value: float | None, spec: str = ".6g") -> str:
    """``value`` formatted with ``spec``; ``n/a`` for None (tables, CSV cells, progress lines)."""
    return "n/a" if value is None else format(value, spec)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` as indented JSON, atomically (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)

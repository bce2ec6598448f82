"""The evaluation seam: the `Evaluator` protocol and `EvaluationOutcome`.

The evaluation seam: the `Evaluator` protocol the nodes use and the `EvaluationOutcome` it
returns (docs/design.md §5).

`evoduet_graph.evaluation.sandbox.SandboxEvaluator` and
`evoduet_graph.evaluation.ray_executor.RayEvaluator` implement it; a test fake does too. The
``evaluate`` and ``initialize`` nodes call only what the protocol declares. Optional
capabilities are protocols of their own, checked with ``isinstance``: `ParallelEvaluator`
(``workers``) and `SandboxedEvaluator` (``isolation``, ``task_sha256``, ``protect``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from evoduet_graph.evaluation.isolation import Isolation


class EvaluationOutcome(BaseModel):
    """The result of evaluating one candidate (JSON-serialisable).

    ``score`` is the fitness on a higher-is-better scale: ``combined_score`` when the evaluator
    reports it, else the mean of the numeric metrics other than ``error`` (OpenEvolve); 0.0 for
    every invalid outcome.
    """

    metrics: dict[str, float] = Field(
        default_factory=dict, description="Finite numeric metrics reported by the evaluator."
    )
    artifacts: dict[str, str] = Field(
        default_factory=dict,
        description="Text side channel: non-numeric metrics, evaluator artifacts, stderr/stdout "
        "tails, traceback, timeout.",
    )
    score: float = Field(0.0, description="Fitness (higher is better); 0.0 when invalid.")
    valid: bool = Field(False, description="The evaluation completed and reported a score.")
    error: str | None = Field(None, description="Why the outcome is invalid.")
    elapsed_s: float = Field(0.0, ge=0.0, description="Wall-clock seconds of the evaluation.")
    stage: int = Field(0, ge=0, description="Cascade stage reached (0 without cascade).")


@runtime_checkable
class Evaluator(Protocol):
    """Evaluates candidate programs for one task. Implementations never raise on bad code."""

    def evaluate(self, code: str, program_id: str = "candidate") -> EvaluationOutcome:
        """Evaluate one program's source text."""
        ...

    def evaluate_many(
        self, codes: Sequence[str], ids: Sequence[str] | None = None
    ) -> list[EvaluationOutcome]:
        """Evaluate several programs; results in input order."""
        ...


@runtime_checkable
class ParallelEvaluator(Evaluator, Protocol):
    """An `Evaluator` that says how many candidates it evaluates at once.

    An `Evaluator` that says how many candidates it evaluates at once (the ``evaluate``
    node runs that many threads; without it, ``evaluation.workers``).
    """

    workers: int


@runtime_checkable
class SandboxedEvaluator(Evaluator, Protocol):
    """An `Evaluator` that runs candidates in a sandbox.

    What it enforces (reported once per session), the task folder it snapshotted, and folders it
    must keep candidates out of.
    """

    task_sha256: str

    @property
    def isolation(self) -> Isolation:
        """What the sandbox enforces on this machine."""
        ...

    def protect(self, *paths: str | Path) -> None:
        """Keep candidates from writing ``paths`` (the run directory)."""
        ...


def score_from_metrics(metrics: Mapping[str, float]) -> float | None:
    """Fitness from numeric metrics, as OpenEvolve computes it.

    Args:
        metrics: numeric metrics.

    Returns:
        ``combined_score`` when present, else the mean of the metrics other than ``error``;
        None when there is nothing to average or the result is not finite.
    """
    if "combined_score" in metrics:
        value = float(metrics["combined_score"])
    else:
        values = [float(v) for k, v in metrics.items() if k != "error"]
        if not values:
            return None
        value = sum(values) / len(values)
    return value if math.isfinite(value) else None

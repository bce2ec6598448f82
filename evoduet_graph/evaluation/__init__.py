"""Sandboxed evaluation of candidate programs (DESIGN.md §5).

`SandboxEvaluator` runs a task's OpenEvolve ``evaluator.py`` on candidate programs in killable,
resource-limited child processes with a scrubbed environment, and returns `EvaluationOutcome`s.
Anything implementing the `Evaluator` protocol (e.g. a test fake) can stand in for it.
"""

from __future__ import annotations

from evoduet_graph.evaluation.sandbox import (
    EvaluationOutcome,
    Evaluator,
    SandboxEvaluator,
    SandboxSetupError,
    score_from_metrics,
    scrub_environment,
)

__all__ = [
    "EvaluationOutcome",
    "Evaluator",
    "SandboxEvaluator",
    "SandboxSetupError",
    "score_from_metrics",
    "scrub_environment",
]

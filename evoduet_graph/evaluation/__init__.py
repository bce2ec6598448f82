"""Sandboxed evaluation of candidate programs (docs/design.md §5).

`SandboxEvaluator` runs a task's OpenEvolve ``evaluator.py`` on candidate programs in killable,
resource-limited child processes with a scrubbed environment, and returns `EvaluationOutcome`s.
Anything implementing the `Evaluator` protocol (e.g. a test fake) can stand in for it.
`make_evaluator` builds the one ``evaluation.executor`` names: the local sandbox, or
`evoduet_graph.evaluation.ray_executor.RayEvaluator` (the same sandbox inside Ray tasks;
``ray`` is imported only then).
"""

from __future__ import annotations

from evoduet_graph.config import EvaluationConfig
from evoduet_graph.evaluation.base import (
    EvaluationOutcome,
    Evaluator,
    ParallelEvaluator,
    SandboxedEvaluator,
    score_from_metrics,
)
from evoduet_graph.evaluation.container import prepare_container
from evoduet_graph.evaluation.limits import SandboxLimits
from evoduet_graph.evaluation.ray_executor import RayEvaluator
from evoduet_graph.evaluation.sandbox import (
    SandboxEvaluator,
    SandboxSetupError,
    scrub_environment,
)
from evoduet_graph.task import Task


def make_evaluator(task: Task, cfg: EvaluationConfig) -> Evaluator:
    """The evaluator ``cfg.executor`` names, built from the ``evaluation`` section.

    Returns:
        `SandboxEvaluator` for ``local``; `RayEvaluator` for ``ray`` (connects to the cluster
        and runs one probe task first).

    Raises:
        TaskError: the task's evaluator is missing.
        ConfigError: (``ray``) ray is not installed, or the cluster at ``cfg.ray_address`` is
            unreachable or cannot run the evaluation task (`RayUnavailableError`);
            (``container: true``) no usable Docker/Podman or the image build failed
            (`ContainerUnavailableError`).
    """
    if getattr(cfg, "container", False):
        task = prepare_container(task)
    if cfg.executor == "ray":
        return RayEvaluator.from_config(task, cfg)
    return SandboxEvaluator.from_config(task, cfg)


__all__ = [
    "EvaluationOutcome",
    "Evaluator",
    "ParallelEvaluator",
    "SandboxEvaluator",
    "SandboxLimits",
    "SandboxSetupError",
    "SandboxedEvaluator",
    "make_evaluator",
    "score_from_metrics",
    "scrub_environment",
]

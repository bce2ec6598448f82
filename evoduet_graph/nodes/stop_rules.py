"""Stop rules shared by ``initialize`` and ``record`` (not a node).

`target_reached`: ``stop_at_score`` ends the run once the best program's metric reaches the
target on the task's own scale (OpenEvolve users ask for it as an early stop at a target
score). The run stops cleanly after the iteration in flight, with a resumable checkpoint;
its ``stop_reason`` starts with `TARGET_PREFIX` (the CLI exits 0 for it).
"""

from __future__ import annotations

from typing import Any

from evoduet_graph.context import Context

TARGET_PREFIX = "target reached"
"""Every ``stop_reason`` set by ``stop_at_score`` starts with this."""


def target_reached(ctx: Context, metrics: dict[str, Any]) -> str | None:
    """The stop reason when ``metrics`` meet ``config.stop_at_score``, else None.

    Args:
        ctx: the run context (task direction and metric, the configured target).
        metrics: the best program's evaluator metrics.

    Returns:
        ``"target reached: <metric> = <value> ≥ <target> (stop_at_score)"`` (``≤`` for
        ``direction: min``), or None (no target, no metric value, or not reached).
    """
    target = ctx.config.stop_at_score
    if target is None:
        return None
    value = ctx.task.metric_value(metrics)
    if value is None:
        return None
    maximise = ctx.task.direction == "max"
    if (value >= target) if maximise else (value <= target):
        sign = "≥" if maximise else "≤"
        return f"{TARGET_PREFIX}: {ctx.task.metric} = {value:g} {sign} {target:g} (stop_at_score)"
    return None

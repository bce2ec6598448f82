"""Stop rules shared by ``initialize`` and ``record`` (not a node).

Every reason a run ends before its planned iterations is decided here.

* `failure_stop`: ``max_consecutive_failures`` iterations in a row without a valid candidate
  (an iteration whose candidates were all duplicates leaves the counter as it was);
* `model_health`: ``max_consecutive_model_failures`` iterations in a row whose every
  ``generate`` call failed, or a last iteration with no answer since the run (re)started
  (reason prefix `MODEL_DOWN_PREFIX`);
* `budget_stop`: a ``budget:`` limit reached (`evoduet_graph.rundir.budget`; prefix
  ``budget reached``); ``initialize`` asks it for a resumed run that already spent its budget,
  ``record`` after each iteration;
* `target_reached`: ``stop_at_score`` ends the run once the best program's metric reaches
  the target on the task's own scale (OpenEvolve users ask for it as an early stop at a
  target score); its ``stop_reason`` starts with `TARGET_PREFIX` (the CLI exits 0 for it).

Every stop ends the run cleanly after the iteration in flight, with a resumable checkpoint.
"""

from __future__ import annotations

from typing import Any

from evoduet_graph.context import Context
from evoduet_graph.llm.runtime import REBUILD_HINT
from evoduet_graph.state import CandidateRecord, OuterState

TARGET_PREFIX = "target reached"
"""Every ``stop_reason`` set by ``stop_at_score`` starts with this."""

MODEL_DOWN_PREFIX = "the model did not answer"
"""Every ``stop_reason`` set because the model endpoint failed starts with this."""


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


def only_duplicates(candidates: list[CandidateRecord]) -> bool:
    """True when the iteration had candidates and the novelty check rejected every one."""
    return bool(candidates) and all(c["status"] == "duplicate" for c in candidates)


def model_health(ctx: Context, state: OuterState, update: dict[str, Any]) -> dict[str, Any]:
    """Stop the run when the model endpoint looks down.

    Track iterations whose every ``generate`` call failed (status ``failed``: the model call
    raised after its retries) and stop the run when the endpoint looks down.

    The run stops after ``max_consecutive_model_failures`` such iterations in a row, or at its
    last iteration when no ``generate`` call answered since it (re)started. The stop reason
    starts with `MODEL_DOWN_PREFIX` and quotes the last error.

    Returns:
        ``model_failures`` and ``model_answered``, plus ``stop_reason`` when the run stops.
    """
    candidates = state.get("candidates", [])
    if not candidates:
        return {}
    if not all(c["status"] == "failed" for c in candidates):
        return {"model_failures": 0, "model_answered": True}
    failures = state["model_failures"] + 1
    out: dict[str, Any] = {"model_failures": failures}
    last = state["iteration"] >= update.get("max_iterations", state["max_iterations"])
    limit = ctx.config.max_consecutive_model_failures
    if failures >= limit or (last and not state["model_answered"]):
        llm = ctx.config.llm
        model = llm.model
        resume = (
            f"`evoduet resume {ctx.run_dir or 'RUN_DIR'}` "
            "(`--iterations N` to run past the planned total)"
        )
        last_error = candidates[-1].get("error")
        if model == "local":
            out["stop_reason"] = (
                f"{MODEL_DOWN_PREFIX} (the embedded model): every generate call failed in "
                f"{failures} iteration(s) in a row (max_consecutive_model_failures={limit}; "
                f"last error: {last_error}); if its worker "
                f"crashed, rebuild the runtime with `{REBUILD_HINT}` (`evoduet doctor` shows "
                f"what is wrong), then {resume}"
            )
            return out
        if model.startswith("openai:"):
            model += f" at {llm.base_url or 'the OpenAI default URL'}"
        out["stop_reason"] = (
            f"{MODEL_DOWN_PREFIX} ({model}): every generate call failed in {failures} "
            f"iteration(s) in a row (max_consecutive_model_failures={limit}; last error: "
            f"{last_error}); check the endpoint (`--model`, `llm.base_url` or "
            f"OPENAI_BASE_URL, its API key), then {resume}"
        )
    return out


def failure_stop(ctx: Context, state: OuterState) -> dict[str, Any]:
    """Count an iteration without a valid candidate; stop at ``max_consecutive_failures``.

    Returns:
        ``consecutive_failures``, plus ``stop_reason`` when the limit is reached.
    """
    failures = state["consecutive_failures"]
    if not only_duplicates(state.get("candidates", [])):
        failures += 1
    out: dict[str, Any] = {"consecutive_failures": failures}
    if failures >= ctx.config.max_consecutive_failures:
        out["stop_reason"] = (
            f"{failures} consecutive iterations without a valid candidate "
            f"(max_consecutive_failures={ctx.config.max_consecutive_failures}); "
            "see the errors in events.jsonl, fix the model or task, then `evoduet resume`"
        )
    return out


def budget_stop(ctx: Context, iteration: int, *, report: bool = True) -> str | None:
    """The budget's stop reason, with a ``budget`` event of the totals (no budget: None).

    Args:
        ctx: the run context (its `Budget`).
        iteration: the iteration the totals are reported for.
        report: write the ``budget`` event also when no limit is reached (``record``;
            ``initialize`` writes it only for a stop).

    Returns:
        The stop reason when a ``budget:`` limit is reached, else None.
    """
    budget = ctx.budget
    if budget is None or not budget.active:
        return None
    totals = budget.totals()
    reason = budget.exceeded(totals)
    if report or reason:
        ctx.events.emit("budget", iteration=iteration, stop_reason=reason, **totals.as_dict())
    return reason

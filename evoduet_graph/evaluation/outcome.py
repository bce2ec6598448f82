"""What a sandbox child left behind, read into an `EvaluationOutcome` (docs/design.md §5).

The child writes its result to a JSON file (metrics, text metrics, artifacts, the cascade stage
reached, a traceback or error); `outcome_from_result` turns it into a valid outcome with the
score taken from the metrics, or an invalid one (score 0.0, ``error`` set) when no valid score
can be taken (`score_problem`), with the tails of the child's stdout/stderr
(`output_tail`) as artifacts. `describe_exit` says how a child that wrote no result ended;
`invalid_outcome` is the one shape of every candidate fault `SandboxEvaluator` reports.
"""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path
from typing import Any

from evoduet_graph.evaluation.base import EvaluationOutcome, score_from_metrics

__all__ = [
    "OUTPUT_TAIL_BYTES",
    "describe_exit",
    "invalid_outcome",
    "outcome_from_result",
    "output_tail",
    "score_problem",
]

#: Bytes kept from the end of the child's stdout and stderr (and of each artifact).
OUTPUT_TAIL_BYTES = 20_000


def outcome_from_result(
    data: dict[str, Any], streams: dict[str, str], start: float, metric: str
) -> EvaluationOutcome:
    """Turn the runner's result into an outcome: validity, score, metrics, artifacts."""
    raw_metrics = _float_dict(data.get("metrics"))
    text_metrics = _str_dict(data.get("text_metrics"))
    artifacts = {k: _cap(v) for k, v in _str_dict(data.get("artifacts")).items()}
    for key, text in text_metrics.items():
        artifacts[key if key not in artifacts else f"metric_{key}"] = _cap(text)
    metrics: dict[str, float] = {}
    for key, value in raw_metrics.items():
        if math.isfinite(value):
            metrics[key] = value
        else:
            artifacts[f"non_finite_{key}"] = repr(value)
    reached = data.get("stage")
    stage = reached if isinstance(reached, int) else 0
    if data.get("traceback"):
        artifacts["traceback"] = _cap(str(data["traceback"]))

    error = data.get("error")
    reported = text_metrics.get("error") or artifacts.get("error")
    if not error and isinstance(reported, str) and reported.strip():
        error = f"evaluator reported error: {reported.strip()}"
    if not error:
        error = score_problem(raw_metrics, text_metrics, metric)
    if error:
        for key, text in streams.items():
            if text:
                artifacts[key if key not in artifacts else f"process_{key}"] = text
        return invalid_outcome(str(error), metrics, artifacts, start, stage)
    if streams["stderr"]:
        artifacts["stderr" if "stderr" not in artifacts else "process_stderr"] = streams["stderr"]
    score = score_from_metrics(metrics)
    assert score is not None  # guaranteed by score_problem
    return EvaluationOutcome(
        metrics=metrics,
        artifacts=artifacts,
        score=score,
        valid=True,
        error=None,
        elapsed_s=time.monotonic() - start,
        stage=stage,
    )


def score_problem(
    raw_metrics: dict[str, float], text_metrics: dict[str, str], metric: str
) -> str | None:
    """Why no valid score can be taken from these metrics (None when one can)."""
    if "combined_score" in text_metrics:
        return f"combined_score is not numeric: {text_metrics['combined_score'][:200]!r}"
    if "combined_score" in raw_metrics:
        if not math.isfinite(raw_metrics["combined_score"]):
            return f"combined_score is not finite ({raw_metrics['combined_score']!r})"
    else:
        used = {k: v for k, v in raw_metrics.items() if k != "error"}
        if not used:
            return "evaluator returned no numeric metrics (expected e.g. combined_score)"
        bad = sorted(k for k, v in used.items() if not math.isfinite(v))
        if bad:
            return f"metric(s) {', '.join(bad)} not finite; score (their mean) is undefined"
    if metric in text_metrics:
        return f"metric {metric!r} is not numeric: {text_metrics[metric][:200]!r}"
    if metric in raw_metrics and not math.isfinite(raw_metrics[metric]):
        return f"metric {metric!r} is not finite ({raw_metrics[metric]!r})"
    return None


def describe_exit(returncode: int) -> str:
    """How a child that wrote no result ended: its exit code, or the signal that killed it."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = {
            "SIGKILL": " (killed: out of memory or CPU time?)",
            "SIGXCPU": " (CPU time limit)",
            "SIGXFSZ": " (file size limit: too much output?)",
            "SIGSEGV": " (segmentation fault)",
        }.get(name, "")
        return f"was killed by {name}{hint}"
    return f"exited with code {returncode}"


def output_tail(path: Path, limit: int = OUTPUT_TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a file as text, marked when truncated."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            if size > limit:
                handle.seek(size - limit)
            data = handle.read(limit)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > limit:
        text = f"[... {size - limit} bytes truncated ...]\n{text}"
    return text


def _cap(text: str, limit: int = OUTPUT_TAIL_BYTES) -> str:
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} chars truncated ...]\n{text[-limit:]}"


def _float_dict(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    out: dict[str, float] = {}
    for key, item in value.items():
        if isinstance(item, int | float) and not isinstance(item, bool):
            out[str(key)] = float(item)
    return out


def _str_dict(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}


def invalid_outcome(
    error: str,
    metrics: dict[str, float],
    artifacts: dict[str, str],
    start: float,
    stage: int = 0,
) -> EvaluationOutcome:
    """An invalid outcome (score 0.0, ``error`` set); empty artifacts are dropped."""
    return EvaluationOutcome(
        metrics=metrics,
        artifacts={k: v for k, v in artifacts.items() if v},
        score=0.0,
        valid=False,
        error=error,
        elapsed_s=time.monotonic() - start,
        stage=stage,
    )

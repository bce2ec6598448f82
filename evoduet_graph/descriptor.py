"""Deterministic text the knowledge layer shows the model: the population-state descriptor and
the recent evolutionary history (paper §3.3: round 0 of query construction sees the knowledge
state and a description of where the search stands).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from evoduet_graph.context import Context


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def population_descriptor(ctx: Context, state: dict[str, Any]) -> str:
    """Facts about the search so far, as compact text (deterministic for equal inputs).

    Lists population size, score quantiles (min/25%/50%/75%/max) and mean, the best score,
    the last parent→child outcomes, the most selected parents and iterations since the last
    improvement. Scores are on the internal higher-is-better scale.
    """
    ids = [i for i in ctx.population.ids() if ctx.population.code_id(i) == i]  # no copies
    scores = np.array([ctx.population.get(pid).score for pid in ids], dtype=float)
    lines = [f"population size: {len(ids)}"]
    if scores.size:
        q = np.quantile(scores, [0.0, 0.25, 0.5, 0.75, 1.0])
        lines.append(
            "scores (higher is better): "
            f"min {_fmt(q[0])}, q25 {_fmt(q[1])}, median {_fmt(q[2])}, q75 {_fmt(q[3])}, "
            f"max {_fmt(q[4])}, mean {_fmt(float(scores.mean()))}"
        )
    iteration = int(state.get("iteration", 0))
    lines.append(f"best score so far: {_fmt(state.get('best_score'))}")
    lines.append(
        "iterations since last improvement: "
        f"{max(0, iteration - 1 - int(state.get('last_improvement_iteration', 0)))}"
    )
    attempts = ctx.store.recent_attempts(6, before_iteration=iteration)
    if attempts:
        lines.append("recent parent -> child outcomes:")
        for row in attempts:
            parent_score = (
                ctx.store.get_program(row.parent_id).score
                if row.parent_id and ctx.store.has_program(row.parent_id)
                else None
            )
            if not row.valid:
                outcome = f"invalid ({(row.error or row.status)[:80]})"
            else:
                outcome = f"{_fmt(parent_score)} -> {_fmt(row.score)}"
            lines.append(f"  iteration {row.iteration}: {outcome}")
    parents = Counter(r.parent_id for r in ctx.store.recent_attempts(200) if r.parent_id)
    if parents:
        top = ", ".join(f"{pid} x{n}" for pid, n in sorted(parents.items(), key=_count_key)[:3])
        lines.append(f"most selected parents: {top}")
    return "\n".join(lines)


def _count_key(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


def history_text(ctx: Context, iteration: int, limit: int) -> str:
    """The last ``limit`` attempts before ``iteration`` with scores or errors, oldest first."""
    rows = list(reversed(ctx.store.recent_attempts(limit, before_iteration=iteration)))
    if not rows:
        return "(no attempts yet)"
    out = []
    for row in rows:
        if row.valid:
            out.append(f"- iteration {row.iteration}: valid, score {_fmt(row.score)}")
        else:
            out.append(f"- iteration {row.iteration}: invalid: {(row.error or row.status)[:200]}")
    return "\n".join(out)

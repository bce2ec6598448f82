"""Model-call figures of a run: prompt-cache reuse and where model time goes.

Read from the ``llm_call`` events (one per model call, written by the node instrumentation,
`evoduet_graph.graphs.instrument`): per node that made the calls, the prompt tokens, the prompt
tokens served from a prompt cache (the embedded model: the evaluated prefix llama.cpp reused;
hosted models: ``prompt_tokens_details.cached_tokens``), their share, output tokens,
prompt-evaluation and decode seconds, the time calls waited for the embedded model's lock and
the finish reasons. Runs recorded before these events existed have none: the figures are empty
and the report leaves the section out.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evoduet_graph.report.summary_types import CallFigures, CallRow

__all__ = ["call_figures", "call_table"]

_SUMS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "prompt_eval_s",
    "decode_s",
    "lock_wait_s",
    "latency_s",
)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _row() -> dict[str, Any]:
    return {"calls": 0, **dict.fromkeys(_SUMS, 0.0), "finish_reasons": Counter()}


def _finish(row: dict[str, Any]) -> CallRow:
    out: dict[str, Any] = {
        k: (int(v) if k.endswith("tokens") else round(v, 3)) for k, v in row.items() if k in _SUMS
    }
    out["calls"] = row["calls"]
    out["cache_share"] = (
        round(row["cached_input_tokens"] / row["input_tokens"], 4) if row["input_tokens"] else None
    )
    out["finish_reasons"] = dict(sorted(row["finish_reasons"].items()))
    return CallRow(**out)


def call_figures(events: list[dict[str, Any]]) -> CallFigures:
    """Per-node and total model-call figures from the ``llm_call`` events.

    Returns:
        `CallFigures`: ``by_node`` (node → `CallRow`) and ``total``, a row being ``calls``,
        ``input_tokens``, ``cached_input_tokens``, ``cache_share`` (cached / input, None
        without input tokens), ``output_tokens``, ``prompt_eval_s``, ``decode_s``,
        ``lock_wait_s``, ``latency_s`` and ``finish_reasons`` (reason → calls); an empty
        ``by_node`` and a zero-call total for a run without such events.
    """
    rows: dict[str, dict[str, Any]] = {}
    total = _row()
    for ev in events:
        if ev.get("event") != "llm_call":
            continue
        node = str(ev.get("from_node") or "unknown")
        for row in (rows.setdefault(node, _row()), total):
            row["calls"] += 1
            for key in _SUMS:
                row[key] += _num(ev.get(key))
            if isinstance(ev.get("finish_reason"), str):
                row["finish_reasons"][ev["finish_reason"]] += 1
    return CallFigures(
        by_node={node: _finish(row) for node, row in sorted(rows.items())},
        total=_finish(total),
    )


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def call_table(figures: CallFigures) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows (one per node, then the total) of the report's model-call table."""
    headers = [
        "node",
        "calls",
        "prompt tokens",
        "cached",
        "cached share",
        "output tokens",
        "prompt eval (s)",
        "decode (s)",
        "lock wait (s)",
        "finish reasons",
    ]

    def cells(name: str, f: CallRow) -> list[Any]:
        reasons = ", ".join(f"{k} {v}" for k, v in f.finish_reasons.items()) or "-"
        return [
            name,
            f.calls,
            f.input_tokens,
            f.cached_input_tokens,
            _share(f.cache_share),
            f.output_tokens,
            f.prompt_eval_s,
            f.decode_s,
            f.lock_wait_s,
            reasons,
        ]

    rows = [cells(node, f) for node, f in figures.by_node.items()]
    rows.append(cells("**total**", figures.total))
    return headers, rows

"""Run budgets: LLM calls, tokens, estimated cost and wall time (DESIGN.md §6 "budget stops").

A `Budget` compares the run's usage with the ``budget:`` section of the configuration
(`evoduet_graph.config.BudgetConfig`). Usage is counted from ``events.jsonl``, so totals
survive ``evoduet resume``: every node event carries the node's LLM calls and tokens (nodes
in `INCLUSIVE_NODES`, which run a subgraph whose own nodes report the same calls, are skipped),
and the wall time of earlier sessions is the span from each ``run_start`` to that session's
last event. The current session adds the events it emitted since (`EventLog.memory`) and its
own elapsed time. Work lost in a killed node (a call whose node never finished) is not counted.

Cost is an estimate: tokens × the price of the run's configured model, found by the longest
matching prefix in `DEFAULT_PRICES` merged with ``budget.prices`` (USD per 1M input / output
tokens). Models without a price (``local``, unknown names) cost 0.

The ``record`` node asks `Budget.exceeded` after each iteration and stops the run with the
reason (prefix `STOP_PREFIX`); ``initialize`` asks again when a run is resumed, so a run that
already spent its budget stops at once instead of running one more iteration. Raise the limit
in ``<run_dir>/config.yaml`` to continue it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from evoduet_graph.config import BudgetConfig
from evoduet_graph.events import EventLog, read_events

__all__ = [
    "DEFAULT_PRICES",
    "INCLUSIVE_NODES",
    "STOP_PREFIX",
    "Budget",
    "UsageTotals",
    "budget_for",
    "price_for",
    "usage_from_events",
]

STOP_PREFIX = "budget reached"
"""Every budget ``stop_reason`` starts with this."""

INCLUSIVE_NODES = frozenset({"retrieve"})
"""Nodes whose LLM usage already includes their subgraph's nodes (not counted twice)."""

#: USD per 1M (input, output) tokens, list prices of OpenAI models when this table was written
#: (2025). Extend or override with ``budget.prices`` in the configuration.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
}


def _model_name(model: str) -> str:
    """``openai:gpt-4o-mini`` / ``openai/gpt-4o-mini`` (OpenRouter) → ``gpt-4o-mini``."""
    name = model.strip()
    if ":" in name:
        name = name.split(":", 1)[1]
    return name.rsplit("/", 1)[-1].strip().lower()


def price_for(
    model: str, extra: Mapping[str, tuple[float, float]] | None = None
) -> tuple[float, float] | None:
    """``(USD per 1M input tokens, USD per 1M output tokens)`` of ``model``, or None.

    The longest key of ``extra`` ∪ `DEFAULT_PRICES` (``extra`` wins) that is a prefix of the
    model's name matches, so ``gpt-4o-mini-2024-07-18`` is priced as ``gpt-4o-mini``.
    """
    table = {k.lower(): v for k, v in DEFAULT_PRICES.items()}
    table.update({_model_name(k): tuple(v) for k, v in (extra or {}).items()})  # type: ignore[misc]
    name = _model_name(model)
    best = max((k for k in table if name.startswith(k)), key=len, default=None)
    return table[best] if best is not None else None


@dataclass
class UsageTotals:
    """Usage of a run so far.

    Attributes:
        llm_calls: chat-model calls.
        input_tokens / output_tokens: tokens over all calls.
        wall_s: wall-clock seconds over all sessions.
        cost_usd: estimated spend (0 for unpriced models).
        by_model: per model name the answer reported (``llm_by_model`` of the node events):
            ``{"calls", "input_tokens", "output_tokens"}``; usage of events without it (older
            runs) is priced as the configured model.
    """

    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    wall_s: float = 0.0
    cost_usd: float = 0.0
    by_model: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "llm_calls": self.llm_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tokens": self.tokens,
            "wall_s": round(self.wall_s, 3),
            "cost_usd": round(self.cost_usd, 6),
        }


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _add_node_usage(totals: UsageTotals, events: Iterable[dict[str, Any]]) -> None:
    for ev in events:
        if ev.get("event") != "node" or ev.get("node") in INCLUSIVE_NODES:
            continue
        totals.llm_calls += _int(ev.get("llm_calls"))
        totals.input_tokens += _int(ev.get("input_tokens"))
        totals.output_tokens += _int(ev.get("output_tokens"))
        by_model = ev.get("llm_by_model")
        if isinstance(by_model, dict):
            for model, counts in by_model.items():
                if not isinstance(counts, dict):
                    continue
                agg = totals.by_model.setdefault(
                    str(model), {"calls": 0, "input_tokens": 0, "output_tokens": 0}
                )
                for key in agg:
                    agg[key] += _int(counts.get(key))


def cost_usd(
    totals: UsageTotals,
    default_model: str,
    prices: Mapping[str, tuple[float, float]] | None = None,
) -> tuple[float, dict[str, float]]:
    """Estimated spend of ``totals``: each model of ``by_model`` at its own price, the rest
    (usage without a model name) at ``default_model``'s.

    Returns:
        ``(total USD, USD per model name)``; unpriced models cost 0.
    """
    per_model: dict[str, float] = {}
    rest_in, rest_out = totals.input_tokens, totals.output_tokens
    for model, counts in totals.by_model.items():
        rest_in -= counts["input_tokens"]
        rest_out -= counts["output_tokens"]
        price = price_for(model, prices) or (
            price_for(default_model, prices) if model == "unknown-model" else None
        )
        per_model[model] = (
            (counts["input_tokens"] * price[0] + counts["output_tokens"] * price[1]) / 1e6
            if price
            else 0.0
        )
    default_price = price_for(default_model, prices)
    rest = 0.0
    if default_price and (rest_in > 0 or rest_out > 0):
        rest = (max(0, rest_in) * default_price[0] + max(0, rest_out) * default_price[1]) / 1e6
        per_model[default_model] = per_model.get(default_model, 0.0) + rest
    return sum(per_model.values()), per_model


def _session_wall(events: list[dict[str, Any]]) -> float:
    """Seconds from each ``run_start`` to the last event of its session, summed."""
    wall, start, last = 0.0, None, None
    for ev in events:
        t = ev.get("time")
        if not isinstance(t, int | float):
            continue
        if ev.get("event") == "run_start":
            if start is not None and last is not None:
                wall += max(0.0, last - start)
            start = last = float(t)
        else:
            last = float(t)
    if start is not None and last is not None:
        wall += max(0.0, last - start)
    return wall


def usage_from_events(events: Iterable[dict[str, Any]]) -> UsageTotals:
    """Calls, tokens and wall time recorded in a run's events (cost not priced)."""
    events = list(events)
    totals = UsageTotals(wall_s=_session_wall(events))
    _add_node_usage(totals, events)
    return totals


class Budget:
    """Usage of a run against its ``budget:`` limits (see the module docstring).

    Args:
        cfg: the limits.
        model: the configured model string (for the price).
        events: the run's event log; its file holds the earlier sessions.
    """

    def __init__(self, cfg: BudgetConfig, model: str, events: EventLog) -> None:
        self.cfg = cfg
        self.model = model
        self.events = events
        self.price = price_for(model, cfg.prices)
        prior = list(read_events(events.path)) if events.path is not None else []
        self._prior = usage_from_events(prior)
        self._seen = len(events.memory)  # events of this session already in ``prior``
        self._started = time.monotonic()

    @property
    def active(self) -> bool:
        """Whether any limit is set."""
        c = self.cfg
        return any(
            v is not None for v in (c.max_llm_calls, c.max_tokens, c.max_cost_usd, c.max_wall_s)
        )

    def totals(self) -> UsageTotals:
        """Usage so far: earlier sessions plus this one."""
        now = UsageTotals(
            llm_calls=self._prior.llm_calls,
            input_tokens=self._prior.input_tokens,
            output_tokens=self._prior.output_tokens,
            wall_s=self._prior.wall_s + (time.monotonic() - self._started),
            by_model={k: dict(v) for k, v in self._prior.by_model.items()},
        )
        _add_node_usage(now, self.events.memory[self._seen :])
        now.cost_usd, _ = cost_usd(now, self.model, self.cfg.prices)
        return now

    def exceeded(self, totals: UsageTotals | None = None) -> str | None:
        """The stop reason when a limit is reached, else None."""
        t = self.totals() if totals is None else totals
        c = self.cfg
        checks = [
            ("max_llm_calls", c.max_llm_calls, t.llm_calls, f"{t.llm_calls} LLM calls"),
            ("max_tokens", c.max_tokens, t.tokens, f"{t.tokens} tokens"),
            ("max_cost_usd", c.max_cost_usd, t.cost_usd, f"${t.cost_usd:.4f} estimated cost"),
            ("max_wall_s", c.max_wall_s, t.wall_s, f"{t.wall_s:.1f} s wall time"),
        ]
        for key, limit, used, text in checks:
            if limit is not None and used >= limit:
                return (
                    f"{STOP_PREFIX}: {text} (budget.{key}={limit:g}); raise it in "
                    "config.yaml of the run directory and `evoduet resume` to continue"
                )
        return None


def budget_for(config: Any, events: EventLog) -> Budget:
    """The `Budget` of a run configuration (``config.budget``; all limits None if absent)."""
    cfg = getattr(config, "budget", None) or BudgetConfig()
    return Budget(cfg, config.llm.model, events)

"""Run budgets: LLM calls, tokens, estimated cost and wall time (docs/design.md §6, "budget stops").

A `Budget` compares the run's usage with the ``budget:`` section of the configuration
(`evoduet_graph.config.BudgetConfig`). Usage is counted from ``events.jsonl``, so totals survive
``evoduet resume``: every node event carries the node's LLM calls and tokens (nodes in
`INCLUSIVE_NODES`, which run a subgraph whose own nodes report the same calls, are skipped), and the
wall time of earlier sessions is the span from each ``run_start`` to that session's last event. The
current session keeps a running total of the events it emits (`EventLog.subscribe`, O(1) per event)
and adds its own elapsed time. Work lost in a killed node (a call whose node never finished) is not
counted.

Cost is an estimate: each model's tokens (``llm_by_model`` of the node events, so ``llm.roles``
models are priced on their own) × that model's price (`evoduet_graph.rundir.pricing`: the
genai-prices catalogue, overridden by ``budget.prices``); see `usage_cost`. The embedded ``local``
model costs 0; an unpriced model (one neither knows) counts as 0 here, so ``max_cost_usd`` cannot
stop it (reports show its cost as n/a).

The ``record`` node asks `Budget.exceeded` after each iteration and stops the run with the
reason (prefix `STOP_PREFIX`); ``initialize`` asks again when a run is resumed, so a run that
already spent its budget stops at once instead of running one more iteration. Raise the limit
in ``<run_dir>/config.yaml`` to continue it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from evoduet_graph.config import BudgetConfig
from evoduet_graph.rundir.events import EventLog, read_events
from evoduet_graph.rundir.pricing import model_name, price_for
from evoduet_graph.rundir.usage import UsageTotals, usage_from_events

__all__ = [
    "STOP_PREFIX",
    "Budget",
    "budget_for",
    "other_models",
    "usage_cost",
]

STOP_PREFIX = "budget reached"
"""Every budget ``stop_reason`` starts with this."""


def usage_cost(
    totals: UsageTotals,
    default_model: str,
    prices: Mapping[str, tuple[float, float]] | None = None,
    base_url: str | None = None,
    role_models: Iterable[str] = (),
) -> tuple[float, dict[str, float | None]]:
    """Estimated spend of ``totals``.

    Each model of ``by_model`` at its own price (`evoduet_graph.rundir.pricing.price_for`), the rest
    (usage without a model name) at ``default_model``'s.

    ``by_model`` holds the names the answers reported. A name that is the bare name of a
    configured model string (``default_model`` or one of ``role_models``, the ``llm.roles`` and
    ``llm.models`` models) is priced as that string (its provider's price; ``ollama:`` is
    free), else by the name itself; a name that neither prices (``unknown-model``, an injected
    model's class name) is priced as ``default_model``, as the budget always did. Input tokens
    read from a prompt cache (``cached_input_tokens``) are priced at the cache-read price.

    Returns:
        ``(total USD, USD per model name)``; an unpriced model's USD is None and counts 0 in
        the total.
    """
    configured = [default_model, *role_models]
    memo: dict[str, Any] = {}

    def price(name: str) -> Any:
        if name not in memo:
            memo[name] = price_for(name, prices, base_url) if name else None
        return memo[name]

    def price_of_answer(name: str) -> Any:
        # the configured string first: it names the provider (``ollama:`` is free, and a
        # provider behind a gateway keeps its own price)
        owners = [m for m in configured if m and model_name(m) == model_name(name)]
        found = price(owners[0]) if owners else None
        if found is None:
            found = price(name)
        return found if found is not None or owners else price(default_model)

    per_model: dict[str, float | None] = {}
    rest_in, rest_out = totals.input_tokens, totals.output_tokens
    for model, counts in totals.by_model.items():
        rest_in -= counts["input_tokens"]
        rest_out -= counts["output_tokens"]
        p = price_of_answer(model)
        per_model[model] = (
            p.cost(
                counts["input_tokens"],
                counts["output_tokens"],
                counts.get("cached_input_tokens", 0),
            )
            if p is not None
            else None
        )
    if rest_in > 0 or rest_out > 0:
        p = price(default_model)
        rest = p.cost(max(0, rest_in), max(0, rest_out)) if p is not None else None
        if default_model in per_model or rest is not None:
            prev = per_model.get(default_model)
            per_model[default_model] = (
                None if rest is None and prev is None else (prev or 0.0) + (rest or 0.0)
            )
    return sum(v for v in per_model.values() if v is not None), per_model


class Budget:
    """Usage of a run against its ``budget:`` limits (see the module docstring).

    Args:
        cfg: the limits.
        model: the configured model string (for the price).
        events: the run's event log; its file holds the earlier sessions.
        base_url: ``llm.base_url`` (for the price; None: the provider's own endpoint).
        role_models: the model strings of ``llm.roles`` (see `usage_cost`).
    """

    def __init__(
        self,
        cfg: BudgetConfig,
        model: str,
        events: EventLog,
        base_url: str | None = None,
        role_models: Iterable[str] = (),
    ) -> None:
        self.cfg = cfg
        self.model = model
        self.base_url = base_url
        self.role_models = tuple(role_models)
        self.events = events
        prior = list(read_events(events.path)) if events.path is not None else []
        self._prior = usage_from_events(prior)
        # this session's usage as a running total: each new event is folded in once
        self._session = UsageTotals()
        events.subscribe(self._session.add)
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
        now = self._prior.copy()
        now.wall_s += time.monotonic() - self._started
        session = self._session
        now.llm_calls += session.llm_calls
        now.input_tokens += session.input_tokens
        now.output_tokens += session.output_tokens
        for model, counts in session.by_model.items():
            agg = now.by_model.setdefault(model, dict.fromkeys(counts, 0))
            for key, value in counts.items():
                agg[key] = agg.get(key, 0) + value
        now.cost_usd, _ = usage_cost(
            now, self.model, self.cfg.prices, self.base_url, self.role_models
        )
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


def other_models(llm: Any) -> list[str]:
    """The model strings of an ``llm`` section (object or dict) besides ``llm.model``.

    The ``llm.models`` ensemble members and the ``llm.roles`` models (for `usage_cost`).
    """
    data = llm.model_dump() if hasattr(llm, "model_dump") else dict(llm or {})
    out: list[str] = []
    for member in data.get("models") or []:
        if isinstance(member, dict) and isinstance(member.get("model"), str):
            out.append(member["model"])
    for spec in (data.get("roles") or {}).values():
        if isinstance(spec, str):
            out.append(spec)
        elif isinstance(spec, dict) and isinstance(spec.get("model"), str):
            out.append(spec["model"])
    return out


def budget_for(config: Any, events: EventLog) -> Budget:
    """The `Budget` of a run configuration (``config.budget``; all limits None if absent)."""
    cfg = getattr(config, "budget", None) or BudgetConfig()
    return Budget(
        cfg,
        config.llm.model,
        events,
        getattr(config.llm, "base_url", None),
        other_models(config.llm),
    )

"""LLM usage, sessions and completed iterations of a run, from its events.

LLM usage, sessions (wall time) and completed iterations of a run, computed once from its
events: the budget, the report, the live progress, the bench and the API use these.

Every node event carries the node's LLM calls and tokens (``llm_calls``, ``input_tokens``,
``output_tokens``, ``llm_by_model``); nodes in `INCLUSIVE_NODES` run a subgraph whose own nodes
report the same calls, so they are left out of totals. A session runs from a ``run_start`` to
its ``run_end`` (a killed session: to its last event). `UsageTotals.add` folds one event in,
so a running total (the budget's) costs O(1) per event.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evoduet_graph.rundir import layout
from evoduet_graph.rundir.read import iter_jsonl

__all__ = [
    "INCLUSIVE_NODES",
    "SessionClock",
    "TokenCounts",
    "UsageTotals",
    "add_model_counts",
    "completed_iterations",
    "finite_number",
    "history_from_events",
    "iterations_of",
    "session_figures",
    "usage_by_iteration",
    "usage_from_events",
]

INCLUSIVE_NODES = frozenset({"query_evolution", "retrieve", "dispatch", "collect"})
"""Nodes whose wall time and LLM usage include other nodes' (the inner loop runs inside
``query_evolution``, called ``retrieve`` in older runs; ``select`` inside ``dispatch``; and
``collect`` waits while the iterations in flight run: ``max_iterations_in_flight``); they are
listed per node but left out of the totals."""


def finite_number(value: Any) -> float:
    """A finite number from an event field, else 0.0."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return 0.0
    return x if math.isfinite(x) else 0.0


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


MODEL_COUNT_KEYS = ("calls", "input_tokens", "cached_input_tokens", "output_tokens")
"""The per-model counts of a ``by_model`` table (`add_model_counts`); ``cached_input_tokens``
are the part of ``input_tokens`` the provider read from its prompt cache (0 in older runs)."""


def add_model_counts(
    by_model: dict[str, dict[str, int]], model: str, counts: Mapping[str, Any]
) -> None:
    """Add one model's counts to a ``by_model`` table (missing or malformed counts are 0).

    The one shape of the per-model usage: the live `evoduet_graph.llm.usage.NodeUsage`, the
    node events' ``llm_by_model`` written from it, and `UsageTotals` read back from them.

    Args:
        by_model: model name → ``{"calls", "input_tokens", "cached_input_tokens",
            "output_tokens"}``, updated in place.
        model: the model name the answer reported.
        counts: what to add, by the keys of `MODEL_COUNT_KEYS`.
    """
    agg = by_model.setdefault(str(model), dict.fromkeys(MODEL_COUNT_KEYS, 0))
    for key in MODEL_COUNT_KEYS:
        agg[key] += _int(counts.get(key))


@dataclass
class TokenCounts:
    """Chat-model tokens, in total and per model.

    What the live accounting (`evoduet_graph.llm.usage.NodeUsage`, per node while the run goes)
    and the persisted one (`UsageTotals`, folded from the node events the live one wrote) both
    count.

    Attributes:
        input_tokens: input tokens over all calls.
        output_tokens: output tokens over all calls.
        by_model: per model name the answer reported: ``{"calls", "input_tokens",
            "cached_input_tokens", "output_tokens"}`` (for pricing; `add_model_counts`).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    by_model: dict[str, dict[str, int]] = field(default_factory=dict)

    def add_model(self, model: str, counts: Mapping[str, Any]) -> None:
        """Add one model's counts to ``by_model`` (`add_model_counts`)."""
        add_model_counts(self.by_model, model, counts)


def counts_usage(event: dict[str, Any]) -> bool:
    """Whether ``event`` is a node event whose LLM usage counts in the run's totals."""
    return event.get("event") == "node" and event.get("node") not in INCLUSIVE_NODES


@dataclass
class UsageTotals(TokenCounts):
    """Usage of a run so far: the `TokenCounts` of its node events, calls, time and spend.

    ``by_model`` is the node events' ``llm_by_model``; usage of events without it (older runs)
    is priced as the configured model.

    Attributes:
        llm_calls: chat-model calls.
        wall_s: wall-clock seconds over all sessions.
        cost_usd: estimated spend (unpriced models count 0).
    """

    llm_calls: int = 0
    wall_s: float = 0.0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, event: dict[str, Any]) -> None:
        """Fold one event's LLM usage in (events that do not count are ignored)."""
        if not counts_usage(event):
            return
        self.llm_calls += _int(event.get("llm_calls"))
        self.input_tokens += _int(event.get("input_tokens"))
        self.output_tokens += _int(event.get("output_tokens"))
        by_model = event.get("llm_by_model")
        if isinstance(by_model, dict):
            for model, counts in by_model.items():
                if isinstance(counts, dict):
                    self.add_model(model, counts)

    def copy(self) -> UsageTotals:
        """An independent copy (``by_model`` included)."""
        return replace(self, by_model={k: dict(v) for k, v in self.by_model.items()})

    def as_dict(self) -> dict[str, Any]:
        """The totals as JSON-ready numbers (``by_model`` left out)."""
        return {
            "llm_calls": self.llm_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tokens": self.tokens,
            "wall_s": round(self.wall_s, 3),
            "cost_usd": round(self.cost_usd, 6),
        }


@dataclass
class SessionClock:
    """Sessions and their wall time, folded one event at a time.

    Attributes:
        sessions: ``run_start`` events seen.
        resumed: of those, the ones that resumed a run.
        closed_s: wall seconds of the sessions already ended.
    """

    sessions: int = 0
    resumed: int = 0
    closed_s: float = 0.0
    _start: float | None = None
    _last: float | None = None

    def add(self, event: dict[str, Any]) -> None:
        """Fold one event in (events without a numeric ``time`` are ignored)."""
        t = event.get("time")
        if not isinstance(t, int | float):
            return
        if event.get("event") == "run_start":
            self._close()
            self.sessions += 1
            self.resumed += bool(event.get("resumed"))
            self._start = self._last = float(t)
            return
        self._last = float(t)
        if event.get("event") == "run_end":
            self._close()

    def _close(self) -> None:
        if self._start is not None and self._last is not None:
            self.closed_s += max(0.0, self._last - self._start)
        self._start = self._last = None

    @property
    def wall_s(self) -> float:
        """Wall seconds of every session; an open one counts up to its last event."""
        open_s = (
            max(0.0, self._last - self._start)
            if self._start is not None and self._last is not None
            else 0.0
        )
        return self.closed_s + open_s


def session_figures(events: Iterable[dict[str, Any]]) -> tuple[int, int, float]:
    """``(sessions, resumed sessions, wall seconds)`` of a run's events (`SessionClock`)."""
    clock = SessionClock()
    for ev in events:
        clock.add(ev)
    return clock.sessions, clock.resumed, clock.wall_s


def usage_from_events(events: Iterable[dict[str, Any]]) -> UsageTotals:
    """Calls, tokens and wall time recorded in a run's events (cost not priced)."""
    totals = UsageTotals()
    clock = SessionClock()
    for ev in events:
        totals.add(ev)
        clock.add(ev)
    totals.wall_s = clock.wall_s
    return totals


def usage_by_iteration(events: Iterable[dict[str, Any]]) -> dict[int, UsageTotals]:
    """LLM usage per iteration (events without an integer iteration count as iteration 0)."""
    out: dict[int, UsageTotals] = {}
    for ev in events:
        if counts_usage(ev):
            it = ev.get("iteration")
            out.setdefault(it if isinstance(it, int) else 0, UsageTotals()).add(ev)
    return out


def completed_iterations(run_dir: str | Path) -> int:
    """The last iteration whose ``record`` node finished, from ``events.jsonl`` (0 if none).

    With ``max_iterations_in_flight`` > 1 iterations finish out of order, so after a kill this
    can exceed the number recorded by the iterations lost in flight (at most k − 1); it is
    still the least total a continued run may ask for (no recorded iteration's number may
    exceed the total).
    """
    return max(
        (
            ev["iteration"]
            for ev in iter_jsonl(Path(run_dir) / layout.EVENTS)
            if ev.get("event") == "node"
            and ev.get("node") == "record"
            and isinstance(ev.get("iteration"), int)
        ),
        default=0,
    )


def iterations_of(values: dict[str, Any]) -> int:
    """Iterations a run's graph state has recorded.

    ``iteration`` (sequential loop), or ``iterations_done`` when iterations ran in flight (they
    finish out of order).
    """
    if "iterations_done" in values:
        return int(values["iterations_done"])
    return int(values.get("iteration", 0))


def history_from_events(events_path: Path) -> list[dict[str, Any]]:
    """Per-iteration history rebuilt from ``events.jsonl`` (latest record per iteration)."""
    by_iter: dict[int, dict[str, Any]] = {}
    for ev in iter_jsonl(events_path):
        if ev.get("event") != "node" or not isinstance(ev.get("iteration"), int):
            continue
        entry = by_iter.setdefault(ev["iteration"], {"iteration": ev["iteration"]})
        if ev.get("node") == "gate" and "gate_decision" in ev:
            entry["gate_decision"] = ev["gate_decision"]
        if ev.get("node") == "evaluate" and "candidates" in ev:
            entry["candidates"] = ev["candidates"]
        if ev.get("node") == "record":
            entry["recorded"] = True
            if "best_score" in ev:
                entry["new_best"] = ev["best_score"]
    history, best = [], None
    for it in sorted(by_iter):
        entry = by_iter[it]
        if it == 0 or not entry.pop("recorded", False):
            continue
        best = entry.pop("new_best", best)
        entry["best_score"] = best
        history.append(entry)
    return history

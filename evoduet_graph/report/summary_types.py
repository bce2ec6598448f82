"""The run summary as typed, frozen values (docs/design.md §6).

`evoduet_graph.report.summary.run_summary` returns a `RunSummary`; its consumers (the Markdown
report, the series, ``compare``, the bench, the CLI's end-of-run lines) read attributes, not
string keys. ``RunSummary.to_dict()`` is the JSON form: the same keys, in the same order, with
the same values as the dict ``run_summary`` returned before the summary was typed (sequences as
lists, mappings as dicts), so whatever was written from it keeps its shape.

Frozen means the attributes cannot be rebound; the mappings inside (per node, per decision, per
model) are plain dicts typed read-only (`Mapping`), built once by ``run_summary``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from evoduet_graph.report.correlation import RankCorrelation

__all__ = [
    "BestProgram",
    "CallFigures",
    "CallRow",
    "CostFigures",
    "EventCounts",
    "FailureFigures",
    "HistoryRow",
    "ImprovementFigures",
    "LlmFigures",
    "ModelUsage",
    "NodeUsage",
    "NodeWall",
    "NoveltyFigures",
    "PerNode",
    "PredictionFigures",
    "Rate",
    "RunSummary",
    "SearchFigures",
    "WallFigures",
    "to_plain",
]


def to_plain(value: Any) -> Any:
    """``value`` as JSON-ready builtins: dataclasses and mappings as dicts, sequences as lists.

    Field order is kept (a dataclass's fields in declaration order), so the JSON text of a typed
    summary is the JSON text of the dict it replaces.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    return value


class _Plain:
    """``to_dict()`` for the summary's dataclasses."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`to_plain`): the keys and values of the untyped summary."""
        out: dict[str, Any] = to_plain(self)
        return out


@dataclass(frozen=True)
class EventCounts(_Plain):
    """Lines of ``events.jsonl``: events read and lines that could not be parsed."""

    count: int
    unreadable_lines: int


@dataclass(frozen=True)
class BestProgram(_Plain):
    """The best program as ``best_program.json`` records it (any field may be missing: None)."""

    id: Any
    iteration: Any
    score: Any
    metric: Any
    metric_value: Any
    ndg: Any
    direction: Any


@dataclass(frozen=True)
class SearchFigures(_Plain):
    """Queries issued (``search`` events) and the D_search database's records and URLs."""

    queries: int
    distinct_queries: int
    results_returned: int
    records: int
    records_by_decision: Mapping[str, int]
    record_queries: int
    documents_stored: int
    returned_urls: int
    distinct_urls: int
    seen_before: int
    seen_before_share: float | None
    dropped_lines: int


@dataclass(frozen=True)
class PredictionFigures(_Plain):
    """Predicted vs realised child score over records with a realised outcome.

    ``rank``: Spearman's ρ of the records' (predicted, realised) pairs, its n and 95% interval;
    ``pairs``: those pairs, one per record, in record order.
    """

    records: int
    predictions: int
    mean_predicted: float | None
    mean_realised: float | None
    mean_abs_error: float | None
    outcomes: Mapping[str, int]
    rank: RankCorrelation
    pairs: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class Rate(_Plain):
    """Iterations, how many improved on their parent, and the rate (None without iterations)."""

    iterations: int
    improved: int
    rate: float | None


@dataclass(frozen=True)
class ImprovementFigures(_Plain):
    """Improvement rates over every completed iteration, by evidence group, by gate decision."""

    all: Rate
    by_evidence: Mapping[str, Rate]
    by_decision: Mapping[str, Rate]


@dataclass(frozen=True)
class CostFigures(_Plain):
    """USD of the LLM tokens (None when unpriced) and the search calls / Tavily credits."""

    model: Any
    price_source: str | None
    usd_per_mtok_input: float | None
    usd_per_mtok_output: float | None
    llm_usd: float | None
    search_backend: Any
    search_calls: int
    search_failed: int
    search_credits: Any


RowT = TypeVar("RowT")


@dataclass(frozen=True)
class PerNode(_Plain, Generic[RowT]):
    """Figures of one kind (a row) per node and in total (`LlmFigures`, `CallFigures`).

    Attributes:
        by_node: node name → its row, in node-name order.
        total: the row over every node.
    """

    by_node: Mapping[str, RowT]
    total: RowT


@dataclass(frozen=True)
class NodeUsage(_Plain):
    """LLM usage of one node (or the total): calls, tokens and summed latency."""

    calls: int
    input_tokens: int
    output_tokens: int
    latency_s: float


@dataclass(frozen=True)
class NodeWall(_Plain):
    """Wall time of one node: executions, failed executions, total and mean seconds."""

    executions: int
    errors: int
    total_s: float
    mean_s: float


@dataclass(frozen=True)
class WallFigures(_Plain):
    """Wall time per node and in total (the total leaves out the inclusive nodes)."""

    by_node: Mapping[str, NodeWall]
    total_s: float


@dataclass(frozen=True)
class CallRow(_Plain):
    """Model-call figures of one node (or the total), from the ``llm_call`` events."""

    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    prompt_eval_s: float
    decode_s: float
    lock_wait_s: float
    latency_s: float
    calls: int
    cache_share: float | None
    finish_reasons: Mapping[str, int]


LlmFigures = PerNode[NodeUsage]
"""LLM usage per node and in total (the total leaves out the inclusive nodes)."""

CallFigures = PerNode[CallRow]
"""Model-call figures per node and in total (`evoduet_graph.report.calls`)."""


@dataclass(frozen=True)
class ModelUsage(_Plain):
    """Calls, tokens and estimated USD of one model (``usd`` None when unpriced).

    ``cached_input_tokens`` is the part of ``input_tokens`` the provider read from its prompt
    cache (priced at the cache-read price).
    """

    calls: float
    input_tokens: float
    output_tokens: float
    usd: float | None
    cached_input_tokens: float = 0.0


@dataclass(frozen=True)
class FailureFigures(_Plain):
    """Candidates by outcome and the most common reasons for the unsuccessful ones."""

    source: str | None
    candidates: int
    valid: int
    invalid: int
    failed: int
    rejected: int
    duplicate: int
    other: int
    top_errors: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class NoveltyFigures(_Plain):
    """Near-duplicate rejections before evaluation (`evoduet_graph.candidates.novelty`)."""

    rejections: int
    by_kind: Mapping[str, int]
    resampled: int
    duplicates: int
    accepted_after_resample: int
    similar_to: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class HistoryRow(_Plain):
    """One completed iteration: gate decision, candidates, best child and best-so-far score."""

    iteration: int
    gate_decision: Any
    candidates: int
    valid: int
    best_child: float | None
    improved: bool
    best_score: Any


@dataclass(frozen=True)
class RunSummary(_Plain):
    """The figures of one run directory (`evoduet_graph.report.summary.run_summary`).

    Attributes:
        run_dir: the run directory as given.
        task: the task's name (``run_start`` event, else ``run.json``), None when unknown.
        model: the model the last session started with.
        files: which inputs exist (``events.jsonl``, ``search_database.jsonl``,
            ``programs.sqlite``, ``best_program.json``).
        events: events read and unreadable lines.
        sessions: run sessions (a resumed run has several).
        resumed: sessions that resumed.
        wall_s: wall seconds over the sessions.
        iterations: completed iterations.
        iterations_planned: the iterations the last session was asked for.
        stop_reason: the last ``run_end``'s stop reason.
        finished: the last session ended (a ``run_end`` after the last ``run_start``).
        best: the best program (None without ``best_program.json``).
        initial_score: the initial program's score.
        improvements: iterations that produced a new best.
        gate_decisions: iterations per gate decision (fallbacks marked apart).
        search: queries, D_search records and URLs.
        prediction: predicted vs realised child scores.
        improvement: improvement rates by evidence group and by gate decision.
        cost: USD of the LLM tokens and the search calls.
        llm: LLM usage per node.
        llm_calls: model-call figures per node (``llm_call`` events).
        llm_models: LLM usage and USD per model.
        wall_time: wall time per node.
        failures: candidates by outcome, top error reasons.
        novelty: near-duplicate rejections.
        fallbacks: count per degraded-path event (`FALLBACK_EVENTS`).
        history: one row per completed iteration.

    Scores are on the internal higher-is-better scale; the metric value on the task's.
    """

    run_dir: str
    task: str | None
    model: Any
    files: Mapping[str, bool]
    events: EventCounts
    sessions: int
    resumed: int
    wall_s: float
    iterations: int
    iterations_planned: Any
    stop_reason: Any
    finished: bool
    best: BestProgram | None
    initial_score: float | None
    improvements: int
    gate_decisions: Mapping[str, int]
    search: SearchFigures
    prediction: PredictionFigures
    improvement: ImprovementFigures
    cost: CostFigures
    llm: LlmFigures
    llm_calls: CallFigures
    llm_models: Mapping[str, ModelUsage]
    wall_time: WallFigures
    failures: FailureFigures
    novelty: NoveltyFigures
    fallbacks: Mapping[str, int]
    history: tuple[HistoryRow, ...]

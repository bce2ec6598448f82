"""``scaffold: evox``: an EvoX-style strategy loop around parent selection.

The search strategy is part of the checkpointed graph state (`SearchStrategy`): a
parent-selection rule out of `RULES` and an instruction added to every mutation prompt. It
starts as ``evox.initial_rule`` with no instruction (``diverse_island``: exactly the
``openevolve`` scaffold). Its effect is measured while it is active: the best-score change
and the number of iterations that produced a new best.

When ``evox.strategy_patience`` iterations in a row produced no new best (counted from the
later of the last improvement and the strategy's stagnation window start), the ``select``
node makes one structured LLM call (prompt ``evox_strategy.md``) with the population-state
descriptor (`evoduet_graph.prompts.descriptor.population_descriptor`), the current strategy and the
last ``evox.history`` strategies with their measured effect, and the model returns a new
rule, instruction and rationale (`StrategyOutput`). Unusable output (after
`structured_call`'s fallbacks and repair) or a failed call keeps the current strategy and
restarts its stagnation window, so a failing model is asked again only after another
``strategy_patience`` iterations.

Every strategy change (and failure) is an event (``strategy``) and a line of
``<run_dir>/strategies.jsonl`` (`StrategyLog`). A run killed after that line was written but
before the checkpoint replays the logged answer instead of asking again, so a resumed run
continues with the same strategy even with a sampling model.

Only parent selection and the prompt instruction change; the gate, inner loop, generate and
evaluate nodes and the world-knowledge layer's prompts are those of every scaffold.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, ClassVar, cast, get_args

from pydantic import BaseModel, Field, field_validator

from evoduet_graph.config import EvoXConfig, StrategyRule
from evoduet_graph.context import Context
from evoduet_graph.llm import LLMCallError, structured_call
from evoduet_graph.prompts.descriptor import population_descriptor
from evoduet_graph.prompts.render import render
from evoduet_graph.scaffolds.base import Selection, ranked_programs
from evoduet_graph.scaffolds.best_of_n import select_best
from evoduet_graph.scaffolds.openevolve import sample_population
from evoduet_graph.scaffolds.top_k import select_top_k
from evoduet_graph.state import OuterState, SearchStrategy, StrategyOutcome

__all__ = [
    "RULES",
    "STRATEGY_FILE",
    "EvoXScaffold",
    "StrategyLog",
    "StrategyOutput",
    "advance_strategy",
    "initial_strategy",
    "select_by_rule",
    "select_recent_improver",
    "strategy_prompt",
]

STRATEGY_FILE = "strategies.jsonl"

RULES: dict[str, str] = {
    "best": "always mutate the best program found so far (exploit it)",
    "top_k_uniform": "a random program among the k best (k = population.top_k)",
    "diverse_island": "OpenEvolve's MAP-Elites island sampling: random, elite-archive or "
    "score-weighted programs of one island at a time (keeps diverse lines alive)",
    "recent_improver": "the most recent program that scored better than its own parent "
    "(follow the freshest line of progress)",
}
"""Parent-selection rules a strategy may choose, with the description the model sees."""

assert set(RULES) == set(get_args(StrategyRule))

_TEXT_CHARS = 300
_RULE_ALIASES = {
    "best": "best",
    "elitist": "best",
    "greedy": "best",
    "top_k": "top_k_uniform",
    "topk": "top_k_uniform",
    "top_k_uniform": "top_k_uniform",
    "uniform": "top_k_uniform",
    "diverse": "diverse_island",
    "island": "diverse_island",
    "diverse_island": "diverse_island",
    "map_elites": "diverse_island",
    "recent": "recent_improver",
    "recent_improver": "recent_improver",
    "improver": "recent_improver",
}


def _one_line(value: Any, limit: int) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        value = "; ".join(str(v) for v in value)
    return " ".join(str(value).split())[:limit]


class StrategyOutput(BaseModel):
    """The revision call's answer. Rule spellings such as ``top-k`` or ``Recent improver``
    are normalised; text fields are collapsed to one line and capped (the caps are part of
    the JSON schema, so a grammar-constrained model cannot ramble)."""

    parent_rule: StrategyRule
    instruction: str = Field("", max_length=_TEXT_CHARS)
    rationale: str = Field("", max_length=_TEXT_CHARS)

    @field_validator("parent_rule", mode="before")
    @classmethod
    def _rule(cls, value: Any) -> str:
        key = "_".join(str(value).strip().lower().replace("-", " ").split())
        if key not in _RULE_ALIASES:
            raise ValueError(f"parent_rule must be one of {', '.join(RULES)}, got {value!r}")
        return _RULE_ALIASES[key]

    @field_validator("instruction", "rationale", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return _one_line(value, _TEXT_CHARS)


# --------------------------------------------------------------------------------------------
# The strategy log (<run_dir>/strategies.jsonl)
# --------------------------------------------------------------------------------------------


class StrategyLog:
    """``<run_dir>/strategies.jsonl``: one JSON object per strategy event, append-only.

    Records: ``{"iteration", "status", "strategy", "previous", "stale_iterations", "method",
    "fallbacks", "error", "time"}`` where ``status`` is ``initial`` (the first strategy),
    ``revised`` (``strategy`` replaced ``previous``, whose measured effect it carries),
    ``failed`` (unusable model output: ``strategy`` is the kept one) or ``error`` (the call
    failed). With ``path=None`` (in-memory runs) nothing is written or found.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path

    @classmethod
    def for_run(cls, run_dir: Path | None) -> StrategyLog:
        """The log of a run directory (None: an in-memory run)."""
        return cls(run_dir / STRATEGY_FILE if run_dir is not None else None)

    def records(self) -> list[dict[str, Any]]:
        """Every record, in order; a torn last line (killed mid-write) is skipped."""
        if self.path is None or not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                out.append(record)
        return out

    def find(
        self, iteration: int, *, status: str | None = None, previous_id: int | None = None
    ) -> dict[str, Any] | None:
        """The last record of ``iteration`` (with that ``status`` / that previous strategy)."""
        found = None
        for record in self.records():
            if record.get("iteration") != iteration:
                continue
            if status is not None and record.get("status") != status:
                continue
            prev = record.get("previous") or {}
            if previous_id is not None and prev.get("id") != previous_id:
                continue
            found = record
        return found

    def append(self, record: dict[str, Any]) -> None:
        """Append one record (flushed; a no-op without a path)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=str) + "\n")
            fh.flush()


# --------------------------------------------------------------------------------------------
# Parent selection by rule
# --------------------------------------------------------------------------------------------


def select_recent_improver(ctx: Context, num_inspirations: int) -> Selection:
    """The newest program that scored strictly better than its parent (ties: higher score,
    then id); inspirations: the best programs other than it. None yet: the best program
    (mode ``best``).

    Raises:
        EmptyPopulationError: the population holds no program.
    """
    population = ctx.population
    improvers: list[tuple[int, float, str]] = []
    for pid in population.ids():
        if population.code_id(pid) != pid:
            continue  # a migrant copy
        entry = population.get(pid)
        parent = entry.parent_id
        if parent is None:
            continue
        if parent in population:
            parent_score: float | None = population.get(parent).score
        elif ctx.store.has_program(parent):
            parent_score = ctx.store.get_program(parent).score
        else:
            parent_score = None
        if parent_score is not None and entry.score > parent_score:
            improvers.append((entry.iteration, entry.score, pid))
    if not improvers:
        return select_best(population, num_inspirations)
    chosen = max(improvers)[2]
    ranked = ranked_programs(population, num_inspirations + 1)
    others = [p for p in ranked if p != chosen][:num_inspirations]
    return Selection(parent_id=chosen, inspiration_ids=others, island=None, mode="recent_improver")


def select_by_rule(rule: str, ctx: Context, rng: random.Random) -> Selection:
    """Apply parent-selection ``rule`` (a key of `RULES`).

    Raises:
        ValueError: unknown rule.
        EmptyPopulationError: the population holds no program.
    """
    n = ctx.config.prompt.num_inspirations
    if rule == "diverse_island":
        return sample_population(ctx.population, rng, n)
    if rule == "top_k_uniform":
        return select_top_k(ctx.population, rng, ctx.config.population.top_k, n)
    if rule == "best":
        return select_best(ctx.population, n)
    if rule == "recent_improver":
        return select_recent_improver(ctx, n)
    raise ValueError(f"unknown parent rule {rule!r}; known: {', '.join(RULES)}")


# --------------------------------------------------------------------------------------------
# The strategy loop
# --------------------------------------------------------------------------------------------


def initial_strategy(cfg: EvoXConfig, iteration: int, best_score: float | None) -> SearchStrategy:
    """Strategy 0: ``cfg.initial_rule``, no instruction, starting at ``iteration``."""
    return SearchStrategy(
        id=0,
        parent_rule=cfg.initial_rule,
        instruction="",
        rationale="initial strategy",
        started_iteration=iteration,
        window_start=iteration,
        start_best_score=best_score,
        new_bests=0,
    )


def _outcome(strategy: SearchStrategy, iteration: int, best: float | None) -> StrategyOutcome:
    start = strategy["start_best_score"]
    delta = best - start if best is not None and start is not None else None
    return StrategyOutcome(
        id=strategy["id"],
        parent_rule=strategy["parent_rule"],
        instruction=strategy["instruction"],
        first_iteration=strategy["started_iteration"],
        last_iteration=iteration - 1,
        best_delta=delta,
        new_bests=strategy["new_bests"],
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.6g}"


def _outcome_text(o: StrategyOutcome) -> str:
    span = o["last_iteration"] - o["first_iteration"] + 1
    instruction = o["instruction"] or "(none)"
    return (
        f"- strategy {o['id']}: parent_rule {o['parent_rule']}; instruction: {instruction}\n"
        f"  active for {span} iteration(s) ({o['first_iteration']}-{o['last_iteration']}): "
        f"best score change {_fmt(o['best_delta'])}, {o['new_bests']} new best(s)"
    )


def strategy_prompt(
    state: OuterState,
    ctx: Context,
    iteration: int,
    current: SearchStrategy,
    history: list[StrategyOutcome],
    stale: int,
) -> str:
    """The revision prompt (``prompts/evox_strategy.md``) for ``iteration``; deterministic
    for equal inputs."""
    rules = "\n".join(f"   - {name}: {text}" for name, text in RULES.items())
    descriptor = population_descriptor(ctx, {**state, "iteration": iteration})
    return render(
        "evox_strategy",
        stale=stale,
        rules=rules,
        instruction=ctx.task.instruction[:2000],
        descriptor=descriptor,
        current=_outcome_text(_outcome(current, iteration, state.get("best_score"))),
        history="\n".join(_outcome_text(o) for o in history) or "(none yet)",
    )


def _record(
    ctx: Context,
    iteration: int,
    status: str,
    strategy: SearchStrategy,
    previous: StrategyOutcome | None,
    **extra: Any,
) -> dict[str, Any]:
    record = {
        "iteration": iteration,
        "status": status,
        "strategy": dict(strategy),
        "previous": dict(previous) if previous is not None else None,
        **extra,
        "time": round(time.time(), 3),
    }
    StrategyLog.for_run(ctx.run_dir).append(record)
    ctx.events.emit(
        "strategy",
        iteration=iteration,
        status=status,
        strategy_id=strategy["id"],
        parent_rule=strategy["parent_rule"],
        instruction=strategy["instruction"],
        rationale=strategy["rationale"],
        previous=dict(previous) if previous is not None else None,
        **{k: v for k, v in extra.items() if k in ("method", "fallbacks", "error")},
    )
    return record


def _revise(
    state: OuterState,
    ctx: Context,
    iteration: int,
    current: SearchStrategy,
    history: list[StrategyOutcome],
    stale: int,
) -> tuple[SearchStrategy, list[StrategyOutcome]]:
    cfg = ctx.config.evox
    best = state.get("best_score")
    previous = _outcome(current, iteration, best)
    kept = cast(SearchStrategy, {**current, "window_start": iteration})
    logged = StrategyLog.for_run(ctx.run_dir).find(iteration, previous_id=current["id"])
    if logged is not None:  # replay the answer of a killed attempt at this select
        if logged.get("status") == "revised":
            history = (history + [previous])[-cfg.history :] if cfg.history else []
            return cast(SearchStrategy, dict(logged["strategy"])), history
        return kept, history
    try:
        result = structured_call(
            ctx.model_for("revise_strategy"),
            strategy_prompt(state, ctx, iteration, current, history, stale),
            StrategyOutput,
            default=lambda: StrategyOutput(parent_rule=current["parent_rule"]),  # type: ignore[arg-type]
            config=ctx.llm_config("select", iteration=iteration, role="revise_strategy"),
            retry=ctx.llm_retry("revise_strategy"),
        )
    except LLMCallError as exc:
        _record(
            ctx, iteration, "error", kept, previous, stale_iterations=stale, error=str(exc)[:500]
        )
        return kept, history
    if result.used_default:
        _record(
            ctx,
            iteration,
            "failed",
            kept,
            previous,
            stale_iterations=stale,
            method=result.method,
            fallbacks=result.fallbacks,
            raw=(result.raw or "")[:600],
        )
        return kept, history
    out = result.value
    new = SearchStrategy(
        id=current["id"] + 1,
        parent_rule=out.parent_rule,
        instruction=out.instruction[: cfg.max_instruction_chars],
        rationale=out.rationale,
        started_iteration=iteration,
        window_start=iteration,
        start_best_score=best,
        new_bests=0,
    )
    _record(
        ctx,
        iteration,
        "revised",
        new,
        previous,
        stale_iterations=stale,
        method=result.method,
        fallbacks=result.fallbacks,
    )
    history = (history + [previous])[-cfg.history :] if cfg.history else []
    return new, history


def advance_strategy(
    state: OuterState, ctx: Context, iteration: int
) -> tuple[SearchStrategy, list[StrategyOutcome]]:
    """The strategy for ``iteration``: the state's one with its effect counters brought up to
    date, revised when it has stagnated for ``evox.strategy_patience`` iterations.

    Returns:
        ``(strategy, history)`` to write into the state.
    """
    history = list(state.get("strategy_history") or [])
    stored = state.get("strategy")
    best = state.get("best_score")
    if stored is None:
        strategy = initial_strategy(ctx.config.evox, iteration, best)
        if StrategyLog.for_run(ctx.run_dir).find(iteration, status="initial") is None:
            _record(ctx, iteration, "initial", strategy, None)
        return strategy, history
    strategy = cast(SearchStrategy, dict(stored))
    last_improvement = int(state.get("last_improvement_iteration", 0))
    if last_improvement == iteration - 1 and last_improvement >= strategy["started_iteration"]:
        strategy["new_bests"] += 1
    stale = (iteration - 1) - max(last_improvement, strategy["window_start"] - 1)
    if stale < ctx.config.evox.strategy_patience:
        return strategy, history
    return _revise(state, ctx, iteration, strategy, history, stale)


class EvoXScaffold:
    """The EvoX strategy loop (module docstring)."""

    name = "evox"
    populations: ClassVar[tuple[str, ...]] = ("islands",)
    """Population kinds it runs over; the first is its choice when none is configured."""

    def select(
        self, state: OuterState, ctx: Context, rng: random.Random, iteration: int
    ) -> Selection:
        """Advance the strategy (`advance_strategy`), then apply its parent rule.

        Returns:
            The rule's `Selection` with the strategy's instruction and the state update
            ``strategy`` / ``strategy_history``.

        Raises:
            EmptyPopulationError: the population holds no program.
        """
        strategy, history = advance_strategy(state, ctx, iteration)
        chosen = select_by_rule(strategy["parent_rule"], ctx, rng)
        return Selection(
            parent_id=chosen.parent_id,
            inspiration_ids=chosen.inspiration_ids,
            island=chosen.island,
            mode=chosen.mode,
            instruction=strategy["instruction"],
            update={"strategy": strategy, "strategy_history": history},
        )

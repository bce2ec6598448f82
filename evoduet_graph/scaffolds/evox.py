"""``scaffold: evox``: an EvoX-style strategy loop around parent selection.

The search strategy is part of the checkpointed graph state (`SearchStrategy`): a
parent-selection rule out of `RULES` and an instruction added to every mutation prompt. It
starts as ``evox.initial_rule`` with no instruction (``diverse_island``: exactly the
``openevolve`` scaffold). Its effect is measured while it is active: the best-score change
and the number of iterations that produced a new best.

When ``evox.strategy_patience`` iterations in a row produced no new best (counted from the
later of the last improvement and the strategy's stagnation window start), ``select`` marks
the revision as due (``strategy_revision`` in the state) and the ``revise_strategy`` node
(`evoduet_graph.nodes.revise_strategy`, between ``select`` and ``gate``) makes one
structured LLM call (prompt ``evox_strategy.md``) with the population-state
descriptor (`evoduet_graph.prompts.descriptor.population_descriptor`), the current strategy and the
last ``evox.history`` strategies with their measured effect, and the model returns a new
rule, instruction and rationale (`StrategyOutput`). Unusable output (after
`structured_call`'s fallbacks and repair) or a failed call keeps the current strategy and
restarts its stagnation window, so a failing model is asked again only after another
``strategy_patience`` iterations.

Every strategy change (and failure) is an event (``strategy``, with the whole strategy).
The revision is a graph node like every other LLM call: its answer is in the checkpoint once
the node has finished, so a resumed run continues with the same strategy; a run killed inside
the node asks again, as for any node.

Only parent selection and the prompt instruction change; the gate, inner loop, generate and
evaluate nodes and the world-knowledge layer's prompts are those of every scaffold.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, cast, get_args

from pydantic import BaseModel, Field, field_validator

from evoduet_graph.config import EvoXConfig, StrategyRule
from evoduet_graph.context import Context
from evoduet_graph.llm import LLMCallError, structured_call
from evoduet_graph.prompts.descriptor import population_descriptor
from evoduet_graph.prompts.render import render
from evoduet_graph.scaffolds.base import ScaffoldBase, Selection, ranked_programs
from evoduet_graph.scaffolds.best_of_n import select_best
from evoduet_graph.scaffolds.openevolve import sample_population
from evoduet_graph.scaffolds.top_k import select_top_k
from evoduet_graph.state import OuterState, SearchStrategy, StrategyOutcome

__all__ = [
    "RULES",
    "EvoXScaffold",
    "StrategyOutput",
    "StrategyRevision",
    "advance_strategy",
    "initial_strategy",
    "revise",
    "select_by_rule",
    "select_recent_improver",
    "strategy_prompt",
]

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
    """The revision call's answer.

    Rule spellings such as ``top-k`` or ``Recent improver`` are normalised; text fields are
    collapsed to one line and capped (the caps are part of the JSON schema, so a grammar-constrained
    model cannot ramble).
    """

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
# Parent selection by rule
# --------------------------------------------------------------------------------------------


def select_recent_improver(ctx: Context, num_inspirations: int) -> Selection:
    """Select the newest program that improved on its parent.

    The newest program that scored strictly better than its parent (ties: higher score,
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


@dataclass(frozen=True)
class StrategyRevision:
    """What one strategy revision reads (the ``revise_strategy`` node builds it).

    Attributes:
        iteration: the iteration being started.
        current: the stagnated strategy.
        history: the replaced strategies so far.
        stale: iterations without a new best.
    """

    iteration: int
    current: SearchStrategy
    history: list[StrategyOutcome]
    stale: int


def strategy_prompt(state: OuterState, ctx: Context, revision: StrategyRevision) -> str:
    """The revision prompt (``prompts/evox_strategy.md``) for ``iteration``.

    Deterministic for equal inputs.
    """
    iteration, current = revision.iteration, revision.current
    history, stale = revision.history, revision.stale
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
) -> None:
    """Write the ``strategy`` event.

    The ``strategy`` event: ``status`` (``initial`` / ``revised`` / ``failed`` /
    ``error``), the strategy in force after it, the replaced one's measured effect.
    """
    ctx.events.emit(
        "strategy",
        iteration=iteration,
        status=status,
        strategy=dict(strategy),
        strategy_id=strategy["id"],
        parent_rule=strategy["parent_rule"],
        instruction=strategy["instruction"],
        rationale=strategy["rationale"],
        previous=dict(previous) if previous is not None else None,
        **extra,
    )


def revise(
    state: OuterState, ctx: Context, revision: StrategyRevision
) -> tuple[SearchStrategy, list[StrategyOutcome]]:
    """Ask the model for a new strategy (the ``revise_strategy`` node's call).

    Args:
        state: the outer state (population descriptor, best score).
        ctx: the run context.
        revision: the iteration, the stagnated strategy, the history and the staleness.

    Returns:
        ``(strategy, history)``: the new strategy and the history with the replaced one
        appended, or (unusable answer, failed call) the current one with its stagnation
        window restarted and the history unchanged.
    """
    iteration, current, history = revision.iteration, revision.current, revision.history
    stale = revision.stale
    cfg = ctx.config.evox
    best = state.get("best_score")
    previous = _outcome(current, iteration, best)
    kept = cast(SearchStrategy, {**current, "window_start": iteration})
    try:
        result = structured_call(
            ctx.model_for("revise_strategy"),
            strategy_prompt(state, ctx, revision),
            StrategyOutput,
            default=lambda: StrategyOutput(parent_rule=current["parent_rule"]),
            config=ctx.llm_config("revise_strategy", iteration=iteration, role="revise_strategy"),
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
) -> tuple[SearchStrategy, list[StrategyOutcome], int | None]:
    """The strategy for ``iteration``.

    The state's one with its effect counters brought up to date (no model call).

    Returns:
        ``(strategy, history, stale)``: ``stale`` is the number of iterations without a new
        best when it reached ``evox.strategy_patience`` (the ``revise_strategy`` node then
        revises the strategy), else None.
    """
    history = list(state.get("strategy_history") or [])
    stored = state.get("strategy")
    best = state.get("best_score")
    if stored is None:
        strategy = initial_strategy(ctx.config.evox, iteration, best)
        _record(ctx, iteration, "initial", strategy, None)
        return strategy, history, None
    strategy = cast(SearchStrategy, dict(stored))
    last_improvement = int(state.get("last_improvement_iteration", 0))
    if last_improvement == iteration - 1 and last_improvement >= strategy["started_iteration"]:
        strategy["new_bests"] += 1
    stale = (iteration - 1) - max(last_improvement, strategy["window_start"] - 1)
    if stale < ctx.config.evox.strategy_patience:
        return strategy, history, None
    return strategy, history, stale


class EvoXScaffold(ScaffoldBase, name="evox", populations=("islands",)):
    """The EvoX strategy loop (module docstring)."""

    def select(
        self, state: OuterState, ctx: Context, rng: random.Random, iteration: int
    ) -> Selection:
        """Advance the strategy (`advance_strategy`), then apply its parent rule.

        Returns:
            The rule's `Selection` with the strategy's instruction and the state update
            ``strategy`` / ``strategy_history`` / ``strategy_revision`` (the stagnation count
            when the ``revise_strategy`` node is to revise the strategy, else None).

        Raises:
            EmptyPopulationError: the population holds no program.
        """
        strategy, history, stale = advance_strategy(state, ctx, iteration)
        chosen = select_by_rule(strategy["parent_rule"], ctx, rng)
        return Selection(
            parent_id=chosen.parent_id,
            inspiration_ids=chosen.inspiration_ids,
            island=chosen.island,
            mode=chosen.mode,
            instruction=strategy["instruction"],
            update={
                "strategy": strategy,
                "strategy_history": history,
                "strategy_revision": stale,
            },
        )

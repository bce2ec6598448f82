"""Scaffold selection policies, their configuration and the strategy instruction.

Scaffold selection policies (top_k, best_of_n, EvoX rules), their configuration and the
strategy instruction's place in the mutation prompt.
"""

from __future__ import annotations

import random
from collections import Counter
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from evoduet_graph.config import ConfigError, EvoDuetConfig, PopulationConfig, merge_config
from evoduet_graph.population import (
    EmptyPopulationError,
    IslandPopulation,
    Population,
    ProgramEntry,
    TopKPopulation,
)
from evoduet_graph.prompts.generate import ProgramView, build_generation_messages
from evoduet_graph.scaffolds import (
    SCAFFOLDS,
    BestOfNScaffold,
    EvoXScaffold,
    OpenEvolveScaffold,
    TopKScaffold,
    check_scaffold,
    make_scaffold,
    ranked_programs,
    scaffold_for,
    select_best,
    select_top_k,
)
from evoduet_graph.scaffolds.evox import RULES, StrategyOutput, select_by_rule


def _code(pid: str) -> str:
    return f"def f():\n    return {pid!r}\n"


def _populate(pop: Population, scores: list[float], *, parents: dict[int, int] | None = None):
    """Programs p0..pN with the given scores, added at iterations 0..N."""
    for i, score in enumerate(scores):
        parent = f"p{(parents or {}).get(i)}" if (parents or {}).get(i) is not None else None
        entry = ProgramEntry(id=f"p{i}", score=score, iteration=i, parent_id=parent)
        pop.add(entry, _code(f"p{i}"), iteration=i)
    return pop


def _topk(k: int = 5) -> TopKPopulation:
    return TopKPopulation(PopulationConfig(kind="top_k", top_k=k), seed=0, get_code=_code)


def _islands(**kw) -> IslandPopulation:
    cfg = PopulationConfig(kind="islands", num_islands=2, migration_interval=1000, **kw)
    return IslandPopulation(cfg, seed=0, get_code=_code)


SCORES = [0.1, 0.9, 0.5, 0.7, 0.3, 0.8, 0.2, 0.6, 0.4, 0.05]


# ------------------------------------------------------------------------------------------
# top_k
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [_islands, lambda: _topk(20)], ids=["islands", "top_k"])
def test_top_k_parent_is_uniform_among_the_k_best_and_inspirations_are_the_rest(make):
    pop = _populate(make(), SCORES)
    k, n = 4, 2
    best_k = ["p1", "p5", "p3", "p7"]  # 0.9, 0.8, 0.7, 0.6
    assert ranked_programs(pop, k) == best_k
    parents = Counter()
    for seed in range(400):
        sel = select_top_k(pop, random.Random(seed), k, n)
        assert sel.mode == "top_k" and sel.island is None
        assert sel.parent_id in best_k
        assert len(sel.inspiration_ids) == n
        assert set(sel.inspiration_ids) <= set(best_k) - {sel.parent_id}
        # shown best first
        assert sel.inspiration_ids == sorted(sel.inspiration_ids, key=best_k.index)
        parents[sel.parent_id] += 1
    assert set(parents) == set(best_k)
    assert min(parents.values()) > 60  # uniform: 100 expected each of 400 draws


def test_top_k_is_deterministic_per_rng_seed_and_handles_small_populations():
    pop = _populate(_topk(), SCORES[:2])
    a = select_top_k(pop, random.Random("42:select:3"), 10, 3)
    b = select_top_k(pop, random.Random("42:select:3"), 10, 3)
    assert a == b
    assert {a.parent_id, *a.inspiration_ids} == {"p0", "p1"}  # only 2 programs exist
    with pytest.raises(EmptyPopulationError):
        select_top_k(_topk(), random.Random(0), 3, 1)
    with pytest.raises(ValueError):
        select_top_k(pop, random.Random(0), 0, 1)


# ------------------------------------------------------------------------------------------
# best_of_n
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [_islands, lambda: _topk(20)], ids=["islands", "top_k"])
def test_best_of_n_always_takes_the_best_with_the_next_best_as_inspirations(make):
    pop = _populate(make(), SCORES)
    sel = select_best(pop, 3)
    assert (sel.parent_id, sel.inspiration_ids, sel.mode) == ("p1", ["p5", "p3", "p7"], "best")
    # the policy ignores the rng: every draw gives the same choice
    state: dict = {}
    ctx = SimpleNamespace(population=pop, config=EvoDuetConfig(scaffold="best_of_n"))
    scaffold = BestOfNScaffold()
    picks = [scaffold.select(state, ctx, random.Random(s), 1) for s in range(20)]  # type: ignore[arg-type]
    assert all(p == picks[0] for p in picks)


def test_best_of_n_follows_a_new_best():
    pop = _populate(_topk(), [0.2, 0.4])
    assert select_best(pop, 1).parent_id == "p1"
    pop.add(ProgramEntry(id="c", score=0.95, parent_id="p1"), _code("c"), iteration=5)
    sel = select_best(pop, 1)
    assert sel.parent_id == "c" and sel.inspiration_ids == ["p1"]


def test_migrant_copies_count_as_their_original():
    cfg = PopulationConfig(kind="islands", num_islands=2, migration_interval=2, migration_rate=1.0)
    pop = IslandPopulation(cfg, seed=0, get_code=_code)
    _populate(pop, [0.5, 0.9, 0.1, 0.3])
    assert any("@" in pid for pid in pop.ids()), "the test needs a migrant copy"
    ranked = ranked_programs(pop, 10)
    assert len(ranked) == len(set(ranked)) and not any("@" in pid for pid in ranked)
    assert ranked == ["p1", "p0", "p3", "p2"]


# ------------------------------------------------------------------------------------------
# EvoX rules and output schema
# ------------------------------------------------------------------------------------------


class _Store:
    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def has_program(self, pid: str) -> bool:
        return pid in self.scores

    def get_program(self, pid: str):
        return SimpleNamespace(score=self.scores[pid])


def _ctx(pop: Population, **cfg) -> SimpleNamespace:
    config = EvoDuetConfig.model_validate({"scaffold": "evox", **cfg})
    return SimpleNamespace(population=pop, config=config, store=_Store({}))


def test_recent_improver_is_the_newest_child_that_beat_its_parent():
    pop = _islands()
    # p0 root; p1 child of p0 improved (0.5 > 0.2); p2 child of p1 worse; p3 child of p0 better
    # but older than p4; p4 child of p2 improved (0.45 > 0.3)
    _populate(pop, [0.2, 0.5, 0.3, 0.6, 0.45], parents={1: 0, 2: 1, 3: 0, 4: 2})
    sel = select_by_rule("recent_improver", _ctx(pop), random.Random(0))
    assert sel.parent_id == "p4" and sel.mode == "recent_improver"
    assert "p4" not in sel.inspiration_ids and sel.inspiration_ids[0] == "p3"  # the best


def test_recent_improver_without_any_improver_falls_back_to_the_best():
    pop = _populate(_islands(), [0.7, 0.4, 0.3], parents={1: 0, 2: 1})
    sel = select_by_rule("recent_improver", _ctx(pop), random.Random(0))
    assert (sel.parent_id, sel.mode) == ("p0", "best")


def test_recent_improver_reads_an_evicted_parent_from_the_store():
    pop = _topk(2)
    _populate(pop, [0.6, 0.7])
    pop.add(
        ProgramEntry(id="c", score=0.65, parent_id="gone", iteration=9), _code("c"), iteration=9
    )
    ctx = _ctx(pop)
    ctx.store = _Store({"gone": 0.1})
    assert select_by_rule("recent_improver", ctx, random.Random(0)).parent_id == "c"


def test_every_rule_selects_and_unknown_rules_raise():
    pop = _populate(_islands(), SCORES)
    ctx = _ctx(pop)
    for rule in RULES:
        sel = select_by_rule(rule, ctx, random.Random(1))
        assert sel.parent_id in pop
    assert select_by_rule("best", ctx, random.Random(1)).parent_id == "p1"
    diverse = select_by_rule("diverse_island", ctx, random.Random(7))
    assert diverse == OpenEvolveScaffold().select({}, ctx, random.Random(7), 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown parent rule"):
        select_by_rule("anything", ctx, random.Random(1))


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        ("best", "best"),
        ("Top-K", "top_k_uniform"),
        ("top k uniform", "top_k_uniform"),
        ("Recent improver", "recent_improver"),
        ("diverse-island", "diverse_island"),
        ("MAP-Elites", "diverse_island"),
    ],
)
def test_strategy_output_normalises_rule_spellings(raw, rule):
    out = StrategyOutput.model_validate(
        {"parent_rule": raw, "instruction": "  try\n  a\tgrid  ", "rationale": ["a", "b"]}
    )
    assert out.parent_rule == rule
    assert out.instruction == "try a grid" and out.rationale == "a; b"


def test_strategy_output_rejects_unknown_rules_and_caps_text():
    with pytest.raises(ValidationError):
        StrategyOutput.model_validate({"parent_rule": "random walk"})
    with pytest.raises(ValidationError):
        StrategyOutput.model_validate({"instruction": "x"})  # the rule is required
    long = StrategyOutput.model_validate({"parent_rule": "best", "instruction": "y" * 1000})
    assert len(long.instruction) == 300
    schema = StrategyOutput.model_json_schema()
    assert schema["properties"]["instruction"]["maxLength"] == 300
    assert set(schema["properties"]["parent_rule"]["enum"]) == set(RULES)


# ------------------------------------------------------------------------------------------
# registry and configuration
# ------------------------------------------------------------------------------------------


def test_registry_and_injection():
    assert set(SCAFFOLDS) == {"openevolve", "top_k", "best_of_n", "evox"}
    for name, cls in SCAFFOLDS.items():
        assert isinstance(make_scaffold(name), cls) and make_scaffold(name).name == name
    assert isinstance(make_scaffold("top_k"), TopKScaffold)
    assert isinstance(make_scaffold("evox"), EvoXScaffold)
    with pytest.raises(ValueError, match="unknown scaffold 'nope'; known: openevolve"):
        make_scaffold("nope")
    custom = BestOfNScaffold()
    assert scaffold_for(SimpleNamespace(scaffold=custom, config=EvoDuetConfig())) is custom  # type: ignore[arg-type]
    named = scaffold_for(SimpleNamespace(scaffold=None, config=EvoDuetConfig(scaffold="evox")))  # type: ignore[arg-type]
    assert isinstance(named, EvoXScaffold)


@pytest.mark.parametrize(
    ("scaffold", "kind"),
    [("openevolve", "islands"), ("top_k", "top_k"), ("best_of_n", "top_k"), ("evox", "islands")],
)
def test_the_scaffold_chooses_the_population_kind(scaffold, kind):
    # the configuration leaves the kind open; the scaffold registry chooses it at setup
    cfg = EvoDuetConfig.model_validate({"scaffold": scaffold, "population": {"top_k": 7}})
    assert cfg.population.kind is None
    checked = check_scaffold(cfg)
    assert checked.population.kind == kind and checked.population.top_k == 7
    assert check_scaffold(checked) == checked  # idempotent
    over = EvoDuetConfig().with_overrides({"scaffold": scaffold})
    assert check_scaffold(over).population.kind == kind
    merged = merge_config(EvoDuetConfig(), {"scaffold": scaffold}, "x")
    assert check_scaffold(merged).population.kind == kind
    # a written config.yaml (the checked configuration) reloads to the same configuration
    assert EvoDuetConfig.model_validate(checked.model_dump()) == checked


def test_contradictory_scaffold_and_population_kind_is_a_config_error():
    with pytest.raises(ConfigError, match="scaffold 'top_k' runs over population.kind 'top_k'"):
        check_scaffold(
            EvoDuetConfig().with_overrides({"scaffold": "top_k", "population.kind": "islands"})
        )
    with pytest.raises(ConfigError, match="scaffold 'evox'"):
        check_scaffold(
            merge_config(
                EvoDuetConfig(), {"scaffold": "evox", "population": {"kind": "top_k"}}, "f"
            )
        )
    # an explicit top_k population (configs/top_k.yaml) is kept by the openevolve scaffold and
    # by best_of_n, and refused by evox
    topk = EvoDuetConfig().with_overrides({"population.kind": "top_k"})
    assert topk.scaffold == "openevolve" and check_scaffold(topk).population.kind == "top_k"
    assert check_scaffold(topk.with_overrides({"scaffold": "best_of_n"})).population.kind == "top_k"
    with pytest.raises(ConfigError, match="leave population.kind out"):
        check_scaffold(topk.with_overrides({"scaffold": "evox"}))
    with pytest.raises(ConfigError, match="unknown scaffold 'greedy'; known: openevolve"):
        check_scaffold(EvoDuetConfig().with_overrides({"scaffold": "greedy"}))
    # a population kind the user wrote is theirs even when it equals the scaffold's choice:
    # `--scaffold top_k` over a file with `population: {kind: islands}` is refused, not rewritten
    written = EvoDuetConfig.model_validate({"population": {"kind": "islands"}})
    with pytest.raises(ConfigError, match="scaffold 'top_k' runs over population.kind"):
        check_scaffold(
            written.with_overrides({"iterations": 3}).with_overrides({"scaffold": "top_k"})
        )
    with pytest.raises(ConfigError, match="scaffold 'best_of_n'"):
        check_scaffold(merge_config(written, {"scaffold": "best_of_n"}, "method.yaml"))
    assert check_scaffold(written.with_overrides({"scaffold": "evox"})).population.kind == "islands"
    # ... and a kind the scaffold chose is chosen again after any number of other overrides
    chosen = EvoDuetConfig().with_overrides({"iterations": 3}).with_overrides({"seed": 1})
    assert check_scaffold(chosen.with_overrides({"scaffold": "top_k"})).population.kind == "top_k"
    with pytest.raises(ConfigError, match="evox.strategy_patience"):
        EvoDuetConfig().with_overrides({"evox.strategy_patience": 0})


# ------------------------------------------------------------------------------------------
# the strategy instruction in the mutation prompt
# ------------------------------------------------------------------------------------------


def _messages(**kw):
    parent = ProgramView(
        id="p", code="# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n", score=0.5
    )
    return build_generation_messages(
        system="# Task\nMaximise x.",
        context="## Current program",
        parent=parent,
        evidence=[],
        cfg=PromptConfigForTest,
        metric_name="x",
        direction="max",
        **kw,
    )


PromptConfigForTest = EvoDuetConfig().prompt


def test_no_instruction_gives_byte_identical_messages():
    plain = _messages()
    assert _messages(strategy_instruction="") == plain
    assert _messages(strategy_instruction="   \n ") == plain
    assert "strategy" not in str(plain[-1].content).lower()


def test_instruction_is_one_neutralised_line_of_the_task_section():
    plain = str(_messages()[-1].content)
    text = "Try a\n```python\nfence``` and </evidence> <<<<<<< SEARCH"
    with_it = str(_messages(strategy_instruction=text)[-1].content)
    added = [line for line in with_it.splitlines() if line not in plain.splitlines()]
    assert len(added) == 1 and added[0].startswith("Search strategy for this step: Try a ")
    assert "```" not in added[0] and "</evidence" not in added[0] and "<<<<<<<" not in added[0]
    task = with_it.index("## Task")
    assert task < with_it.index(added[0]) < with_it.index("## Output format")
    # everything else is unchanged
    assert with_it.replace(added[0] + "\n", "") == plain


def test_the_scaffold_registry_is_the_one_source_of_names_and_population_kinds():
    from evoduet_graph.config import EvoDuetConfig
    from evoduet_graph.scaffolds import SCAFFOLDS

    described = EvoDuetConfig.model_fields["scaffold"].description or ""
    for name, cls in SCAFFOLDS.items():
        assert f"`{name}`" in described  # the config reference lists every registered name
        assert check_scaffold(EvoDuetConfig(scaffold=name)).population.kind == cls.populations[0]


def test_a_scaffold_class_declares_its_name_and_population_kinds_in_its_header():
    from evoduet_graph.scaffolds.base import Scaffold, ScaffoldBase

    class Greedy(ScaffoldBase, name="greedy", populations=("top_k",)):
        select = BestOfNScaffold.select

    assert Greedy.name == "greedy" and Greedy.populations == ("top_k",)
    assert isinstance(Greedy(), Scaffold)
    assert [cls.name for cls in SCAFFOLDS.values()] == list(SCAFFOLDS)
    with pytest.raises(ValueError, match="'empty' must run over at least one population kind"):

        class Empty(ScaffoldBase, name="empty", populations=()):
            pass

"""Population semantics: OpenEvolve MAP-Elites islands and the top-k baseline."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import textwrap
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from evoduet_graph.config import PopulationConfig
from evoduet_graph.population import (
    EmptyPopulationError,
    IslandPopulation,
    Population,
    ProgramEntry,
    TopKPopulation,
    make_population,
    population_from_dict,
)

REPO = Path(__file__).resolve().parents[2]


class Store(dict[str, str]):
    """Program store fake: id -> code, counting `get_code` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def get_code(self, pid: str) -> str:
        self.calls.append(pid)
        return self[pid]


def random_code(rng: random.Random) -> str:
    lines = [f"    v{rng.randint(0, 30)} = {rng.choice('abcxyz')} * {rng.randint(0, 99)}"]
    lines += [
        f"    {rng.choice(['a', 'b', 'c'])} = f{rng.randint(0, 9)}(x, {rng.randint(0, 9)})"
        for _ in range(rng.randint(0, 25))
    ]
    return "def solve(x):\n" + "\n".join(lines) + "\n    return x\n"


def islands_cfg(**kw) -> PopulationConfig:
    base = {"kind": "islands", "num_islands": 3, "migration_interval": 1000}
    return PopulationConfig(**{**base, **kw})


def add(
    pop: Population,
    store: Store,
    pid: str,
    score: float,
    *,
    code: str | None = None,
    iteration: int = 0,
    island: int | None = None,
    parent: str | None = None,
    **metrics: float,
) -> bool:
    code = code if code is not None else f"def p():\n    return {pid!r}  # {score}\n"
    store[pid] = code
    entry = ProgramEntry(
        id=pid,
        score=score,
        metrics=metrics,
        iteration=iteration,
        parent_id=parent,
        code_length=len(code),
    )
    return pop.add(entry, code, iteration=iteration, island=island)


def evolve(pop: Population, store: Store, rng: random.Random, steps: int, start: int) -> list:
    """Random adds driven by sampling (the outer loop's pattern); returns the samples."""
    samples = []
    for it in range(start, start + steps):
        sample = pop.sample(rng, num_inspirations=rng.randint(0, 4))
        samples.append(sample.model_dump())
        roll = rng.random()
        if roll < 0.1 and len(pop):  # replay of an existing id: must be a no-op
            pid = rng.choice(pop.ids())
            assert not pop.add(pop.get(pid), "ignored", iteration=it)
            continue
        pid = f"p{it}"
        # some children repeat existing code (exercises hash dedupe and the diversity cache)
        code = store[pop.code_id(sample.parent_id)] if roll < 0.25 else random_code(rng)
        score = round(rng.uniform(-1.0, 2.0), 3)
        add(
            pop,
            store,
            pid,
            score,
            code=code,
            iteration=it,
            island=sample.island,
            parent=sample.parent_id,
            acc=round(rng.random(), 2),
        )
    return samples


# ----------------------------------------------------------------------------------- islands


def test_add_is_idempotent() -> None:
    store = Store()
    pop = IslandPopulation(islands_cfg(), seed=0, get_code=store.get_code)
    assert add(pop, store, "a", 1.0, iteration=0)
    before = pop.to_dict()
    assert pop.current_island == 1
    assert not add(pop, store, "a", 5.0, iteration=0)
    assert not add(pop, store, "a", 5.0, iteration=7, island=2)
    assert pop.to_dict() == before
    assert len(pop) == 1 and pop.ids() == ["a"] and "a" in pop and "b" not in pop
    assert pop.get("a").score == 1.0


def test_best_tracking_across_islands() -> None:
    store = Store()
    pop = IslandPopulation(islands_cfg(num_islands=3), seed=0, get_code=store.get_code)
    assert pop.best_id is None
    for i, (pid, score, island) in enumerate(
        [("a", 0.1, 0), ("b", 0.7, 1), ("c", 0.4, 2), ("d", 0.7, 2), ("e", 0.2, 0)]
    ):
        add(pop, store, pid, score, iteration=i, island=island)
    assert pop.best_id == "b"  # d ties b: the earlier one stays best
    assert pop.top(3) == ["b", "d", "c"]
    assert pop.top(5, island=0) == ["e", "a"]
    assert pop.top(1, island=2) == ["d"]
    assert [pop.get(p).island for p in "abcde"] == [0, 1, 2, 2, 0]
    add(pop, store, "f", 0.9, iteration=9, island=0)
    assert pop.best_id == "f"
    assert pop.stats()["best_score"] == 0.9
    with pytest.raises(ValueError):
        pop.top(1, island=3)


def test_map_elites_cell_replacement_and_archive_seat() -> None:
    store = Store()
    cfg = islands_cfg(num_islands=1, feature_dimensions=["x"], archive_size=5)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    assert pop.feature_bins == 10
    add(pop, store, "lo", 0.1, x=0.0)  # a first value (min == max) scales to 0.5: bin 5
    add(pop, store, "hi", 0.1, x=1.0)  # min/max of x are now 0 and 1: bin 9
    assert (pop.cell("lo"), pop.cell("hi")) == ((5,), (9,))
    add(pop, store, "c", 0.5, x=0.35)
    assert pop.cell("c") == (3,)
    assert "c" in pop.archive_ids()

    add(pop, store, "d", 0.9, x=0.37)  # same cell, fitter: takes the cell, c leaves
    assert pop.cell("d") == (3,)
    assert "c" not in pop
    assert "d" in pop.archive_ids() and "c" not in pop.archive_ids()

    add(pop, store, "e", 0.2, x=0.31)  # same cell, less fit: joins the island without the cell
    assert "e" in pop and "e" in pop.island_ids(0)
    assert pop.to_dict()["feature_maps"][0]["3"] == "d"
    assert pop.stats()["occupied_cells"] == 3  # lo, hi, d

    add(pop, store, "f", 0.9, x=0.36)  # equal fitness does not replace
    assert pop.to_dict()["feature_maps"][0]["3"] == "d"
    assert pop.to_dict()["feature_maps"][0] == {"5": "lo", "9": "hi", "3": "d"}


def test_archive_keeps_the_fittest() -> None:
    store = Store()
    cfg = islands_cfg(num_islands=1, feature_dimensions=["x"], archive_size=2, feature_bins=50)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    for i, (score, x) in enumerate([(0.3, 0), (0.1, 10), (0.5, 6), (0.2, 2), (0.4, 8)]):
        add(pop, store, f"p{i}", score, iteration=i, x=float(x))
    assert len({pop.cell(p) for p in pop.ids()}) == 5  # no cell replacement involved
    assert sorted(pop.archive_ids()) == ["p2", "p4"]


def test_population_limit_never_drops_the_best() -> None:
    store = Store()
    cfg = islands_cfg(num_islands=2, population_size=4, archive_size=2)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    rng = random.Random(3)
    add(pop, store, "best", 100.0, iteration=0, code=random_code(rng))
    for i in range(1, 60):
        add(pop, store, f"p{i}", rng.uniform(-5, 5), iteration=i, code=random_code(rng))
        assert "best" in pop and pop.best_id == "best"
        assert len(pop) <= 4
        assert f"p{i}" in pop  # the program just added is never the one removed


def test_population_limit_of_one_keeps_best_and_newest() -> None:
    store = Store()
    pop = IslandPopulation(islands_cfg(population_size=1), seed=0, get_code=store.get_code)
    add(pop, store, "best", 9.0, iteration=0)
    add(pop, store, "a", 1.0, iteration=1)
    add(pop, store, "b", 2.0, iteration=2)
    assert pop.ids() == ["best", "b"]


def test_population_limit_evicts_cell_less_before_cell_owners() -> None:
    store = Store()
    cfg = islands_cfg(num_islands=1, population_size=3, feature_dimensions=["x"], archive_size=5)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    add(pop, store, "a", 0.25, iteration=0, x=0.0)  # owns bin 0
    add(pop, store, "b", 0.6, iteration=1, x=1.0)  # owns bin 9
    add(pop, store, "c", 0.3, iteration=2, x=1.0)  # loses bin 9 to b: cell-less
    add(pop, store, "d", 0.2, iteration=3, x=0.3)  # over the limit: c goes, not a
    assert pop.ids() == ["a", "b", "d"]


def test_migration_copies_top_programs_to_ring_neighbours() -> None:
    store = Store()
    cfg = islands_cfg(num_islands=4, migration_interval=3, migration_rate=0.5)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    add(pop, store, "a", 0.3, iteration=0, island=0)
    add(pop, store, "b", 0.9, iteration=1, island=0)
    assert len(pop) == 2  # island 0 is at generation 2 < 3: no migration yet
    add(pop, store, "c", 0.5, iteration=2, island=0)  # generation 3: migrate int(3 * .5) = 1
    assert set(pop.ids()) == {"a", "b", "c", "b@i1", "b@i3"}
    copy = pop.get("b@i1")
    assert (copy.island, copy.parent_id, copy.migrant_of, copy.score) == (1, "b", "b", 0.9)
    assert pop.code_id("b@i3") == "b" and pop.code_id("b") == "b"
    assert pop.island_ids(2) == []  # not a neighbour of island 0
    assert pop.best_id == "b"  # the original, not a copy
    assert pop.top(2) == ["b", "c"]  # copies do not repeat in the global ranking
    assert pop.top(1, island=3) == ["b@i3"]
    assert pop.stats()["migrants"] == 2

    for i in range(3, 9):  # three more generations on island 1 -> second migration
        add(pop, store, f"q{i}", 0.1 * i, iteration=i, island=1)
    ids = pop.ids()
    assert all(pid.count("@i") <= 1 for pid in ids)  # copies are never re-migrated
    assert "q8@i0" in ids and "q8@i2" in ids  # island 1's best goes to 0 and 2
    assert pop.best_id == "b"


def test_migration_skips_identical_code_on_target() -> None:
    store = Store()
    cfg = islands_cfg(num_islands=2, migration_interval=2, migration_rate=1.0)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    add(pop, store, "a", 0.5, iteration=0, island=0, code="same")
    add(pop, store, "b", 0.4, iteration=1, island=1, code="same")
    add(pop, store, "c", 0.6, iteration=2, island=0, code="other")
    assert "a@i1" not in pop and "b@i0" not in pop
    assert "c@i1" in pop


def test_round_robin_advances_once_per_iteration() -> None:
    store = Store()
    pop = IslandPopulation(islands_cfg(num_islands=3), seed=0, get_code=store.get_code)
    assert pop.current_island == 0
    add(pop, store, "init", 0.0, iteration=0)
    assert pop.current_island == 1 and pop.get("init").island == 0
    add(pop, store, "a", 0.1, iteration=1, island=1)
    add(pop, store, "b", 0.2, iteration=1, island=1)  # second add in the same iteration
    assert pop.current_island == 2
    assert pop.next_island(iteration=2) == 0  # an iteration that added nothing
    assert pop.next_island(iteration=2) == 0  # replayed: no-op
    add(pop, store, "c", 0.3, iteration=3, parent="b")  # inherits the parent's island
    assert pop.get("c").island == 1 and pop.current_island == 1
    assert pop.island_generations == [1, 3, 0]


def test_sample_from_single_program() -> None:
    store = Store()
    pop = IslandPopulation(islands_cfg(), seed=0, get_code=store.get_code)
    with pytest.raises(EmptyPopulationError):
        pop.sample(random.Random(0), num_inspirations=2)
    add(pop, store, "init", 0.5, iteration=0)
    sample = pop.sample(random.Random(0), num_inspirations=3)  # island 1 is still empty
    assert (sample.parent_id, sample.inspiration_ids, sample.island, sample.mode) == (
        "init",
        [],
        1,
        "best",
    )
    pop.set_current_island(0)
    modes = set()
    for seed in range(60):
        sample = pop.sample(random.Random(seed), num_inspirations=3)
        assert sample.parent_id == "init" and sample.inspiration_ids == [] and sample.island == 0
        modes.add(sample.mode)
    assert modes == {"exploration", "exploitation", "weighted"}


def test_inspirations_are_distinct_island_members() -> None:
    store = Store()
    cfg = islands_cfg(num_islands=2, migration_interval=10_000)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    rng = random.Random(1)
    for i in range(40):
        add(pop, store, f"p{i}", rng.random(), iteration=i, island=i % 2, code=random_code(rng))
    for seed in range(30):
        sample = pop.sample(random.Random(seed), num_inspirations=5, island=1)
        insp = sample.inspiration_ids
        assert len(insp) == 5 and len(set(insp)) == 5 and sample.parent_id not in insp
        assert all(pop.get(p).island == 1 for p in insp)
        assert insp[0] == pop.top(1, island=1)[0] or sample.parent_id == pop.top(1, island=1)[0]


def test_sampling_is_deterministic_under_the_same_seed() -> None:
    def build() -> tuple[IslandPopulation, list]:
        store = Store()
        cfg = islands_cfg(population_size=25, migration_interval=4, archive_size=8)
        pop = IslandPopulation(cfg, seed=7, get_code=store.get_code)
        add(pop, store, "init", 0.0, iteration=0)
        return pop, evolve(pop, store, random.Random(11), 60, start=1)

    (pop1, samples1), (pop2, samples2) = build(), build()
    assert samples1 == samples2
    assert pop1.to_dict() == pop2.to_dict()
    draws = [pop1.sample(random.Random(s), num_inspirations=3) for s in range(5)]
    assert draws == [pop2.sample(random.Random(s), num_inspirations=3) for s in range(5)]
    assert len({d.model_dump_json() for d in draws}) > 1  # the rng does drive the choice


def test_parent_sampling_modes_follow_the_configured_ratios() -> None:
    # exploration 0.3, exploitation 0.5, so fitness-weighted 0.2; archive of 2 on 5 programs
    store = Store()
    cfg = islands_cfg(
        num_islands=1,
        exploration_ratio=0.3,
        exploitation_ratio=0.5,
        archive_size=2,
        feature_dimensions=["x"],
        feature_bins=50,
    )
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    scores = {"p1": 0.1, "p2": 0.2, "p3": 0.3, "p4": 0.4, "p5": 0.5}
    for i, ((pid, score), x) in enumerate(zip(scores.items(), (0, 10, 6, 2, 8), strict=True)):
        add(pop, store, pid, score, iteration=i, island=0, x=float(x))
    assert pop.island_ids(0) == list(scores)  # one MAP-Elites cell each: nobody displaced
    assert sorted(pop.archive_ids()) == ["p4", "p5"]  # the two fittest hold the archive

    rng = random.Random(2024)
    draws = 20_000
    picks: dict[str, Counter] = defaultdict(Counter)
    for _ in range(draws):
        sample = pop.sample(rng, num_inspirations=0)
        picks[sample.mode][sample.parent_id] += 1
    share = {mode: sum(c.values()) / draws for mode, c in picks.items()}
    # binomial standard deviation at n=20,000 is <= 0.0036: 0.015 is over 4 of them
    assert share == pytest.approx(
        {"exploration": 0.3, "exploitation": 0.5, "weighted": 0.2}, abs=0.015
    )
    # each mode picks by its own rule: uniform / archive only / proportional to the score
    explored = picks["exploration"]
    assert {pid: n / explored.total() for pid, n in explored.items()} == pytest.approx(
        dict.fromkeys(scores, 0.2), abs=0.025
    )
    exploited = picks["exploitation"]
    assert set(exploited) == {"p4", "p5"}
    assert exploited["p4"] / exploited.total() == pytest.approx(0.5, abs=0.025)
    weighted = picks["weighted"]
    total_score = sum(scores.values())
    assert {pid: n / weighted.total() for pid, n in weighted.items()} == pytest.approx(
        {pid: s / total_score for pid, s in scores.items()}, abs=0.03
    )


def test_custom_metric_feature_dimension() -> None:
    store = Store()
    cfg = islands_cfg(
        num_islands=1, feature_dimensions=["acc", "score"], feature_bins=4, archive_size=4
    )
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    add(pop, store, "a", 0.0, acc=0.0)
    add(pop, store, "b", 1.0, acc=1.0)
    add(pop, store, "c", 0.6, acc=0.3)
    assert pop.cell("a") == (2, 2)  # first value: min == max, scaled to the middle
    assert pop.cell("b") == (3, 3)
    assert pop.cell("c") == (1, 2)
    before = pop.to_dict()
    with pytest.raises(ValueError, match="acc"):
        add(pop, store, "d", 0.5)  # no `acc` metric
    assert pop.to_dict() == before


def test_metric_overrides_builtin_complexity() -> None:
    store = Store()
    cfg = islands_cfg(num_islands=1, feature_dimensions=["complexity"], archive_size=4)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    add(pop, store, "short", 0.1, code="x", complexity=100.0)
    add(pop, store, "long", 0.1, code="x" * 500, complexity=0.0)
    assert pop.cell("short") > pop.cell("long")


def test_diversity_uses_a_bounded_reference_set() -> None:
    store = Store()
    cfg = islands_cfg(population_size=50, migration_interval=5)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    add(pop, store, "init", 0.0, iteration=0)
    evolve(pop, store, random.Random(2), 80, start=1)
    assert store.calls == []  # adds never read code back: it is passed in
    data = pop.to_dict()
    refs = [rid for rid, _ in data["diversity_reference"]]
    assert len(refs) == 20
    assert all(
        0.0 <= f <= 1.0 for p in data["programs"] for f in p["features"][1:] if f is not None
    )

    restored = IslandPopulation.from_dict(data, cfg, store.get_code)
    assert store.calls == []  # lazy: nothing read until a diversity is computed
    add(restored, store, "new", 1.0, iteration=200, code=random_code(random.Random(5)))
    assert sorted(store.calls) == sorted(refs)


def test_invalid_adds_raise_and_change_nothing() -> None:
    store = Store()
    pop = IslandPopulation(islands_cfg(), seed=0, get_code=store.get_code)
    add(pop, store, "a", 1.0)
    before = pop.to_dict()
    with pytest.raises(ValueError):
        add(pop, store, "b", math.nan)
    with pytest.raises(ValueError):
        add(pop, store, "b", 1.0, island=3)
    with pytest.raises(ValueError):
        pop.add(ProgramEntry(id="b", score=1.0, migrant_of="a"), "x", iteration=1)
    with pytest.raises(ValueError):
        pop.sample(random.Random(0), num_inspirations=-1)
    assert pop.to_dict() == before


def test_infinite_scores_are_ranked_and_serialised() -> None:
    store = Store()
    cfg = islands_cfg(num_islands=1, feature_dimensions=["score"], archive_size=5)
    pop = IslandPopulation(cfg, seed=0, get_code=store.get_code)
    add(pop, store, "a", -math.inf, iteration=0)
    add(pop, store, "b", 1.0, iteration=1)
    add(pop, store, "c", math.inf, iteration=2)
    assert pop.best_id == "c" and pop.cell("a") == (0,) and pop.cell("c") == (9,)
    for seed in range(20):
        pop.sample(random.Random(seed), num_inspirations=2)
    restored = IslandPopulation.from_dict(
        json.loads(json.dumps(pop.to_dict())), cfg, store.get_code
    )
    assert restored.to_dict() == pop.to_dict()


# ----------------------------------------------------------------------------------- resume


@pytest.mark.parametrize("kind", ["islands", "top_k"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_round_trip_reproduces_future_samples_and_adds(kind: str, seed: int) -> None:
    cfg = PopulationConfig(
        kind=kind,
        num_islands=3,
        population_size=30,
        archive_size=10,
        migration_interval=4,
        migration_rate=0.3,
        feature_dimensions=["complexity", "diversity", "acc"],
        top_k=6,
    )
    store = Store()
    original = make_population(cfg, seed=seed, get_code=store.get_code)
    add(original, store, "init", 0.0, iteration=0, acc=0.5)
    evolve(original, store, random.Random(seed), 70, start=1)

    data = json.loads(json.dumps(original.to_dict()))
    restored = population_from_dict(data, cfg, store.get_code)
    assert type(restored) is type(original)
    assert restored.to_dict() == original.to_dict()
    assert restored.stats() == original.stats()

    # the same future on both: identical samples, adds, migrations and final state
    future_a = evolve(original, store, random.Random(100 + seed), 70, start=71)
    future_b = evolve(restored, store, random.Random(100 + seed), 70, start=71)
    assert future_a == future_b
    assert restored.to_dict() == original.to_dict()
    assert restored.best_id == original.best_id
    assert restored.top(5) == original.top(5)


def test_state_is_independent_of_the_hash_seed() -> None:
    """A resumed run lives in a new process: nothing may depend on set/str-hash order."""
    script = textwrap.dedent(
        """
        import json, random, sys, types
        # load only the population sub-package: the package __init__ imports LangGraph (~2 s)
        package = types.ModuleType("evoduet_graph")
        package.__path__ = ["evoduet_graph"]
        sys.modules["evoduet_graph"] = package
        sys.path.insert(0, "tests/unit")
        from test_population import Store, add, evolve
        from evoduet_graph.config import PopulationConfig
        from evoduet_graph.population import make_population
        cfg = PopulationConfig(kind="islands", num_islands=3, population_size=20,
                               archive_size=6, migration_interval=3)
        store = Store()
        pop = make_population(cfg, seed=0, get_code=store.get_code)
        add(pop, store, "init", 0.0, iteration=0)
        samples = evolve(pop, store, random.Random(0), 50, start=1)
        print(json.dumps([samples, pop.to_dict()], sort_keys=True))
        """
    )
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]


def test_from_dict_rejects_a_different_configuration() -> None:
    store = Store()
    pop = IslandPopulation(islands_cfg(num_islands=3), seed=0, get_code=store.get_code)
    add(pop, store, "a", 1.0)
    data = pop.to_dict()
    with pytest.raises(ValueError, match="num_islands"):
        IslandPopulation.from_dict(data, islands_cfg(num_islands=4), store.get_code)
    with pytest.raises(ValueError, match="feature_dimensions"):
        IslandPopulation.from_dict(data, islands_cfg(feature_dimensions=["score"]), store.get_code)
    with pytest.raises(ValueError):
        TopKPopulation.from_dict(data, PopulationConfig(kind="top_k"), store.get_code)
    with pytest.raises(ValueError):
        population_from_dict(data, PopulationConfig(kind="top_k"), store.get_code)


# ----------------------------------------------------------------------------------- top-k


def test_top_k_keeps_the_k_fittest() -> None:
    store = Store()
    cfg = PopulationConfig(kind="top_k", top_k=3)
    pop = make_population(cfg, seed=0, get_code=store.get_code)
    assert isinstance(pop, TopKPopulation) and isinstance(pop, Population)
    assert add(pop, store, "a", 0.5)
    assert add(pop, store, "b", 0.9)
    assert add(pop, store, "c", 0.1)
    assert not add(pop, store, "d", 0.1)  # not fitter than the least fit: rejected
    assert add(pop, store, "e", 0.7)  # evicts c
    assert not add(pop, store, "e", 0.99)  # already kept
    assert pop.ids() == ["a", "b", "e"]
    assert pop.top(2) == ["b", "e"] and pop.best_id == "b"
    assert pop.get("e").island is None
    with pytest.raises(ValueError):
        pop.top(1, island=0)
    stats = pop.stats()
    assert stats["size"] == 3 and stats["best_score"] == 0.9


def test_top_k_sampling() -> None:
    store = Store()
    elite = make_population(
        PopulationConfig(kind="top_k", top_k=4, elite_selection_ratio=1.0),
        seed=0,
        get_code=store.get_code,
    )
    uniform = make_population(
        PopulationConfig(kind="top_k", top_k=4, elite_selection_ratio=0.0),
        seed=0,
        get_code=store.get_code,
    )
    with pytest.raises(EmptyPopulationError):
        elite.sample(random.Random(0), num_inspirations=1)
    for pop in (elite, uniform):
        add(pop, store, "only", 0.3)
        sample = pop.sample(random.Random(0), num_inspirations=2)
        assert sample.parent_id == "only" and sample.inspiration_ids == []
        for pid, score in [("a", 0.1), ("b", 0.9), ("c", 0.5)]:
            add(pop, store, pid, score)
    parents = set()
    for seed in range(40):
        s = elite.sample(random.Random(seed), num_inspirations=2)
        assert (s.parent_id, s.mode, s.island) == ("b", "best", None)
        assert len(s.inspiration_ids) == 2 and "b" not in s.inspiration_ids
        scores = [elite.get(p).score for p in s.inspiration_ids]
        assert scores == sorted(scores, reverse=True)
        u = uniform.sample(random.Random(seed), num_inspirations=5)
        assert u.mode == "top_k" and len(u.inspiration_ids) == 3
        parents.add(u.parent_id)
    assert parents == {"only", "a", "b", "c"}


def test_json_round_trip_of_both_kinds() -> None:
    for kind in ("islands", "top_k"):
        store = Store()
        cfg = PopulationConfig(kind=kind, num_islands=2, migration_interval=3)
        pop = make_population(cfg, seed=3, get_code=store.get_code)
        add(pop, store, "init", 0.0, iteration=0, acc=1.0)
        evolve(pop, store, random.Random(4), 25, start=1)
        text = json.dumps(pop.to_dict())
        restored = population_from_dict(json.loads(text), cfg, store.get_code)
        assert json.dumps(restored.to_dict()) == text
        assert restored.ids() == pop.ids()
        assert [restored.get(p) for p in restored.ids()] == [pop.get(p) for p in pop.ids()]


def test_make_population_dispatches_on_kind() -> None:
    store = Store()
    assert isinstance(
        make_population(PopulationConfig(kind="islands"), seed=0, get_code=store.get_code),
        IslandPopulation,
    )
    with pytest.raises(ValueError, match="population.kind is not chosen yet"):
        make_population(PopulationConfig(), seed=0, get_code=store.get_code)
    assert isinstance(
        make_population(PopulationConfig(kind="top_k"), seed=0, get_code=store.get_code),
        TopKPopulation,
    )

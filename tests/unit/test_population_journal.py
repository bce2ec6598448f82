"""The population is persisted as snapshot + journal.

O(1) bytes per iteration, and a restore equals the population in memory at every iteration, also
across a snapshot.
"""

from __future__ import annotations

import json
import random

import pytest

from evoduet_graph.config import PopulationConfig
from evoduet_graph.nodes.record import commit_population
from evoduet_graph.population import (
    ProgramEntry,
    add_op,
    apply_op,
    make_population,
    next_island_op,
    restore_population,
)
from evoduet_graph.rundir.store import ProgramRow, ProgramStore


class _Ctx:
    """The two context fields `commit_population` reads."""

    def __init__(self, store, population, interval):
        from evoduet_graph.config import EvoDuetConfig

        self.store = store
        self.population = population
        self.config = EvoDuetConfig.model_validate(
            {"population": {"num_islands": 3, "snapshot_interval": interval}}
        )


@pytest.mark.parametrize("kind", ["islands", "top_k"])
def test_restore_equals_memory_at_every_iteration(tmp_path, kind):
    cfg = PopulationConfig(
        kind=kind,
        num_islands=3,
        snapshot_interval=7,
        top_k=5,
        population_size=20,
        migration_interval=4,
    )
    store = ProgramStore(tmp_path / "programs.sqlite")
    population = make_population(cfg, seed=3, get_code=store.get_code)
    ctx = _Ctx(store, population, 7)
    ctx.config.population = cfg
    rng = random.Random(0)
    for it in range(40):
        if it and rng.random() < 0.2:
            op = next_island_op()
        else:
            pid = f"p{it}"
            code = f"x = {rng.random()}\n" + "y = 1\n" * rng.randrange(5)
            store.put_program(
                ProgramRow(
                    id=pid,
                    code=code,
                    parent_id=None,
                    iteration=it,
                    kind="rewrite",
                    status="evaluated",
                    score=rng.random(),
                    valid=True,
                )
            )
            entry = ProgramEntry(
                id=pid,
                score=store.get_program(pid).score,
                metrics={},
                iteration=it,
                parent_id=None,
                generation=0,
                code_length=len(code),
            )
            op = add_op(entry, rng.randrange(3) if kind == "islands" else None)
        commit_population(ctx, it, op)
        restored, last = restore_population(store, cfg, seed=3)
        assert last == it
        assert json.dumps(restored.to_dict(), sort_keys=True) == json.dumps(
            population.to_dict(), sort_keys=True
        )
        # the journal never holds more than one snapshot interval
        assert len(store.population_ops(after=-1)) <= 7
    # re-applying the last operation (a resumed `record`) changes nothing
    before = json.dumps(population.to_dict(), sort_keys=True)
    apply_op(population, op, 39, store.get_code)
    assert json.dumps(population.to_dict(), sort_keys=True) == before


def test_an_unknown_journal_operation_is_a_clear_error(tmp_path):
    store = ProgramStore(tmp_path / "p.sqlite")
    cfg = PopulationConfig(kind="islands")
    store.log_population_op(1, {"teleport": True})
    with pytest.raises(ValueError, match="unknown population journal operation"):
        restore_population(store, cfg, seed=1)

"""The ``record`` node, called directly.

It adds the best valid child of the iteration to the population, updates the global best and
its files, credits the realised Δ to the D_search record that fed the iteration, and applies
the stop rules (consecutive failures, model health, ``stop_at_score``).

Each test runs on a real `Context` (`tests.node_env.make_env` on the smoke task, seeded by
``initialize`` + ``select``); the children are stored by hand with known scores, so every
expected value below is the one the test wrote. The D_search credit of an improving and of an
invalid iteration, and the idempotence of that credit, are covered in
``test_knowledge_nodes.py``; the journal and snapshots of the population in
``test_population_journal.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evoduet_graph.graphs.inner import build_inner_graph
from evoduet_graph.nodes.record import record
from evoduet_graph.nodes.retrieve import make_retrieve
from evoduet_graph.rundir.store import ProgramRow
from evoduet_graph.state import CandidateRecord
from tests.conftest import SMOKE_TASK
from tests.node_env import Env, make_env


def store_child(env: Env, pid: str, score: float, *, valid: bool = True) -> None:
    """Store an evaluated child of ``initial`` in iteration 1 with ``score``."""
    code = env.ctx.task.initial_program.replace("radius = 0.6", f"radius = {0.1 + score:.3f}")
    env.ctx.store.put_program(
        ProgramRow(
            id=pid,
            code=code,
            parent_id="initial",
            iteration=1,
            generation=1,
            kind="rewrite",
            status="evaluated",
            score=score,
            valid=valid,
            metrics={"area": 3 * score, "combined_score": score},
        )
    )


def candidate(
    index: int,
    status: str = "evaluated",
    score: float | None = 0.0,
    valid: bool = False,
    error: str | None = None,
) -> CandidateRecord:
    return CandidateRecord(
        id=f"it00001-c{index}", index=index, status=status, score=score, valid=valid, error=error
    )


def with_candidates(env: Env, *cands: CandidateRecord, **extra: Any) -> dict[str, Any]:
    return {**env.state, "candidates": list(cands), **extra}


# ------------------------------------------------------------------------------------------
# population and global best
# ------------------------------------------------------------------------------------------


def test_the_best_valid_child_of_the_iteration_joins_the_population_and_becomes_best(tmp_path):
    env = make_env(SMOKE_TASK, run_dir=tmp_path, candidates=3)
    initial = env.state["best_score"]
    store_child(env, "it00001-c0", initial + 0.1)
    store_child(env, "it00001-c1", initial + 0.3)
    store_child(env, "it00001-c2", 0.0, valid=False)
    update = record(
        with_candidates(
            env,
            candidate(0, score=initial + 0.1, valid=True),
            candidate(1, score=initial + 0.3, valid=True),
            candidate(2, score=0.0, valid=False, error="points outside the unit disk"),
        ),
        env.runtime,
    )
    assert update["best_id"] == "it00001-c1"
    assert update["best_score"] == pytest.approx(initial + 0.3)
    assert update["last_improvement_iteration"] == 1
    assert update["consecutive_failures"] == 0
    assert "stop_reason" not in update
    ids = env.ctx.population.ids()
    assert "it00001-c1" in ids  # only the best of the N is added
    assert "it00001-c0" not in ids and "it00001-c2" not in ids
    assert env.ctx.population.get("it00001-c1").iteration == 1
    # the best program's files in the run directory
    info = json.loads((tmp_path / "best_program.json").read_text())
    assert info["id"] == "it00001-c1"
    assert [p["id"] for p in info["parent_chain"]] == ["initial", "it00001-c1"]
    assert (tmp_path / info["program_file"]).read_text() == env.ctx.store.get_code("it00001-c1")


def test_ties_go_to_the_lower_candidate_index():
    env = make_env(SMOKE_TASK, candidates=2)
    score = env.state["best_score"] + 0.2
    store_child(env, "it00001-c0", score)
    store_child(env, "it00001-c1", score)
    update = record(
        with_candidates(
            env, candidate(1, score=score, valid=True), candidate(0, score=score, valid=True)
        ),
        env.runtime,
    )
    assert update["best_id"] == "it00001-c0"


def test_a_valid_child_below_the_best_joins_the_population_without_a_new_best(tmp_path):
    env = make_env(SMOKE_TASK, run_dir=tmp_path)
    before = (tmp_path / "best_program.json").read_text()
    worse = env.state["best_score"] - 0.05
    store_child(env, "it00001-c0", worse)
    update = record(with_candidates(env, candidate(0, score=worse, valid=True)), env.runtime)
    assert "best_id" not in update and "best_score" not in update
    assert update["consecutive_failures"] == 0  # a valid child resets the failure counter
    assert "it00001-c0" in env.ctx.population.ids()
    assert (tmp_path / "best_program.json").read_text() == before


def test_re_entering_record_after_a_crash_adds_the_child_once():
    env = make_env(SMOKE_TASK)
    score = env.state["best_score"] + 0.1
    store_child(env, "it00001-c0", score)
    state = with_candidates(env, candidate(0, score=score, valid=True))
    record(state, env.runtime)
    size = len(env.ctx.population.ids())
    record(state, env.runtime)
    assert len(env.ctx.population.ids()) == size
    assert env.ctx.population.ids().count("it00001-c0") == 1


def test_an_iteration_without_a_valid_child_adds_nothing_and_moves_to_the_next_island():
    env = make_env(SMOKE_TASK)  # two islands (tests.node_env.BASE)
    ids = env.ctx.population.ids()
    island = env.ctx.population.current_island
    update = record(with_candidates(env, candidate(0, error="SyntaxError")), env.runtime)
    assert env.ctx.population.ids() == ids
    assert env.ctx.population.current_island == (island + 1) % 2
    assert "best_id" not in update
    assert update["consecutive_failures"] == 1


# ------------------------------------------------------------------------------------------
# stop rules
# ------------------------------------------------------------------------------------------


def test_consecutive_iterations_without_a_valid_child_stop_the_run_at_the_limit():
    env = make_env(SMOKE_TASK, max_consecutive_failures=3)
    state = with_candidates(env, candidate(0, error="SyntaxError"), consecutive_failures=1)
    update = record(state, env.runtime)
    assert update["consecutive_failures"] == 2 and "stop_reason" not in update
    update = record({**state, "consecutive_failures": 2}, env.runtime)
    assert update["consecutive_failures"] == 3
    assert update["stop_reason"].startswith("3 consecutive iterations without a valid candidate")
    assert "max_consecutive_failures=3" in update["stop_reason"]


def test_an_iteration_of_duplicates_only_neither_counts_nor_resets_the_failures():
    env = make_env(SMOKE_TASK, max_consecutive_failures=2)
    state = with_candidates(
        env, candidate(0, status="duplicate", score=None), consecutive_failures=1
    )
    update = record(state, env.runtime)
    assert update["consecutive_failures"] == 1
    assert "stop_reason" not in update


def test_an_iteration_whose_every_generate_call_failed_counts_towards_model_health():
    env = make_env(SMOKE_TASK, max_consecutive_model_failures=2, iterations=10)
    failed = candidate(0, status="failed", score=None, error="connection refused")
    update = record(with_candidates(env, failed, model_answered=True), env.runtime)
    assert update["model_failures"] == 1 and "stop_reason" not in update
    update = record(
        with_candidates(env, failed, model_failures=1, model_answered=True), env.runtime
    )
    assert update["model_failures"] == 2
    reason = update["stop_reason"]
    assert reason.startswith("the model did not answer")
    assert "max_consecutive_model_failures=2" in reason
    assert "connection refused" in reason  # the last error is quoted


def test_one_answered_generate_call_resets_model_health():
    env = make_env(SMOKE_TASK)
    update = record(
        with_candidates(
            env,
            candidate(0, status="failed", score=None, error="timeout"),
            candidate(1, error="SyntaxError"),  # the model answered, the program was invalid
            model_failures=2,
        ),
        env.runtime,
    )
    assert update["model_failures"] == 0 and update["model_answered"] is True


def test_a_new_best_that_reaches_stop_at_score_stops_the_run():
    env = make_env(SMOKE_TASK, stop_at_score=0.5)  # the smoke task's metric: the hull area
    store_child(env, "it00001-c0", 0.2)  # area 0.6 >= 0.5
    update = record(with_candidates(env, candidate(0, score=0.2, valid=True)), env.runtime)
    assert update["best_id"] == "it00001-c0"
    assert update["stop_reason"].startswith("target reached")


def test_a_new_best_below_stop_at_score_does_not_stop():
    env = make_env(SMOKE_TASK, stop_at_score=5.0)
    store_child(env, "it00001-c0", 0.2)
    update = record(with_candidates(env, candidate(0, score=0.2, valid=True)), env.runtime)
    assert update["best_id"] == "it00001-c0"
    assert "stop_reason" not in update


# ------------------------------------------------------------------------------------------
# D_search impact credit
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("change", "outcome"), [(-0.05, "decreased"), (0.0, "unchanged")])
def test_the_evidence_record_is_credited_with_a_child_that_did_not_improve(
    tmp_path: Path, change, outcome
):
    env = make_env(SMOKE_TASK, run_dir=tmp_path)
    state = {**env.state, **make_retrieve(build_inner_graph().compile())(env.state, env.runtime)}
    parent = env.ctx.store.get_program("initial").score
    store_child(env, "it00001-c0", parent + change)
    state["candidates"] = [candidate(0, score=parent + change, valid=True)]
    record(state, env.runtime)
    [impact] = env.ctx.search_db.get_record("ret_000001").impacts
    assert impact.outcome == outcome
    assert impact.delta == pytest.approx(change)
    assert impact.parent_score == pytest.approx(parent)
    [event] = env.events("impact")
    assert event["record_id"] == "ret_000001" and event["outcome"] == outcome


def test_without_the_search_database_nothing_is_credited(tmp_path):
    env = make_env(SMOKE_TASK, run_dir=tmp_path, retrieval__use_search_database=False)
    state = {**env.state, "evidence_record_id": "ret_000001"}
    store_child(env, "it00001-c0", 0.3)
    state["candidates"] = [candidate(0, score=0.3, valid=True)]
    record(state, env.runtime)
    assert env.events("impact") == []

"""The outer loop's own nodes, called directly.

``initialize``, ``select``, ``generate``, ``evaluate``.

Every node runs with a real `Context` (`tests.node_env.make_env` on the smoke task) whose chat
model is a `ScriptedChatModel` and whose evaluator is a `CountingEvaluator` around the task's
own evaluator run in process (`InProcessEvaluator`), so each test sees exactly which programs
were evaluated. Expected scores are computed by hand: the smoke program puts 12 points on an arc
of radius ``r`` at angles ``k * spread / 12``; the shoelace formula gives the hull area
``r²/2 · (11 sin(step) + sin(2π − 11 step))`` and ``combined_score`` is that area / 3.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from evoduet_graph import load_task
from evoduet_graph.evaluation import EvaluationOutcome
from evoduet_graph.nodes.evaluate import evaluate
from evoduet_graph.nodes.generate import generate
from evoduet_graph.nodes.initialize import initialize
from evoduet_graph.nodes.select import select
from evoduet_graph.population import EmptyPopulationError
from evoduet_graph.rundir.store import ProgramRow
from evoduet_graph.state import CandidateRecord, GenerateInput
from tests.conftest import GARBAGE, SMOKE_TASK
from tests.fakes import CountingEvaluator, ScriptedChatModel
from tests.fault_harness import InProcessEvaluator, smoke_program
from tests.node_env import Env, add_program, make_env


def hull_score(radius: float, spread: float = math.pi) -> float:
    """``combined_score`` of ``smoke_program(radius, spread)`` (12 points, spread <= π)."""
    step = spread / 12
    area = 0.5 * radius**2 * (11 * math.sin(step) + math.sin(2 * math.pi - 11 * step))
    return area / 3.0


INITIAL_SCORE = hull_score(0.6)  # 0.18 · 10 · sin(π/12) / 3 = 0.155291...
CHILD_SPREAD = float(f"{math.pi:.6f}")  # `smoke_program` writes the spread with 6 decimals


def sha(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


@pytest.fixture
def evaluator(tmp_path: Path) -> CountingEvaluator:
    return CountingEvaluator(InProcessEvaluator(SMOKE_TASK, workers=1), tmp_path / "evals.jsonl")


def env_with(evaluator: CountingEvaluator, *, answers: list | None = None, **kw) -> Env:
    """``make_env`` on the smoke task with a scripted model.

    ``make_env`` on the smoke task with ``evaluator`` and a model scripted with
    ``answers`` (an exhausted script raises), unseeded unless ``seeded=True``.
    """
    kw.setdefault("seeded", False)
    llm = ScriptedChatModel(responses=list(answers or []))
    return make_env(SMOKE_TASK, llm=llm, evaluator=evaluator, **kw)


def add_child(env: Env, pid: str, radius: float, iteration: int) -> None:
    """Store an evaluated child of ``initial`` with this radius; add it to the population."""
    score = hull_score(radius, CHILD_SPREAD)
    metrics = {"area": 3 * score, "combined_score": score}
    add_program(env, pid, smoke_program(radius, math.pi), score, iteration, metrics=metrics)


# ------------------------------------------------------------------------------------------
# initialize
# ------------------------------------------------------------------------------------------


def test_initialize_evaluates_and_seeds_the_initial_program(evaluator, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = env_with(evaluator, run_dir=run_dir)
    ctx = env.ctx
    assert len(ctx.population) == 0 and not ctx.store.has_program("initial")

    update = initialize(env.state, env.runtime)

    assert update.pop("best_score") == pytest.approx(INITIAL_SCORE, rel=1e-12)
    assert update.pop("initial_score") == pytest.approx(INITIAL_SCORE, rel=1e-12)
    assert update == {
        "max_iterations": 3,
        "run_dir": str(run_dir),  # the state names where the run writes
        "stop_reason": None,
        "consecutive_failures": 0,
        "model_failures": 0,
        "model_answered": False,
        "iteration": 0,
        "best_id": "initial",
        "last_improvement_iteration": 0,
        "knowledge_state": None,
        "documents": [],
    }
    code = load_task(SMOKE_TASK).initial_program
    assert evaluator.evaluated() == [{"id": "initial", "sha": sha(code)}]
    row = ctx.store.get_program("initial")
    assert (row.code, row.parent_id, row.iteration, row.kind, row.status, row.valid) == (
        code,
        None,
        0,
        "initial",
        "evaluated",
        True,
    )
    assert row.metrics["area"] == pytest.approx(3 * INITIAL_SCORE, rel=1e-12)
    assert ctx.store.cached_evaluation(code).score == pytest.approx(INITIAL_SCORE, rel=1e-12)
    assert ctx.population.ids() == ["initial"] and ctx.population.best_id == "initial"
    assert ctx.population.get("initial").score == pytest.approx(INITIAL_SCORE, rel=1e-12)
    snapshot = ctx.store.load_population()
    assert snapshot is not None and snapshot[0] == 0
    best = json.loads((run_dir / "best_program.json").read_text())
    assert best["id"] == "initial" and best["score"] == pytest.approx(INITIAL_SCORE, rel=1e-12)
    assert not env.events("warning")  # the initial program is valid


def test_initialize_twice_on_the_same_store_does_not_reseed(evaluator, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = env_with(evaluator, run_dir=run_dir)
    first = initialize(env.state, env.runtime)

    # same context, a state without best_id (a node replayed before its checkpoint)
    again = initialize(env.state, env.runtime)
    assert again == first
    # a fresh context on the same run directory, a state that has already moved on
    resumed = env_with(evaluator, run_dir=run_dir)
    assert resumed.ctx.population.ids() == ["initial"]  # restored from the snapshot
    state = {"max_iterations": 5, "iteration": 2, "best_id": "it00002-c0", "best_score": 0.9}
    update = initialize(state, resumed.runtime)
    assert update == {
        "max_iterations": 5,
        "run_dir": str(run_dir),
        "stop_reason": None,
        "consecutive_failures": 0,
        "model_failures": 0,
        "model_answered": False,
    }  # no iteration / best reset

    assert [e["id"] for e in evaluator.evaluated()] == ["initial"]  # evaluated once
    assert resumed.ctx.population.ids() == ["initial"]
    assert [r.id for r in resumed.ctx.store.all_programs()] == ["initial"]


# ------------------------------------------------------------------------------------------
# select
# ------------------------------------------------------------------------------------------


def test_select_picks_population_parent_and_resets_the_iteration_channels(evaluator):
    env = env_with(evaluator)
    env.state.update(initialize(env.state, env.runtime))
    for it, radius in enumerate((0.7, 0.8, 0.9, 1.0), start=1):
        add_child(env, f"it{it:05d}-c0", radius, it)
    population = set(env.ctx.population.ids())
    assert len(population) >= 3  # MAP-Elites may let a child take an earlier child's cell
    stale = CandidateRecord(
        id="it00004-c0", index=0, status="evaluated", score=0.4, valid=True, error=None
    )
    state = {
        **env.state,
        "iteration": 4,
        "candidates": [stale],
        "gate_decision": "retrieve",
        "gate_reason": "old",
        "documents": [{"id": "doc_000001"}],
        "gate_document_ids": ["doc_000001"],
        "evidence_record_id": "rec_1",
    }

    update = select(state, env.runtime)

    assert update["iteration"] == 5
    assert update["parent_id"] in population
    inspirations = update["inspiration_ids"]
    assert inspirations and set(inspirations) <= population
    assert update["parent_id"] not in inspirations
    assert len(set(inspirations)) == len(inspirations)
    assert update["island"] in range(env.ctx.config.population.num_islands)
    assert update["mutation_instruction"] == ""
    assert {
        k: update[k]
        for k in (
            "candidates",
            "documents",
            "gate_document_ids",
            "evidence_record_id",
            "gate_decision",
            "gate_reason",
        )
    } == {
        "candidates": None,
        "documents": [],
        "gate_document_ids": [],
        "evidence_record_id": None,
        "gate_decision": None,
        "gate_reason": "",
    }
    assert select(state, env.runtime) == update  # seeded by (seed, iteration): a replay agrees
    assert env.llm.calls == 0 and not evaluator.evaluated()[1:]  # no model, no evaluation

    for it in range(4, 24):  # a pick comes from the island it names (empty: the global best)
        pick = select({**state, "iteration": it}, env.runtime)
        members = env.ctx.population.island_ids(pick["island"])
        assert pick["parent_id"] in (members or [env.ctx.population.best_id])


def test_select_before_initialize_raises(evaluator):
    env = env_with(evaluator)
    with pytest.raises(EmptyPopulationError):
        select(env.state, env.runtime)


# ------------------------------------------------------------------------------------------
# generate
# ------------------------------------------------------------------------------------------

REWRITE = f"Here is the whole program.\n```python\n{smoke_program(1.0, math.pi)}```\n"


@pytest.mark.parametrize(
    ("answer", "status", "kind", "error"),
    [
        (REWRITE, "generated", "rewrite", None),
        (GARBAGE, "invalid", "none", "no SEARCH/REPLACE block or code block found"),
        (
            ConnectionError("endpoint refused the connection"),
            "failed",
            "none",
            (
                "LLM call failed: LLMCallError: chat model call failed: ConnectionError: "
                "endpoint refused the connection"
            ),
        ),
    ],
    ids=["rewrite", "garbage", "model-raises"],
)
def test_generate_records_the_candidate(evaluator, answer, status, kind, error):
    env = env_with(
        evaluator, answers=[answer], seeded=True, prompt__diff_based=False, llm__max_retries=0
    )
    state = env.state
    payload = GenerateInput(
        iteration=state["iteration"],
        index=2,
        parent_id=state["parent_id"],
        inspiration_ids=state["inspiration_ids"],
        documents=[],
    )

    update = generate(payload, env.runtime)

    assert update == {
        "candidates": [
            CandidateRecord(
                id="it00001-c2", index=2, status=status, score=None, valid=False, error=error
            )
        ]
    }
    assert env.llm.calls == 1  # one model call, no retry
    prompt = "\n".join(str(m.content) for m in env.llm.prompts[0])
    assert "radius = 0.6" in prompt  # the parent (the initial program) is shown
    row = env.ctx.store.get_program("it00001-c2")
    assert (row.parent_id, row.iteration, row.generation, row.kind, row.status, row.error) == (
        "initial",
        1,
        1,
        kind,
        status,
        error,
    )
    assert row.score is None and not row.valid
    if status == "generated":
        assert row.code == smoke_program(1.0, math.pi)
        assert env.ctx.store.get_code("it00001-c2") == row.code
    else:
        assert row.code is None
    if status == "invalid":
        assert row.artifacts == {"llm_response_head": GARBAGE}
    assert [e["id"] for e in evaluator.evaluated()] == ["initial"]  # generate never evaluates


def test_a_bug_around_the_model_call_is_raised_not_a_failed_candidate(evaluator, monkeypatch):
    """Only a model/transport fault (`LLMCallError`) makes a ``failed`` candidate.

    A programming error in the code around the call must surface, not read as "the model did not
    answer".
    """
    env = env_with(evaluator, answers=[REWRITE], seeded=True, prompt__diff_based=False)
    state = env.state
    payload = GenerateInput(
        iteration=state["iteration"],
        index=0,
        parent_id=state["parent_id"],
        inspiration_ids=state["inspiration_ids"],
        documents=[],
    )

    def broken(*_args, **_kwargs):
        raise KeyError("a bug in the call's metadata")

    monkeypatch.setattr(env.ctx, "llm_config", broken)
    with pytest.raises(KeyError, match="a bug"):
        generate(payload, env.runtime)
    assert env.llm.calls == 0


# ------------------------------------------------------------------------------------------
# evaluate
# ------------------------------------------------------------------------------------------


def test_evaluate_runs_generated_candidates_once_and_stores_outcomes(evaluator):
    env = env_with(evaluator, seeded=True)
    store = env.ctx.store
    good, bad, cached = (smoke_program(r, math.pi) for r in (1.0, 1.5, 0.9))
    planted = EvaluationOutcome(
        metrics={"area": 2.25, "combined_score": 0.75}, score=0.75, valid=True
    )
    store.put_evaluation(cached, planted)  # already evaluated (e.g. before a kill)
    programs = {
        "it00001-c0": (good, "generated"),
        "it00001-c1": (bad, "generated"),
        "it00001-c2": (good, "generated"),
        "it00001-c3": (None, "invalid"),
        "it00001-c4": (cached, "generated"),
    }
    candidates = []
    for index, (pid, (code, status)) in enumerate(programs.items()):
        error = "no SEARCH/REPLACE block or code block found" if code is None else None
        store.put_program(
            ProgramRow(
                id=pid,
                code=code,
                parent_id="initial",
                iteration=1,
                generation=1,
                kind="rewrite",
                status=status,
                error=error,
            )
        )
        candidates.append(
            CandidateRecord(
                id=pid, index=index, status=status, score=None, valid=False, error=error
            )
        )
    state = {**env.state, "candidates": candidates}

    update = evaluate(state, env.runtime)

    out = {c["id"]: c for c in update["candidates"]}
    assert list(out) == ["it00001-c0", "it00001-c1", "it00001-c2", "it00001-c4"]
    assert all(c["status"] == "evaluated" for c in out.values())
    assert [c["valid"] for c in out.values()] == [True, False, True, True]
    outside = out["it00001-c1"]["error"]
    assert re.fullmatch(r"point \d+ is outside the unit disk \(distance 1\.500000 > 1\)", outside)
    assert [c["error"] for c in out.values()] == [None, outside, None, None]
    assert out["it00001-c0"]["score"] == pytest.approx(hull_score(1.0, CHILD_SPREAD), rel=1e-12)
    assert out["it00001-c2"]["score"] == out["it00001-c0"]["score"]
    assert out["it00001-c1"]["score"] == 0.0
    assert out["it00001-c4"]["score"] == 0.75  # the stored outcome, not hull_score(0.9)
    # identical children are evaluated once; the stored evaluation is not redone
    assert sorted(e["sha"] for e in evaluator.evaluated()[1:]) == sorted((sha(good), sha(bad)))

    row = store.get_program("it00001-c0")
    assert (row.status, row.valid, row.error) == ("evaluated", True, None)
    assert row.metrics["area"] == pytest.approx(3 * hull_score(1.0, CHILD_SPREAD), rel=1e-12)
    row = store.get_program("it00001-c1")
    assert (row.status, row.valid, row.score, row.error) == ("evaluated", False, 0.0, outside)
    assert store.get_program("it00001-c4").metrics == planted.metrics
    assert store.get_program("it00001-c3").status == "invalid"  # not evaluated
    assert store.cached_evaluation(bad).valid is False
    assert store.cached_evaluation(good).score == out["it00001-c0"]["score"]

    # a replay (e.g. the node re-run after a kill) finds every evaluation in the store
    assert evaluate(state, env.runtime) == update
    assert len(evaluator.evaluated()) == 3  # initial, good, bad

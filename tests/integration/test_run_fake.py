"""End-to-end runs of the outer graph with a scripted fake model and the real sandbox."""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from evoduet_graph import (
    EvoDuetConfig,
    build_context,
    build_graph,
    checked_config,
    load_task,
    run,
)
from evoduet_graph.api import THREAD_ID
from evoduet_graph.population import restore_population
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from tests.conftest import BAD_DIFF, GARBAGE, RADIUS_UP, SPREAD_UP
from tests.fakes import ScriptedChatModel


def _config(**kw) -> EvoDuetConfig:
    # the outer loop with a scripted model, answers in call order: the baseline's gate
    base = {
        "iterations": 3,
        "gate": {"mode": "never"},
        "population": {"num_islands": 2},
        "evaluation": {"workers": 2},
    }
    base.update(kw)
    return EvoDuetConfig.model_validate(base)


def test_three_iterations_valid_invalid_garbage(smoke_task_dir, tmp_path):
    llm = ScriptedChatModel(responses=[RADIUS_UP, BAD_DIFF, GARBAGE])
    config = _config(prompt={"failed_attempts": "details"})
    result = run(smoke_task_dir, config, llm=llm, run_dir=tmp_path / "run")
    rdir = tmp_path / "run"

    assert llm.calls == 3
    assert result.iterations == 3
    assert result.best_id == "it00001-c0"
    initial = load_task(smoke_task_dir).initial_score
    # radius 0.6 -> 1.0 scales the hull area by 1 / 0.36
    assert result.metric_value == pytest.approx(initial / 0.36, rel=1e-9)

    store = ProgramStore(rdir / "programs.sqlite")
    rows = {r.id: r for r in store.all_programs()}
    assert rows["it00001-c0"].status == "evaluated" and rows["it00001-c0"].valid
    assert rows["it00002-c0"].status == "invalid" and "SEARCH" in (rows["it00002-c0"].error or "")
    assert rows["it00003-c0"].status == "invalid"
    population, last = restore_population(store, checked_config(_config()).population, seed=42)
    assert last == 3
    store.close()

    # population: the initial program and the one valid child
    ctx_pop = json.dumps(population.to_dict())
    assert "initial" in ctx_pop and "it00001-c0" in ctx_pop

    events = list(read_events(rdir / "events.jsonl"))
    nodes = [e["node"] for e in events if e["event"] == "node"]
    assert nodes.count("generate") == 3 and nodes.count("record") == 3
    gen = [e for e in events if e.get("node") == "generate"]
    assert all(e["llm_calls"] == 1 and e["output_tokens"] > 0 for e in gen)
    # one llm_call event per model call, named by the node that made it
    calls = [e for e in events if e["event"] == "llm_call"]
    assert [(e["from_node"], e["iteration"]) for e in calls] == [("generate", i) for i in (1, 2, 3)]
    assert all(e["input_tokens"] > 0 and e["latency_s"] >= 0 for e in calls)

    best = json.loads((rdir / "best_program.json").read_text())
    assert best["id"] == "it00001-c0"
    assert [p["id"] for p in best["parent_chain"]] == ["initial", "it00001-c0"]
    assert "radius = 1.0" in (rdir / "best_program.py").read_text()
    assert [h["iteration"] for h in result.history] == [1, 2, 3]

    # the invalid diff's reason reaches the next prompt (and only after it happened)
    second_prompt, third_prompt = (
        "\n".join(str(m.content) for m in llm.prompts[i]) for i in (1, 2)
    )
    reason = rows["it00002-c0"].error or ""
    assert "the SEARCH text was not found" in reason
    assert "### Iteration 2, from initial: invalid\nError: " + reason in third_prompt
    assert "the SEARCH text was not found" not in second_prompt


def test_by_default_the_next_prompt_gives_an_invalid_attempts_outcome_only(
    smoke_task_dir, tmp_path
):
    llm = ScriptedChatModel(responses=[BAD_DIFF, RADIUS_UP])
    run(smoke_task_dir, _config(iterations=2), llm=llm, run_dir=tmp_path / "run")
    second_prompt = "\n".join(str(m.content) for m in llm.prompts[1])
    assert "### Iteration 1, from initial: invalid\n" in second_prompt
    assert "SEARCH text was not found" not in second_prompt


def test_parallel_candidates_best_kept(smoke_task_dir, tmp_path):
    llm = ScriptedChatModel(responses=[], default=lambda msgs: RADIUS_UP)
    llm2 = ScriptedChatModel(responses=[SPREAD_UP, RADIUS_UP, GARBAGE])
    result = run(
        smoke_task_dir, _config(iterations=1, candidates=3), llm=llm2, run_dir=tmp_path / "r"
    )
    assert llm2.calls == 3
    store = ProgramStore(tmp_path / "r" / "programs.sqlite")
    scores = {r.id: r.score for r in store.all_programs() if r.iteration == 1}
    assert set(scores) == {"it00001-c0", "it00001-c1", "it00001-c2"}
    best_child = max((k for k in scores if scores[k] is not None), key=lambda k: scores[k])
    assert result.best_id == best_child
    assert llm.calls == 0


def test_build_graph_invoke_with_in_memory_saver(smoke_task_dir):
    task = load_task(smoke_task_dir)
    cfg = _config(iterations=2)
    llm = ScriptedChatModel(responses=[RADIUS_UP, SPREAD_UP])
    ctx = build_context(task, cfg, None, llm=llm)
    graph = build_graph().compile(checkpointer=InMemorySaver())
    state = graph.invoke({"max_iterations": 2}, {"configurable": {"thread_id": "t"}}, context=ctx)
    assert state["iteration"] == 2
    assert state["best_score"] > state["initial_score"]
    assert len(ctx.population) >= 2


class _Interrupted(Exception):
    """Raised from the progress callback to stop a run mid-way (like a crash)."""


def test_run_checkpoints_to_the_user_checkpointer_and_resumes_from_it(smoke_task_dir, tmp_path):
    rdir = tmp_path / "run"
    saver = InMemorySaver()
    thread = {"configurable": {"thread_id": THREAD_ID}}

    def stop_after_first_record(node, update):
        if node == "record":
            raise _Interrupted

    first_llm = ScriptedChatModel(responses=[RADIUS_UP])
    with pytest.raises(_Interrupted):
        run(
            smoke_task_dir,
            _config(),
            llm=first_llm,
            checkpointer=saver,
            run_dir=rdir,
            progress=stop_after_first_record,
        )
    assert first_llm.calls == 1
    assert json.loads((rdir / "run.json").read_text())["thread_id"] == THREAD_ID
    saved = saver.get_tuple(thread)
    assert saved is not None and saved.checkpoint["channel_values"]["iteration"] == 1
    checkpoints = len(list(saver.list(thread)))
    assert checkpoints > 0
    assert not (rdir / "checkpoints.sqlite").exists()  # the default saver was never opened

    second_llm = ScriptedChatModel(responses=[], default=GARBAGE)
    result = run(smoke_task_dir, _config(), llm=second_llm, checkpointer=saver, run_dir=rdir)
    # resumed after iteration 1: two more iterations, the first child kept, nothing redone
    assert second_llm.calls == 2
    assert result.iterations == 3 and result.best_id == "it00001-c0"
    assert len(list(saver.list(thread))) > checkpoints
    assert saver.get_tuple(thread).checkpoint["channel_values"]["iteration"] == 3
    starts = [e for e in read_events(rdir / "events.jsonl") if e["event"] == "run_start"]
    assert [e["resumed"] for e in starts] == [False, True]
    store = ProgramStore(rdir / "programs.sqlite")
    assert [r.id for r in store.all_programs()] == [
        "initial",
        "it00001-c0",
        "it00002-c0",
        "it00003-c0",
    ]
    store.close()


def test_custom_gate_node_swaps_in(smoke_task_dir, tmp_path):
    seen = []

    def my_gate(state, runtime):
        seen.append(state["iteration"])
        return {"gate_decision": "no-op", "gate_reason": "custom"}

    llm = ScriptedChatModel(responses=[], default=RADIUS_UP)
    run(
        smoke_task_dir,
        _config(iterations=2),
        llm=llm,
        run_dir=tmp_path / "r",
        nodes={"gate": my_gate},
    )
    assert seen == [1, 2]


def test_consecutive_failures_stop_the_run(smoke_task_dir, tmp_path):
    llm = ScriptedChatModel(responses=[], default=GARBAGE)
    result = run(
        smoke_task_dir,
        _config(iterations=10, max_consecutive_failures=3),
        llm=llm,
        run_dir=tmp_path / "r",
    )
    assert result.iterations == 3
    assert result.stop_reason and "3 consecutive" in result.stop_reason


def test_model_exceptions_fail_candidates_not_the_run(smoke_task_dir, tmp_path):
    llm = ScriptedChatModel(responses=[ConnectionError("refused"), RADIUS_UP])
    # no retries: the first call's error fails candidate 1 (retries: tests/integration/test_faults)
    cfg = _config(iterations=2, llm={"max_retries": 0})
    result = run(smoke_task_dir, cfg, llm=llm, run_dir=tmp_path / "r")
    store = ProgramStore(tmp_path / "r" / "programs.sqlite")
    first = store.get_program("it00001-c0")
    assert first.status == "failed" and "refused" in (first.error or "")
    assert result.best_id == "it00002-c0"

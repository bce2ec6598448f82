"""The four scaffolds end to end with fakes: each runs 3 iterations.

Only the select node's policy differs (the other nodes are the same objects, and the world-knowledge
layer's and the mutation prompts are byte-identical for the same parent and evidence); the EvoX
strategy loop revises on stagnation, records each strategy with its measured effect, keeps the old
one on garbage, and a crashed or killed EvoX run resumes with the same strategies.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver

from evoduet_graph import EvoDuetConfig, api, build_context, build_graph, load_task, run
from evoduet_graph.nodes.evaluate import evaluate
from evoduet_graph.nodes.gate import gate
from evoduet_graph.nodes.generate import generate
from evoduet_graph.nodes.initialize import initialize
from evoduet_graph.nodes.look_up import look_up
from evoduet_graph.nodes.record import record
from evoduet_graph.nodes.revise_strategy import revise_strategy
from evoduet_graph.nodes.select import select
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.scaffolds import Selection, select_best
from tests.conftest import GARBAGE, RADIUS_UP, ROOT, SPREAD_UP
from tests.fakes import (
    FakeSearcher,
    KnowledgeResponder,
    ScriptedChatModel,
    prompt_kind,
    prompt_text,
)

SCAFFOLDS = ["openevolve", "top_k", "best_of_n", "evox"]
KINDS = {"openevolve": "islands", "top_k": "top_k", "best_of_n": "top_k", "evox": "islands"}
STRATEGY_LINE = "Search strategy for this step: "

BASE: dict[str, Any] = {
    "iterations": 3,
    "population": {"num_islands": 2},
    "evaluation": {"workers": 2},
    "prompt": {"diff_based": True},
    "retrieval": {"inner_rounds": 2, "search_retries": 0},
}


def _config(scaffold: str, **dotted: Any) -> EvoDuetConfig:
    return EvoDuetConfig.model_validate({**BASE, "scaffold": scaffold}).with_overrides(dotted)


def _sequence(*answers: str):
    """A generate answer that walks through ``answers`` (the last one repeats)."""
    calls = {"n": 0}

    def answer(_messages) -> str:
        n = calls["n"]
        calls["n"] += 1
        return answers[min(n, len(answers) - 1)]

    return answer


def _events(run_dir: Path, name: str | None = None) -> list[dict[str, Any]]:
    return [e for e in read_events(run_dir / "events.jsonl") if name is None or e["event"] == name]


def _node_events(run_dir: Path, node: str) -> list[dict[str, Any]]:
    return [e for e in _events(run_dir, "node") if e["node"] == node and "error" not in e]


def _prompts(llm: ScriptedChatModel, kind: str) -> list[str]:
    """Full text (every message) of the prompts of one kind, in call order."""
    return [prompt_text(m) for m in llm.prompts if prompt_kind(m) == kind]


def _generate_prompts(llm: ScriptedChatModel) -> list[str]:
    return _prompts(llm, "generate")


def _strategy_lines(prompts: list[str]) -> list[str | None]:
    out = []
    for text in prompts:
        found = [ln for ln in text.splitlines() if ln.startswith(STRATEGY_LINE)]
        out.append(found[0][len(STRATEGY_LINE) :] if found else None)
    return out


def _final_state(run_dir: Path) -> dict[str, Any]:
    saver = api.open_checkpointer(run_dir / "checkpoints.sqlite")
    try:
        graph = build_graph().compile(checkpointer=saver)
        return graph.get_state({"configurable": {"thread_id": api.THREAD_ID}}).values
    finally:
        saver.conn.close()


def _strategy_records(run_dir: Path) -> list[dict[str, Any]]:
    """The ``strategy`` events, each once (a node re-run after a kill may repeat one)."""
    seen: set[str] = set()
    out = []
    for e in read_events(run_dir / "events.jsonl"):
        if e.get("event") != "strategy":
            continue
        record = {k: v for k, v in e.items() if k not in ("time", "event")}
        key = json.dumps(record, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(record)
    return out


def _parents(run_dir: Path) -> dict[int, str]:
    """Each iteration's parent: ``select``'s, or ``revise_strategy``'s after a revision."""
    out: dict[int, str] = {}
    for e in read_events(run_dir / "events.jsonl"):
        node = e.get("node") if e.get("event") == "node" else None
        if node in ("select", "revise_strategy") and e.get("parent_id") is not None:
            out[e["iteration"]] = e["parent_id"]
    return out


# ------------------------------------------------------------------------------------------
# every scaffold runs
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scaffold", SCAFFOLDS)
def test_each_scaffold_runs_three_iterations(smoke_task_dir, tmp_path, scaffold):
    n = 2 if scaffold == "best_of_n" else 1
    cfg = _config(scaffold, **{"gate.mode": "llm", "candidates": n, "evox.strategy_patience": 1})
    responder = KnowledgeResponder(
        gate="retrieve", generate=_sequence(RADIUS_UP, GARBAGE, GARBAGE, SPREAD_UP, GARBAGE)
    )
    llm = ScriptedChatModel(responses=[], default=responder)
    rdir = tmp_path / "run"
    result = run(smoke_task_dir, cfg, llm=llm, run_dir=rdir, searcher=FakeSearcher())

    assert result.iterations == 3 and result.stop_reason is None
    initial = load_task(smoke_task_dir).initial_score
    assert result.metric_value is not None and result.metric_value > initial
    for node, count in (
        ("select", 3),
        ("gate", 3),
        ("query_evolution", 3),
        ("generate", 3 * n),
        ("evaluate", 3),
        ("record", 3),
    ):
        assert len(_node_events(rdir, node)) == count, node
    store = ProgramStore(rdir / "programs.sqlite")
    try:
        snapshot = store.load_population()
        rows = {r.id: r for r in store.all_programs()}
    finally:
        store.close()
    assert snapshot is not None and snapshot[1]["kind"] == KINDS[scaffold]

    parents = _parents(rdir)
    assert parents[1] == "initial"
    assert all(rows[p].valid for p in parents.values())
    best, best_after = "initial", {}
    for e in _node_events(rdir, "record"):
        best = e.get("best_id", best)
        best_after[e["iteration"]] = best
    if scaffold == "best_of_n":  # always the best program so far
        assert [parents[i] for i in (2, 3)] == [best_after[1], best_after[2]]
    strategies = [r["status"] for r in _strategy_records(rdir)]
    if scaffold == "evox":  # iteration 1 improved, iteration 2 did not: revised at 3
        assert strategies == ["initial", "revised"]
        assert _strategy_lines(_generate_prompts(llm)) == [None, None, "strategy 0"]
        assert len(_prompts(llm, "evox_strategy")) == 1
    else:
        assert strategies == [] and not _node_events(rdir, "revise_strategy")
        assert _strategy_lines(_generate_prompts(llm)) == [None] * (3 * n)
        assert "strategy" not in _final_state(rdir)


# ------------------------------------------------------------------------------------------
# only select differs
# ------------------------------------------------------------------------------------------


def _fn(graph: Any, name: str) -> Any:
    return graph.nodes[name].runnable.func.__wrapped__


def _inner_graph(graph: Any) -> Any:
    retrieve = _fn(graph, "query_evolution")
    cells = [c.cell_contents for c in retrieve.__closure__ or ()]
    return next(c for c in cells if hasattr(c, "builder"))


def test_the_graph_a_run_builds_has_the_same_node_objects_for_every_scaffold(
    smoke_task_dir, tmp_path, monkeypatch
):
    built: dict[str, Any] = {}
    real = api.build_outer_graph
    current = {"scaffold": ""}

    def spy(nodes=None, **kw):
        graph = real(nodes, **kw)
        built[current["scaffold"]] = graph
        return graph

    monkeypatch.setattr(api, "build_outer_graph", spy)
    for scaffold in SCAFFOLDS:
        current["scaffold"] = scaffold
        llm = ScriptedChatModel(responses=[], default=RADIUS_UP)
        run(smoke_task_dir, _config(scaffold, iterations=1), llm=llm, run_dir=tmp_path / scaffold)
    assert sorted(built) == sorted(SCAFFOLDS)
    expected = {
        "initialize": initialize,
        "select": select,
        "gate": gate,
        "look_up": look_up,
        "generate": generate,
        "evaluate": evaluate,
        "record": record,
    }
    reference = built["openevolve"]
    for scaffold, graph in built.items():
        assert set(graph.nodes) == set(reference.nodes)
        for name, fn in expected.items():
            assert _fn(graph, name) is fn, (scaffold, name)
        inner, inner_ref = _inner_graph(graph).builder, _inner_graph(reference).builder
        assert set(inner.nodes) == set(inner_ref.nodes) and inner.nodes
        for name in inner.nodes:
            assert _fn(inner, name) is _fn(inner_ref, name), (scaffold, name)
        assert _fn(graph, "query_evolution").__code__ is _fn(reference, "query_evolution").__code__


def test_select_applies_the_policy_injected_through_the_context(smoke_task_dir):
    calls: list[int] = []

    class AlwaysBest:
        name = "custom"

        def select(self, state, ctx, rng, iteration):
            calls.append(iteration)
            chosen = select_best(ctx.population, 1)
            return Selection(
                parent_id=chosen.parent_id,
                inspiration_ids=chosen.inspiration_ids,
                island=None,
                mode="custom",
                instruction=f"custom instruction {iteration}",
            )

    task = load_task(smoke_task_dir)
    llm = ScriptedChatModel(responses=[], default=GARBAGE)
    ctx = build_context(task, _config("openevolve", iterations=2), None, llm=llm)
    ctx.scaffold = AlwaysBest()
    graph = build_graph().compile(checkpointer=InMemorySaver())
    state = graph.invoke({"max_iterations": 2}, {"configurable": {"thread_id": "t"}}, context=ctx)
    assert calls == [1, 2] and state["mutation_instruction"] == "custom instruction 2"
    assert _strategy_lines(_generate_prompts(llm)) == [
        "custom instruction 1",
        "custom instruction 2",
    ]


def test_layer_and_generate_prompts_are_byte_identical_across_scaffolds(smoke_task_dir, tmp_path):
    """Layer and generate prompts are identical bytes across scaffolds.

    Every candidate is garbage, so each scaffold's parent is the initial program in both
    iterations, with the same history and (scripted, same-query) evidence. The gate,
    construct_query and hypothetical_score prompts are then identical bytes for every
    scaffold; so are the generate prompts, except that EvoX's revised strategy (iteration 2,
    patience 1) adds its one instruction line.
    """
    llms: dict[str, ScriptedChatModel] = {}
    for scaffold in SCAFFOLDS:
        cfg = _config(
            scaffold, **{"iterations": 2, "gate.mode": "llm", "evox.strategy_patience": 1}
        )
        responder = KnowledgeResponder(gate="retrieve", generate=GARBAGE)
        llms[scaffold] = ScriptedChatModel(responses=[], default=responder)
        run(
            smoke_task_dir,
            cfg,
            llm=llms[scaffold],
            run_dir=tmp_path / scaffold,
            searcher=FakeSearcher(),
        )
    ref = llms["openevolve"]
    for kind in ("gate", "construct_query", "hypothetical_score"):
        assert _prompts(ref, kind), kind
        for scaffold in SCAFFOLDS:
            assert _prompts(llms[scaffold], kind) == _prompts(ref, kind), (scaffold, kind)
    generate_ref = _generate_prompts(ref)
    assert len(generate_ref) == 2 and "<evidence>" in generate_ref[1]
    for scaffold in ("top_k", "best_of_n"):
        assert _generate_prompts(llms[scaffold]) == generate_ref, scaffold
    evox = _generate_prompts(llms["evox"])
    assert evox[0] == generate_ref[0]
    assert _strategy_lines(evox) == [None, "strategy 0"]
    line = STRATEGY_LINE + "strategy 0\n"
    assert evox[1] != generate_ref[1] and evox[1].replace(line, "") == generate_ref[1]
    assert len(_prompts(llms["evox"], "evox_strategy")) == 1
    assert all(not _prompts(llms[s], "evox_strategy") for s in SCAFFOLDS if s != "evox")


# ------------------------------------------------------------------------------------------
# EvoX strategy loop
# ------------------------------------------------------------------------------------------


def _rules(n: int, _text: str) -> dict[str, str]:
    return {
        "parent_rule": ["best", "recent_improver", "top_k_uniform"][n % 3],
        "instruction": f"instruction {n}",
        "rationale": f"because {n}",
    }


def test_evox_revises_on_stagnation_and_records_each_strategy_with_its_effect(
    smoke_task_dir, tmp_path
):
    cfg = _config("evox", **{"iterations": 6, "evox.strategy_patience": 2})
    generate_answers = _sequence(GARBAGE, GARBAGE, RADIUS_UP, GARBAGE, GARBAGE, GARBAGE)
    responder = KnowledgeResponder(generate=generate_answers, strategy=_rules)
    llm = ScriptedChatModel(responses=[], default=responder)
    rdir = tmp_path / "run"
    result = run(smoke_task_dir, cfg, llm=llm, run_dir=rdir)
    assert result.iterations == 6 and result.best_id == "it00003-c0"

    records = _strategy_records(rdir)
    assert [(r["iteration"], r["status"]) for r in records] == [
        (1, "initial"),
        (3, "revised"),  # iterations 1-2 without a new best
        (6, "revised"),  # iteration 3 improved; 4-5 did not
    ]
    first, second = records[1], records[2]
    assert first["previous"] == {
        "id": 0,
        "parent_rule": "diverse_island",
        "instruction": "",
        "first_iteration": 1,
        "last_iteration": 2,
        "best_delta": 0.0,
        "new_bests": 0,
    }
    assert first["strategy"]["id"] == 1 and first["strategy"]["parent_rule"] == "best"
    assert first["strategy"]["instruction"] == "instruction 0"
    assert first["stale_iterations"] == 2 and first["method"] == "extraction"
    prev = second["previous"]
    assert (prev["id"], prev["first_iteration"], prev["last_iteration"]) == (1, 3, 5)
    assert prev["new_bests"] == 1
    assert prev["best_delta"] == pytest.approx(
        result.best_score - first["strategy"]["start_best_score"]
    )
    assert prev["best_delta"] > 0
    assert second["strategy"]["parent_rule"] == "recent_improver"

    # the instruction reaches the mutation prompt while its strategy is active
    lines = _strategy_lines(_generate_prompts(llm))
    assert lines == [None, None, "instruction 0", "instruction 0", "instruction 0", "instruction 1"]
    # parents follow the rules: best at 3, the recent improver (the new best) at 6
    parents = _parents(rdir)
    assert parents[3] == "initial" and parents[6] == "it00003-c0"

    # the revision prompt shows the descriptor and the measured effect of earlier strategies
    revisions = _prompts(llm, "evox_strategy")
    assert len(revisions) == 2
    assert "population size: 1" in revisions[0] and "for 2 iterations" in revisions[0]
    assert "best_delta" not in revisions[1]
    assert "- strategy 1: parent_rule best; instruction: instruction 0" in revisions[1]
    assert re.search(
        r"active for 3 iteration\(s\) \(3-5\): best score change \+[0-9.]", revisions[1]
    )
    assert "1 new best(s)" in revisions[1]
    assert "- strategy 0: parent_rule diverse_island; instruction: (none)" in revisions[1]

    # checkpointed state and events
    state = _final_state(rdir)
    assert state["strategy"]["id"] == 2 and state["strategy"]["instruction"] == "instruction 1"
    assert [o["id"] for o in state["strategy_history"]] == [0, 1]
    assert state["mutation_instruction"] == "instruction 1"
    events = _events(rdir, "strategy")
    assert [(e["iteration"], e["status"], e["strategy_id"]) for e in events] == [
        (1, "initial", 0),
        (3, "revised", 1),
        (6, "revised", 2),
    ]
    # the revision is its own node: select makes no model call
    assert [e["llm_calls"] for e in _node_events(rdir, "select")] == [0] * 6
    revisions_run = [
        (e["iteration"], e["llm_calls"]) for e in _node_events(rdir, "revise_strategy")
    ]
    assert revisions_run == [(3, 1), (6, 1)]


def test_evox_keeps_its_strategy_when_the_revision_is_garbage_or_fails(smoke_task_dir, tmp_path):
    def strategy(n: int, _text: str) -> str:
        if n == 0:
            return "Sure! I would pick the best parent. {not json"
        raise ConnectionError("endpoint down")

    cfg = _config("evox", **{"iterations": 5, "evox.strategy_patience": 2})
    llm = ScriptedChatModel(
        responses=[], default=KnowledgeResponder(generate=GARBAGE, strategy=strategy)
    )
    rdir = tmp_path / "run"
    result = run(smoke_task_dir, cfg, llm=llm, run_dir=rdir)
    assert result.iterations == 5 and result.stop_reason is None

    records = _strategy_records(rdir)
    assert [(r["iteration"], r["status"]) for r in records] == [
        (1, "initial"),
        (3, "failed"),  # unusable output after extraction + repair
        (5, "error"),  # the call raised; asked again only after another `patience` iterations
    ]
    failed, error = records[1], records[2]
    assert failed["strategy"]["id"] == 0 and failed["strategy"]["window_start"] == 3
    assert failed["method"] == "default" and len(failed["fallbacks"]) >= 2
    assert "{not json" in failed["raw"]
    assert failed["previous"]["id"] == 0 and failed["previous"]["last_iteration"] == 2
    assert error["strategy"]["id"] == 0 and "endpoint down" in error["error"]
    state = _final_state(rdir)
    assert state["strategy"]["id"] == 0 and state["strategy"]["parent_rule"] == "diverse_island"
    assert state["strategy"]["window_start"] == 5 and state["strategy_history"] == []
    assert _strategy_lines(_generate_prompts(llm)) == [None] * 5
    assert [e["status"] for e in _events(rdir, "strategy")] == ["initial", "failed", "error"]


# ------------------------------------------------------------------------------------------
# resume
# ------------------------------------------------------------------------------------------


def _prompt_rules(_n: int, text: str) -> dict[str, str]:
    """A strategy answer that depends only on the prompt.

    A strategy answer that depends only on the prompt (the current strategy's id), so a
    resumed process answers as the uninterrupted one did.
    """
    current = int(
        re.search(r"## Current strategy and its effect so far\n- strategy (\d+)", text)[1]
    )
    return {
        "parent_rule": ["best", "recent_improver", "top_k_uniform"][current % 3],
        "instruction": f"after strategy {current}",
        "rationale": "scripted",
    }


def _evox_llm(strategy=_prompt_rules) -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[], default=KnowledgeResponder(generate=GARBAGE, strategy=strategy)
    )


EVOX_RESUME = {"iterations": 5, "evox.strategy_patience": 1}


class Crash(RuntimeError):
    """Raised by a wrapped node to simulate a process dying at that point."""


def _crash_after(node, iteration: int):
    def wrapped(state, runtime):
        update = node(state, runtime)
        if update.get("iteration", state.get("iteration")) == iteration:
            raise Crash(f"simulated crash after {node.__name__} at iteration {iteration}")
        return update

    return wrapped


def test_a_crashed_evox_run_resumes_with_the_same_strategies(smoke_task_dir, tmp_path):
    cfg = _config("evox", **EVOX_RESUME)
    reference = tmp_path / "reference"
    run(smoke_task_dir, cfg, llm=_evox_llm(), run_dir=reference)

    rdir = tmp_path / "crashed"
    with pytest.raises(Crash):
        run(
            smoke_task_dir,
            cfg,
            llm=_evox_llm(),
            run_dir=rdir,
            nodes={"record": _crash_after(record, 3)},
        )
    resumed_llm = _evox_llm()
    result = api.resume(rdir, llm=resumed_llm)
    assert result.iterations == 5
    # the revisions of iterations 2 and 3 were checkpointed: only 4 and 5 ask the model
    assert len(_prompts(resumed_llm, "evox_strategy")) == 2
    assert _strategy_records(rdir) == _strategy_records(reference)
    got, want = _final_state(rdir), _final_state(reference)
    assert (
        got["strategy"] == want["strategy"] and got["strategy_history"] == want["strategy_history"]
    )
    assert got["strategy"]["id"] == 4 and got["strategy"]["instruction"] == "after strategy 3"
    assert len(got["strategy_history"]) == 4


def test_a_revision_is_checkpointed_by_its_node_and_not_asked_again(smoke_task_dir, tmp_path):
    """The revision is the ``revise_strategy`` node.

    Once it has finished, its answer is in the checkpoint; a run that dies later in the iteration
    (here in ``gate``) resumes with it and never asks the model again for that iteration.
    """
    cfg = _config("evox", **EVOX_RESUME)
    rdir = tmp_path / "run"
    with pytest.raises(Crash):
        run(
            smoke_task_dir,
            cfg,
            llm=_evox_llm(),
            run_dir=rdir,
            nodes={"gate": _crash_after(gate, 3)},
        )
    assert [e["iteration"] for e in _node_events(rdir, "revise_strategy")][-1] == 3

    def other(_n, _text):  # a model that would now answer differently
        return {"parent_rule": "best", "instruction": "something else", "rationale": "x"}

    resumed_llm = _evox_llm(other)
    result = api.resume(rdir, llm=resumed_llm)
    assert result.iterations == 5
    records = _strategy_records(rdir)
    assert [(r["iteration"], r["status"]) for r in records].count((3, "revised")) == 1
    assert len(_prompts(resumed_llm, "evox_strategy")) == 2  # iterations 4 and 5 only
    lines = _strategy_lines(_generate_prompts(resumed_llm))
    assert lines == ["after strategy 1", "something else", "something else"]
    history = _final_state(rdir)["strategy_history"]
    assert [o["instruction"] for o in history] == [
        "",
        "after strategy 0",
        "after strategy 1",
        "something else",
    ]


def test_a_run_killed_inside_the_revision_asks_again_on_resume(smoke_task_dir, tmp_path):
    """Like every LLM node, a revision that did not finish is not in the checkpoint.

    The resumed run runs the node again (no side file replays it).
    """
    cfg = _config("evox", **EVOX_RESUME)
    rdir = tmp_path / "run"
    with pytest.raises(Crash):
        run(
            smoke_task_dir,
            cfg,
            llm=_evox_llm(),
            run_dir=rdir,
            nodes={"revise_strategy": _crash_after(revise_strategy, 3)},
        )

    def other(_n, _text):
        return {"parent_rule": "best", "instruction": "something else", "rationale": "x"}

    resumed_llm = _evox_llm(other)
    result = api.resume(rdir, llm=resumed_llm)
    assert result.iterations == 5
    assert len(_prompts(resumed_llm, "evox_strategy")) == 3  # iterations 3, 4 and 5
    assert _strategy_lines(_generate_prompts(resumed_llm)) == ["something else"] * 3


def _start(run_dir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration._run_evox", str(run_dir), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_mid_evox_run_then_resume_reproduces_the_strategies(tmp_path):
    reference, rdir = tmp_path / "reference", tmp_path / "killed"
    ref = _start(reference)
    out, err = ref.communicate(timeout=300)
    assert ref.returncode == 0, err[-3000:]

    proc = _start(rdir)
    try:  # kill once iteration 3 has generated (strategies 1 and 2 are checkpointed)
        deadline = time.time() + 120
        while not any(
            e.get("node") == "generate" and e.get("iteration") == 3
            for e in (
                read_events(rdir / "events.jsonl") if (rdir / "events.jsonl").exists() else []
            )
        ):
            assert time.time() < deadline, "iteration 3 never generated"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert len(_node_events(rdir, "record")) < 5
    resumed = _start(rdir, "resume")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    assert out.strip().splitlines()[-1].startswith("DONE 5")

    def strategies(path: Path) -> list[tuple[int, str, dict]]:
        return [(r["iteration"], r["status"], r["strategy"]) for r in _strategy_records(path)]

    assert strategies(rdir) == strategies(reference)
    got, want = _final_state(rdir), _final_state(reference)
    assert (
        got["strategy"] == want["strategy"] and got["strategy_history"] == want["strategy_history"]
    )
    assert json.dumps(got["strategy"]) and got["strategy"]["id"] == 4


def test_studio_context_chooses_the_scaffold_from_its_json_config(tmp_path):
    from evoduet_graph.graphs.outer import build_outer_graph
    from evoduet_graph.graphs.studio import StudioContext

    studio = build_outer_graph(context_schema=StudioContext).compile(checkpointer=InMemorySaver())
    context = {
        "task_dir": str(ROOT / "tasks" / "smoke_polygon_area"),
        "run_dir": str(tmp_path / "studio"),
        "model": "python:tests.studio_fakes:improving_model",
        "config_file": str(ROOT / "configs" / "openevolve_mode.yaml"),
        "config": {"scaffold": "best_of_n", "evaluation": {"workers": 1}},
    }
    thread = {"configurable": {"thread_id": "studio-scaffold"}}
    state = studio.invoke({"max_iterations": 2}, thread, context=context)
    assert state["iteration"] == 2
    cfg = EvoDuetConfig.model_validate(
        yaml.safe_load((tmp_path / "studio" / "config.yaml").read_text())
    )
    assert cfg.scaffold == "best_of_n" and cfg.population.kind == "top_k"
    parents = {e["iteration"]: e["parent_id"] for e in _node_events(tmp_path / "studio", "select")}
    best = {e["iteration"]: e.get("best_id") for e in _node_events(tmp_path / "studio", "record")}
    assert parents[1] == "initial" and parents[2] == (best[1] or "initial")

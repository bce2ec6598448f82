"""Every YAML file shipped under ``configs/`` runs and shows its configured behaviour.

Every YAML file shipped under ``configs/`` runs for 2 iterations with fakes, and the run
shows the behaviour the file configures.

`tests/unit/test_docs.py` only loads and validates these files; here each one is loaded with
`load_config` and run on the smoke task. Only what a fast offline run needs is replaced:
``iterations`` (2), the chat model (a `ScriptedChatModel` answering through a
`KnowledgeResponder`), the search backend (a `FakeSearcher`) and the evaluator (the task's own
``evaluate`` in this process). Every method-defining key (gate, retrieval, candidates,
population, scaffold, EvoX, novelty) is the file's own, and every expectation below is
derived from the loaded configuration, so a new file under ``configs/`` is covered as soon as
it exists and a run that ignored part of its file fails:

* the run records the file's configuration (``<run_dir>/config.yaml``);
* gate: ``llm`` decides what the scripted gate answers (retrieve, then no-op) with one gate
  call per iteration; a rule-based mode (``never``, ``always``, ``heuristic``,
  ``stagnation``) makes no gate call and decides (and explains) exactly what
  `evoduet_graph.nodes.gate.rule_decision` gives for the file's settings and the run's own
  improvement history (iteration 1's child is valid but worse than its parent, so iteration 2
  follows one iteration without a new best: a stagnation patience of 1 would retrieve there);
* retrieval: one search-database record per retrieve decision, each with
  ``query_evolution_steps`` (else ``inner_rounds``) rounds of ``queries_per_round`` queries and
  ``results_per_query`` documents per query, keeping ``top_k`` documents; the search backend
  and the knowledge-layer prompts are used by retrieve decisions only;
* candidates: ``candidates_after_retrieval`` (else ``candidates``) ``generate`` slots after a
  retrieve / look-up, ``candidates`` after a no-op;
* population and scaffold: the population snapshot has the configured kind (and top-k size),
  islands only for an island population; ``best_of_n`` mutates the best program so far,
  ``top_k`` a program among the k best, ``evox`` starts from ``evox.initial_rule`` and
  revises only once ``evox.strategy_patience`` iterations went without a new best (only
  ``evox`` writes strategies);
* novelty: iteration 2 only asks for children that normalise to an existing program, so they
  are rejected as duplicates when ``novelty.enabled`` and all evaluated when it is off.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evoduet_graph import checked_config, load_task, run
from evoduet_graph.api import can_retrieve
from evoduet_graph.config import EvoDuetConfig, load_config
from evoduet_graph.nodes.gate import rule_decision
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.search import SearchDatabase
from tests.conftest import ROOT, diff
from tests.fakes import (
    FakeSearcher,
    KnowledgeResponder,
    ScriptedChatModel,
    prompt_kind,
    prompt_text,
)
from tests.fault_harness import InProcessEvaluator

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
ITERATIONS = 2
LLM_GATE = ["retrieve", "no-op"]  # the scripted LLM gate's answers, in gate-call order
LAYER_KINDS = ("gate", "construct_query", "hypothetical_score")
ANGLES = "    angles = np.linspace(0.0, spread, N_POINTS, endpoint=False)"
# a comment-only edit: a different text whose normalised code equals the parent's
COMMENT_ONLY = diff(ANGLES, ANGLES + "  # evenly spaced")
RADIUS = "    radius = {}  # distance of every point from the origin (at most 1.0 is allowed)"
RADIUS_DOWN = diff(RADIUS.format("0.6"), RADIUS.format("0.5"))  # valid, smaller hull


def _current_program(messages: list[Any]) -> str:
    """The ``## Current program`` section of a generation prompt (up to the next heading).

    A joint-level search appends its turns after the generation prompt.
    """
    user = next(str(m.content) for m in messages if "## Current program" in str(m.content))
    return user.split("## Current program", 1)[1].split("\n## ", 1)[0]


JOINT_QUERY = "convex hull area of points in a disk"


def _joint(_n: int, text: str) -> dict[str, str]:
    """A structured joint-search turn.

    One search per mutation call (the same query in every iteration, so the second call's URLs are
    repeats), then answer.
    """
    if "Searches so far in this mutation:\n(none)" in text:
        return {"action": "search", "query": JOINT_QUERY}
    return {"action": "answer", "query": ""}


def _grounding_file(tmp_path: Path) -> Path:
    path = tmp_path / "grounding.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(
                {"url": f"https://seed.example/{i}", "title": f"Seed {i}", "content": f"c{i}"}
            )
            for i in range(2)
        )
        + "\n",
        encoding="utf-8",
    )
    return path


def _generate(messages: list[Any]) -> str:
    """From the initial program a valid but worse child (radius 0.6 → 0.5).

    From any other parent a comment-only edit. Iteration 1 therefore finds no new best, and every
    child of iteration 2 repeats a population program (normalised): novelty rejects it, or the
    evaluator scores it.
    """
    return RADIUS_DOWN if RADIUS.format("0.6") in _current_program(messages) else COMMENT_ONLY


def _run(cfg: EvoDuetConfig, run_dir: Path) -> tuple[Any, ScriptedChatModel, FakeSearcher]:
    """Run ``cfg`` on the smoke task with the fakes; returns (result, model, searcher)."""
    q = cfg.retrieval.queries_per_round
    responder = KnowledgeResponder(
        gate=LLM_GATE,
        queries=lambda n, _text: [f"query {n}.{j}" for j in range(q)],
        generate=_generate,
        joint=_joint,
    )
    llm = ScriptedChatModel(responses=[], default=responder)
    searcher = FakeSearcher()
    result = run(
        ROOT / "tasks" / "smoke_polygon_area",
        cfg,
        llm=llm,
        evaluator=InProcessEvaluator(),
        searcher=searcher,
        run_dir=run_dir,
    )
    return result, llm, searcher


def _node_events(run_dir: Path, node: str) -> list[dict[str, Any]]:
    return [
        e
        for e in read_events(run_dir / "events.jsonl")
        if e["event"] == "node" and e["node"] == node and "error" not in e
    ]


def _by_iteration(events: list[dict[str, Any]], key: str) -> list[Any]:
    """``key`` of one event per iteration, iterations 1..ITERATIONS in order."""
    seen = {e["iteration"]: e.get(key) for e in events}
    assert sorted(seen) == list(range(1, ITERATIONS + 1)), sorted(seen)
    return [seen[i] for i in range(1, ITERATIONS + 1)]


def _kinds(llm: ScriptedChatModel) -> Counter:
    return Counter(prompt_kind(m) for m in llm.prompts)


@pytest.mark.parametrize("config_path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_config_runs_and_shows_its_behaviour(config_path, tmp_path):
    cfg = checked_config(load_config(config_path).with_overrides({"iterations": ITERATIONS}))
    task = ROOT / "tasks" / "smoke_polygon_area"
    if cfg.retrieval.grounding == "offline" and not (task / "docs").is_dir():
        # the smoke task has no docs/ folder: seed from a JSONL file (the other source)
        cfg = cfg.with_overrides({"retrieval.grounding_documents": str(_grounding_file(tmp_path))})
    rdir = tmp_path / "run"
    result, llm, searcher = _run(cfg, rdir)
    check_behaviour(cfg, rdir, result, llm, searcher)


def _last_improvement(improved: set[int], i: int) -> int:
    """``last_improvement_iteration`` as iteration ``i`` starts."""
    return max((j for j in improved if j < i), default=0)


def _check_gate(cfg: EvoDuetConfig, rdir: Path, kinds: Counter, improved: set[int]) -> list[str]:
    """Assert the gate decided as ``cfg.gate.mode`` says; return its decisions by iteration."""
    gates = _node_events(rdir, "gate")
    decisions = _by_iteration(gates, "gate_decision")
    reasons = _by_iteration(gates, "gate_reason")
    if cfg.gate.mode == "llm":
        assert decisions == LLM_GATE
        assert reasons == [f"scripted gate answer {n}" for n in range(ITERATIONS)]
        assert kinds["gate"] == ITERATIONS
    elif cfg.gate.mode == "oracle":
        assert decisions == ["no-op"] * ITERATIONS and kinds["gate"] == 0
        assert all(reason.startswith("gate mode oracle") for reason in reasons)
    else:
        expected = [
            rule_decision(
                {"iteration": i, "last_improvement_iteration": _last_improvement(improved, i)},
                SimpleNamespace(config=cfg),  # type: ignore[arg-type]
            )
            for i in range(1, ITERATIONS + 1)
        ]
        assert list(zip(decisions, reasons, strict=True)) == expected
        assert kinds["gate"] == 0
    if cfg.gate.mode == "always":
        assert decisions == ["retrieve"] * ITERATIONS
    return decisions


def check_behaviour(
    cfg: EvoDuetConfig, rdir: Path, result: Any, llm: ScriptedChatModel, searcher: FakeSearcher
) -> None:
    """Assert that the run in ``rdir`` shows what ``cfg`` configures (module docstring)."""
    kinds = _kinds(llm)
    initial = load_task(ROOT / "tasks" / "smoke_polygon_area").initial_score

    assert result.iterations == ITERATIONS and result.stop_reason is None
    assert load_config(rdir / "config.yaml") == cfg
    # iteration 1's children are valid and worse: no new best in this run
    records = _node_events(rdir, "record")
    improved = {e["iteration"] for e in records if "best_id" in e}
    assert improved == set() and result.best_id == "initial"
    assert result.metric_value == pytest.approx(initial)

    # -- gate ------------------------------------------------------------------------------
    decisions = _check_gate(cfg, rdir, kinds, improved)

    # -- retrieval (inner loop, search backend, D_search) -----------------------------------
    r = cfg.retrieval
    retrieves = [i for i, d in enumerate(decisions, start=1) if d == "retrieve"]
    rounds = r.query_evolution_steps or r.inner_rounds
    found = rounds * r.queries_per_round * r.results_per_query  # distinct URLs per retrieval
    ranking = "rerank" if r.ranking == "listwise_rerank" else "hypothetical_score"
    db_path = rdir / "search_database.jsonl"
    db = SearchDatabase(db_path)
    events = list(read_events(rdir / "events.jsonl"))
    searches = [e for e in events if e["event"] == "search"]
    if r.use_search_database:
        retrievals = [rec for rec in db.records() if rec.decision == "retrieve"]
        assert [rec.iteration for rec in retrievals] == retrieves
        for rec in retrievals:
            assert len(rec.rounds) == rounds
            assert all(len(rnd.queries) == r.queries_per_round for rnd in rec.rounds)
            assert len(rec.final_doc_ids) == min(r.top_k, found)
            assert [i.iteration for i in rec.impacts] == [rec.iteration]
        retrieved = {d for rec in retrievals for rnd in rec.rounds for d in rnd.retained}
        assert len(retrieved) <= len(retrieves) * found
    inner_searches = [e for e in searches if not e.get("joint") and e["iteration"] > 0]
    assert len(inner_searches) == len(retrieves) * rounds * r.queries_per_round
    joint_searches = [e for e in searches if e.get("joint")]
    grounding_searches = [e for e in searches if e["iteration"] == 0]
    backend_searches = [  # a repeated query is answered by the search cache, not the backend
        e for e in [*inner_searches, *joint_searches, *grounding_searches] if not e.get("cached")
    ]
    assert searcher.calls == len(backend_searches)
    assert searcher.preflights == (1 if can_retrieve(cfg) else 0)
    assert kinds["construct_query"] == len(retrieves) * rounds
    assert kinds[ranking] == len(retrieves) * rounds
    assert kinds["rerank" if ranking == "hypothetical_score" else "hypothetical_score"] == 0
    if not can_retrieve(cfg):  # no knowledge layer (closed world, or the oracle's fixed set)
        assert searcher.calls == 0 and not any(kinds[k] for k in LAYER_KINDS)
        assert not [rec for rec in db.records()]
    if cfg.gate.mode == "never" and not cfg.joint_search.enabled:  # the closed-world run
        assert not db_path.exists() or len(db.documents()) == 0
    check_row(cfg, rdir, llm, searcher, db, events, decisions)

    # -- candidates per iteration ------------------------------------------------------------
    slots = Counter(e["iteration"] for e in _node_events(rdir, "generate"))
    for i, decision in enumerate(decisions, start=1):
        after = cfg.candidates_after_retrieval or cfg.candidates
        n = after if decision in ("retrieve", "look-up") else cfg.candidates
        assert slots[i] == n, (i, decision)

    # -- population and scaffold --------------------------------------------------------------
    store = ProgramStore(rdir / "programs.sqlite")
    try:
        snapshot = store.load_population()
        rows = [p for p in store.all_programs() if p.iteration > 0]
        ops = store.population_ops(after=snapshot[0]) if snapshot is not None else []
    finally:
        store.close()
    assert snapshot is not None and snapshot[1]["kind"] == cfg.population.kind
    islands = _by_iteration(_node_events(rdir, "select"), "island")
    parents = _by_iteration(_node_events(rdir, "select"), "parent_id")
    if cfg.population.kind == "top_k":
        assert snapshot[1]["top_k"] == cfg.population.top_k
        assert islands == [None] * ITERATIONS
    else:
        assert all(isinstance(i, int) for i in islands)
    best_after = {0: "initial"}
    for e in sorted(records, key=lambda e: e["iteration"]):
        best_after[e["iteration"]] = e.get("best_id", best_after[e["iteration"] - 1])
    assert parents[0] == "initial"
    if cfg.scaffold == "best_of_n":  # always the best program so far
        assert parents == [best_after[i - 1] for i in range(1, ITERATIONS + 1)]
    if cfg.scaffold == "top_k":  # uniform among the k best programs of the population
        # members: the last snapshot's entries, then the journal's additions (iteration j's
        # addition is there from iteration j + 1 on)
        joined = {e["id"]: (e["score"], e["iteration"]) for e in snapshot[1]["entries"]}
        joined.update({op["add"]["id"]: (op["add"]["score"], j) for j, op in ops if "add" in op})
        for i, parent in enumerate(parents, start=1):
            members = sorted((-score, pid) for pid, (score, j) in joined.items() if j < i)
            assert parent in {pid for _, pid in members[: cfg.population.top_k]}, (i, parent)
    if cfg.scaffold == "evox":
        # the initial strategy (window from iteration 1) is revised at the first iteration
        # that follows `strategy_patience` iterations without a new best; 2 iterations leave
        # room for one revision at most
        stale = {i: i - 1 - _last_improvement(improved, i) for i in range(2, ITERATIONS + 1)}
        revised = [i for i in stale if stale[i] >= cfg.evox.strategy_patience][:1]
        expected_log = [(1, "initial")] + [(i, "revised") for i in revised]
        events = [e for e in read_events(rdir / "events.jsonl") if e["event"] == "strategy"]
        assert [(e["iteration"], e["status"]) for e in events] == expected_log
        assert events[0]["strategy"]["parent_rule"] == cfg.evox.initial_rule
        assert kinds["evox_strategy"] == len(revised)
    else:
        events = [e for e in read_events(rdir / "events.jsonl") if e["event"] == "strategy"]
        assert events == [] and kinds["evox_strategy"] == 0

    # -- novelty ---------------------------------------------------------------------------
    second = [p for p in rows if p.iteration == 2]
    rejected = [e for e in read_events(rdir / "events.jsonl") if e["event"] == "novelty_rejected"]
    assert len(second) == slots[2]
    if cfg.novelty.enabled:
        assert {p.status for p in second} == {"duplicate"}
        assert {e["iteration"] for e in rejected} == {2}
    else:  # every child is evaluated
        assert all(p.status == "evaluated" and p.valid for p in rows)
        assert rejected == []


def check_row(
    cfg: EvoDuetConfig,
    rdir: Path,
    llm: ScriptedChatModel,
    searcher: FakeSearcher,
    db: SearchDatabase,
    events: list[dict[str, Any]],
    decisions: list[str],
) -> None:
    """The defining behaviour of the ablation-ladder rows (README "Baselines and ablations")."""
    r = cfg.retrieval
    generate_prompts = [prompt_text(m) for m in llm.prompts if prompt_kind(m) == "generate"]
    gate_prompts = [prompt_text(m) for m in llm.prompts if prompt_kind(m) == "gate"]
    if cfg.gate.mode == "oracle":  # oracle documents in every mutation prompt, no search
        titles = [
            line.removeprefix("# ").strip()
            for f in sorted((ROOT / "tasks" / "smoke_polygon_area" / "oracle").glob("*.md"))
            for line in f.read_text(encoding="utf-8").splitlines()
            if line.startswith("# ")
        ]
        assert titles and generate_prompts
        for text in generate_prompts:
            assert all(t in text for t in titles)
        assert searcher.calls == 0 and db.records() == []
    if cfg.joint_search.enabled:  # the mutation call searched; recorded like the method
        records = [rec for rec in db.records() if rec.decision == "joint-search"]
        assert [rec.iteration for rec in records] == list(range(1, ITERATIONS + 1))
        assert all(rec.queries == [JOINT_QUERY] for rec in records)
        # each candidate's record is credited with its own outcome (iteration 2: duplicate)
        assert [[i.outcome for i in rec.impacts] for rec in records] == [
            ["decreased"],
            ["not_evaluated"],
        ]
        assert searcher.queries == [JOINT_QUERY]  # iteration 2's repeat: the search cache
        joint = [e for e in events if e["event"] == "search" and e.get("joint")]
        assert [e["cached"] for e in joint] == [False] + [True] * (ITERATIONS - 1)
        urls = [u for e in events if e["event"] == "search" and e.get("joint") for u in e["urls"]]
        assert len(urls) == ITERATIONS * r.results_per_query
        stats = db.url_stats()  # iteration 2 returned iteration 1's URLs again
        assert stats["seen_before_share"] == pytest.approx(0.5)
        assert [e["protocol"] for e in events if e["event"] == "joint_search"] == (
            ["structured"] * ITERATIONS
        )
        assert _kinds(llm)["joint_search_step"] == 2 * ITERATIONS  # search, then answer
        assert all("## Search" in t for t in generate_prompts[:1])
    if r.ranking == "listwise_rerank":  # exactly one ranking call per retrieve
        assert _kinds(llm)["rerank"] == decisions.count("retrieve")
        for rec in db.records():
            assert all(res.relevance is not None for rnd in rec.rounds for res in rnd.results)
    if not r.use_search_database:  # nothing persisted or credited, never a look-up
        assert not (rdir / "search_database.jsonl").exists()
        assert not [e for e in events if e["event"] == "impact"]
        assert "look-up" not in decisions and not _node_events(rdir, "look_up")
        assert gate_prompts and not any("## Search database" in t for t in gate_prompts)
    if r.grounding != "none":  # D_search seeded before iteration 1
        seed = db.get_record("grd_000000")
        assert seed is not None and seed.iteration == 0 and seed.final_doc_ids
        grounding = next(e for e in events if e["event"] == "grounding")
        first_gate = next(e for e in events if e["event"] == "node" and e["node"] == "gate")
        assert grounding["time"] <= first_gate["time"]
        shown = seed.final_doc_ids[: r.documents_per_entry]
        assert all(d in gate_prompts[0] for d in shown)  # look-up can name them
        if r.grounding == "online":
            assert searcher.queries[0] == seed.queries[0]


def test_the_shipped_configs_are_found():
    """An empty glob (moved folder, wrong root) would leave the test above with no cases."""
    assert len(CONFIGS) >= 11 and all(p.suffix == ".yaml" for p in CONFIGS)

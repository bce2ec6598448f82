"""Novelty rejection in real runs: duplicates never reach the evaluator, distinct children do.

Runs the smoke task with a scripted model (full rewrites) and the real sandboxed evaluator
wrapped in `CountingEvaluator`, which logs every program it evaluates.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from evoduet_graph import EvoDuetConfig, checked_config, load_task, run
from evoduet_graph.evaluation import SandboxEvaluator
from evoduet_graph.population import restore_population
from evoduet_graph.report.markdown import report_markdown
from evoduet_graph.report.summary import run_summary
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore, code_sha
from tests.conftest import ROOT, SMOKE_TASK
from tests.fakes import CountingEvaluator, ScriptedChatModel
from tests.novelty_harness import current_program, fenced, grown, with_comment


def _config(**kw) -> EvoDuetConfig:
    base = {
        "iterations": 3,
        "gate": {"mode": "never"},  # the scripted answers are all mutation answers
        "prompt": {"diff_based": False},
        "population": {"kind": "top_k"},
        "evaluation": {"workers": 1},
    }
    base.update(kw)
    return EvoDuetConfig.model_validate(base)


def _evaluator(cfg: EvoDuetConfig, log: Path) -> CountingEvaluator:
    return CountingEvaluator(
        SandboxEvaluator.from_config(load_task(SMOKE_TASK), cfg.evaluation), log
    )


def echo(note: str):
    """Answer: the current program with one more comment line (the same program)."""
    return lambda messages: fenced(with_comment(current_program(messages), note))


def grow(step: float):
    """Answer: the current program with its radius grown by ``step`` (a distinct program)."""
    return lambda messages: fenced(grown(current_program(messages), step))


def _rejections(rdir: Path) -> list[dict]:
    return [e for e in read_events(rdir / "events.jsonl") if e["event"] == "novelty_rejected"]


def test_duplicate_rejected_without_evaluation_distinct_one_accepted(tmp_path):
    cfg = _config()
    rdir = tmp_path / "run"
    evaluator = _evaluator(cfg, tmp_path / "evaluated.jsonl")
    # it1: a comment-only copy of the parent (rejected), resample: a real change (accepted);
    # it2: two comment-only copies (both rejected: the candidate is a duplicate);
    # it3: a real change, whose prompt shows the rejection of iteration 2.
    llm = ScriptedChatModel(
        responses=[echo("first idea"), grow(0.1), echo("again"), echo("and again"), grow(0.05)]
    )
    result = run(SMOKE_TASK, cfg, llm=llm, evaluator=evaluator, run_dir=rdir)

    assert llm.calls == 5 and result.iterations == 3 and result.stop_reason is None
    store = ProgramStore(rdir / "programs.sqlite")
    rows = {r.id: r for r in store.all_programs()}
    assert rows["it00001-c0"].status == "evaluated" and rows["it00001-c0"].valid
    assert "radius = 0.7000" in (rows["it00001-c0"].code or "")
    dup = rows["it00002-c0"]
    assert dup.status == "duplicate" and not dup.valid and dup.score is None
    assert dup.code is not None and "# and again" in dup.code  # stored, for inspection
    assert (dup.error or "").startswith("near-duplicate: exact duplicate of ")
    assert rows["it00003-c0"].status == "evaluated"

    # the evaluator saw the initial program and the two accepted children, nothing else
    evaluated = [e["id"] for e in evaluator.evaluated()]
    assert evaluated == ["initial", "it00001-c0", "it00003-c0"]
    assert code_sha(dup.code) not in {e["sha"] for e in evaluator.evaluated()}

    events = _rejections(rdir)
    assert [(e["candidate_id"], e["attempt"], e["resampled"]) for e in events] == [
        ("it00001-c0", 1, True),
        ("it00002-c0", 1, True),
        ("it00002-c0", 2, False),
    ]
    assert all(e["kind"] == "exact" and e["similarity"] == 1.0 for e in events)
    assert events[0]["similar_to"] == "initial"
    assert events[2]["code_sha"] == code_sha(dup.code)
    assert [str(p.content) for p in llm.prompts[0]] == [str(p.content) for p in llm.prompts[1]]
    # the next prompt tells the model its last attempt was rejected, and why
    last_prompt = str(llm.prompts[4][-1].content)
    assert "Iteration 2, from initial: rejected before evaluation" in last_prompt
    assert "Error: near-duplicate: exact duplicate of initial" in last_prompt

    # an all-duplicate iteration neither fails nor resets the failure counter
    records = {
        e["iteration"]: e
        for e in read_events(rdir / "events.jsonl")
        if e["event"] == "node" and e["node"] == "record"
    }
    assert records[2]["consecutive_failures"] == 0

    summary = run_summary(rdir)
    novelty = summary.novelty
    assert (novelty.rejections, novelty.resampled, novelty.duplicates) == (3, 2, 1)
    assert novelty.by_kind == {"exact": 3, "token": 0, "embedding": 0}
    assert novelty.accepted_after_resample == 1
    assert summary.failures.duplicate == 1 and summary.failures.valid == 2
    text = report_markdown(rdir)
    assert "## Novelty rejections" in text
    assert "| drafts rejected (never evaluated) | 3 |" in text
    assert "| by exact check | 3 |" in text
    assert "| candidates recorded as duplicate | 1 |" in text
    store.close()


def test_disabled_novelty_evaluates_the_comment_only_copy(tmp_path):
    """Without the check the copy is evaluated.

    Its file differs from its parent's, so the evaluation cache (keyed by the sha of the exact text)
    does not serve it.
    """
    cfg = _config(iterations=1, novelty={"enabled": False})
    evaluator = _evaluator(cfg, tmp_path / "evaluated.jsonl")
    llm = ScriptedChatModel(responses=[echo("first idea")])
    run(SMOKE_TASK, cfg, llm=llm, evaluator=evaluator, run_dir=tmp_path / "run")
    assert llm.calls == 1
    assert [e["id"] for e in evaluator.evaluated()] == ["initial", "it00001-c0"]
    store = ProgramStore(tmp_path / "run" / "programs.sqlite")
    row = store.get_program("it00001-c0")
    assert row.status == "evaluated" and row.valid
    assert row.score == store.get_program("initial").score  # the same program, evaluated again
    population, _ = restore_population(store, checked_config(cfg).population, seed=cfg.seed)
    assert "it00001-c0" in population  # and a clone joins the population
    store.close()
    assert not _rejections(tmp_path / "run")


def test_clone_of_a_population_program_is_kept_out_of_the_population(tmp_path):
    """An exact copy of the parent's text is refused earlier (`diffs`: "identical").

    A copy of another population program, or the parent re-commented, is what the check keeps out.
    """
    cfg = _config(iterations=2, novelty={"resample": False})
    llm = ScriptedChatModel(responses=[grow(0.1), echo("same as before")])
    evaluator = _evaluator(cfg, tmp_path / "evaluated.jsonl")
    run(SMOKE_TASK, cfg, llm=llm, evaluator=evaluator, run_dir=tmp_path / "run")
    assert llm.calls == 2  # no resample
    store = ProgramStore(tmp_path / "run" / "programs.sqlite")
    population, _ = restore_population(store, checked_config(cfg).population, seed=cfg.seed)
    assert sorted(population.ids()) == ["initial", "it00001-c0"]
    assert store.get_program("it00002-c0").status == "duplicate"
    store.close()
    (event,) = _rejections(tmp_path / "run")
    assert event["resampled"] is False and event["attempt"] == 1


def test_token_and_embedding_checks_in_a_run(tmp_path):
    # a one-constant change (token similarity 1 - 1/N ~ 0.99) is rejected at 0.98, a bigger
    # change is not
    cfg = _config(iterations=1, novelty={"max_similarity": 0.98})
    llm = ScriptedChatModel(
        responses=[
            grow(0.1),
            lambda m: fenced(
                grown(current_program(m), 0.2).replace("spread = np.pi", "spread = 2 * np.pi")
            ),
        ]
    )
    evaluator = _evaluator(cfg, tmp_path / "a.jsonl")
    run(SMOKE_TASK, cfg, llm=llm, evaluator=evaluator, run_dir=tmp_path / "token")
    (event,) = _rejections(tmp_path / "token")
    assert event["kind"] == "token" and 0.98 <= event["similarity"] < 1.0
    assert event["reason"].startswith("token similarity 0.99")
    assert [e["id"] for e in evaluator.evaluated()] == ["initial", "it00001-c0"]

    # the embedding check, with a LangChain Embeddings named in the configuration
    cfg = _config(
        iterations=1,
        novelty={"embeddings": "tests.fakes:code_embeddings", "max_cosine": 0.99},
    )
    llm = ScriptedChatModel(responses=[grow(0.1), grow(0.1)])
    evaluator = _evaluator(cfg, tmp_path / "b.jsonl")
    run(SMOKE_TASK, cfg, llm=llm, evaluator=evaluator, run_dir=tmp_path / "emb")
    kinds = [(e["kind"], e["attempt"]) for e in _rejections(tmp_path / "emb")]
    assert kinds == [("embedding", 1), ("embedding", 2)]
    assert [e["id"] for e in evaluator.evaluated()] == ["initial"]
    assert run_summary(tmp_path / "emb").novelty.by_kind["embedding"] == 2


def test_a_failing_check_lets_the_candidate_through(tmp_path):
    cfg = _config(iterations=1, novelty={"embeddings": "tests.fakes:down_embeddings"})
    llm = ScriptedChatModel(responses=[grow(0.1)])
    evaluator = _evaluator(cfg, tmp_path / "evaluated.jsonl")
    result = run(SMOKE_TASK, cfg, llm=llm, evaluator=evaluator, run_dir=tmp_path / "run")
    assert result.iterations == 1 and result.best_id == "it00001-c0" and llm.calls == 1
    errors = [
        e for e in read_events(tmp_path / "run" / "events.jsonl") if e["event"] == "novelty_error"
    ]
    assert len(errors) == 1 and "embeddings service unreachable" in errors[0]["error"]
    assert run_summary(tmp_path / "run").fallbacks["novelty_error"] == 1


def test_bad_embeddings_config_fails_before_the_run_directory_exists(tmp_path):
    cfg = _config(novelty={"embeddings": "tests.fakes:not_embeddings"})
    llm = ScriptedChatModel(responses=[])
    try:
        run(SMOKE_TASK, cfg, llm=llm, run_dir=tmp_path / "run")
    except ValueError as exc:  # ConfigError
        assert "not a LangChain Embeddings" in str(exc)
    else:
        raise AssertionError("the run started with an unusable embeddings factory")
    assert not (tmp_path / "run").exists()


def test_a_model_that_only_repeats_does_not_stop_the_run_early(tmp_path):
    """Duplicates are not failures: ``max_consecutive_failures`` stops broken runs only."""
    cfg = _config(iterations=4, max_consecutive_failures=2)
    llm = ScriptedChatModel(responses=[], default=echo("nothing new"))
    evaluator = _evaluator(cfg, tmp_path / "evaluated.jsonl")
    result = run(SMOKE_TASK, cfg, llm=llm, evaluator=evaluator, run_dir=tmp_path / "run")
    assert result.iterations == 4 and result.stop_reason is None
    assert llm.calls == 8  # every candidate resampled once
    assert [e["id"] for e in evaluator.evaluated()] == ["initial"]
    # an invalid answer is still a failure
    cfg = _config(iterations=4, max_consecutive_failures=2)
    llm = ScriptedChatModel(responses=[], default="no code here, sorry")
    result = run(SMOKE_TASK, cfg, llm=llm, run_dir=tmp_path / "garbage")
    assert result.iterations == 2 and "2 consecutive" in (result.stop_reason or "")


def test_kill_and_resume_around_rejections_reproduce_the_uninterrupted_run(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tests.novelty_harness", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.stdout.strip(), proc.stderr[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    ref = summary["reference"]
    assert ref["rejections"] >= 8 and ref["duplicates"] >= 3 and ref["evaluations"] >= 3
    assert ref["unexpected_evaluations"] == []
    assert len(summary["scenarios"]) >= 6
    assert summary["failed"] == [], json.dumps(summary["failed"], indent=1)
    assert {s["label"] for s in summary["scenarios"]} >= {
        "event:novelty_rejected",
        "llm:generate",
        "store:put_program",
    }


def same():
    """Answer: the current program exactly as it is (an unchanged rewrite)."""
    return lambda messages: fenced(current_program(messages))


def test_an_unchanged_answer_is_resampled_like_a_duplicate_of_its_parent(tmp_path):
    # it1: the parent unchanged (rejected as its exact duplicate), resample: a real change;
    # it2: the parent unchanged twice (the candidate stays invalid for that reason)
    cfg = _config(iterations=2)
    rdir = tmp_path / "run"
    evaluator = _evaluator(cfg, tmp_path / "evaluated.jsonl")
    llm = ScriptedChatModel(responses=[same(), grow(0.1), same(), same()])
    result = run(SMOKE_TASK, cfg, llm=llm, evaluator=evaluator, run_dir=rdir)
    assert llm.calls == 4 and result.iterations == 2
    store = ProgramStore(rdir / "programs.sqlite")
    rows = {r.id: r for r in store.all_programs()}
    assert rows["it00001-c0"].status == "evaluated" and rows["it00001-c0"].valid
    second = rows["it00002-c0"]
    assert second.status == "invalid"
    assert second.error == "the rewrite is identical to the current program"
    assert [e["id"] for e in evaluator.evaluated()] == ["initial", "it00001-c0"]
    events = _rejections(rdir)
    assert [(e["candidate_id"], e["attempt"], e["resampled"]) for e in events] == [
        ("it00001-c0", 1, True),
        ("it00002-c0", 1, True),
    ]
    assert all(e["kind"] == "exact" and e["similar_to"] == "initial" for e in events)
    assert "left the parent unchanged" in events[0]["reason"]
    assert events[0]["code_sha"] == code_sha(rows["initial"].code)
    store.close()
    # without the resample, an unchanged answer is invalid at once
    llm = ScriptedChatModel(responses=[], default=same())
    cfg = _config(iterations=2, novelty={"resample": False})
    run(SMOKE_TASK, cfg, llm=llm, run_dir=tmp_path / "no-resample")
    assert llm.calls == 2 and not _rejections(tmp_path / "no-resample")

"""Run directories are never mixed up or overwritten; a resume may change the iteration count.

A candidate that kills the run process cannot make the run impossible to resume.
"""

from __future__ import annotations

import pytest

from evoduet_graph import EvoDuetConfig, RunError, run
from evoduet_graph.api import build_context
from evoduet_graph.nodes.evaluate import MAX_EVALUATION_ATTEMPTS, evaluate_and_store
from evoduet_graph.task import load_task
from tests.conftest import RADIUS_UP
from tests.fakes import ScriptedChatModel


def _cfg(n: int) -> EvoDuetConfig:
    return EvoDuetConfig.model_validate({"iterations": n, "population": {"num_islands": 2}})


def test_out_pointing_at_a_task_folder_is_refused_and_nothing_is_overwritten(
    smoke_task_dir, tmp_path
):
    import shutil

    folder = tmp_path / "mytask"
    shutil.copytree(smoke_task_dir, folder)
    before = (folder / "config.yaml").read_text()
    with pytest.raises(RunError, match="not an evoduet run directory"):
        run(smoke_task_dir, _cfg(1), llm=ScriptedChatModel(responses=[]), run_dir=folder)
    assert (folder / "config.yaml").read_text() == before


def test_out_pointing_at_a_run_of_another_task_is_refused(
    smoke_task_dir, circle_task_dir, tmp_path
):
    llm = ScriptedChatModel(responses=[], default=RADIUS_UP)
    run(smoke_task_dir, _cfg(1), llm=llm, run_dir=tmp_path / "r")
    with pytest.raises(RunError, match="another task"):
        run(circle_task_dir, _cfg(1), llm=llm, run_dir=tmp_path / "r")


def test_out_pointing_at_a_file_is_refused(smoke_task_dir, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(RunError, match="is a file"):
        run(smoke_task_dir, _cfg(1), llm=ScriptedChatModel(responses=[]), run_dir=target)


def test_a_run_continued_with_more_iterations(smoke_task_dir, tmp_path):
    llm = ScriptedChatModel(responses=[], default=RADIUS_UP)
    first = run(smoke_task_dir, _cfg(1), llm=llm, run_dir=tmp_path / "r")
    assert first.iterations == 1
    second = run(smoke_task_dir, _cfg(3), llm=llm, run_dir=tmp_path / "r")
    assert second.iterations == 3


def test_a_program_whose_evaluation_keeps_killing_the_run_is_skipped(smoke_task_dir):
    task = load_task(smoke_task_dir)
    ctx = build_context(task, _cfg(1), None, llm=ScriptedChatModel(responses=[]))
    code = task.initial_program + "\n# poison\n"
    for _ in range(MAX_EVALUATION_ATTEMPTS):  # processes that died mid-evaluation
        ctx.store.start_evaluation(code)
    outcome = evaluate_and_store(ctx, [code], ["it00001-c0"])[code]
    assert not outcome.valid and "died" in (outcome.error or "")
    assert ctx.store.cached_evaluation(code) == outcome
    assert any(e["event"] == "evaluation_skipped" for e in ctx.events.memory)


class _Died(BaseException):
    """Stands in for the process dying during an evaluation (not an `Exception`)."""


class _DiesOnFirst:
    """An evaluator whose first evaluation kills the process; it records what it started."""

    def __init__(self, inner):
        self.inner, self.started = inner, []

    def evaluate(self, code, program_id):
        self.started.append(program_id)
        if len(self.started) == 1:
            raise _Died
        return self.inner.evaluate(code, program_id)


def test_candidates_queued_behind_a_dying_evaluation_keep_their_attempts(smoke_task_dir):
    # the attempt is counted when an evaluation starts: two kills during the first candidate
    # must not make the never-started ones look poisoned
    task = load_task(smoke_task_dir)
    ctx = build_context(task, _cfg(1), None, llm=ScriptedChatModel(responses=[]))
    codes = [task.initial_program + f"\n# child {i}\n" for i in range(3)]
    ids = [f"it00001-c{i}" for i in range(3)]
    ctx.config.evaluation.workers = 1
    for _ in range(MAX_EVALUATION_ATTEMPTS):  # two processes die while evaluating child 0
        dying = _DiesOnFirst(ctx.evaluator)
        ctx.evaluator = dying
        with pytest.raises(_Died):
            evaluate_and_store(ctx, codes, ids)
        assert dying.started == ["it00001-c0"]  # the others were queued, never started
        ctx.evaluator = dying.inner
    outcomes = evaluate_and_store(ctx, codes, ids)
    assert not outcomes[codes[0]].valid and "died" in (outcomes[codes[0]].error or "")
    assert outcomes[codes[1]].valid and outcomes[codes[2]].valid  # evaluated, not skipped
    skipped = [e for e in ctx.events.memory if e["event"] == "evaluation_skipped"]
    assert [e["program_id"] for e in skipped] == ["it00001-c0"]

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

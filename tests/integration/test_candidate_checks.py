"""Candidates are checked before they cost an evaluation.

Python code that does not compile is rejected with the compiler's message, and the evaluator never
sees it.
"""

from __future__ import annotations

import json
from pathlib import Path

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.evaluation import SandboxEvaluator
from evoduet_graph.nodes.generate import compile_error
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.task import load_task
from tests.conftest import SMOKE_TASK
from tests.fakes import CountingEvaluator, ScriptedChatModel


def test_compile_error_is_the_compilers_message_and_only_for_python() -> None:
    message = compile_error("python", "def f(:\n    return 1\n")
    assert message and message.startswith("the program does not compile: SyntaxError")
    assert "line 1" in message and "def f(:" in message
    assert compile_error("python", "\tif True:\n        pass\n")  # IndentationError / TabError
    assert compile_error("python", "x = 1\n") is None
    assert compile_error("cpp", "int main( {") is None  # other languages: their evaluator


def test_a_rewrite_that_does_not_compile_is_rejected_before_evaluation(tmp_path: Path) -> None:
    task = load_task(SMOKE_TASK)
    broken = task.initial_program.replace("radius = 0.6", "radius = (0.6")
    llm = ScriptedChatModel(responses=[f"```python\n{broken}\n```"], default="no change")
    log = tmp_path / "evaluations.log"
    evaluator = CountingEvaluator(SandboxEvaluator(task, timeout_s=30), log)
    cfg = EvoDuetConfig.model_validate(
        {"iterations": 1, "gate": {"mode": "never"}, "prompt": {"diff_based": False}}
    )
    run(task, cfg, llm=llm, evaluator=evaluator, run_dir=tmp_path / "run")
    store = ProgramStore(tmp_path / "run" / "programs.sqlite")
    try:
        row = store.get_program("it00001-c0")
    finally:
        store.close()
    assert row.status == "invalid"
    assert row.error and row.error.startswith("the program does not compile: SyntaxError")
    evaluated = [json.loads(line)["id"] for line in log.read_text().splitlines()]
    assert "it00001-c0" not in evaluated  # only the initial program was evaluated

"""Helper process for the kill/resume test.

Runs (or resumes) a smoke-task run with a scripted model that answers full rewrites (a different
radius per call) and logs every evaluation.

Usage: python -m tests.integration._run_smoke RUN_DIR ITERATIONS OFFSET [resume]
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evoduet_graph import EvoDuetConfig, Task, load_task, resume, run
from evoduet_graph.evaluation import SandboxEvaluator
from tests.conftest import SMOKE_TASK
from tests.fakes import CountingEvaluator, ScriptedChatModel


def drive(task: Task, answer_for: Callable[[int], str], settings: dict[str, Any]) -> None:
    """Run (or resume, with ``resume`` as the 4th argument) ``task`` from the command line.

    ``answer_for(k)`` is the model's k-th answer (k counts on from OFFSET); ``settings`` are
    laid over 2 candidates per iteration on 2 islands.
    """
    run_dir, iterations, offset = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    counter = {"k": offset}
    lock = threading.Lock()

    def answer(messages):
        with lock:
            counter["k"] += 1
            k = counter["k"]
        time.sleep(0.3)
        return answer_for(k)

    llm = ScriptedChatModel(responses=[], default=answer)
    evaluator = CountingEvaluator(SandboxEvaluator(task, workers=2), run_dir / "evaluations.log")
    if len(sys.argv) > 4 and sys.argv[4] == "resume":
        result = resume(run_dir, llm=llm, evaluator=evaluator)
    else:
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": iterations,
                "candidates": 2,
                "population": {"num_islands": 2},
                **settings,
            }
        )
        result = run(task, cfg, llm=llm, evaluator=evaluator, run_dir=run_dir)
    print(f"DONE {result.iterations} {result.best_score}")


def main() -> None:
    task = load_task(SMOKE_TASK)

    def rewrite(k: int) -> str:
        code = task.initial_program.replace("radius = 0.6", f"radius = {0.5 + 0.004 * k:.4f}")
        return f"```python\n{code}\n```"

    drive(task, rewrite, {"prompt": {"diff_based": False}})


if __name__ == "__main__":
    main()

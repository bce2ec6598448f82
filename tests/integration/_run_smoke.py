"""Helper process for the kill/resume test.

Runs (or resumes) a smoke-task run with a scripted model that answers full rewrites (a different
radius per call) and logs every evaluation.

Usage: python -m tests.integration._run_smoke RUN_DIR ITERATIONS OFFSET [resume]
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from evoduet_graph import EvoDuetConfig, load_task, resume, run
from evoduet_graph.evaluation import SandboxEvaluator
from tests.conftest import SMOKE_TASK
from tests.fakes import CountingEvaluator, ScriptedChatModel


def main() -> None:
    run_dir, iterations, offset = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    task = load_task(SMOKE_TASK)
    counter = {"k": offset}
    lock = threading.Lock()

    def answer(messages):
        with lock:
            counter["k"] += 1
            k = counter["k"]
        time.sleep(0.3)
        code = task.initial_program.replace("radius = 0.6", f"radius = {0.5 + 0.004 * k:.4f}")
        return f"```python\n{code}\n```"

    llm = ScriptedChatModel(responses=[], default=answer)
    evaluator = CountingEvaluator(SandboxEvaluator(task, workers=2), run_dir / "evaluations.log")
    if len(sys.argv) > 4 and sys.argv[4] == "resume":
        result = resume(run_dir, llm=llm, evaluator=evaluator)
    else:
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": iterations,
                "candidates": 2,
                "prompt": {"diff_based": False},
                "population": {"num_islands": 2},
            }
        )
        result = run(task, cfg, llm=llm, evaluator=evaluator, run_dir=run_dir)
    print(f"DONE {result.iterations} {result.best_score}")


if __name__ == "__main__":
    main()

"""Helper process for the folder kill/resume test.

Runs (or resumes) a ``tsp_folder`` run with a scripted model whose every answer edits two files
(a different 2-opt pass count per call) and logs every evaluation.

Usage: python -m tests.integration._run_folder RUN_DIR ITERATIONS OFFSET [resume]
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from evoduet_graph import EvoDuetConfig, load_task, resume, run
from evoduet_graph.evaluation import SandboxEvaluator
from tests.fakes import CountingEvaluator, ScriptedChatModel
from tests.folder_answers import TSP_TASK, tsp_two_files


def main() -> None:
    run_dir, iterations, offset = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    task = load_task(TSP_TASK)
    counter = {"k": offset}
    lock = threading.Lock()

    def answer(messages):
        with lock:
            counter["k"] += 1
            k = counter["k"]
        time.sleep(0.3)
        return tsp_two_files(k)

    llm = ScriptedChatModel(responses=[], default=answer)
    evaluator = CountingEvaluator(SandboxEvaluator(task, workers=2), run_dir / "evaluations.log")
    if len(sys.argv) > 4 and sys.argv[4] == "resume":
        result = resume(run_dir, llm=llm, evaluator=evaluator)
    else:
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": iterations,
                "candidates": 2,
                "prompt": {"diff_based": True},
                "novelty": {"enabled": False},
                "gate": {"mode": "never"},
                "population": {"num_islands": 2},
            }
        )
        result = run(task, cfg, llm=llm, evaluator=evaluator, run_dir=run_dir)
    print(f"DONE {result.iterations} {result.best_score}")


if __name__ == "__main__":
    main()

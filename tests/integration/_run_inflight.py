"""Helper process for the iterations-in-flight kill/resume test.

A gate-llm smoke-task run with ``max_iterations_in_flight: 4``, a slow scripted model (every call
0.3 s) and a `FakeSearcher`; every evaluation is logged.

Usage: python -m tests.integration._run_inflight RUN_DIR ITERATIONS [resume]
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.config import load_config
from evoduet_graph.evaluation import SandboxEvaluator
from tests.conftest import SMOKE_TASK
from tests.fakes import CountingEvaluator, FakeSearcher, KnowledgeResponder, ScriptedChatModel

GATE_PATTERN = ("retrieve", "no-op", "look-up", "no-op")


def main() -> None:
    """Run or resume; print ``DONE <iterations> <best score>`` on success."""
    run_dir, iterations = Path(sys.argv[1]), int(sys.argv[2])
    task = load_task(SMOKE_TASK)
    lock = threading.Lock()
    counter = {"k": 0}
    resuming = len(sys.argv) > 3 and sys.argv[3] == "resume"
    offset = 1000 if resuming else 0  # a resumed process writes other children

    def rewrite(_messages) -> str:
        with lock:
            counter["k"] += 1
            k = counter["k"] + offset
        code = task.initial_program.replace("radius = 0.6", f"radius = {0.5 + 0.0001 * k:.4f}")
        return f"```python\n{code}\n```"

    responder = KnowledgeResponder(
        gate=lambda i, _text: GATE_PATTERN[i % len(GATE_PATTERN)], generate=rewrite, delay_s=0.3
    )
    llm = ScriptedChatModel(responses=[], default=responder)
    evaluator = CountingEvaluator(SandboxEvaluator(task, workers=2), run_dir / "evaluations.log")
    if resuming:
        cfg = load_config(run_dir / "config.yaml")  # `run` on the run directory continues it
    else:
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": iterations,
                "max_iterations_in_flight": 4,
                "prompt": {"diff_based": False},
                "population": {"num_islands": 2},
                "gate": {"mode": "llm"},
                "retrieval": {"inner_rounds": 2, "search_retries": 0},
            }
        )
    result = run(task, cfg, llm=llm, evaluator=evaluator, run_dir=run_dir, searcher=FakeSearcher())
    print(f"DONE {result.iterations} {result.best_score}", flush=True)


if __name__ == "__main__":
    main()

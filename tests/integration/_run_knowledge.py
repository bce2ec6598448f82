"""Helper process for the D_search kill/resume test.

A smoke-task run that retrieves every iteration (gate ``always``, a `FakeSearcher`, R=2 inner
rounds) with a slow scripted model.

Usage: python -m tests.integration._run_knowledge RUN_DIR ITERATIONS [resume]

The fake searcher's results depend only on the query and the model's queries only on the
number of construct_query calls this process made, so a resumed process that re-runs an
interrupted retrieval asks the same queries and gets the same URLs again.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.config import load_config
from tests.conftest import SMOKE_TASK
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel


def main() -> None:
    """Run or resume; print ``DONE <iterations> <best score>`` on success."""
    run_dir, iterations = Path(sys.argv[1]), int(sys.argv[2])
    task = load_task(SMOKE_TASK)
    lock = threading.Lock()
    counter = {"k": 0}

    def rewrite(_messages) -> str:
        with lock:
            counter["k"] += 1
            k = counter["k"]
        code = task.initial_program.replace("radius = 0.6", f"radius = {0.6 + 0.01 * k:.3f}")
        return f"```python\n{code}\n```"

    responder = KnowledgeResponder(generate=rewrite, delay_s=0.25)
    llm = ScriptedChatModel(responses=[], default=responder)
    searcher = FakeSearcher()
    if len(sys.argv) > 3 and sys.argv[3] == "resume":
        # `resume()` cannot take a searcher; `run` on an existing run directory continues its
        # thread the same way, with the run's own config.yaml
        cfg = load_config(run_dir / "config.yaml")
        result = run(task, cfg, llm=llm, run_dir=run_dir, searcher=searcher)
    else:
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": iterations,
                "prompt": {"diff_based": False},
                "population": {"num_islands": 2},
                "gate": {"mode": "always"},
                "retrieval": {"inner_rounds": 2, "search_retries": 0},
            }
        )
        result = run(task, cfg, llm=llm, run_dir=run_dir, searcher=searcher)
    print(f"DONE {result.iterations} {result.best_score}", flush=True)


if __name__ == "__main__":
    main()

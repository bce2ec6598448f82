"""Helper process for the EvoX kill/resume test.

A smoke-task run with ``scaffold: evox`` (patience 1, so the strategy is revised every iteration
without a new best) and a slow scripted model whose every answer depends only on its prompt (garbage
programs; a strategy derived from the current strategy's id), so a resumed process answers as an
uninterrupted one would.

Usage: python -m tests.integration._run_evox RUN_DIR [resume]
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from evoduet_graph import EvoDuetConfig, load_task, resume, run
from tests.conftest import GARBAGE, SMOKE_TASK
from tests.fakes import KnowledgeResponder, ScriptedChatModel


def strategy(_n: int, text: str) -> dict[str, str]:
    """The revision's answer: a function of the current strategy's id in the prompt."""
    match = re.search(r"## Current strategy and its effect so far\n- strategy (\d+)", text)
    current = int(match[1]) if match else -1
    return {
        "parent_rule": ["best", "recent_improver", "top_k_uniform"][current % 3],
        "instruction": f"after strategy {current}",
        "rationale": "scripted",
    }


def slow_garbage(_messages) -> str:
    time.sleep(0.3)
    return GARBAGE


def main() -> None:
    """Run or resume; print ``DONE <iterations> <strategy id>`` on success."""
    run_dir = Path(sys.argv[1])
    llm = ScriptedChatModel(
        responses=[], default=KnowledgeResponder(generate=slow_garbage, strategy=strategy)
    )
    if len(sys.argv) > 2 and sys.argv[2] == "resume":
        result = resume(run_dir, llm=llm)
    else:
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": 5,
                "scaffold": "evox",
                "evox": {"strategy_patience": 1},
                "population": {"num_islands": 2},
                "evaluation": {"workers": 1},
            }
        )
        result = run(load_task(SMOKE_TASK), cfg, llm=llm, run_dir=run_dir)
    print(f"DONE {result.iterations} {result.best_score}", flush=True)


if __name__ == "__main__":
    main()

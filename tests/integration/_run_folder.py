"""Helper process for the folder kill/resume test.

Runs (or resumes) a ``tsp_folder`` run with a scripted model whose every answer edits two files
(a different 2-opt pass count per call) and logs every evaluation.

Usage: python -m tests.integration._run_folder RUN_DIR ITERATIONS OFFSET [resume]
"""

from __future__ import annotations

from evoduet_graph import load_task
from tests.folder_answers import TSP_TASK, tsp_two_files
from tests.integration._run_smoke import drive


def main() -> None:
    drive(
        load_task(TSP_TASK),
        tsp_two_files,
        {"prompt": {"diff_based": True}, "novelty": {"enabled": False}, "gate": {"mode": "never"}},
    )


if __name__ == "__main__":
    main()

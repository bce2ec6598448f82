"""A trivial OpenEvolve task folder for the overhead benchmark.

The program holds one line ``SALT = "<text>"`` inside its EVOLVE-BLOCK; the canned server's
diffs replace that line, so every child differs from its parent and nothing accumulates
along a lineage (program length stays constant however long the run). The evaluator scores
a program by a hash of its salt (deterministic, in (0, 1]), so the population sees a spread
of scores and MAP-Elites cells like a real run, and costs microseconds.
"""

from __future__ import annotations

from pathlib import Path

INITIAL_PROGRAM = '''"""Overhead-benchmark program: only the salt changes."""

# EVOLVE-BLOCK-START
SALT = "initial"


def value():
    """The quantity the evaluator scores (a function of SALT only)."""
    return SALT
# EVOLVE-BLOCK-END
'''

EVALUATOR = '''"""Overhead-benchmark evaluator: score = a hash of the program's SALT, in (0, 1].

When $OVERHEAD_EVAL_LOG names a file, each call appends "<end unix s> <own seconds>" to it,
so the benchmark can subtract the evaluator's own time from a framework's wall time.
"""

import hashlib
import os
import re
import time


def evaluate(program_path):
    start = time.perf_counter()
    with open(program_path, encoding="utf-8") as fh:
        text = fh.read()
    match = re.search(r'^SALT = "([^"]*)"$', text, re.MULTILINE)
    if match is None:
        result = {"combined_score": 0.0, "error": "no SALT line"}
    else:
        digest = hashlib.sha256(match.group(1).encode()).digest()
        result = {"combined_score": (int.from_bytes(digest[:4], "big") % 1_000_000 + 1) / 1e6}
    log = os.environ.get("OVERHEAD_EVAL_LOG")
    if log:
        line = f"{time.time():.6f} {time.perf_counter() - start:.7f}\\n"
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    return result
'''

CONFIG = """# OpenEvolve configuration of the overhead benchmark's trivial task.
language: "python"
diff_based_evolution: true
prompt:
  system_message: |
    Change the SALT string of the program. The evaluator scores a hash of it.
evaluator:
  timeout: 10
  cascade_evaluation: false
"""

TASK_YAML = """# evoduet_graph metadata of the overhead benchmark's trivial task.
name: overhead_trivial
direction: max
metric: combined_score
initial_score: null
timeout_s: 10
"""


def write_task(folder: str | Path) -> Path:
    """Write the trivial task folder into ``folder`` and return its path.

    Write the task folder (``initial_program.py``, ``evaluator.py``, ``config.yaml``,
    ``task.yaml``) into ``folder`` and return its path.
    """
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    (path / "initial_program.py").write_text(INITIAL_PROGRAM, encoding="utf-8")
    (path / "evaluator.py").write_text(EVALUATOR, encoding="utf-8")
    (path / "config.yaml").write_text(CONFIG, encoding="utf-8")
    (path / "task.yaml").write_text(TASK_YAML, encoding="utf-8")
    return path

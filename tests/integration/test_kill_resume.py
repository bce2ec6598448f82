"""A run process killed with SIGKILL mid-iteration resumes to completion.

Nothing already evaluated is evaluated again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from evoduet_graph.rundir.events import read_events
from tests.conftest import ROOT


def _start(run_dir: Path, iterations: int, offset: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration._run_smoke",
            str(run_dir),
            str(iterations),
            str(offset),
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def _events(run_dir: Path) -> list[dict]:
    return list(read_events(run_dir / "events.jsonl"))


def test_sigkill_mid_iteration_then_resume(tmp_path):
    run_dir = tmp_path / "run"
    proc = _start(run_dir, 4, 0)
    try:
        # kill while iteration 2 is between generation and record
        _wait_for(
            lambda: any(
                e.get("node") == "generate" and e.get("iteration") == 2 for e in _events(run_dir)
            ),
            timeout=120,
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    recorded = [e for e in _events(run_dir) if e.get("node") == "record"]
    assert len(recorded) < 4

    resumed = _start(run_dir, 4, 1000, "resume")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    assert out.strip().splitlines()[-1].startswith("DONE 4")

    log = [json.loads(x) for x in (run_dir / "evaluations.log").read_text().splitlines()]
    shas = Counter(entry["sha"] for entry in log)
    assert all(n == 1 for n in shas.values()), shas
    ids = Counter(entry["id"] for entry in log)
    assert all(n == 1 for n in ids.values()), ids
    records = [e for e in _events(run_dir) if e.get("node") == "record"]
    assert sorted({e["iteration"] for e in records}) == [1, 2, 3, 4]
    assert (run_dir / "best_program.json").exists()


def test_resume_with_a_different_iteration_count_after_a_mid_iteration_kill(tmp_path):
    from evoduet_graph import resume
    from tests.conftest import SMOKE_TASK
    from tests.fakes import ScriptedChatModel

    run_dir = tmp_path / "run"
    proc = _start(run_dir, 3, 0)
    try:
        _wait_for(
            lambda: any(
                e.get("node") == "generate" and e.get("iteration") == 1 for e in _events(run_dir)
            ),
            timeout=120,
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    code = (SMOKE_TASK / "initial_program.py").read_text().replace("radius = 0.6", "radius = 0.7")
    llm = ScriptedChatModel(responses=[], default=f"```python\n{code}\n```")
    result = resume(run_dir, llm=llm, iterations=5)
    assert result.iterations == 5
    records = {e["iteration"] for e in _events(run_dir) if e.get("node") == "record"}
    assert records == {1, 2, 3, 4, 5}

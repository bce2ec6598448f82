"""Kill anywhere, resume exactly (issue item 1).

`tests.fault_harness` runs a small deterministic run (smoke task, 3 iterations, LLM gate with
2 inner rounds, 2-3 parallel candidates) in forked children that SIGKILL themselves at chosen
fault points — node entries, model calls, searches, evaluations, event lines, search-database
and program-store writes, checkpoint writes, some of them torn half-way — resumes each, and
checks the result against an uninterrupted run with the same seed. The 200-point soak is
``benchmarks/kill_soak.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

REQUIRED = {
    "select": ("enter:select",),
    "gate": ("enter:gate", "llm:gate", "event:gate_decision"),
    "inner rounds": (
        "enter:construct_query",
        "llm:construct_query",
        "enter:search",
        "search",
        "enter:hypothetical_score",
        "llm:hypothetical_score",
        "enter:update_knowledge",
    ),
    "generate": ("enter:generate", "llm:generate"),
    "evaluate": ("enter:evaluate", "eval:start", "eval:end", "store:put_evaluation"),
    "record": ("enter:record", "event:impact", "store:log_population_op"),
    "checkpoint": ("ckpt", "ckpt:writes"),
}


def test_at_least_20_kill_points_resume_to_the_uninterrupted_result(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.fault_harness",
            "--points",
            "36",
            "--jobs",
            "2",
            "--double-every",
            "4",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.stdout.strip(), proc.stderr[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["failed"] == [], json.dumps(summary["failed"], indent=1)[:6000]
    assert summary["kill_points"] >= 20 and summary["passed"] == summary["kill_points"]
    assert summary["lost_programs"] == 0
    assert summary["torn_writes"] >= 1 and summary["double_kills"] >= 1
    killed = {s["label"] for s in summary["scenarios"]}
    for stage, labels in REQUIRED.items():
        assert any(lab.startswith(labels) for lab in killed), (stage, sorted(killed))


def test_kill_after_a_step_whose_tasks_all_finished_is_resumed_not_restarted(
    tmp_path: Path,
) -> None:
    """All parallel ``generate`` tasks saved their writes, the step's checkpoint was not written.

    ``StateSnapshot.next`` is empty although the step is not committed. The run must resume it (a
    regression: it used to start a new invocation and skip the iteration).
    """
    code = f"""
import json
from pathlib import Path
from tests import fault_harness as fh
w = Path({str(tmp_path)!r})
ref, trace = fh.reference_run(w)
first_eval = trace.index("enter:evaluate")
point = max(i for i, lab in enumerate(trace[:first_eval], 1) if lab == "ckpt:writes")
res = fh.run_scenario(w, point, False, ref, trace=trace)
print(json.dumps({{"ok": res.ok, "label": res.label, "problems": res.problems}}))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["label"] == "ckpt:writes"
    assert out["ok"], out["problems"]

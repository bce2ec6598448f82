"""Novelty rejection under kills: deterministic runs that reject and resample, killed and resumed.

A run on the smoke task (rewrite mode, 2 candidates, 4 iterations) with `NoveltyModel`, whose
first draft of every candidate is its parent plus a comment (an exact duplicate after
normalisation, rejected), and whose resample either grows the parent's radius (accepted and
evaluated) or is another comment-only copy (recorded as ``duplicate``). Each scenario runs it
in a forked child that SIGKILLs itself at a fault point of `tests.fault_harness` (the
``novelty_rejected`` event, the resample's model call, a program-store write, ...), resumes it
until done and compares with an uninterrupted run:

* the program table (id, code hash, status, score, valid), the restored population and the
  best program are the same;
* no program is evaluated twice, and nothing but a candidate's accepted code is ever
  evaluated (a rejected draft or ``duplicate`` never reaches the evaluator);
* the ``novelty_rejected`` events name the same (candidate, attempt, kind) set.

Usage: ``python -m tests.novelty_harness --out DIR`` prints a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import sqlite3
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from tests.fakes import CountingEvaluator
from tests.fault_harness import (
    POINTS,
    SMOKE_TASK,
    InProcessEvaluator,
    fork_run,
    install_hooks,
)

NOVELTY_RUN_CONFIG: dict[str, Any] = {
    "iterations": 4,
    "candidates": 2,
    "seed": 5,
    "prompt": {"diff_based": False},
    "population": {"num_islands": 2},
    "evaluation": {"workers": 2},
    "llm": {"max_retries": 0},
}

_FENCE = re.compile(r"## Current program.*?```python\n(.*?)\n```", re.DOTALL)
_RADIUS = re.compile(r"radius = ([0-9.]+)")


def current_program(messages: list[BaseMessage]) -> str:
    """The parent's code as the generation prompt shows it."""
    match = _FENCE.search(str(messages[-1].content))
    if match is None:
        raise ValueError("no parent program in the prompt")
    return match.group(1) + "\n"


def with_comment(code: str, note: str) -> str:
    """``code`` with a comment line added inside the evolve block.

    A different file, the same program (a rewrite identical to its parent is already refused as
    invalid by `diffs`).
    """
    return code.replace("    angles = ", f"    # {note}\n    angles = ", 1)


def grown(code: str, step: float) -> str:
    """``code`` with its radius grown by ``step`` (capped at the unit disk)."""
    radius = float(_RADIUS.search(code).group(1))  # type: ignore[union-attr]
    return _RADIUS.sub(f"radius = {min(1.0, radius + step):.4f}", code, count=1)


def fenced(code: str) -> str:
    return f"```python\n{code}```"


class NoveltyModel(BaseChatModel):
    """Deterministic generator: the answer is a function of the prompt and metadata.

    Deterministic generator: the answer is a function of the prompt's parent and the
    call's metadata (iteration, candidate index, attempt), never of call counts, so a resumed
    process gets exactly the answers the uninterrupted one did.

    attempt 0: the parent plus a comment (rejected as an exact duplicate). attempt 1 (the
    resample): when ``iteration + index`` is even, the parent with its radius grown by
    ``0.01 * (index + 1)`` (accepted); else another comment-only copy (a ``duplicate``).
    """

    _calls: Counter = PrivateAttr(default_factory=Counter)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "novelty-harness-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        POINTS.hit("llm:generate")
        meta = dict(run_manager.metadata) if run_manager is not None else {}
        iteration, index = int(meta["iteration"]), int(meta["candidate_index"])
        attempt = int(meta.get("attempt", 0))
        with self._lock:
            self._calls[attempt] += 1
        parent = current_program(messages)
        if attempt == 0:
            text = fenced(with_comment(parent, f"draft of {iteration}/{index}"))
        elif (iteration + index) % 2 == 0:
            text = fenced(grown(parent, 0.01 * (index + 1)))
        else:
            text = fenced(with_comment(parent, f"resample of {iteration}/{index}"))
        usage = {"input_tokens": 100, "output_tokens": len(text) // 4 + 1, "total_tokens": 200}
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=text, usage_metadata=usage))]
        )


EVAL_LOG = "evaluations.log"


def run_child(run_dir: Path, kill_at: tuple[str, int] | None, marker: Path | None) -> None:
    """Body of a forked child: run (or resume) the novelty run, possibly dying at ``kill_at``."""
    from evoduet_graph import EvoDuetConfig, load_task, run

    install_hooks()
    POINTS.reset(kill_at, False, marker)
    evaluator = CountingEvaluator(InProcessEvaluator(), run_dir.parent / EVAL_LOG)
    cfg = EvoDuetConfig.model_validate(NOVELTY_RUN_CONFIG)
    run(load_task(SMOKE_TASK), cfg, llm=NoveltyModel(), evaluator=evaluator, run_dir=run_dir)


def fork_child(run_dir: Path, kill_at: tuple[str, int] | None = None) -> tuple[int, str | None]:
    """Run `run_child` in a fork; ``(wait status, label killed at)`` (``-9`` when killed)."""
    marker = run_dir.parent / "killed.json"
    marker.unlink(missing_ok=True)
    status = fork_run(run_child, run_dir, kill_at, marker)
    label = json.loads(marker.read_text())["label"] if marker.exists() else None
    return status, label


def outcome(scenario_dir: Path) -> dict[str, Any]:
    """What must equal between a killed-and-resumed run and the reference."""
    from evoduet_graph.config import EvoDuetConfig
    from evoduet_graph.population import restore_population
    from evoduet_graph.rundir.events import read_events
    from evoduet_graph.rundir.store import ProgramStore
    from evoduet_graph.startup import checked_config

    run_dir = scenario_dir / "run"
    conn = sqlite3.connect(f"file:{run_dir / 'programs.sqlite'}?mode=ro", uri=True)
    try:
        programs = {
            r[0]: [r[1], r[2], None if r[3] is None else round(r[3], 12), r[4]]
            for r in conn.execute("SELECT id, code_sha, status, score, valid FROM programs")
        }
    finally:
        conn.close()
    cfg = checked_config(EvoDuetConfig.model_validate(NOVELTY_RUN_CONFIG))
    store = ProgramStore(run_dir / "programs.sqlite")
    try:
        population = restore_population(store, cfg.population, seed=cfg.seed)[0].to_dict()
    finally:
        store.close()
    rejections = sorted(
        {
            (e["candidate_id"], e["attempt"], e["kind"], e["code_sha"])
            for e in read_events(run_dir / "events.jsonl")
            if e.get("event") == "novelty_rejected"
        }
    )
    best = json.loads((run_dir / "best_program.json").read_text())
    log = scenario_dir / EVAL_LOG
    lines = log.read_text().splitlines() if log.exists() else []
    evaluated = Counter(
        f"{rec['id']} {rec['sha']}" for rec in (json.loads(line) for line in lines if line)
    )
    return {
        "programs": programs,
        "population": population,
        "best": [best["id"], best["score"]],
        "rejections": [list(r) for r in rejections],
        "evaluated": dict(sorted(evaluated.items())),
    }


KILL_POINTS: list[tuple[str, int]] = [
    ("event:novelty_rejected", 1),  # right after the first rejection, before the resample
    ("llm:generate", 2),  # inside a resample (or the sibling's first draft)
    ("event:novelty_rejected", 4),
    ("store:put_program", 3),  # a candidate row (duplicate or generated) just written
    ("enter:evaluate", 2),
    ("enter:record", 3),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    out: Path = args.out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    ref_dir = out / "reference"
    ref_dir.mkdir()
    status, _ = fork_child(ref_dir / "run")
    if status != 0:
        print(json.dumps({"error": f"reference run failed ({status})"}))
        return 1
    reference = outcome(ref_dir)

    def unexpected(got: dict[str, Any]) -> list[str]:
        """Evaluations of anything but a candidate's final, accepted code."""
        bad = []
        for key in got["evaluated"]:
            pid, sha = key.split(" ")
            row = got["programs"].get(pid)
            if pid != "initial" and (row is None or row[0] != sha or row[1] != "evaluated"):
                bad.append(key)
        return bad

    summary: dict[str, Any] = {
        "reference": {
            "programs": len(reference["programs"]),
            "duplicates": sum(p[1] == "duplicate" for p in reference["programs"].values()),
            "rejections": len(reference["rejections"]),
            "evaluations": sum(reference["evaluated"].values()),
            "unexpected_evaluations": unexpected(reference),
        },
        "scenarios": [],
    }
    for n, point in enumerate(KILL_POINTS):
        sdir = out / f"kill-{n}"
        sdir.mkdir()
        status, label = fork_child(sdir / "run", point)
        problems = []
        if status != -signal.SIGKILL:
            problems.append(f"not killed at {point} (status {status})")
        else:
            for _ in range(3):  # resume until finished
                status, _ = fork_child(sdir / "run")
                if status == 0:
                    break
            if status != 0:
                problems.append(f"resume failed ({status})")
            else:
                got = outcome(sdir)
                for key in ("programs", "population", "best", "rejections"):
                    if got[key] != reference[key]:
                        problems.append(f"{key} differs from the reference")
                twice = [s for s, k in got["evaluated"].items() if k > 1]
                if twice:
                    problems.append(f"{len(twice)} program(s) evaluated twice")
                if unexpected(got):
                    problems.append(f"rejected drafts evaluated: {unexpected(got)}")
        summary["scenarios"].append({"point": list(point), "label": label, "problems": problems})
    summary["failed"] = [s for s in summary["scenarios"] if s["problems"]]
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

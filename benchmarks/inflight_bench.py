"""Iterations in flight: does ``max_iterations_in_flight: 4`` cut the wall time of a hosted run?

The target: with a scripted endpoint answering every call after 2 s and a 1 s evaluator,
20 gate-llm iterations with ``max_iterations_in_flight: 4`` take at most 0.35× the wall time
of k = 1, with the same number of recorded iterations and no lost or doubled record.

Setup (one process, the two cases back to back, same seed):

* the model is ``openai:scripted`` at a loopback OpenAI-compatible server
  (`tests.fake_openai_server.FaultyServer` with ``delay_s``) that answers each request after
  ``--delay`` seconds (default 2), every request on its own thread as a hosted endpoint
  would; the answers come from `tests.fakes.KnowledgeResponder` by prompt kind: the gate
  decides ``retrieve`` at every fourth gate call and ``no-op`` otherwise (by gate-call order,
  so both cases make the same decisions in total), the inner loop asks one query per round and
  scores the documents not scored yet in that loop, ``generate`` returns a full rewrite with a
  new radius;
* the task is ``tasks/smoke_polygon_area`` with the real sandboxed evaluator, held to at least
  ``--eval-seconds`` (default 1) per evaluation;
* the search backend is the real offline one (BM25 over the task's documents);
* gate ``llm`` (the method), R = 3 inner rounds, N = 1, ``--iterations`` (default 20).

It prints per case the wall time (graph run, start-up included), the recorded iterations, the
model calls, and the ratio k=4 / k=1; it checks that each case recorded every iteration once
(``record`` events), that every D_search impact belongs to a recorded iteration and is
credited once, and that the population holds no child of an unrecorded iteration. ``--json
OUT`` writes the figures. Run from the repository root::

    .venv/bin/python benchmarks/inflight_bench.py [--iterations 20] [--json OUT.json]

Exit code 0 when the target (ratio ≤ 0.35, same iteration count, no lost or doubled record)
is met, 1 when it is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.evaluation import EvaluationOutcome, SandboxEvaluator
from evoduet_graph.rundir.events import read_events
from evoduet_graph.search.database import SearchDatabase
from tests.fake_openai_server import FaultyServer
from tests.fakes import KnowledgeResponder
from tests.studio_fakes import responder_content

TASK = ROOT / "tasks" / "smoke_polygon_area"
TARGET_RATIO = 0.35
GATE_PATTERN = ("retrieve", "no-op", "no-op", "no-op")


class MinimumTimeEvaluator:
    """The real sandboxed evaluator, each evaluation held to at least ``seconds``."""

    def __init__(self, inner: SandboxEvaluator, seconds: float) -> None:
        self.inner = inner
        self.seconds = seconds
        self.workers = getattr(inner, "workers", None)
        self.task_sha256 = getattr(inner, "task_sha256", None)

    def evaluate(self, code: str, program_id: str = "candidate") -> EvaluationOutcome:
        start = time.monotonic()
        outcome = self.inner.evaluate(code, program_id)
        time.sleep(max(0.0, self.seconds - (time.monotonic() - start)))
        return outcome

    def __getattr__(self, name: str) -> Any:  # the sandbox's other attributes
        return getattr(self.inner, name)


def responder_for(task: Any) -> KnowledgeResponder:
    """Answers by prompt kind; ``generate`` rewrites the radius (a new child per call)."""
    lock = threading.Lock()
    counter = {"n": 0}

    def rewrite(_messages: Any) -> str:
        with lock:
            counter["n"] += 1
            n = counter["n"]
        code = task.initial_program.replace("radius = 0.6", f"radius = {0.6 + 0.001 * n:.4f}")
        return f"```python\n{code}\n```"

    return KnowledgeResponder(
        gate=lambda i, _text: GATE_PATTERN[i % len(GATE_PATTERN)], generate=rewrite
    )


def check_records(run_dir: Path, iterations: int) -> dict[str, Any]:
    """Recorded iterations, doubled / lost records and D_search consistency of one run."""
    events = list(read_events(run_dir / "events.jsonl"))
    records = Counter(
        e["iteration"] for e in events if e.get("event") == "node" and e.get("node") == "record"
    )
    impacts = Counter(
        (e["record_id"], e["iteration"]) for e in events if e.get("event") == "impact"
    )
    recorded = set(records)
    calls_by_node: Counter[str] = Counter()
    for e in events:
        if e.get("event") == "node" and e.get("llm_calls") and e.get("node") != "query_evolution":
            calls_by_node[str(e["node"])] += int(e["llm_calls"])
    db = SearchDatabase(run_dir / "search_database.jsonl")
    db_impacts = Counter((r.record_id, i.iteration) for r in db.records() for i in r.impacts)
    misplaced = [
        (r.record_id, i.iteration)
        for r in db.records()
        for i in r.impacts
        if i.iteration != r.iteration  # an iteration credits the record it made itself
    ]
    return {
        "recorded": len(recorded),
        "doubled": sorted(i for i, n in records.items() if n > 1),
        "lost": sorted(set(range(1, iterations + 1)) - recorded),
        "impacts": sum(db_impacts.values()),
        "impacts_doubled": sorted(
            {k for k, n in impacts.items() if n > 1} | {k for k, n in db_impacts.items() if n > 1}
        ),
        "impacts_of_unrecorded": sorted(k for k in db_impacts if k[1] not in recorded),
        "impacts_misplaced": misplaced,
        "decisions": dict(
            Counter(
                e["gate_decision"]
                for e in events
                if e.get("event") == "node" and e.get("node") == "gate" and "gate_decision" in e
            )
        ),
        "calls_by_node": dict(calls_by_node),
    }


def run_case(k: int, args: argparse.Namespace, server: FaultyServer, root: Path) -> dict[str, Any]:
    task = load_task(TASK)
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": args.iterations,
            "max_iterations_in_flight": k,
            "llm": {"model": "openai:scripted", "base_url": server.base_url, "max_retries": 0},
            "gate": {"mode": "llm"},
            "prompt": {"diff_based": False},
            "population": {"num_islands": 2},
            "retrieval": {"inner_rounds": 3},
            "seed": 7,
        }
    )
    evaluator = MinimumTimeEvaluator(SandboxEvaluator(task, workers=4), args.eval_seconds)
    run_dir = root / f"k{k}"
    before = len(server.requests)
    start = time.perf_counter()
    result = run(task, cfg, evaluator=evaluator, run_dir=run_dir)
    wall = time.perf_counter() - start
    checks = check_records(run_dir, args.iterations)
    return {
        "k": k,
        "wall_s": round(wall, 2),
        "iterations": result.iterations,
        "best_score": result.best_score,
        "stop_reason": result.stop_reason,
        "requests": len(server.requests) - before,
        **checks,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds per model call")
    parser.add_argument("--eval-seconds", type=float, default=1.0)
    parser.add_argument("--k", type=int, default=4, help="max_iterations_in_flight to compare")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "not-needed")
    task = load_task(TASK)
    responder = responder_for(task)
    cases = []
    with (
        FaultyServer(["ok"], content=responder_content(responder), delay_s=args.delay) as server,
        tempfile.TemporaryDirectory(prefix="inflight_bench_") as tmp,
    ):
        for k in (1, args.k):
            case = run_case(k, args, server, Path(tmp))
            cases.append(case)
            print(
                f"k={case['k']}: {case['wall_s']:.1f} s, {case['iterations']} iterations "
                f"({case['recorded']} recorded; doubled {case['doubled']}, lost "
                f"{case['lost']}), {case['requests']} model requests, {case['impacts']} "
                f"D_search impacts (doubled {case['impacts_doubled']}, of unrecorded "
                f"iterations {case['impacts_of_unrecorded']}), best {case['best_score']}",
                flush=True,
            )
            print(
                f"  gate decisions {case['decisions']}; model calls by node "
                f"{case['calls_by_node']}",
                flush=True,
            )
    one, many = cases
    ratio = many["wall_s"] / one["wall_s"]
    ok = (
        ratio <= TARGET_RATIO
        and one["recorded"] == many["recorded"] == args.iterations
        and not any(c["doubled"] or c["lost"] or c["impacts_doubled"] for c in cases)
        and not any(c["impacts_of_unrecorded"] or c["impacts_misplaced"] for c in cases)
    )
    print(
        f"ratio k={args.k} / k=1: {ratio:.3f} (target ≤ {TARGET_RATIO}); "
        f"{'met' if ok else 'MISSED'}"
    )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "setup": {
                        "iterations": args.iterations,
                        "delay_s": args.delay,
                        "eval_seconds": args.eval_seconds,
                        "gate_pattern": GATE_PATTERN,
                        "inner_rounds": 3,
                        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                        "load_1m": round(os.getloadavg()[0], 2),
                    },
                    "cases": cases,
                    "ratio": round(ratio, 4),
                    "target": TARGET_RATIO,
                    "met": ok,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

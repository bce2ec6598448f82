"""Evaluation throughput of the Ray executor with 1 vs 2 workers, against the local executor.

Builds a copy of the smoke task whose evaluator scores the program and then spends a known
amount of time per candidate (``--work cpu``: burns ``--work-s`` seconds of CPU time;
``--work sleep``: sleeps that long), starts a local Ray instance (``ray.init(num_cpus=...)``,
no dashboard), and times ``evaluate_many`` over ``--candidates`` distinct programs for:

* ``local``: `SandboxEvaluator` (sandboxed child processes of this process), workers 1 and 2;
* ``ray``: `RayEvaluator` (one Ray task per candidate, the same sandbox inside), workers 1
  and 2 (tasks in flight; each reserves 1 CPU).

Each configuration first evaluates one untimed warm-up batch (Ray worker processes start
there; its time is reported as ``cold_s``); then ``--repeats`` rounds time every configuration
in turn (interleaved, so the load of other processes on a shared machine spreads over all of
them). Printed per configuration: wall seconds (median over the rounds), candidates/s, the
ratio to the local executor with the same workers (same run, same machine), the speed-up over
1 worker of the same executor, and the overhead per candidate beyond the ideal
``candidates × work / workers``.

Run (package installed with the ``ray`` extra)::

    .venv/bin/python benchmarks/ray_bench.py --repeats 3 --out benchmarks/results/ray_bench.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from evoduet_graph.evaluation import SandboxEvaluator
from evoduet_graph.task import Task, load_task

SMOKE_TASK = ROOT / "tasks" / "smoke_polygon_area"

WORK_CODE = '''

import time as _bench_time

_BENCH_WORK = {work!r}
_BENCH_SECONDS = {seconds!r}
_score_points = evaluate


def evaluate(program_path):
    """The smoke task's evaluation, then a fixed amount of work (the benchmark's load)."""
    result = _score_points(program_path)
    if _BENCH_WORK == "cpu":
        end = _bench_time.process_time() + _BENCH_SECONDS
        spins = 0
        while _bench_time.process_time() < end:
            spins += 1
    else:
        _bench_time.sleep(_BENCH_SECONDS)
    return result
'''


def make_task(folder: Path, work: str, seconds: float) -> Task:
    """A copy of the smoke task whose evaluator adds ``seconds`` of ``work`` per candidate."""
    target = folder / f"smoke_{work}"
    shutil.copytree(SMOKE_TASK, target)
    evaluator = target / "evaluator.py"
    evaluator.write_text(
        evaluator.read_text() + WORK_CODE.format(work=work, seconds=seconds), encoding="utf-8"
    )
    return load_task(target)


def programs(task: Task, count: int, salt: int) -> list[str]:
    """``count`` distinct valid programs (radii 0.5 .. 0.99)."""
    out = []
    for i in range(count):
        radius = 0.5 + 0.49 * (i + 1) / (count + 1)
        code = task.initial_program.replace("radius = 0.6 ", f"radius = {radius:.6f} ", 1)
        out.append(f"{code}\n# candidate {salt}-{i}\n")
    return out


def batch(evaluator: Any, codes: list[str]) -> float:
    """Seconds ``evaluator.evaluate_many(codes)`` takes; every outcome must be valid.

    Raises:
        RuntimeError: an outcome is invalid (the benchmark would time failures).
    """
    start = time.perf_counter()
    outcomes = evaluator.evaluate_many(codes)
    wall = time.perf_counter() - start
    bad = [o.error for o in outcomes if not o.valid]
    if bad:
        raise RuntimeError(f"invalid outcomes in the benchmark: {bad[:3]}")
    return wall


def measure(
    configs: list[tuple[dict[str, Any], Any]], task: Task, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Time every configuration, interleaved, after one warm-up batch each.

    One untimed warm-up batch per configuration, then ``args.repeats`` rounds that time
    every configuration in turn (interleaved, so load from other processes spreads evenly).
    """
    cold = [batch(ev, programs(task, ev.workers, salt=-1)) for _, ev in configs]
    walls: list[list[float]] = [[] for _ in configs]
    for rep in range(args.repeats):
        for k, (_, evaluator) in enumerate(configs):
            walls[k].append(batch(evaluator, programs(task, args.candidates, salt=rep)))
    rows = []
    for (row, evaluator), cold_s, times in zip(configs, cold, walls, strict=True):
        wall = statistics.median(times)
        ideal = args.candidates * args.work_s / evaluator.workers
        rows.append(
            {
                **row,
                "wall_s": wall,
                "walls_s": times,
                "cold_s": cold_s,
                "candidates_per_s": args.candidates / wall,
                "overhead_ms_per_candidate": 1000 * (wall - ideal) / args.candidates,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=8, help="programs per timed batch")
    parser.add_argument("--work-s", type=float, default=1.0, help="seconds of work per candidate")
    parser.add_argument(
        "--work", default="cpu,sleep", help="comma-separated: cpu (burn CPU time), sleep"
    )
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--ray-cpus", type=int, default=2, help="num_cpus of the Ray instance")
    parser.add_argument("--repeats", type=int, default=1, help="timed batches (median)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    works = [w.strip() for w in args.work.split(",") if w.strip()]
    worker_counts = [int(w) for w in args.workers.split(",")]
    if not set(works) <= {"cpu", "sleep"} or min(worker_counts) < 1 or args.candidates < 1:
        parser.error("--work takes cpu and/or sleep; --workers and --candidates must be >= 1")

    import ray

    from evoduet_graph.evaluation.ray_executor import RayEvaluator

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    t0 = time.perf_counter()
    ray.init(
        num_cpus=args.ray_cpus,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
    )
    ray_start_s = time.perf_counter() - t0
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    load_start = os.getloadavg()[0]
    print(
        f"machine: {machine}, load average {load_start:.2f}; ray {ray.__version__} "
        f"(num_cpus={args.ray_cpus}, started in {ray_start_s:.1f} s); {args.candidates} "
        f"candidates x {args.work_s:g} s of work"
    )
    rows: list[dict[str, Any]] = []
    timeout = 10 * args.work_s + 30
    with tempfile.TemporaryDirectory(prefix="evoduet_ray_bench_") as tmp:
        for work in works:
            task = make_task(Path(tmp), work, args.work_s)
            configs: list[tuple[dict[str, Any], Any]] = []
            for executor in ("local", "ray"):
                for workers in worker_counts:
                    if executor == "local":
                        evaluator: Any = SandboxEvaluator(task, workers=workers, timeout_s=timeout)
                    else:
                        evaluator = RayEvaluator(task, workers=workers, timeout_s=timeout)
                    configs.append(
                        ({"work": work, "executor": executor, "workers": workers}, evaluator)
                    )
            rows.extend(measure(configs, task, args))
    ray.shutdown()
    load_end = os.getloadavg()[0]
    print(f"load average at the end: {load_end:.2f} (other processes share the cores)")

    def find(work: str, executor: str, workers: int) -> dict[str, Any]:
        return next(
            r for r in rows if (r["work"], r["executor"], r["workers"]) == (work, executor, workers)
        )

    header = (
        f"{'work':6} {'executor':8} {'workers':>7} {'wall s':>8} {'cand/s':>7} "
        f"{'vs local':>9} {'vs 1 worker':>11} {'overhead ms/cand':>17} {'cold s':>7}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        local = find(row["work"], "local", row["workers"])
        one = find(row["work"], row["executor"], worker_counts[0])
        row["ratio_vs_local"] = row["candidates_per_s"] / local["candidates_per_s"]
        row["speedup_vs_first_workers"] = row["candidates_per_s"] / one["candidates_per_s"]
        print(
            f"{row['work']:6} {row['executor']:8} {row['workers']:>7} {row['wall_s']:>8.2f} "
            f"{row['candidates_per_s']:>7.2f} {row['ratio_vs_local']:>8.2f}x "
            f"{row['speedup_vs_first_workers']:>10.2f}x {row['overhead_ms_per_candidate']:>17.0f} "
            f"{row['cold_s']:>7.2f}"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "date": time.strftime("%Y-%m-%d"),
            "machine": machine,
            "load_average_start_end": [load_start, load_end],
            "ray": ray.__version__,
            "ray_num_cpus": args.ray_cpus,
            "ray_start_s": ray_start_s,
            "candidates": args.candidates,
            "work_s": args.work_s,
            "repeats": args.repeats,
            "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
            "rows": rows,
        }
        args.out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

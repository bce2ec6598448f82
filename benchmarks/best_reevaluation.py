"""Does each run's best program score the same again? Re-evaluations of the delivered programs.

A run evaluates each child once. The task evaluators are deterministic, but a child can draw from
an unseeded random generator (``np.random.normal`` in place of the task's seeded
``default_rng``); its recorded score is then one draw, and a gain that rests on it may be luck.
This script evaluates the best program of every finished run that improved on its initial
program again, ``--repeats`` times, through the same sandbox, and prints one Markdown row per run:
the recorded metric and NDG, the re-evaluated metric's lowest, median and highest value, the NDG
of the median, and whether every evaluation gave the recorded value. From the repository root::

    .venv/bin/python benchmarks/best_reevaluation.py [benchmarks/results/local/run_records]
        [--tasks lennard_jones_10,heilbronn_triangle_7] [--repeats 10]

The argument is a folder of ``<task>/<method>/seed<k>/bench_run.json`` records (a bench folder's
``runs/`` or the committed records); each run's task comes from its recorded folder, else the
bundled task of its name. A run whose best is its initial program is left out (the initial
programs are seeded); when no run is left, a line on stderr says why.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evoduet_graph.bench.common import BenchError
from evoduet_graph.bench.output import RunRecord, collect_runs
from evoduet_graph.evaluation import SandboxEvaluator

DEFAULT_RECORDS = ROOT / "benchmarks" / "results" / "local" / "run_records"


def reevaluate(record: RunRecord, repeats: int) -> list[float | None]:
    """The task metric of the run's best program over ``repeats`` sandboxed evaluations."""
    assert record.task is not None and record.outcome is not None
    evaluator = SandboxEvaluator(record.task, workers=1)
    code = record.outcome.best_code or ""
    values = []
    for k in range(repeats):
        outcome = evaluator.evaluate(code, f"reeval{k}")
        values.append(record.task.metric_value(outcome.metrics) if outcome.valid else None)
    return values


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}%"


def row(record: RunRecord, values: list[float | None]) -> str:
    """One Markdown row: recorded metric and NDG, re-evaluated range and median, verdict."""
    assert record.outcome is not None and record.outcome.best is not None
    task, method, seed = record.key
    recorded = record.outcome.best
    scored = [v for v in values if v is not None]
    head = f"| {task} / {method} / seed{seed} | {recorded:.5g} | {_pct(record.ndg(recorded))} |"
    if not scored:
        return f"{head} no valid re-evaluation | | |"
    median = statistics.median(scored)
    same = len(scored) == len(values) and all(v == recorded for v in scored)
    verdict = "yes" if same else f"no ({len(set(scored))} distinct values)"
    invalid = len(values) - len(scored)
    if invalid:
        verdict += f", {invalid} invalid"
    return (
        f"{head} {min(scored):.5g} / {median:.5g} / {max(scored):.5g} | "
        f"{_pct(record.ndg(median))} | {verdict} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", type=Path, nargs="?", default=DEFAULT_RECORDS)
    parser.add_argument("--tasks", default="", help="comma-separated; default: all")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    if not args.records.is_dir():
        print(f"error: {args.records} is not a folder of run records", file=sys.stderr)
        return 2
    tasks = {t for t in args.tasks.split(",") if t}
    try:
        runs = collect_runs(args.records, runs=args.records)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not runs:
        print(
            f"error: no run records (<task>/<method>/seed<k>/bench_run.json) under {args.records}",
            file=sys.stderr,
        )
        return 2
    finished = {r.key[0] for r in runs if r.outcome is not None}
    if missing := sorted(tasks - finished):
        print(
            f"error: no finished runs of task(s) {', '.join(missing)}; "
            f"tasks with finished runs: {', '.join(sorted(finished)) or '(none)'}",
            file=sys.stderr,
        )
        return 2
    improved = [
        r
        for r in runs
        if r.outcome is not None
        and (not tasks or r.key[0] in tasks)
        and r.outcome.best is not None
        and r.outcome.best != r.outcome.initial
        and r.outcome.best_code
    ]
    records = [r for r in improved if r.task is not None]
    print(
        f"| run | recorded best | NDG | re-evaluated ×{args.repeats}: min / median / max "
        "| NDG of the median | same every time |"
    )
    print("|---|---|---|---|---|---|")
    if not finished:
        print(f"no finished runs under {args.records}: nothing to re-evaluate", file=sys.stderr)
    elif not improved:
        scope = f" of task(s) {', '.join(sorted(tasks))}" if tasks else ""
        print(
            f"no finished run{scope} improved on its initial program: nothing to re-evaluate",
            file=sys.stderr,
        )
    for record in improved:
        if record.task is None:
            task, method, seed = record.key
            print(
                f"left out {task} / {method} / seed{seed}: its task is neither in its recorded "
                "folder nor bundled",
                file=sys.stderr,
            )
    for record in records:
        print(row(record, reevaluate(record, args.repeats)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

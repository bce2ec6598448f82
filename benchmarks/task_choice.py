"""Which tasks the local protocol takes: the fixed rule applied to the baseline's run records.

`benchmarks/protocols/local_candidates.yaml` fixed this rule before any candidate's run. A task
qualifies on the baseline's runs alone (openevolve-mode, so the choice cannot favour EvoDuet)
when, over its three seeds:

1. at least half of its children are valid, pooled over the seeds (the bench summary's
   `VALID_SHARE_FLOOR`);
2. at least one seed improves on the initial program (NDG > 0);
3. no seed reaches the reference (NDG < 100).

`local.yaml` takes the first ``--need`` qualifying tasks in the fixed ``--order``. A task is
decided early when its runs so far already settle a part of the rule: it fails when even
all-valid children still to come could not lift the pooled share to half, or when a finished
seed reached the reference. An unfinished run's children (read from its program store in a bench
folder) count toward that early "cannot reach half". From the repository root::

    .venv/bin/python benchmarks/task_choice.py <bench-out>            # a bench folder
    .venv/bin/python benchmarks/task_choice.py benchmarks/results/local/run_records --records
    .venv/bin/python benchmarks/task_choice.py <bench-out> --save-unfinished <records>

The last writes each unfinished run's children beside the committed records (a run stopped
once its task could no longer qualify has no finished record), so that ``--records`` reaches
the verdicts the bench folder gave.

Prints a Markdown table (valid children and NDG per seed, the pooled share, the verdict and
why) and the tasks taken.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evoduet_graph.bench.common import write_json
from evoduet_graph.bench.output import RunRecord, collect_runs
from evoduet_graph.bench.tables import VALID_SHARE_FLOOR
from evoduet_graph.rundir.read import load_programs, read_json

ORDER = (
    "lennard_jones_10",
    "circle_packing_10",
    "heilbronn_triangle_7",
    "autocorrelation_c3",
    "hadamard_29",
    "sums_diffs",
    "heilbronn_triangle_11",
    "lennard_jones_13",
    "pressure_vessel",
)
"""The order fixed in `local_candidates.yaml`: the first qualifying tasks in it are taken."""


@dataclass
class Seed:
    """One baseline run: its valid children, children and NDG (%).

    An unfinished run (``finished`` false) counts the children its program store holds; they
    are final, so they settle the valid share early, but its NDG is None.
    """

    seed: int
    valid: int
    children: int
    ndg: float | None
    finished: bool = True


@dataclass
class Verdict:
    """A task's standing under the rule.

    Attributes:
        task: the task's name.
        seeds: its baseline runs by seed, an unfinished one with its children so far.
        state: ``qualifies``, ``fails`` or ``open`` (its runs so far do not settle it).
        why: the reason, in words.
    """

    task: str
    seeds: list[Seed] = field(default_factory=list)
    state: str = "open"
    why: str = ""

    @property
    def valid(self) -> int:
        """Valid children over its runs so far."""
        return sum(s.valid for s in self.seeds)

    @property
    def children(self) -> int:
        """Children over its runs so far."""
        return sum(s.children for s in self.seeds)


CHILDREN = "children.json"
"""Beside an unfinished run's committed record: its children so far (`save_unfinished`)."""


def _children(runs: Path, key: tuple[str, str, int]) -> list[dict[str, Any]]:
    """An unfinished run's children: its program store in a bench folder, else `CHILDREN`."""
    folder = runs / key[0] / key[1] / f"seed{key[2]}"
    programs = load_programs(folder / "run" / "programs.sqlite")
    if programs is not None:
        return [
            {"iteration": p.iteration, "valid": p.valid, "status": p.status, "error": p.error}
            for p in programs
            if p.iteration > 0
        ]
    saved = read_json(folder / CHILDREN)
    return list(saved.get("children") or []) if saved else []


def _seed(record: RunRecord, runs: Path | None) -> Seed | None:
    """A finished run's figures from its record; an unfinished one's from its children."""
    outcome = record.outcome
    if outcome is None or "children" not in outcome.details:
        children = _children(runs, record.key) if runs else []
        if not children:
            return None
        valid = sum(bool(c.get("valid")) for c in children)
        return Seed(record.key[2], valid, len(children), None, finished=False)
    return Seed(
        seed=record.key[2],
        valid=int(outcome.details["valid_children"]),
        children=int(outcome.details["children"]),
        ndg=record.ndg(outcome.best),
    )


def judge(task: str, seeds: list[Seed], n_seeds: int, iterations: int) -> Verdict:
    """The rule on one task's baseline runs so far (see the module docstring).

    Args:
        task: the task's name.
        seeds: its runs (any order), unfinished ones with the children they have so far.
        n_seeds: how many seeds the protocol runs per task.
        iterations: children per run (one per iteration), for the early "cannot reach half".
    """
    verdict = Verdict(task, sorted(seeds, key=lambda s: s.seed))
    ndgs = [s.ndg for s in verdict.seeds]
    finished = sum(s.finished for s in seeds)
    left = max(0, n_seeds - len(seeds)) * iterations + sum(
        max(0, iterations - s.children) for s in seeds if not s.finished
    )
    best_share = (
        (verdict.valid + left) / (verdict.children + left) if verdict.children + left else 0
    )
    if any(n is not None and n >= 100 for n in ndgs):
        verdict.state, verdict.why = "fails", "a seed reached the reference (NDG 100)"
    elif best_share < VALID_SHARE_FLOOR:
        verdict.state = "fails"
        verdict.why = f"under {VALID_SHARE_FLOOR:.0%} valid" + (
            f" even if the {left} children still to come were all valid" if left else ""
        )
    elif finished < n_seeds:
        verdict.why = f"{finished} of {n_seeds} seeds finished"
    elif not any(n is not None and n > 0 for n in ndgs):
        verdict.state, verdict.why = "fails", "no seed improved on the initial program"
    else:
        verdict.state, verdict.why = "qualifies", ""
    return verdict


def choose(
    records: list[RunRecord],
    order: tuple[str, ...] = ORDER,
    *,
    method: str = "openevolve-mode",
    n_seeds: int = 3,
    iterations: int = 15,
    need: int = 3,
    runs: Path | None = None,
) -> tuple[list[Verdict], list[str] | None]:
    """Every task's verdict in ``order`` and the tasks taken.

    ``runs``: the bench's ``runs/`` folder, where an unfinished run's children are read.

    Returns:
        The verdicts, and the first ``need`` qualifying tasks once every task before the last
        of them is decided (None while an undecided task could still change the choice).
    """
    by_task: dict[str, list[Seed]] = {t: [] for t in order}
    for rec in records:
        task, rec_method, _ = rec.key
        seed = _seed(rec, runs) if rec_method == method and task in by_task else None
        if seed is not None:
            by_task[task].append(seed)
    # committed records: a stopped run has no record, only its saved children
    for path in sorted(runs.glob(f"*/{method}/seed*/{CHILDREN}")) if runs else []:
        task, k = path.parts[-4], int(path.parent.name.removeprefix("seed"))
        if task in by_task and all(s.seed != k for s in by_task[task]):
            children = _children(runs, (task, method, k)) if runs else []
            valid = sum(bool(c.get("valid")) for c in children)
            by_task[task].append(Seed(k, valid, len(children), None, finished=False))
    verdicts = [judge(t, by_task[t], n_seeds, iterations) for t in order]
    taken: list[str] = []
    for v in verdicts:
        if len(taken) == need:
            break
        if v.state == "open":
            return verdicts, None
        if v.state == "qualifies":
            taken.append(v.task)
    return verdicts, taken if len(taken) == need else None


def _ndg(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return "0" if value == 0 else f"{value:.2f}%"


def table(verdicts: list[Verdict], n_seeds: int = 3) -> list[str]:
    """The Markdown table: valid/children and NDG per seed, the pooled share, the verdict."""
    head = ["task", *(f"seed {k}" for k in range(1, n_seeds + 1)), "valid, pooled", "NDG per seed"]
    lines = ["| " + " | ".join([*head, "verdict"]) + " |", "|" + "---|" * (len(head) + 1)]
    for v in verdicts:
        seeds = {s.seed: s for s in v.seeds}
        cells = [
            f"{seeds[k].valid}/{seeds[k].children}{'' if seeds[k].finished else ', unfinished'}"
            if k in seeds
            else "–"
            for k in range(1, n_seeds + 1)
        ]
        pooled = (
            f"{v.valid}/{v.children} = {100 * v.valid / v.children:.0f}%" if v.children else "–"
        )
        ndgs = ", ".join(_ndg(seeds[k].ndg) if k in seeds else "–" for k in range(1, n_seeds + 1))
        verdict = v.state + (f": {v.why}" if v.why else "")
        lines.append("| " + " | ".join([v.task, *cells, pooled, ndgs, verdict]) + " |")
    return lines


def save_unfinished(runs: Path, records: list[RunRecord], dest: Path) -> list[Path]:
    """Write each unfinished run's children next to its record under ``dest``.

    The committed run records hold finished runs only; a run stopped once its task could no
    longer qualify keeps its children here (iteration, valid, status, reason), so that
    ``--records`` reaches the same verdicts as the bench folder did.
    """
    written = []
    for rec in records:
        if rec.outcome is not None:
            continue
        children = _children(runs, rec.key)
        if not children:
            continue
        task, method, seed = rec.key
        path = dest / task / method / f"seed{seed}" / CHILDREN
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {"task": task, "method": method, "seed": seed, "children": children})
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Print the table and the tasks taken."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="a bench folder (its runs/), or a records folder")
    parser.add_argument(
        "--records",
        action="store_true",
        help="OUT holds <task>/<method>/seed<k>/bench_run.json directly (the committed records)",
    )
    parser.add_argument("--order", default=",".join(ORDER), help="the fixed task order")
    parser.add_argument("--need", type=int, default=3, help="how many tasks to take")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per task")
    parser.add_argument("--iterations", type=int, default=15, help="iterations per run")
    parser.add_argument(
        "--save-unfinished",
        type=Path,
        metavar="RECORDS",
        help=f"write each unfinished run's children to RECORDS/<task>/<method>/seed<k>/{CHILDREN}",
    )
    args = parser.parse_args(argv)
    folder = args.out if args.records else args.out / "runs"
    if not folder.is_dir():
        parser.error(f"no such folder: {folder}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.records:
            shutil.copytree(args.out, Path(tmp) / "runs")
            runs = Path(tmp) / "runs"
            records = collect_runs(Path(tmp))
        else:
            runs = folder
            records = collect_runs(args.out)
        if not records:
            parser.error(f"no bench_run.json under {folder}/<task>/<method>/seed<k>/")
        if args.save_unfinished and not args.records:
            for path in save_unfinished(runs, records, args.save_unfinished):
                print(f"wrote {path}", file=sys.stderr)
        return _print_choice(args, records, runs)


def _print_choice(args: argparse.Namespace, records: list[RunRecord], runs: Path) -> int:
    order = tuple(t.strip() for t in args.order.split(",") if t.strip())
    verdicts, taken = choose(
        records,
        order,
        n_seeds=args.seeds,
        iterations=args.iterations,
        need=args.need,
        runs=runs,
    )
    print("\n".join(table(verdicts, args.seeds)))
    print()
    print(f"taken: {', '.join(taken)}" if taken else "taken: not decided yet")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

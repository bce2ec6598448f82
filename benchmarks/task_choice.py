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
import re
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

_SEED_FOLDER = re.compile(r"seed(\d+)")


class RecordError(ValueError):
    """A run record or saved children file that the rule cannot read: named, never guessed."""


def _children(folder: Path) -> list[dict[str, Any]]:
    """An unfinished run's children: its program store in a bench folder, else `CHILDREN`."""
    store = folder / "run" / "programs.sqlite"
    if store.exists():
        programs = load_programs(store)
        if programs is None:
            raise RecordError(f"{store}: not a readable program store")
        return [
            {"iteration": p.iteration, "valid": p.valid, "status": p.status, "error": p.error}
            for p in programs
            if p.iteration > 0
        ]
    if not (folder / CHILDREN).exists():
        return []
    saved = read_json(folder / CHILDREN)
    children = saved.get("children") if isinstance(saved, dict) else None
    if not isinstance(children, list) or not all(
        isinstance(c, dict) and isinstance(c.get("valid"), bool) for c in children
    ):
        raise RecordError(
            f"{folder / CHILDREN}: expected {{'children': [{{'valid': true|false, ...}}, ...]}}"
        )
    return children


def _unfinished(folder: Path, seed: int) -> Seed | None:
    children = _children(folder)
    if not children:
        return None
    valid = sum(c["valid"] for c in children)
    return Seed(seed, valid, len(children), None, finished=False)


def _seed(record: RunRecord, runs: Path | None) -> Seed | None:
    """A finished run's figures from its record; an unfinished one's from its children."""
    task, method, k = record.key
    outcome = record.outcome
    if outcome is None:
        return _unfinished(runs / task / method / f"seed{k}", k) if runs else None
    try:
        valid = int(outcome.details["valid_children"])
        children = int(outcome.details["children"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(
            f"{task}/{method}/seed{k}: the finished record has no valid_children/children counts"
            f" ({exc!r})"
        ) from None
    if not 0 <= valid <= children:
        raise RecordError(f"{task}/{method}/seed{k}: {valid} valid of {children} children")
    return Seed(seed=k, valid=valid, children=children, ndg=record.ndg(outcome.best))


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
    unknown = [s.seed for s in seeds if s.finished and s.ndg is None]
    if any(n is not None and n >= 100 for n in ndgs):
        verdict.state, verdict.why = "fails", "a seed reached the reference (NDG 100)"
    elif best_share < VALID_SHARE_FLOOR:
        verdict.state = "fails"
        verdict.why = f"under {VALID_SHARE_FLOOR:.0%} valid" + (
            f" even if the {left} children still to come were all valid" if left else ""
        )
    elif finished < n_seeds:
        verdict.why = f"{finished} of {n_seeds} seeds finished"
    elif unknown:
        verdict.why = (
            f"NDG unknown on seed {', '.join(map(str, unknown))} (no best metric, or the task "
            "cannot be loaded): cannot tell whether a seed improved"
        )
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
    by_task: dict[str, dict[int, Seed]] = {t: {} for t in order}

    def add(task: str, seed: Seed | None) -> None:
        if seed is None or not 1 <= seed.seed <= n_seeds:
            return  # a seed outside the protocol's does not count
        if seed.seed in by_task[task]:
            raise RecordError(f"{task}/{method}: two runs of seed {seed.seed}")
        by_task[task][seed.seed] = seed

    for rec in records:
        task, rec_method, _ = rec.key
        if rec_method == method and task in by_task:
            add(task, _seed(rec, runs))
    # committed records: a stopped run has no record, only its saved children
    for path in sorted(runs.glob(f"*/{method}/*/{CHILDREN}")) if runs else []:
        task, match = path.parts[-4], _SEED_FOLDER.fullmatch(path.parent.name)
        if match is None:
            raise RecordError(f"{path}: its folder is not named seed<k>")
        k = int(match.group(1))
        if task in by_task and not (path.parent / "bench_run.json").exists():
            add(task, _unfinished(path.parent, k))  # else its record was read above
    verdicts = [judge(t, list(by_task[t].values()), n_seeds, iterations) for t in order]
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

    Run it with the bench stopped: a run still going is saved as it stands.

    The committed run records hold finished runs only; a run stopped once its task could no
    longer qualify keeps its children here (iteration, valid, status, reason), so that
    ``--records`` reaches the same verdicts as the bench folder did.
    """
    written = []
    for rec in records:
        if rec.outcome is not None:
            continue
        task, method, seed = rec.key
        children = _children(runs / task / method / f"seed{seed}")
        if not children:
            continue
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
    for name in ("need", "seeds", "iterations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    order = tuple(t.strip() for t in args.order.split(",") if t.strip())
    if not order or len(set(order)) < len(order):
        parser.error("--order must name each task once")
    if args.save_unfinished and args.records:
        parser.error("--save-unfinished reads a bench folder's runs, not committed records")
    folder = args.out if args.records else args.out / "runs"
    if not folder.is_dir():
        parser.error(f"no such folder: {folder}")
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs" if args.records else folder
        if args.records:
            shutil.copytree(args.out, runs)
        try:
            records = collect_runs(runs.parent)
            if args.save_unfinished:
                for path in save_unfinished(runs, records, args.save_unfinished):
                    print(f"wrote {path}", file=sys.stderr)
            verdicts, taken = choose(
                records,
                order,
                n_seeds=args.seeds,
                iterations=args.iterations,
                need=args.need,
                runs=runs,
            )
        except (RecordError, TypeError, ValueError, KeyError, OSError) as exc:
            parser.error(f"cannot read the run records: {exc}")
    if not any(v.seeds for v in verdicts):
        parser.error(f"no run of the order's tasks under {folder}/<task>/<method>/seed<k>/")
    print("\n".join(table(verdicts, args.seeds)))
    print()
    if taken:
        print(f"taken: {', '.join(taken)}")
    elif any(v.state == "open" for v in verdicts):
        print("taken: not decided yet")
    else:
        qualified = [v.task for v in verdicts if v.state == "qualifies"]
        print(
            f"taken: none: every task in the order is decided and only {len(qualified)} of the "
            f"{args.need} needed qualify ({', '.join(qualified) or 'none'})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

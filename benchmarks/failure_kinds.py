"""What a bench's invalid children were: each one's recorded reason, sorted into kinds.

The bench summary gives the share of valid children per task and method; this says what the
rest were, from each run directory's ``programs.sqlite`` (the store keeps every child with its
status and the reason it was not used). Kinds, in the order they are tested:

* ``duplicate``: rejected before evaluation as a copy of its parent or of a population program
  (status ``duplicate``), or a rewrite identical to the current program;
* ``diff syntax``: does not compile, and the line it fails on is a unified diff's (a ``@@``
  hunk header, or a line that begins with ``+`` or ``-``): the model wrote diff markup into
  a full rewrite;
* ``syntax``: does not compile for another reason;
* ``markers``: the rewrite lost the EVOLVE-BLOCK markers and cannot be mapped back;
* ``name``: the evaluator raised ``NameError`` (a renamed entry point or a dropped line);
* ``timeout``: the evaluation ran out of time;
* ``other invalid``: any other reason (a wrong shape, an out-of-range value, a cut-off reply).

From the repository root, over run directories (a running run is read as far as it got)::

    .venv/bin/python benchmarks/failure_kinds.py <bench-out>/runs/<task>/<method>/seed*/run

One Markdown row per run and a total: children, valid, and the count of each kind.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evoduet_graph.rundir.read import load_programs
from evoduet_graph.rundir.store import ProgramRow

KINDS = ("duplicate", "diff syntax", "syntax", "markers", "name", "timeout", "other invalid")
"""The kinds of invalid child, in the order `kind` tests them."""

_FAILING_LINE = re.compile(r"\(line \d+: (.*)\)\s*$")
_DIFF_LINE = re.compile(r"@@|[+-]")
"""A failing line that starts so is diff markup: a statement cannot start with ``+``/``-``
and still be where compilation fails, short of a unary expression nobody writes alone."""


def kind(program: ProgramRow) -> str | None:
    """The kind of an invalid child (None for a valid one); see the module docstring."""
    if program.valid:
        return None
    error = (program.error or "").strip()
    first = error.splitlines()[0] if error else ""
    if program.status == "duplicate" or "identical to the current program" in first:
        return "duplicate"
    if "does not compile" in first or "SyntaxError" in first or "IndentationError" in first:
        line = _FAILING_LINE.search(first)
        if line and _DIFF_LINE.match(line.group(1).strip()):
            return "diff syntax"
        return "syntax"
    if "EVOLVE-BLOCK" in first:
        return "markers"
    if "NameError" in first:
        return "name"
    if first.startswith("timeout after") or "CPU time limit" in first:
        return "timeout"
    return "other invalid"


def count(run_dir: Path) -> Counter[str]:
    """``children``, ``valid`` and the count of each kind over a run's children."""
    tally: Counter[str] = Counter()
    for program in load_programs(run_dir / "programs.sqlite") or []:
        if program.iteration <= 0:
            continue
        tally["children"] += 1
        tally[kind(program) or "valid"] += 1
    return tally


def table(rows: list[tuple[str, Counter[str]]]) -> list[str]:
    """The Markdown table: one row per run, then the total."""
    head = ["run", "children", "valid", *KINDS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    total: Counter[str] = sum((tally for _, tally in rows), Counter())
    for label, tally in [*rows, ("total", total)]:
        cells = [str(tally[k]) for k in ("children", "valid", *KINDS)]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return lines


def _label(run_dir: Path) -> str:
    """``task/method/seedK`` for a bench run directory, else the folder's path."""
    parts = run_dir.resolve().parts
    if len(parts) >= 4 and parts[-1] == "run":
        return "/".join(parts[-4:-1])
    return str(run_dir)


def main(argv: list[str] | None = None) -> int:
    """Print the table over the run directories given."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    args = parser.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / "programs.sqlite").is_file()]
    if missing:
        parser.error(f"no programs.sqlite in: {', '.join(missing)}")
    print("\n".join(table([(_label(r), count(r)) for r in args.runs])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

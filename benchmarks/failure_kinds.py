"""What a bench's invalid children were: each one's recorded reason, sorted into kinds.

The bench summary gives the share of valid children per task and method; this says what the
rest were, from each run directory's ``programs.sqlite`` (the store keeps every child with its
status and the reason it was not used). Kinds, in the order they are tested:

* ``duplicate``: rejected before evaluation as a copy of its parent or of a population program
  (status ``duplicate``), or a rewrite identical to the current program;
* ``prompt markup``: does not compile, and the line it fails on is markup the prompt showed
  rather than code: a unified diff's (a ``@@`` hunk header, or a line that begins with ``+``
  or ``-``) or one of the prompt's cut-off notes (``... (10 more diff lines)``);
* ``syntax``: does not compile for another reason;
* ``markers``: the rewrite lost the EVOLVE-BLOCK markers and cannot be mapped back;
* ``name``: the evaluator raised ``NameError`` or ``UnboundLocalError`` (a renamed entry
  point or a dropped line);
* ``timeout``: the evaluation ran out of time (wall clock or CPU);
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

KINDS = ("duplicate", "prompt markup", "syntax", "markers", "name", "timeout", "other invalid")
"""The kinds of invalid child, in the order `kind` tests them."""

_FAILING_LINE = re.compile(r"\(line \d+: (.*)\)\s*$")
_MARKUP_LINE = re.compile(r"@@|[+-]|\.\.\. \(\d+ more ")
"""A failing line that starts so is the prompt's markup: a diff line (a statement starting
with ``+``/``-`` where compilation fails is, short of a unary expression nobody writes alone)
or a cut-off note."""


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
        if line and _MARKUP_LINE.match(line.group(1).strip()):
            return "prompt markup"
        return "syntax"
    if "EVOLVE-BLOCK" in first:
        return "markers"
    if "NameError" in first or "UnboundLocalError" in first:
        return "name"
    if first.startswith("timeout after") or "CPU time limit" in first or "ran past" in first:
        return "timeout"
    return "other invalid"


def count(run_dir: Path) -> Counter[str]:
    """``children``, ``valid`` and the count of each kind over a run's children.

    Raises:
        ValueError: the run's ``programs.sqlite`` cannot be read as a program store.
    """
    programs = load_programs(run_dir / "programs.sqlite")
    if programs is None:
        raise ValueError(f"{run_dir / 'programs.sqlite'}: not a readable program store")
    tally: Counter[str] = Counter()
    for program in programs:
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
    if len(parts) >= 4 and parts[-1] == "run" and re.fullmatch(r"seed\d+", parts[-2]):
        return "/".join(parts[-4:-1])
    return str(run_dir)


def main(argv: list[str] | None = None) -> int:
    """Print the table over the run directories given."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    args = parser.parse_args(argv)
    runs = list(dict.fromkeys(r.resolve() for r in args.runs))  # a run given twice counts once
    missing = [str(r) for r in runs if not (r / "programs.sqlite").is_file()]
    if missing:
        parser.error(f"no programs.sqlite in: {', '.join(missing)}")
    try:
        rows = [(_label(r), count(r)) for r in runs]
    except ValueError as exc:
        parser.error(str(exc))
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

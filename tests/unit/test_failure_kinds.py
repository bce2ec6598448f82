"""What a bench's invalid children were (`benchmarks/failure_kinds.py`)."""

from __future__ import annotations

import pytest

from evoduet_graph.rundir.store import ProgramRow, ProgramStore
from tests.conftest import ROOT, load_script

fk = load_script(ROOT / "benchmarks" / "failure_kinds.py")


def _row(i: int, status: str, error: str | None = None, valid: bool = False) -> ProgramRow:
    return ProgramRow(
        id=f"c{i}",
        code=None if status == "invalid" else "x = 1\n",
        parent_id="p",
        iteration=i,
        kind="rewrite",
        status=status,
        valid=valid,
        error=error,
    )


# The reasons as the runs record them (copied from local bench runs).
CHILDREN = [
    (_row(1, "evaluated", valid=True), None),
    (
        _row(2, "duplicate", "near-duplicate: exact duplicate of initial after normalisation"),
        "duplicate",
    ),
    (_row(3, "invalid", "the rewrite is identical to the current program"), "duplicate"),
    (
        _row(
            4,
            "invalid",
            "the program does not compile: SyntaxError: invalid syntax "
            "(line 27: @@ -29,4 +30,58 @@)",
        ),
        "prompt markup",
    ),
    (
        _row(
            5,
            "invalid",
            "the program does not compile: SyntaxError: invalid syntax (line 12: +    r = 0.1)",
        ),
        "prompt markup",
    ),
    (
        _row(
            6,
            "invalid",
            "the program does not compile: SyntaxError: invalid syntax (line 3: -    n = 65536)",
        ),
        "prompt markup",
    ),
    (
        _row(
            7,
            "invalid",
            "the program does not compile: SyntaxError: '(' was never closed (line 49: x = f(1,)",
        ),
        "syntax",
    ),
    (
        _row(
            8, "invalid", "the rewrite dropped the EVOLVE-BLOCK markers and cannot be mapped back"
        ),
        "markers",
    ),
    (
        _row(9, "evaluated", "evaluate raised NameError: name 'construct_packing' is not defined"),
        "name",
    ),
    (_row(10, "evaluated", "timeout after 60 s"), "timeout"),
    (
        _row(
            12,
            "invalid",
            "the program does not compile: SyntaxError: invalid syntax "
            "(line 40: ... (10 more diff lines))",
        ),
        "prompt markup",
    ),
    (
        _row(
            13, "evaluated", "evaluate raised UnboundLocalError: cannot access local variable 'r'"
        ),
        "name",
    ),
    (
        _row(11, "evaluated", "evaluate raised ValueError: operands could not be broadcast"),
        "other invalid",
    ),
]


@pytest.mark.parametrize(("row", "expected"), CHILDREN, ids=[str(r.iteration) for r, _ in CHILDREN])
def test_each_recorded_reason_gets_its_kind(row, expected):
    assert fk.kind(row) == expected


def test_a_run_directorys_children_are_counted_by_kind_and_the_initial_program_is_not(
    tmp_path, capsys
):
    run = tmp_path / "runs" / "t" / "openevolve-mode" / "seed1" / "run"
    run.mkdir(parents=True)
    store = ProgramStore(run / "programs.sqlite")
    store.put_program(_row(0, "evaluated", valid=True).model_copy(update={"id": "p"}))
    for row, _ in CHILDREN:
        store.put_program(row)
    store.close()
    tally = fk.count(run)
    assert tally["children"] == len(CHILDREN)
    kinds = (tally["valid"], tally["duplicate"], tally["prompt markup"], tally["name"])
    assert kinds == (1, 2, 4, 2)
    assert fk.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "| t/openevolve-mode/seed1 | 13 | 1 | 2 | 4 | 1 | 1 | 2 | 1 | 1 |" in out
    assert "| total | 13 | 1 | 2 | 4 | 1 | 1 | 2 | 1 | 1 |" in out


def test_a_folder_without_a_program_store_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit):
        fk.main([str(tmp_path)])
    assert "no programs.sqlite in" in capsys.readouterr().err


def test_an_unreadable_program_store_is_refused_by_name_and_a_run_given_twice_counts_once(
    tmp_path, capsys
):
    run = tmp_path / "t" / "m" / "seed1" / "run"
    run.mkdir(parents=True)
    store = ProgramStore(run / "programs.sqlite")
    store.put_program(CHILDREN[0][0])
    store.close()
    assert fk.main([str(run), str(run / ".." / "run")]) == 0
    assert "| total | 1 | 1 |" in capsys.readouterr().out
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "programs.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(SystemExit):
        fk.main([str(bad)])
    assert "not a readable program store" in capsys.readouterr().err

"""Re-evaluating each run's delivered program (`benchmarks/best_reevaluation.py`)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, load_script

br = load_script(ROOT / "benchmarks" / "best_reevaluation.py")

TASK = "heilbronn_triangle_7"
SEEDED = (ROOT / "tasks" / TASK / "initial_program.py").read_text()
# the step's noise drawn from numpy's global generator, which nothing seeds
UNSEEDED = SEEDED.replace("rng.normal(0.0, 0.05, 3)", "np.random.normal(0.0, 0.05, 3)")


def _records(folder, programs):
    for seed, (code, best) in enumerate(programs, start=1):
        path = folder / TASK / "evoduet" / f"seed{seed}" / "bench_run.json"
        path.parent.mkdir(parents=True)
        outcome = {"iterations": 1, "initial": 0.01, "best": best, "best_code": code}
        path.write_text(
            json.dumps(
                {"task": TASK, "task_dir": "/gone", "method": "evoduet", "seed": seed}
                | {"status": "done", "outcome": outcome}
            )
        )
    return br.collect_runs(folder, runs=folder)


def test_a_program_drawing_from_an_unseeded_generator_scores_differently_again(tmp_path):
    seeded, unseeded = _records(tmp_path, [(SEEDED, 0.02), (UNSEEDED, 0.02)])
    assert SEEDED != UNSEEDED
    again = br.reevaluate(seeded, 3)
    assert None not in again and len(set(again)) == 1
    drawn = br.reevaluate(unseeded, 3)
    assert None not in drawn and len(set(drawn)) > 1


def test_the_row_says_whether_every_evaluation_gave_the_recorded_value(tmp_path):
    (record,) = _records(tmp_path, [(SEEDED, 0.02)])
    assert br.row(record, [0.02, 0.02, 0.02]).endswith("| yes |")
    line = br.row(record, [0.03, 0.01, None])
    assert "0.01 / 0.02 / 0.03" in line and "| no (2 distinct values), 1 invalid |" in line
    assert "no valid re-evaluation" in br.row(record, [None, None])


def test_only_improved_runs_are_read_and_a_missing_folder_is_refused(tmp_path, capsys):
    _records(tmp_path, [(SEEDED, 0.01)])  # best == initial: left out
    assert br.main([str(tmp_path), "--repeats", "1"]) == 0
    assert TASK not in capsys.readouterr().out
    assert br.main([str(tmp_path / "nowhere")]) == 2
    assert "not a folder of run records" in capsys.readouterr().err


def _record(folder, *, task=TASK, status="done", best=0.02, seed=1):
    path = folder / task / "evoduet" / f"seed{seed}" / "bench_run.json"
    path.parent.mkdir(parents=True)
    outcome = {"iterations": 1, "initial": 0.01, "best": best, "best_code": SEEDED}
    data = {"task": task, "task_dir": "/gone", "method": "evoduet", "seed": seed}
    path.write_text(json.dumps(data | {"status": status, "outcome": outcome}))


def test_a_record_that_does_not_read_back_is_one_error_line_naming_it(tmp_path, capsys):
    # passes once `collect_runs` checks each record's field types (a `BenchError` naming it)
    _record(tmp_path, best="abc")
    assert br.main([str(tmp_path), "--repeats", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and "bench_run.json" in captured.err
    assert "Traceback" not in captured.err


def test_when_no_run_is_listed_stderr_says_why(tmp_path, capsys):
    assert br.main([str(tmp_path)]) == 2  # an empty folder
    assert capsys.readouterr().err.startswith("error: no run records")
    _record(tmp_path / "running", status="running")
    assert br.main([str(tmp_path / "running")]) == 0
    assert capsys.readouterr().err.startswith("no finished runs under")
    _record(tmp_path / "flat", best=0.01)  # best == initial
    assert br.main([str(tmp_path / "flat")]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("| run |")
    assert captured.err.startswith("no finished run improved on its initial program")
    assert br.main([str(tmp_path / "flat"), "--tasks", f"{TASK},nosuch"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"error: no finished runs of task(s) nosuch; tasks with finished runs: {TASK}\n"
    )
    _record(tmp_path / "gone", task="no_such_task")  # improved, but its task is nowhere
    assert br.main([str(tmp_path / "gone")]) == 0
    assert "left out no_such_task / evoduet / seed1: its task" in capsys.readouterr().err


@pytest.mark.parametrize("repeats", ["0", "-3"])
def test_repeats_below_1_are_refused(tmp_path, capsys, repeats):
    _record(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        br.main([str(tmp_path), "--repeats", repeats])
    assert exit_.value.code == 2
    assert "--repeats" in capsys.readouterr().err

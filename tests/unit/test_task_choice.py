"""The local protocol's task choice (`benchmarks/task_choice.py`): the fixed rule, as written."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from evoduet_graph.bench.output import collect_runs
from evoduet_graph.rundir.store import ProgramRow, ProgramStore

_ROOT = Path(__file__).parents[2]
_SPEC = importlib.util.spec_from_file_location(
    "task_choice", _ROOT / "benchmarks" / "task_choice.py"
)
assert _SPEC is not None and _SPEC.loader is not None
tc = importlib.util.module_from_spec(_SPEC)
sys.modules["task_choice"] = tc  # its dataclasses look their module up
_SPEC.loader.exec_module(tc)

RECORDS = _ROOT / "benchmarks" / "results" / "local" / "run_records"


def _seeds(*rows: tuple[int, int, float | None]) -> list:
    return [tc.Seed(k, valid, 15, ndg) for k, (valid, ndg) in enumerate(rows, start=1)]


def _s(valid: int, ndg: float | None) -> tuple[int, float | None]:
    return valid, ndg


def test_a_task_qualifies_with_half_valid_one_improving_seed_and_none_at_the_reference():
    verdict = tc.judge("t", _seeds(_s(8, 0.0), _s(7, 12.5), _s(8, 0.0)), 3, 15)
    assert (verdict.state, verdict.valid, verdict.children) == ("qualifies", 23, 45)


def test_each_part_of_the_rule_can_fail_a_task():
    no_progress = tc.judge("t", _seeds(_s(15, 0.0), _s(15, 0.0), _s(15, 0.0)), 3, 15)
    at_reference = tc.judge("t", _seeds(_s(15, 10.0), _s(15, 100.0), _s(15, 0.0)), 3, 15)
    under_half = tc.judge("t", _seeds(_s(7, 50.0), _s(7, 0.0), _s(8, 0.0)), 3, 15)
    assert no_progress.state == at_reference.state == under_half.state == "fails"
    assert "no seed improved" in no_progress.why
    assert "reference" in at_reference.why
    assert "under 50% valid" in under_half.why


def test_a_task_is_open_until_its_seeds_settle_it_and_fails_early_when_half_is_out_of_reach():
    # 8/30 valid: 15 of 15 on the last seed would still make 23/45, just over half.
    reachable = tc.judge("t", _seeds(_s(1, 0.0), _s(7, 0.0)), 3, 15)
    # 7/30 valid: even 15 of 15 gives 22/45.
    out_of_reach = tc.judge("t", _seeds(_s(1, 0.0), _s(6, 0.0)), 3, 15)
    assert reachable.state == "open"
    assert out_of_reach.state == "fails" and "still to come" in out_of_reach.why
    assert tc.judge("t", _seeds(_s(15, 100.0)), 3, 15).state == "fails"


def _records_of(tmp_path: Path, tasks: dict[str, list[int]]) -> list:
    """The committed openevolve-mode records of ``tasks`` (only the seeds named)."""
    for task, seeds in tasks.items():
        for k in seeds:
            src = RECORDS / task / "openevolve-mode" / f"seed{k}"
            shutil.copytree(src, tmp_path / "runs" / task / "openevolve-mode" / f"seed{k}")
    return collect_runs(tmp_path)


def test_the_committed_baseline_records_give_the_verdicts_the_readme_states(tmp_path):
    records = _records_of(
        tmp_path,
        {
            "lennard_jones_10": [1, 2, 3],
            "heilbronn_triangle_7": [1, 2, 3],
            "autocorrelation_c3": [1, 2, 3],
        },
    )
    verdicts, taken = tc.choose(
        records, ("lennard_jones_10", "heilbronn_triangle_7", "autocorrelation_c3")
    )
    assert [(v.task, v.state) for v in verdicts] == [
        ("lennard_jones_10", "qualifies"),
        ("heilbronn_triangle_7", "qualifies"),
        ("autocorrelation_c3", "fails"),
    ]
    assert [round(s.ndg or 0, 2) for s in verdicts[1].seeds] == [0.0, 20.4, 0.0]
    assert taken is None  # two qualify, three are needed
    assert tc.choose(records, ("lennard_jones_10", "heilbronn_triangle_7"), need=2)[1] == [
        "lennard_jones_10",
        "heilbronn_triangle_7",
    ]


def test_an_undecided_task_earlier_in_the_order_holds_the_choice_back(tmp_path):
    records = _records_of(tmp_path, {"lennard_jones_10": [1, 2, 3], "heilbronn_triangle_7": [1, 2]})
    order = ("heilbronn_triangle_7", "lennard_jones_10")
    assert tc.choose(records, order, need=1)[1] is None
    assert tc.choose(records, tuple(reversed(order)), need=1)[1] == ["lennard_jones_10"]


def test_other_methods_runs_do_not_count(tmp_path):
    records = _records_of(tmp_path, {"lennard_jones_10": [1, 2, 3]})
    verdicts, taken = tc.choose(records, ("lennard_jones_10",), method="evoduet", need=1)
    assert verdicts[0].seeds == [] and taken is None


def test_the_table_prints_one_row_per_task_with_its_verdict(tmp_path, capsys):
    _records_of(tmp_path, {"lennard_jones_10": [1, 2, 3]})
    assert tc.main([str(tmp_path), "--order", "lennard_jones_10", "--need", "1"]) == 0
    out = capsys.readouterr().out
    assert (
        "| lennard_jones_10 | 10/15 | 9/15 | 4/15 | 23/45 = 51% | 0, 0, 9.71% | qualifies |" in out
    )
    assert "taken: lennard_jones_10" in out


def test_a_folder_without_run_records_is_refused_by_name(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    for argv in ([str(tmp_path / "nowhere")], [str(tmp_path)], [str(tmp_path), "--records"]):
        with pytest.raises(SystemExit) as exc:
            tc.main(argv)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "no such folder" in err and "no run of the order's tasks under" in err


def _stopped_circle_packing(runs: Path, error: str | None = None) -> None:
    """circle_packing_10's two finished seeds, and a third stopped after 7 invalid children."""
    base = RECORDS / "circle_packing_10" / "openevolve-mode"
    for k in (1, 2):
        shutil.copytree(
            base / f"seed{k}", runs / "circle_packing_10" / "openevolve-mode" / f"seed{k}"
        )
    seed3 = runs / "circle_packing_10" / "openevolve-mode" / "seed3"
    (seed3 / "run").mkdir(parents=True)
    record = {
        "status": "running",
        "task": "circle_packing_10",
        "method": "openevolve-mode",
        "seed": 3,
    }
    (seed3 / "bench_run.json").write_text(json.dumps(record), encoding="utf-8")
    store = ProgramStore(seed3 / "run" / "programs.sqlite")
    store.put_program(
        ProgramRow(
            id="p",
            code="x = 1\n",
            parent_id=None,
            iteration=0,
            kind="initial",
            status="evaluated",
            valid=True,
        )
    )
    for i in range(1, 8):
        child = ProgramRow(
            id=f"c{i}",
            code=None,
            parent_id="p",
            iteration=i,
            kind="rewrite",
            status="invalid",
            error=error,
        )
        store.put_program(child)
    store.close()


def test_an_unfinished_runs_children_settle_the_valid_share_early(tmp_path, capsys):
    # circle_packing_10's first two seeds: 8 valid of 30. A third seed stopped after 7 children,
    # none valid, leaves 8 to come: 16 of 45 at best, so the task fails without the rest.
    _stopped_circle_packing(tmp_path / "runs")
    verdicts, _ = tc.choose(
        collect_runs(tmp_path), ("circle_packing_10",), need=1, runs=tmp_path / "runs"
    )
    assert verdicts[0].state == "fails" and "the 8 children still to come" in verdicts[0].why
    # Without the program store the third seed is not counted, and 8/30 + 15 could reach half.
    assert tc.choose(collect_runs(tmp_path), ("circle_packing_10",), need=1)[0][0].state == "open"
    assert tc.main([str(tmp_path), "--order", "circle_packing_10", "--need", "1"]) == 0
    assert "| 1/15 | 7/15 | 0/7, unfinished | 8/37 = 22% |" in capsys.readouterr().out


def test_a_stopped_runs_saved_children_give_the_committed_records_the_same_verdict(tmp_path):
    bench = tmp_path / "bench"
    _stopped_circle_packing(bench / "runs", error="no code")
    # the committed records: finished runs' bench_run.json, the stopped run's children only
    records = tmp_path / "records"
    base = RECORDS / "circle_packing_10" / "openevolve-mode"
    for k in (1, 2):
        shutil.copytree(
            base / f"seed{k}", records / "circle_packing_10" / "openevolve-mode" / f"seed{k}"
        )
    written = tc.save_unfinished(bench / "runs", collect_runs(bench), records)
    assert written == [records / "circle_packing_10" / "openevolve-mode" / "seed3" / tc.CHILDREN]
    saved = json.loads(written[0].read_text(encoding="utf-8"))
    assert saved["children"][0] == {
        "iteration": 1,
        "valid": False,
        "status": "invalid",
        "error": "no code",
    }
    copy = tmp_path / "copy"
    shutil.copytree(records, copy / "runs")
    verdicts, _ = tc.choose(collect_runs(copy), ("circle_packing_10",), need=1, runs=copy / "runs")
    assert (verdicts[0].state, verdicts[0].valid, verdicts[0].children) == ("fails", 8, 37)


def _base_records(tmp_path: Path) -> Path:
    records = tmp_path / "records"
    for task in ("lennard_jones_10", "heilbronn_triangle_7"):
        shutil.copytree(RECORDS / task, records / task)
    return records


def _main_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        tc.main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_bad_records_and_options_get_one_clear_error_not_a_traceback_or_a_guess(tmp_path, capsys):
    records = _base_records(tmp_path)
    order = ["--order", "lennard_jones_10,heilbronn_triangle_7", "--need", "2"]
    garbage = records / "heilbronn_triangle_7" / "openevolve-mode" / "seed4" / tc.CHILDREN
    garbage.parent.mkdir()
    garbage.write_text('{"children": [1, 2]}', encoding="utf-8")
    assert "expected {'children'" in _main_error(
        capsys, [str(records), "--records", *order, "--seeds", "4"]
    )
    garbage.unlink()
    odd = records / "heilbronn_triangle_7" / "openevolve-mode" / "seedX" / tc.CHILDREN
    odd.parent.mkdir()
    odd.write_text('{"children": []}', encoding="utf-8")
    assert "not named seed<k>" in _main_error(capsys, [str(records), "--records", *order])
    shutil.rmtree(odd.parent)
    twin = records / "heilbronn_triangle_7" / "openevolve-mode" / "seed3_copy"
    shutil.copytree(twin.parent / "seed3", twin)
    assert "two runs of seed 3" in _main_error(capsys, [str(records), "--records", *order])
    shutil.rmtree(twin)
    counts = records / "lennard_jones_10" / "openevolve-mode" / "seed1" / "bench_run.json"
    data = json.loads(counts.read_text(encoding="utf-8"))
    del data["outcome"]["details"]["valid_children"]
    counts.write_text(json.dumps(data), encoding="utf-8")
    assert "no valid_children/children counts" in _main_error(
        capsys, [str(records), "--records", *order]
    )
    for bad in (["--need", "0"], ["--seeds", "0"], ["--iterations", "-1"]):
        assert "must be at least 1" in _main_error(capsys, [str(records), "--records", *bad])
    assert "each task once" in _main_error(capsys, [str(records), "--records", "--order", "a,a"])
    assert "not committed records" in _main_error(
        capsys, [str(records), "--records", "--save-unfinished", str(tmp_path / "x")]
    )


def test_an_unknown_ndg_keeps_a_task_open_instead_of_failing_it(tmp_path, capsys):
    records = _base_records(tmp_path)
    best = records / "lennard_jones_10" / "openevolve-mode" / "seed3" / "bench_run.json"
    data = json.loads(best.read_text(encoding="utf-8"))
    data["outcome"]["best"] = None
    best.write_text(json.dumps(data), encoding="utf-8")
    assert tc.main([str(records), "--records", "--order", "lennard_jones_10", "--need", "1"]) == 0
    out = capsys.readouterr().out
    assert "open: NDG unknown on seed 3" in out and "taken: not decided yet" in out


def test_when_every_task_is_decided_and_too_few_qualify_it_says_so(tmp_path, capsys):
    records = _base_records(tmp_path)
    order = "lennard_jones_10,heilbronn_triangle_7"
    assert tc.main([str(records), "--records", "--order", order, "--need", "3"]) == 0
    out = capsys.readouterr().out
    assert (
        "taken: none: every task in the order is decided and only 2 of the 3 needed qualify" in out
    )

"""Best-so-far curves against compute: seed bands (plots), equal-compute NDG (summary)."""

from __future__ import annotations

import pytest

from evoduet_graph import load_task
from evoduet_graph.bench.common import IterationPoint, MethodOutcome
from evoduet_graph.bench.curves import best_at, curve, seed_band
from evoduet_graph.bench.output import RunRecord
from evoduet_graph.bench.tables import write_plots, write_summary
from tests.conftest import SMOKE_TASK


def _points(rows: list[tuple[float | None, int, float | None]]) -> list[IterationPoint]:
    """Points from ``(best, tokens, wall_s)`` per iteration 0..n."""
    return [
        IterationPoint(i, best, llm_calls=i, tokens=tokens, wall_s=wall)
        for i, (best, tokens, wall) in enumerate(rows)
    ]


def test_a_curve_skips_unknown_points_and_keeps_the_last_best_at_a_repeated_x():
    points = _points([(1.0, 0, 0.0), (None, 50, 5.0), (2.0, 50, None), (3.0, 90, 9.0)])
    assert curve(points, "iteration") == [(0.0, 1.0), (2.0, 2.0), (3.0, 3.0)]
    assert curve(points, "tokens") == [(0.0, 1.0), (50.0, 2.0), (90.0, 3.0)]
    assert curve(points, "wall_s") == [(0.0, 1.0), (9.0, 3.0)]


def test_best_at_a_budget_is_the_step_function_of_the_run():
    points = _points([(1.0, 0, 0.0), (2.0, 100, 10.0), (4.0, 300, 30.0)])
    assert best_at(points, "tokens", 0) == 1.0
    assert best_at(points, "tokens", 99) == 1.0
    assert best_at(points, "tokens", 100) == 2.0
    assert best_at(points, "tokens", 10_000) == 4.0
    assert best_at(points, "wall_s", 29.9) == 2.0
    assert best_at(_points([(None, 0, 0.0), (2.0, 100, 10.0)]), "tokens", 50) is None


def test_a_seed_band_puts_seeds_with_different_grids_on_one_grid_up_to_the_shortest():
    a = [(0.0, 1.0), (100.0, 3.0), (400.0, 5.0)]
    b = [(0.0, 1.0), (250.0, 2.0), (300.0, 6.0)]
    band = seed_band([a, b])
    assert band.xs == [0.0, 100.0, 250.0, 300.0]  # 400 is past b's end
    assert band.low == [1.0, 1.0, 2.0, 3.0]
    assert band.high == [1.0, 3.0, 3.0, 6.0]
    assert band.mean == pytest.approx([1.0, 2.0, 2.5, 4.5])
    late = [(50.0, 7.0), (300.0, 8.0)]  # unobserved before x = 50
    assert seed_band([a, late]).xs == [50.0, 100.0, 300.0]
    assert seed_band([a, []]).xs == []


def _record(method: str, seed: int, rows: list[tuple[float, int, float]]) -> RunRecord:
    task = load_task(SMOKE_TASK)
    points = _points([(best, tokens, wall) for best, tokens, wall in rows])
    outcome = MethodOutcome(
        iterations=len(rows) - 1,
        initial=rows[0][0],
        best=rows[-1][0],
        points=points,
        tokens=rows[-1][1],
        wall_s=rows[-1][2],
    )
    data = {"task": task.name, "method": method, "seed": seed, "status": "done"}
    return RunRecord(task, data, outcome)


def test_the_summary_compares_methods_at_equal_tokens_and_wall_time(tmp_path):
    """A method that spends 3x the tokens per iteration is read at fewer iterations."""
    task = load_task(SMOKE_TASK)
    init, span = task.initial_score, task.sota_score - task.initial_score

    def at(share: float) -> float:
        return init + share * span

    cheap = _record(
        "openevolve-mode", 0, [(init, 0, 0.0), (at(0.1), 100, 10.0), (at(0.2), 200, 30.0)]
    )
    costly = _record("evoduet", 0, [(init, 0, 0.0), (at(0.5), 300, 30.0), (at(0.6), 600, 90.0)])
    summary = write_summary(tmp_path, [cheap, costly], {}).read_text()
    section = summary.split("## NDG (%) at equal compute")[1].split("\n## ")[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    header, *rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    by_budget = {row[1]: dict(zip(header, row, strict=True)) for row in rows}
    tokens, wall = by_budget["200 tokens"], by_budget["0.5 min"]
    assert (tokens["openevolve-mode"], tokens["evoduet"]) == ("20.0 (n=1)", "0.0 (n=1)")
    assert (wall["openevolve-mode"], wall["evoduet"]) == ("20.0 (n=1)", "50.0 (n=1)")
    # the headline table still reads the runs at their end
    assert "| 60.0 (n=1)" in summary.split("## NDG (%) per task")[1].split("\n## ")[0]
    paths = write_plots(tmp_path, [cheap, costly])
    assert [p.name for p in paths] == [f"best_{task.name}.png", "ndg.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths)


def test_one_method_has_no_equal_compute_table(tmp_path):
    task = load_task(SMOKE_TASK)
    only = _record("openevolve-mode", 0, [(task.initial_score, 0, 0.0), (1.0, 100, 10.0)])
    assert "equal compute" not in write_summary(tmp_path, [only], {}).read_text()


def test_a_difference_is_beyond_the_seed_spread_only_when_the_seed_ranges_are_apart():
    from evoduet_graph.bench.spread import difference

    apart = difference([5.0, 6.0, 7.0], [1.0, 2.0, 3.0])
    assert apart.delta == pytest.approx(4.0) and apart.apart
    assert apart.p_value == pytest.approx(0.1)  # 2 of the 20 splits of 3 + 3 runs
    one_lucky_seed = difference([0.0, 0.0, 9.7], [0.0, 0.0, 0.0])
    assert one_lucky_seed.delta == pytest.approx(9.7 / 3) and not one_lucky_seed.apart
    assert one_lucky_seed.p_value == pytest.approx(1.0)
    overlapping = difference([2.0, 4.0, 6.0], [1.0, 3.0, 5.0])
    assert not overlapping.apart and overlapping.p_value == pytest.approx(0.7)
    assert difference([0.0, 0.0], [0.0, 0.0]).p_value is None  # nothing varies
    assert difference([1.0, 2.0], [0.0]).p_value is None  # one seed: no test
    assert difference([], [1.0]).delta is None and not difference([], [1.0]).apart
    one_each = difference([4.1], [0.0])  # one run against one: no spread to exceed
    assert one_each.delta == pytest.approx(4.1) and not one_each.apart and not one_each.seeded
    assert not difference([4.1], [0.0, 0.0, 0.0]).apart


def test_the_summary_reads_each_method_against_openevolve_mode(tmp_path):
    task = load_task(SMOKE_TASK)
    init, span = task.initial_score, task.sota_score - task.initial_score
    records = []
    for seed, (base, evo) in enumerate([(0.0, 0.3), (0.1, 0.4), (0.05, 0.5)]):
        records.append(
            _record("openevolve-mode", seed, [(init, 0, 0.0), (init + base * span, 9, 1.0)])
        )
        records.append(_record("evoduet", seed, [(init, 0, 0.0), (init + evo * span, 9, 1.0)]))
    summary = write_summary(tmp_path, records, {}).read_text()
    section = summary.split("## NDG against openevolve-mode")[1].split("\n## ")[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| {task.name}"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == [task.name, "evoduet", "+35.0", "30.0 to 50.0", "0.0 to 10.0", "0.10", "yes"]
    alone = [r for r in records if r.key[1] == "evoduet"]
    assert "NDG against" not in write_summary(tmp_path, alone, {}).read_text()
    first_seeds = [r for r in records if r.key[2] == 0]  # one seed each: no spread to read
    summary = write_summary(tmp_path, first_seeds, {}).read_text()
    section = summary.split("## NDG against openevolve-mode")[1].split("\n## ")[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| {task.name}"))
    assert row.rstrip("| ").endswith("— (one seed)")


_NO_KNOWLEDGE = {
    key: None
    for key in (
        "rate_predicted_better",
        "n_predicted_better",
        "improved_predicted_better",
        "rate_no_documents",
        "n_no_documents",
        "improved_no_documents",
        "rank_rho",
        "rank_n",
        "rank_low",
        "rank_high",
        "repeated_url_share",
        "llm_usd",
        "search_credits",
    )
} | {"search_calls": 0}
"""A run's knowledge figures (`evoduet_graph.report.summary`) with nothing measured."""


def test_a_method_that_predicts_nothing_gets_no_correlation_rows(tmp_path):
    """The baseline and the oracle score no documents: named once, not an 'undefined' row."""
    task = load_task(SMOKE_TASK)
    init, span = task.initial_score, task.sota_score - task.initial_score
    records = []
    for seed in range(3):
        end = init + 0.1 * (seed + 1) * span
        for method in ("evoduet", "oracle", "openevolve-mode"):
            record = _record(method, seed, [(init, 0, 0.0), (end, 9, 1.0)])
            assert record.outcome is not None
            pairs = [[0.1 * k + seed, 0.2 * k] for k in range(4)] if method == "evoduet" else []
            if method != "openevolve-mode":
                record.outcome.details["knowledge"] = {**_NO_KNOWLEDGE, "prediction_pairs": pairs}
            records.append(record)
    summary = write_summary(tmp_path, records, {}).read_text()
    section = summary.split("## Predicted vs realised child score")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    assert [row.split("|")[1].strip() for row in rows] == ["evoduet"]
    assert "n = 12" in rows[0]
    assert "No predicted scores (no hypothetical evidence scoring): openevolve-mode, oracle." in (
        section
    )

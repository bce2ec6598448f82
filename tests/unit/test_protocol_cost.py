"""What a protocol costs, from a local bench's run records (`benchmarks/protocol_cost.py`)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import ROOT, load_script

pc = load_script(ROOT / "benchmarks" / "protocol_cost.py")


def _record(folder, task, method, seed, *, calls, tokens, queries=0, status="done"):
    knowledge = {"queries": queries, "search_calls": queries} if queries else {}
    data = {
        "task": task,
        "method": method,
        "seed": seed,
        "status": status,
        "outcome": {
            "iterations": 10,
            "initial": 0.0,
            "best": 0.0,
            "llm_calls": calls,
            "tokens": tokens,
            "details": {"knowledge": knowledge},
        },
    }
    path = folder / task / method / f"seed{seed}" / "bench_run.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))


def test_counts_per_iteration_pool_the_finished_runs_of_the_named_tasks(tmp_path):
    _record(tmp_path, "a", "openevolve-mode", 1, calls=10, tokens=1000)
    _record(tmp_path, "a", "openevolve-mode", 2, calls=30, tokens=3000)
    _record(tmp_path, "a", "evoduet", 1, calls=40, tokens=8000, queries=6)
    _record(tmp_path, "a", "evoduet", 2, calls=99, tokens=99, status="running")
    _record(tmp_path, "b", "evoduet", 1, calls=99, tokens=99, queries=99)
    counts = pc._local_counts(tmp_path, {"a"})
    assert counts["openevolve-mode"]["calls"] == 2.0  # 40 calls over 20 iterations
    assert counts["openevolve-mode"]["tokens"] == 200.0
    assert counts["evoduet"] == pytest.approx(
        {"calls": 4.0, "tokens": 800.0, "queries": 0.6, "search_calls": 0.6, "runs": 1}
    )
    bench = tmp_path / "bench"
    (bench / "runs").mkdir(parents=True)
    _record(bench / "runs", "a", "oracle", 1, calls=20, tokens=500)
    assert pc._local_counts(bench, set())["oracle"]["calls"] == 2.0  # a bench folder too


def test_the_cost_table_scales_the_local_counts_to_the_protocol(tmp_path, monkeypatch, capsys):
    _record(tmp_path, "a", "openevolve-mode", 1, calls=10, tokens=1000)
    _record(tmp_path, "a", "oracle", 1, calls=10, tokens=1500)
    _record(tmp_path, "a", "evoduet", 1, calls=40, tokens=8000, queries=6)
    argv = ["protocol_cost.py", str(ROOT / "benchmarks/protocols/paper.yaml")]
    monkeypatch.setattr(sys, "argv", [*argv, "--local", str(tmp_path)])
    assert pc.main() == 0
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and not line.startswith("| method")
    }
    paper = pc.load_protocol(ROOT / "benchmarks/protocols/paper.yaml")
    iterations = len(paper.tasks) * len(paper.seeds) * paper.iterations
    assert rows["openevolve-mode"][0] == f"{iterations:,}"  # one call per iteration
    assert rows["evoduet"][0] == f"{4 * iterations:,}"
    assert rows["evoduet"][3] == f"{round(0.6 * iterations):,}"  # Tavily: one per search
    assert rows["openevolve-mode-n8"][0] == f"{8 * iterations:,}"


def test_no_finished_records_is_a_clear_error(tmp_path):
    _record(tmp_path, "a", "evoduet", 1, calls=1, tokens=1, status="failed")
    with pytest.raises(pc.BenchError, match="no finished run records"):
        pc._local_counts(tmp_path, set())


def _main(monkeypatch, capsys, protocol, *args) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["protocol_cost.py", str(protocol), *args])
    rc = pc.main()
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _protocol(path, methods: str, extra: str = ""):
    path.write_text(f"tasks: [a]\nmethods: {methods}\nseeds: [0]\niterations: 10\n{extra}")
    return path


def _rows(out: str) -> dict[str, list[str]]:
    return {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in out.splitlines()
        if line.startswith("| ") and not line.startswith("| method")
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "cannot read it"),
        ("tasks: [a\n", "not valid YAML"),
        ("- a\n- b\n", "must hold a mapping"),
    ],
)
def test_an_unreadable_protocol_is_one_error_line_and_exit_2(
    tmp_path, monkeypatch, capsys, text, message
):
    _record(tmp_path, "a", "openevolve-mode", 1, calls=10, tokens=1000)
    protocol = tmp_path / "protocol.yaml"
    if text is not None:
        protocol.write_text(text)
    rc, out, err = _main(monkeypatch, capsys, protocol, "--local", str(tmp_path))
    assert rc == 2 and out == ""
    assert err.startswith(f"error: protocol {protocol}") and message in err


def test_a_method_without_local_runs_is_named_with_the_methods_that_have_some(
    tmp_path, monkeypatch, capsys
):
    records = tmp_path / "records"
    _record(records, "a", "openevolve-mode", 1, calls=10, tokens=1000)
    _record(records, "a", "oracle", 1, calls=10, tokens=1000)
    local = ["--local", str(records)]
    protocol = _protocol(tmp_path / "p.yaml", "[openevolve-mode, rerank]")
    rc, out, err = _main(monkeypatch, capsys, protocol, *local)
    assert (rc, out) == (2, "")
    assert err == (
        "error: no local runs of method 'rerank' to estimate from "
        "(local runs of: openevolve-mode, oracle)\n"
    )
    # an N > 1 row prices its extra children at openevolve-mode's counts: they must be there
    _record(tmp_path / "oracle_only", "a", "oracle", 1, calls=10, tokens=1000)
    n8 = "[oracle, {name: oracle-n8, method: oracle, config: {candidates: 8}}]"
    protocol = _protocol(tmp_path / "p.yaml", n8)
    rc, out, err = _main(monkeypatch, capsys, protocol, "--local", str(tmp_path / "oracle_only"))
    assert (rc, out) == (2, "")
    assert err.startswith("error: no local runs of method 'openevolve-mode' to estimate")
    assert "'oracle-n8'" in err and "(local runs of: oracle)" in err


@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5", "true"])
def test_a_variant_candidates_that_is_not_a_whole_number_of_at_least_1_is_refused(
    tmp_path, monkeypatch, capsys, value
):
    _record(tmp_path / "records", "a", "openevolve-mode", 1, calls=10, tokens=1000)
    methods = f"[{{name: wide, method: openevolve-mode, config: {{candidates: {value}}}}}]"
    protocol = _protocol(tmp_path / "p.yaml", methods)
    rc, out, err = _main(monkeypatch, capsys, protocol, "--local", str(tmp_path / "records"))
    assert (rc, out) == (2, "")
    assert err.startswith("error: method variant 'wide': config.candidates must be a whole")
    assert len(err.splitlines()) == 1


def test_the_protocol_candidates_are_every_method_n_unless_a_variant_sets_its_own(
    tmp_path, monkeypatch, capsys
):
    records = tmp_path / "records"
    _record(records, "a", "openevolve-mode", 1, calls=10, tokens=1000)  # 1 call an iteration
    _record(records, "a", "oracle", 1, calls=20, tokens=1000)  # 2 calls an iteration
    methods = "[openevolve-mode, oracle, {name: o2, method: oracle, config: {candidates: 2}}]"
    protocol = _protocol(tmp_path / "p.yaml", methods, "candidates: 4\n")
    rc, out, _ = _main(monkeypatch, capsys, protocol, "--local", str(records))
    assert rc == 0
    rows = _rows(out)  # 10 iterations: 1 task × 1 seed × 10
    assert rows["openevolve-mode"][0] == "40"  # 1 + 3 extra children at 1 call
    assert rows["oracle"][0] == "50"  # 2 + 3 extra children
    assert rows["o2"][0] == "30"  # 2 + 1 extra child


def test_requested_tasks_without_finished_local_runs_are_named(tmp_path, monkeypatch, capsys):
    records = tmp_path / "records"
    _record(records, "a", "openevolve-mode", 1, calls=10, tokens=1000)
    _record(records, "b", "openevolve-mode", 1, calls=10, tokens=1000)
    _record(records, "c", "openevolve-mode", 1, calls=10, tokens=1000, status="running")
    protocol = _protocol(tmp_path / "p.yaml", "[openevolve-mode]")
    local = ["--local", str(records)]
    rc, out, err = _main(monkeypatch, capsys, protocol, *local, "--tasks", "a,nosuch_task,c")
    assert (rc, out) == (2, "")
    assert err == "error: no finished local runs of task(s) c, nosuch_task; tasks with runs: a, b\n"
    rc, _, _ = _main(monkeypatch, capsys, protocol, *local, "--tasks", "a,b")
    assert rc == 0


@pytest.mark.parametrize("share", ["-0.1", "1.5", "nan"])
def test_an_output_share_outside_0_to_1_is_refused(tmp_path, monkeypatch, capsys, share):
    _record(tmp_path, "a", "openevolve-mode", 1, calls=10, tokens=1000)
    protocol = _protocol(tmp_path / "p.yaml", "[openevolve-mode]")
    with pytest.raises(SystemExit) as exit_:
        _main(monkeypatch, capsys, protocol, "--local", str(tmp_path), "--output-share", share)
    assert exit_.value.code == 2
    assert "--output-share" in capsys.readouterr().err

"""``evoduet view``: its JSON endpoints, and ``evoduet run --view``.

On a finished run, on a run still going, on partial and bad directories and on a bench folder.

Every run is a real ``evoduet run`` process against the scripted OpenAI-compatible server
(`tests.view_harness`); the view is a real ``evoduet view`` process read over HTTP.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from evoduet_graph.rundir.read import read_json
from tests.conftest import ROOT
from tests.view_harness import GATE_PATTERN, ViewProcess, scripted_run, scripted_server, start_run


def _files(rdir: Path) -> dict[str, tuple[int, int]]:
    """Every file of a run directory with its size and modification time."""
    return {
        str(p.relative_to(rdir)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(rdir.rglob("*"))
        if p.is_file()
    }


PRICES = (1.0, 2.0)
"""USD per million input / output tokens of the scripted model (``budget.prices``)."""


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("view")
    config = tmp / "priced.yaml"
    config.write_text(f"budget:\n  prices:\n    scripted: [{PRICES[0]}, {PRICES[1]}]\n")
    return scripted_run(tmp / "run", 4, "--config", str(config))


def test_endpoints_of_a_finished_run_and_nothing_written(finished: Path) -> None:
    before = _files(finished)
    with ViewProcess(finished) as view:
        runs = view.get("api/runs")["runs"]
        assert len(runs) == 1
        run = runs[0]
        assert run["finished"] is True and run["iterations"] == 4 and run["notices"] == []
        assert run["task"] == "smoke_polygon_area"

        tree = view.get("api/runs/0/programs")
        programs = {p["id"]: p for p in tree["programs"]}
        assert set(programs) == {"initial", *(f"it0000{i}-c0" for i in range(1, 5))}
        best = read_json(finished / "best_program.json")
        assert best is not None and tree["best_lineage"][-1] == best["id"]
        assert tree["best_lineage"][0] == "initial"
        # the gate decision of the iteration that made each program: the scripted gate answers
        # retrieve, no-op, look-up, retrieve; its look-up names no stored document, so the
        # run goes on as a no-op (gate_lookup_fallback, shown in the timeline)
        assert GATE_PATTERN == ("retrieve", "no-op", "look-up")
        gates = [programs[f"it0000{i}-c0"]["gate"] for i in range(1, 5)]
        assert gates == ["retrieve", "no-op", "no-op", "retrieve"]
        for i in range(1, 5):
            node = programs[f"it0000{i}-c0"]
            assert node["parent"] and node["status"] == "evaluated" and node["valid"]
            assert node["island"] is not None

        child = view.get("api/runs/0/programs/it00001-c0")
        assert child["parent_id"] == "initial"
        assert (
            "-    radius = 0.6  #" in child["diff"] and "+    radius = 0.6200  #" in child["diff"]
        )
        assert child["metrics"]["combined_score"] == pytest.approx(child["score"])
        (call,) = child["prompts"]
        assert [m["role"] for m in call["messages"]] == ["system", "user"]
        assert "make_points" in call["messages"][1]["content"]
        assert "radius = 0.6200" in call["reply"] and call["error"] is None
        initial = view.get("api/runs/0/programs/initial")
        assert initial["diff"] is None and initial["prompts"] == []

        timeline = view.get("api/runs/0/timeline")["iterations"]
        assert [t["iteration"] for t in timeline] == [1, 2, 3, 4]
        first = timeline[0]
        assert first["gate"] == "retrieve" and first["knowledge_state"]["unresolved"]
        assert first["rounds"] and first["rounds"][0]["queries"]
        docs = first["rounds"][0]["documents"]
        assert docs and all(d["predicted_score"] is not None for d in docs)
        assert set(first["rounds"][0]["retained"]) <= {d["doc_id"] for d in docs}
        assert first["evidence"] and first["evidence"][0]["url"]
        assert first["impacts"][0]["outcome"] == "improved" and first["impacts"][0]["delta"] > 0
        assert "gate_lookup_fallback" in timeline[2]["fallbacks"]
        # iteration 4 retrieves again: the offline corpus returns URLs it returned before
        fourth = timeline[3]
        assert fourth["gate"] == "retrieve"
        assert any(d["repeated"] for r in fourth["rounds"] for d in r["documents"])

        curves = view.get("api/runs/0/curves")
        scores = [s for _, s in curves["best"]]
        assert scores == sorted(scores) and len(scores) == 5
        assert curves["ndg"][-1][1] > 0 and curves["predictions"]
        nodes = {r["node"]: r for r in curves["llm"]}
        assert nodes["generate"]["calls"] == 4 and nodes["gate"]["calls"] == 4
        assert nodes["query_evolution"]["inclusive"] is True
        # cost per node at the configured prices; the nodes' costs add up to the run's
        for row in nodes.values():
            if row["inclusive"]:
                assert row["usd"] is None
            else:
                expected = (
                    row["input_tokens"] * PRICES[0] + row["output_tokens"] * PRICES[1]
                ) / 1e6
                assert row["usd"] == pytest.approx(expected)
        assert nodes["generate"]["usd"] > 0
        total = sum(r["usd"] for r in nodes.values() if not r["inclusive"])
        assert curves["llm_usd"] == pytest.approx(total)

        compare = view.get("api/compare")["runs"]
        assert compare[0]["row"]["iterations"] == 4 and compare[0]["best"] == curves["best"]
        summary = view.get("api/runs/0/summary")
        assert summary["iterations"] == 4 and summary["finished"] is True

        for path in ("api/runs/1/programs", "api/runs/x/curves", "api/runs/0/programs/nope"):
            with pytest.raises(urllib.error.HTTPError) as err:
                view.get(path)
            assert err.value.code == 404 and "error" in json.loads(err.value.read())
        page = view.text("")
        # every asset from this server: no CDN, works offline
        assert "/static/view.js" in page and "/static/view.css" in page
        assert not re.search(r'(src|href)="(https?:)?//', page)
        script = view.text("static/view.js")
        assert "fetch(" in script and not re.search(r"https?://(?!www\.w3\.org)", script)
    assert _files(finished) == before  # nothing written: no -wal, -shm, cache or report


def test_endpoints_while_the_run_goes(tmp_path: Path) -> None:
    rdir = tmp_path / "live"
    with scripted_server(delay_s=0.25) as server:
        proc = start_run(server, rdir, 40)
        try:
            deadline = time.time() + 120
            while not (rdir / "programs.sqlite").exists() or not _recorded(rdir):
                assert proc.poll() is None and time.time() < deadline, proc.stderr.read()  # type: ignore[union-attr]
                time.sleep(0.2)
            with ViewProcess(rdir) as view:
                run = view.get("api/runs")["runs"][0]
                assert run["finished"] is False
                assert any("still going" in n for n in run["notices"])
                seen = len(view.get("api/runs/0/programs")["programs"])
                version = run["version"]
                deadline = time.time() + 120
                while len(view.get("api/runs/0/programs")["programs"]) <= seen:
                    assert time.time() < deadline and proc.poll() is None
                    time.sleep(0.3)
                assert view.get("api/runs")["runs"][0]["version"] != version
                assert view.get("api/runs/0/timeline")["iterations"]
                assert view.get("api/runs/0/curves")["best"]
                # a kill mid-iteration leaves what it leaves: the view still answers
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
                with (rdir / "events.jsonl").open("a") as fh:  # a torn last line
                    fh.write('{"event": "node", "node": "gen')
                run = view.get("api/runs")["runs"][0]
                assert any("not JSON objects" in n for n in run["notices"])
                assert view.get("api/runs/0/programs")["programs"]
                assert view.get("api/runs/0/timeline")["iterations"]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _recorded(rdir: Path) -> bool:
    path = rdir / "events.jsonl"
    return path.exists() and '"node": "record"' in path.read_text(encoding="utf-8")


def test_partial_directories_render_what_exists_with_a_notice(finished: Path, tmp_path: Path):
    partial = tmp_path / "partial"
    shutil.copytree(finished, partial)
    (partial / "search_database.jsonl").unlink()
    (partial / "prompts.jsonl").unlink()
    with (partial / "events.jsonl").open("a") as fh:
        fh.write('{"event": "no')
    empty = tmp_path / "starting"
    empty.mkdir()
    (empty / "run.json").write_text("{}")
    with ViewProcess(partial, empty) as view:
        runs = view.get("api/runs")["runs"]
        notices = " ".join(runs[0]["notices"])
        assert "no search_database.jsonl" in notices and "no prompts.jsonl" in notices
        assert "1 line(s) of events.jsonl" in notices
        assert len(view.get("api/runs/0/programs")["programs"]) == 5
        timeline = view.get("api/runs/0/timeline")["iterations"]
        assert timeline[0]["gate"] == "retrieve" and timeline[0]["rounds"] == []
        assert view.get("api/runs/0/programs/it00001-c0")["prompts"] == []
        assert "no events.jsonl" in " ".join(runs[1]["notices"])
        assert view.get("api/runs/1/programs") == {"programs": [], "best_lineage": []}
        assert view.get("api/runs/1/timeline") == {"iterations": []}
        assert view.get("api/runs/1/curves")["best"] == []
        assert len(view.get("api/compare")["runs"]) == 2


def test_a_bench_folder_opens_as_the_comparison_of_its_runs(finished: Path, tmp_path: Path):
    bench = tmp_path / "bench"
    for method in ("evoduet", "openevolve_mode"):
        shutil.copytree(finished, bench / "runs" / "smoke_polygon_area" / method / "seed0" / "run")
    (bench / "manifest.json").write_text("{}")
    with ViewProcess(bench) as view:
        labels = [r["label"] for r in view.get("api/runs")["runs"]]
        assert labels == [
            "smoke_polygon_area/evoduet/seed0",
            "smoke_polygon_area/openevolve_mode/seed0",
        ]
        rows = view.get("api/compare")["runs"]
        assert [r["label"] for r in rows] == labels and all(r["best"] for r in rows)
        # a run the bench starts later appears, after the ones already shown
        shutil.copytree(
            finished, bench / "runs" / "smoke_polygon_area" / "evoduet" / "seed1" / "run"
        )
        labels = [r["label"] for r in view.get("api/runs")["runs"]]
        assert labels[-1] == "smoke_polygon_area/evoduet/seed1" and len(labels) == 3
        assert view.get("api/runs/2/programs")["programs"]


@pytest.mark.parametrize("make", ["missing", "not_a_run", "empty_bench"])
def test_bad_paths_are_refused_with_one_line(tmp_path: Path, make: str) -> None:
    target = tmp_path / "x"
    if make == "not_a_run":
        target.mkdir()
        (target / "notes.txt").write_text("hello")
    elif make == "empty_bench":
        (target / "runs").mkdir(parents=True)
        (target / "manifest.json").write_text("{}")
    proc = subprocess.run(
        [sys.executable, "-m", "evoduet_graph.cli", "view", str(target), "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: cannot view:"), proc.stderr
    assert str(target) in " ".join(proc.stderr.split())


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "live-display-not-a-terminal"])
def test_run_with_view_serves_the_page_beside_the_run(tmp_path: Path, quiet: bool) -> None:
    # without --quiet and with the output not a terminal, the live display prints only its
    # last frame: the address must still come while the run goes
    rdir = tmp_path / "run"
    with scripted_server(delay_s=0.2) as server:
        proc = start_run(server, rdir, 6, "--view", quiet=quiet)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            while line and "view:" not in line:
                line = proc.stderr.readline()
            match = re.search(r"view: (http://\S+)", line)
            assert match, line
            view = ViewProcess.attach(match.group(1))
            deadline = time.time() + 120
            programs: list[Any] = []
            while len(programs) < 2:
                assert time.time() < deadline
                programs = view.get("api/runs/0/programs")["programs"]
                time.sleep(0.2)
            assert "evoduet view" in view.text("")
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err[-3000:]
    with pytest.raises(OSError):  # the page stops with the run
        view.get("api/runs")


def test_the_live_display_shows_the_address() -> None:
    from evoduet_graph.report.live import RunStatus

    status = RunStatus()
    assert not any(line.startswith("view:") for line in status.lines())
    status.view_url = "http://127.0.0.1:8765/"
    assert status.lines()[-1] == "view: http://127.0.0.1:8765/"


def test_run_with_view_refuses_a_taken_port_before_it_starts(tmp_path: Path) -> None:
    from evoduet_graph.view.app import bind

    sock = bind("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        with scripted_server() as server:
            proc = start_run(server, tmp_path / "run", 2, "--view", "--view-port", str(port))
            _, err = proc.communicate(timeout=120)
    finally:
        sock.close()
    assert proc.returncode == 2 and "--view cannot listen on port" in err
    assert not (tmp_path / "run").exists()

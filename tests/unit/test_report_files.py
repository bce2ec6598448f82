"""`evoduet report`, `compare` and `graph` files and their one-line errors.

`evoduet report` files (PNG plots, report.md, self-contained HTML), `evoduet compare`,
`evoduet graph`, and the one-line errors of report / compare / graph / resume.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evoduet_graph.cli import app
from evoduet_graph.report.compare import compare_runs
from evoduet_graph.report.html import markdown_to_html
from evoduet_graph.report.markdown import PLOT_TITLES, write_report
from evoduet_graph.report.series import run_series
from evoduet_graph.report.summary import run_summary
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.search.base import normalize_url
from tests.unit.test_report import _snapshot, fake_run  # noqa: F401 - module fixture

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
runner = CliRunner()


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("report"))
    return dst


def _one_line_error(result: Any) -> str:
    text = result.output.strip()
    assert result.exit_code == 2, text
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error: ")
    return text


def test_write_report_plots_markdown_html(fake_run, tmp_path):  # noqa: F811
    rdir = _copy(fake_run["dir"], tmp_path / "run")
    before = _snapshot(rdir)
    out = write_report(rdir, html=True)
    assert _snapshot(rdir) == before  # only <run_dir>/report/ is written

    report = rdir / "report"
    assert set(out["plots"]) == set(PLOT_TITLES)
    for name, path in out["plots"].items():
        assert path == report / f"{name}.png"
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000
    md = (report / "report.md").read_text()
    assert md == out["markdown"]
    for name in PLOT_TITLES:
        assert f"![{PLOT_TITLES[name]}]({name}.png)" in md

    html = (report / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) == len(PLOT_TITLES) and all(
        s.startswith("data:image/png;base64,") for s in srcs
    )
    assert "<table>" in html and "<h2>Lineage of the best program</h2>" in html
    assert 'class="add"' in html and 'class="del"' in html  # coloured diffs


def test_series_agree_with_the_raw_files(fake_run):  # noqa: F811
    rdir: Path = fake_run["dir"]
    series = run_series(rdir)
    summary = run_summary(rdir)
    best = json.loads((rdir / "best_program.json").read_text())

    assert series["best"][0] == [0, summary.initial_score]
    assert [p[1] for p in series["best"][1:]] == [h.best_score for h in summary.history]
    assert len(series["candidates"]) == summary.failures.candidates == 8
    gates = {h.iteration: h.gate_decision for h in summary.history}
    assert all(c["gate"] == gates[c["iteration"]] for c in series["candidates"])
    assert series["ndg"][-1][1] == pytest.approx(best["ndg"])
    assert series["metric_values"][-1][1] == pytest.approx(best["metric_value"])

    # URLs: distinct vs repeated, recomputed from the search events
    seen, repeated = set(), 0
    for ev in read_events(rdir / "events.jsonl"):
        if ev["event"] == "search":
            for url in ev["urls"]:
                key = normalize_url(url)
                repeated += key in seen
                seen.add(key)
    assert series["urls"][-1]["distinct_total"] == len(seen)
    assert series["urls"][-1]["repeated_total"] == repeated

    # lineage = best_program.json's parent chain, with a diff per step
    chain = [p["id"] for p in best["parent_chain"]]
    assert [s["id"] for s in series["lineage"]] == chain
    assert series["lineage"][0]["diff"] is None
    store = ProgramStore(rdir / "programs.sqlite")
    try:
        for prev, step in zip(series["lineage"], series["lineage"][1:], strict=False):
            parent, child = store.get_program(prev["id"]), store.get_program(step["id"])
            assert step["delta"] == pytest.approx(child.score - parent.score)
            changed = [ln for ln in step["diff"].splitlines() if ln[:1] in "+-"]
            assert changed and all(
                ln[1:] in (child.code if ln[0] == "+" else parent.code) for ln in changed
            )
    finally:
        store.close()

    # queries by realised Δ: every record with impacts, highest Δ first
    deltas = [r["delta"] for r in series["query_deltas"]]
    assert deltas == sorted(deltas, reverse=True) and len(deltas) >= 2
    retrieve = [r for r in series["query_deltas"] if r["decision"] == "retrieve"]
    assert retrieve and all(r["queries"] for r in retrieve)
    assert series["predictions"] and all(
        p["realised"] is not None and p["predicted"] is not None for p in series["predictions"]
    )


def test_markdown_sections_for_queries_and_lineage(fake_run):  # noqa: F811
    from evoduet_graph.report.markdown import report_markdown

    text = report_markdown(fake_run["dir"])
    assert "\n## Queries by realised Δ\n" in text
    assert "\n## Lineage of the best program\n" in text
    assert "![" not in text  # images only when plots are passed
    series = run_series(fake_run["dir"])
    top = series["query_deltas"][0]
    assert f"| {top['iteration']} | {top['record_id']} | {top['decision']} |" in text
    for i, step in enumerate(series["lineage"][1:], start=1):
        assert f"### Step {i}: " in text and step["id"] in text
    assert text.count("```diff") == len(series["lineage"]) - 1


def test_ndg_plot_skipped_without_the_task_folder(fake_run, tmp_path):  # noqa: F811
    rdir = _copy(fake_run["dir"], tmp_path / "run")
    (rdir / "run.json").write_text(json.dumps({"task_dir": str(tmp_path / "gone")}))
    out = write_report(rdir)
    assert "ndg" not in out["plots"] and "scores" in out["plots"]
    assert "ndg.png" not in out["markdown"]


def test_report_of_a_run_without_search_or_programs(fake_run, tmp_path):  # noqa: F811
    rdir = _copy(fake_run["dir"], tmp_path / "run")
    for name in ("programs.sqlite", "search_database.jsonl", "programs.sqlite-wal"):
        (rdir / name).unlink(missing_ok=True)
    out = write_report(rdir, html=True)
    assert "predictions" not in out["plots"] and "scores" in out["plots"]
    assert "No readable program store" in out["markdown"]
    assert "No D_search record has a realised Δ yet" in out["markdown"]


def test_html_converter_escapes_and_inlines(tmp_path):
    (tmp_path / "a.png").write_bytes(PNG_MAGIC + b"0" * 10)
    md = (
        "# T <x>\n\n| a | b \\| c |\n|---|---|\n| `<y>` | **z** |\n\n![cap](a.png)\n\n"
        "![gone](b.png)\n"
    )
    html = markdown_to_html(md, base=tmp_path, title="t")
    assert "<h1>T &lt;x&gt;</h1>" in html and "<code>&lt;y&gt;</code>" in html
    assert "<strong>z</strong>" in html and "<td>b | c</td>" not in html
    assert "<th>b | c</th>" in html
    assert html.count("data:image/png;base64,") == 1 and "missing image b.png" in html


def test_compare_runs(fake_run, tmp_path):  # noqa: F811
    other = _copy(fake_run["dir"], tmp_path / "b")
    out = compare_runs([fake_run["dir"], other], out_dir=tmp_path / "cmp")
    assert [r["run"] for r in out["rows"]] == ["run", "b"]
    assert all(r["task"] == "smoke_polygon_area" and r["gate"] == "llm" for r in out["rows"])
    assert out["rows"][0]["ndg"] == out["rows"][1]["ndg"] is not None
    assert set(out["plots"]) == {"best", "ndg"}
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in out["plots"].values())
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "| run | task |" in md and "![Best score so far vs iteration](best.png)" in md


# -- CLI ---------------------------------------------------------------------------------------


def test_cli_report_html_and_out(fake_run, tmp_path):  # noqa: F811
    rdir = _copy(fake_run["dir"], tmp_path / "run")
    copy = tmp_path / "elsewhere" / "r.md"
    copy.parent.mkdir()
    result = runner.invoke(app, ["report", str(rdir), "--html", "--out", str(copy)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# EvoDuet run report: smoke_polygon_area")
    assert (rdir / "report" / "report.html").is_file()
    assert "](../run/report/scores.png)" in copy.read_text()


def test_cli_report_no_plots_writes_nothing(fake_run, tmp_path):  # noqa: F811
    rdir = _copy(fake_run["dir"], tmp_path / "run")
    result = runner.invoke(app, ["report", str(rdir), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "## Lineage of the best program" in result.stdout
    assert not (rdir / "report").exists()


def test_cli_compare(fake_run, tmp_path):  # noqa: F811
    other = _copy(fake_run["dir"], tmp_path / "b")
    result = runner.invoke(
        app, ["compare", str(fake_run["dir"]), str(other), "--out", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    assert "| run | task | model | gate |" in result.stdout
    assert (tmp_path / "c" / "best.png").is_file()


def test_cli_graph_mermaid_and_png(tmp_path):
    result = runner.invoke(app, ["graph", "--xray"])
    assert result.exit_code == 0, result.output
    assert "graph TD;" in result.stdout and "query_evolution\\3aconstruct_query" in result.stdout
    inner = runner.invoke(app, ["graph", "--loop", "inner"])
    assert "update_knowledge -.-> construct_query;" in inner.stdout
    pytest.importorskip("pygraphviz")
    png = tmp_path / "g.png"
    result = runner.invoke(app, ["graph", "--format", "png", "--xray", "--out", str(png)])
    assert result.exit_code == 0, result.output
    assert png.read_bytes().startswith(PNG_MAGIC)


# -- errors: one line, what is wrong, where, what to do -----------------------------------------


def test_report_errors(tmp_path):
    text = _one_line_error(runner.invoke(app, ["report", str(tmp_path / "nope")]))
    assert "no such directory" in text and "evoduet run" in text
    text = _one_line_error(runner.invoke(app, ["report", str(tmp_path)]))
    assert "not an evoduet run directory" in text and str(tmp_path) in text
    afile = tmp_path / "f.txt"
    afile.write_text("x")
    assert "not a directory" in _one_line_error(runner.invoke(app, ["report", str(afile)]))


def test_report_error_when_the_report_folder_cannot_be_written(fake_run, tmp_path):  # noqa: F811
    rdir = _copy(fake_run["dir"], tmp_path / "run")
    (rdir / "report").write_text("a file where the folder should be")
    text = _one_line_error(runner.invoke(app, ["report", str(rdir)]))
    assert "cannot write the report into" in text and "--no-plots" in text
    bad_out = tmp_path / "missing" / "x.md"
    ok = _copy(fake_run["dir"], tmp_path / "run2")
    text = _one_line_error(runner.invoke(app, ["report", str(ok), "--out", str(bad_out)]))
    assert f"cannot write {bad_out}" in text and "--out" in text


def test_compare_errors(fake_run, tmp_path):  # noqa: F811
    text = _one_line_error(
        runner.invoke(app, ["compare", str(fake_run["dir"]), str(tmp_path / "nope")])
    )
    assert "cannot compare" in text and "nope" in text


def test_graph_png_without_pygraphviz(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pygraphviz", None)
    text = _one_line_error(
        runner.invoke(app, ["graph", "--format", "png", "--out", str(tmp_path / "g.png")])
    )
    assert "pygraphviz" in text and "--format mermaid" in text


def test_resume_errors(fake_run, tmp_path):  # noqa: F811
    text = _one_line_error(runner.invoke(app, ["resume", str(tmp_path / "nope")]))
    assert "cannot resume" in text and "no such directory" in text

    moved = _copy(fake_run["dir"], tmp_path / "moved")
    (moved / "run.json").write_text(json.dumps({"task_dir": str(tmp_path / "task-gone")}))
    text = _one_line_error(runner.invoke(app, ["resume", str(moved)]))
    assert "task folder" in text and "task-gone" in text and "run.json" in text

    torn = _copy(fake_run["dir"], tmp_path / "torn")
    (torn / "run.json").write_text('{"task_dir": ')
    text = _one_line_error(runner.invoke(app, ["resume", str(torn)]))
    assert "run.json is damaged" in text

    noconf = _copy(fake_run["dir"], tmp_path / "noconf")
    (noconf / "config.yaml").unlink()
    text = _one_line_error(runner.invoke(app, ["resume", str(noconf)]))
    assert "config.yaml is missing" in text

    badconf = _copy(fake_run["dir"], tmp_path / "badconf")
    (badconf / "config.yaml").write_text("iterations: 2\nnot_a_key: 1\n")
    text = _one_line_error(runner.invoke(app, ["resume", str(badconf)]))
    assert "not_a_key" in text and "fix" in text

    studio = _copy(fake_run["dir"], tmp_path / "studio")
    meta = json.loads((studio / "run.json").read_text())
    (studio / "run.json").write_text(json.dumps({**meta, "studio": True}))
    text = _one_line_error(runner.invoke(app, ["resume", str(studio)]))
    assert "LangGraph Studio" in text

"""The typed run summary keeps the JSON form of the dict it replaced, on committed run directories.

``tests/unit/data/run_summary-<run>.json`` is the JSON text (``json.dumps(..., indent=1)``) of
the dict ``run_summary`` returned before the summary was typed, for the two real runs committed
under ``benchmarks/results/real-runs/``: the typed summary of the same directories must give
the same text (keys, key order, values, ints vs floats), so run directories written by older
versions still read, and whatever was written from the summary keeps its shape. Fields added
since are appended where they belong (``prediction.rank``, ``prediction.pairs``: the
predicted-vs-realised rank correlation), never renamed or moved.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from evoduet_graph.report.summary import paper_metrics, run_summary
from evoduet_graph.report.summary_types import RunSummary
from tests.conftest import ROOT

DATA = Path(__file__).parent / "data"
RUNS = ("smoke10-gate-llm-0309f41", "smoke10-gate-llm-a652882")


@pytest.mark.parametrize("run", RUNS)
def test_summary_of_a_committed_run_has_the_old_json_form(run: str, tmp_path: Path) -> None:
    # a copy: reading must not depend on (or touch) the committed folder's location
    rdir = tmp_path / "run"
    shutil.copytree(ROOT / "benchmarks" / "results" / "real-runs" / run, rdir)
    expected = (DATA / f"run_summary-{run}.json").read_text(encoding="utf-8")
    summary = run_summary(rdir)
    assert isinstance(summary, RunSummary)
    as_dict = summary.to_dict()
    assert as_dict["run_dir"] == str(rdir)
    as_dict["run_dir"] = json.loads(expected)["run_dir"]
    assert json.dumps(as_dict, indent=1) == expected.strip()
    # attributes read what the JSON form says
    assert summary.iterations == as_dict["iterations"] > 0
    assert summary.best is not None and summary.best.id == as_dict["best"]["id"]
    assert summary.search.queries == as_dict["search"]["queries"]
    assert summary.llm.total.calls == as_dict["llm"]["total"]["calls"]
    assert [h.iteration for h in summary.history] == [h["iteration"] for h in as_dict["history"]]
    assert paper_metrics(summary)["search_calls"] == as_dict["cost"]["search_calls"]


def test_summary_is_frozen(tmp_path: Path) -> None:
    summary = run_summary(tmp_path)  # an empty directory: every figure at its default
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.iterations = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.llm.total.calls = 1  # type: ignore[misc]
    assert summary.to_dict()["history"] == [] and summary.history == ()
    assert json.loads(json.dumps(summary.to_dict())) == summary.to_dict()

"""Resume with an edited ``config.yaml``.

Every refused edit is one line, exit 2 and nothing written; every accepted edit is applied, and an
edited model or seed is said in one line; the task folder must not change between sessions either.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from evoduet_graph.cli import app
from evoduet_graph.config import EvoDuetConfig
from evoduet_graph.rundir.continuation import RESUME_APPLIED, RESUME_NOTED, _matches
from evoduet_graph.rundir.events import read_events
from tests.conftest import SMOKE_TASK

runner = CliRunner()


@pytest.fixture(autouse=True)
def _hosted_model_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # refused, never the internet
    monkeypatch.chdir(tmp_path)


def _run(*args: str) -> tuple[int, list[str]]:
    result = runner.invoke(app, list(args))
    return result.exit_code, [ln for ln in result.output.splitlines() if ln.strip()]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def task_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "task"
    shutil.copytree(SMOKE_TASK, folder)
    return folder


@pytest.fixture
def finished_run(task_copy: Path, tmp_path: Path) -> Path:
    out = tmp_path / "done"
    code, lines = _run(
        "run", str(task_copy), "--iterations", "0", "--model", "openai:gpt-4o-mini",
        "--quiet", "--out", str(out),
    )  # fmt: skip
    assert code == 0, lines
    return out


def _edit(run_dir: Path, changes: dict[str, object]) -> None:
    path = run_dir / "config.yaml"
    data = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize(
    "changes",
    [
        {"population.num_islands": 3},
        {"scaffold": "top_k", "population.kind": "top_k"},
        {"gate.mode": "always"},
        {"candidates": 4},
        {"iterations": 5, "population.num_islands": 2},  # one refused key refuses the lot
    ],
    ids=["islands", "scaffold+kind", "gate", "candidates", "mixed"],
)
def test_a_refused_edit_is_one_line_exit_2_and_nothing_written(
    finished_run: Path, changes: dict[str, object]
) -> None:
    _edit(finished_run, changes)
    before = _files(finished_run)
    code, lines = _run("resume", str(finished_run), "--quiet")
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), lines
    for key in changes:
        if not _matches(key, RESUME_APPLIED + RESUME_NOTED):
            assert key in lines[0], (key, lines[0])
    assert "resume table" in lines[0]
    assert _files(finished_run) == before  # config.yaml and run.json untouched


def test_accepted_edits_are_applied_and_model_and_seed_changes_are_said(
    finished_run: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _edit(
        finished_run,
        {
            "iterations": 0,
            "llm.model": "openai:gpt-4o",
            "seed": 7,
            "llm.timeout_s": 30.0,
            "llm.call_deadline_s": 20.0,
            "budget.max_llm_calls": 50,
            "evaluation.workers": 2,
        },
    )
    with caplog.at_level(logging.WARNING, logger="evoduet_graph.api"):
        code, lines = _run("resume", str(finished_run), "--quiet")
    assert code == 0, lines
    said = [r.getMessage() for r in caplog.records]
    assert any("llm.model changed from 'openai:gpt-4o-mini' to 'openai:gpt-4o'" in m for m in said)
    assert any("seed changed from 42 to 7" in m for m in said), said
    assert not any("timeout_s" in m or "max_llm_calls" in m for m in said)  # silent ones
    meta = json.loads((finished_run / "run.json").read_text())
    assert meta["config"]["llm"]["model"] == "openai:gpt-4o" and meta["config"]["seed"] == 7
    events = list(read_events(finished_run / "events.jsonl"))
    starts = [e for e in events if e["event"] == "run_start"]
    assert [s["resumed"] for s in starts] == [False, True]
    changes = [e["message"] for e in events if e["event"] == "config_change"]
    assert len(changes) == 2
    # the applied values are the baseline now: resuming again says nothing new
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="evoduet_graph.api"):
        code, lines = _run("resume", str(finished_run), "--quiet")
    assert code == 0 and not [r for r in caplog.records if "changed from" in r.getMessage()]


def test_a_changed_task_folder_is_refused_at_resume(finished_run: Path, task_copy: Path) -> None:
    (task_copy / "evaluator.py").write_text(
        (task_copy / "evaluator.py").read_text() + "\n# edited\n"
    )
    before = _files(finished_run)
    code, lines = _run("resume", str(finished_run), "--quiet")
    assert code == 2 and len(lines) == 1 and "task folder" in lines[0] and "changed" in lines[0]
    assert _files(finished_run) == before


def test_every_config_key_is_in_the_table_or_refused() -> None:
    """docs/resume.md's table is the code's: every key a resume applies is a real config key."""
    from evoduet_graph.rundir.continuation import _flat

    keys = set(_flat(EvoDuetConfig().model_dump(mode="json")))
    for name in RESUME_APPLIED + RESUME_NOTED:
        assert any(k == name or (name[-1] in "._" and k.startswith(name)) for k in keys), name
    page = (Path(__file__).resolve().parents[2] / "docs" / "resume.md").read_text()
    for name in RESUME_APPLIED + RESUME_NOTED:
        assert f"`{name.rstrip('._')}" in page, name

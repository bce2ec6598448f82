"""The ``evoduet`` command: eval, error paths, and the langgraph.json graph entry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evoduet_graph.cli import app
from tests.conftest import ROOT

runner = CliRunner()


def test_eval_prints_metrics_json(smoke_task_dir):
    result = runner.invoke(app, ["eval", str(smoke_task_dir)])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert payload["valid"] is True
    assert payload["metrics"]["area"] == pytest.approx(0.46587428118453733)


def test_eval_of_a_crashing_program_exits_1_with_error(smoke_task_dir, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit(3)\n")
    result = runner.invoke(app, ["eval", str(smoke_task_dir), str(bad)])
    assert result.exit_code == 1
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert payload["valid"] is False and payload["error"]


def test_run_on_a_missing_task_folder_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["run", str(tmp_path / "nope"), "--iterations", "1"])
    assert result.exit_code == 2
    assert "error" in result.output.lower()
    assert not (tmp_path / "nope").exists()


def test_run_with_bad_config_key_is_a_clear_error(smoke_task_dir, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("iterations: 2\nnot_a_key: 1\n")
    result = runner.invoke(app, ["run", str(smoke_task_dir), "--config", str(cfg)])
    assert result.exit_code == 2
    assert "not_a_key" in result.output


def test_run_with_hosted_model_and_no_key_fails_fast(smoke_task_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["run", str(smoke_task_dir), "--model", "openai:gpt-4o-mini", "--out", str(out)]
    )
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.output


def test_resume_of_a_non_run_directory_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["resume", str(tmp_path)])
    assert result.exit_code == 2
    assert "cannot resume" in result.output


def test_langgraph_json_graph_entry_imports_and_compiles():
    spec = json.loads((ROOT / "langgraph.json").read_text())
    target = spec["graphs"]["evoduet"]
    path, attr = target.rsplit(":", 1)
    code = (
        "import importlib.util, sys;"
        f"spec = importlib.util.spec_from_file_location('studio', {str(ROOT / path)!r});"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m);"
        f"g = m.{attr}; print(sorted(g.get_graph().nodes))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert out.returncode == 0, out.stderr
    for node in ("select", "gate", "generate", "evaluate", "record", "query_evolution", "look_up"):
        assert node in out.stdout


def test_console_script_help():
    exe = Path(sys.executable).parent / "evoduet"
    if not exe.exists():
        pytest.fail("the evoduet console script is not installed in this environment")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
    assert out.returncode == 0
    for cmd in ("run", "resume", "eval"):
        assert cmd in out.stdout

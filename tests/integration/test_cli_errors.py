"""Bad task folders, configs and concurrent use through the CLI.

Every start-up error is one line on stderr that names the file and the field, exit code 2, and
nothing is written: no run directory (neither ``--out`` nor the default ``runs/...``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evoduet_graph.cli import app
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.lock import RunDirLock
from tests.conftest import ROOT, SMOKE_TASK

runner = CliRunner()


@pytest.fixture
def task_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "task"
    shutil.copytree(SMOKE_TASK, folder)
    return folder


@pytest.fixture(autouse=True)
def _hosted_model_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A hosted model string that builds offline, and a cwd for default run folders.

    A hosted model string that builds offline (no call is made before the errors), and a
    cwd in which a default ``runs/`` folder would show.
    """
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # refused, never the internet
    monkeypatch.chdir(tmp_path)


def _run(*args: str) -> tuple[int, list[str]]:
    result = runner.invoke(app, list(args))
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    return result.exit_code, lines


def _assert_clear_error(code: int, lines: list[str], out: Path, *needles: str) -> None:
    assert code == 2, lines
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, lines  # one line, no traceback
    assert len(lines) == 1, lines
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    assert not out.exists(), "a failed start must not create the run directory"
    assert not (Path.cwd() / "runs").exists()


def _start(task: Path, out: Path, *extra: str) -> tuple[int, list[str]]:
    return _run(
        "run",
        str(task),
        "--iterations",
        "1",
        "--model",
        "openai:gpt-4o-mini",
        "--quiet",
        "--out",
        str(out),
        *extra,
    )


def test_missing_evaluator(task_copy: Path, tmp_path: Path) -> None:
    (task_copy / "evaluator.py").unlink()
    code, lines = _start(task_copy, tmp_path / "run")
    _assert_clear_error(code, lines, tmp_path / "run", "evaluator.py", str(task_copy))


def test_evaluator_without_evaluate(task_copy: Path, tmp_path: Path) -> None:
    (task_copy / "evaluator.py").write_text("def score(path):\n    return {}\n")
    code, lines = _start(task_copy, tmp_path / "run")
    _assert_clear_error(code, lines, tmp_path / "run", "evaluator.py", "evaluate")


def test_syntax_error_in_evaluator(task_copy: Path, tmp_path: Path) -> None:
    (task_copy / "evaluator.py").write_text("def evaluate(path)\n    return {}\n")
    code, lines = _start(task_copy, tmp_path / "run")
    _assert_clear_error(code, lines, tmp_path / "run", "evaluator.py", "syntax error", "line 1")


def test_initial_program_failing_its_evaluation_is_an_error_unless_allowed(
    task_copy: Path, tmp_path: Path
) -> None:
    program = task_copy / "initial_program.py"
    program.write_text(program.read_text().replace("radius = 0.6", "radius = 1.5"))
    code, lines = _start(task_copy, tmp_path / "run")
    _assert_clear_error(
        code,
        lines,
        tmp_path / "run",
        "initial_program.py",
        "outside the unit disk",
        "--allow-invalid-initial",
    )
    out = tmp_path / "allowed"
    result = runner.invoke(
        app,
        [
            "run",
            str(task_copy),
            "--iterations",
            "0",
            "--model",
            "openai:gpt-4o-mini",
            "--quiet",
            "--out",
            str(out),
            "--allow-invalid-initial",
        ],
    )
    assert result.exit_code == 0, result.output
    warnings = [e for e in read_events(out / "events.jsonl") if e.get("event") == "warning"]
    assert any("initial program fails" in str(w.get("message")) for w in warnings)


def test_a_failing_initial_program_names_the_tasks_actual_evaluator(tmp_path: Path) -> None:
    folder = tmp_path / "shg"
    (folder / "evaluator").mkdir(parents=True)
    shutil.copy(SMOKE_TASK / "initial_program.py", folder)
    script = folder / "evaluator" / "evaluate.sh"
    script.write_text("#!/bin/bash\necho not json at all\n")
    script.chmod(0o755)
    code, lines = _start(folder, tmp_path / "run")
    _assert_clear_error(
        code, lines, tmp_path / "run", "fix the initial program or evaluator/evaluate.sh"
    )


def test_empty_evolve_block(task_copy: Path, tmp_path: Path) -> None:
    (task_copy / "initial_program.py").write_text(
        "def run():\n    return None\n\n# EVOLVE-BLOCK-START\n\n# EVOLVE-BLOCK-END\n"
    )
    code, lines = _start(task_copy, tmp_path / "run")
    _assert_clear_error(
        code, lines, tmp_path / "run", "initial_program.py", "EVOLVE-BLOCK", "empty"
    )


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("direction: up\n", "direction"),
        ("timeout_s: soon\n", "timeout_s"),
        ("sota_score: [1, 2]\n", "sota_score"),
    ],
)
def test_wrong_types_in_task_yaml(task_copy: Path, tmp_path: Path, text: str, field: str) -> None:
    (task_copy / "task.yaml").write_text(text)
    code, lines = _start(task_copy, tmp_path / "run")
    _assert_clear_error(code, lines, tmp_path / "run", "task.yaml", field)


def test_wrong_types_in_openevolve_config_yaml(task_copy: Path, tmp_path: Path) -> None:
    (task_copy / "config.yaml").write_text("evaluator:\n  cascade_evaluation: maybe\n")
    code, lines = _start(task_copy, tmp_path / "run")
    _assert_clear_error(
        code, lines, tmp_path / "run", "config.yaml", "evaluator.cascade_evaluation"
    )


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("candidates: many\n", "candidates"),
        ("llm:\n  temperature: hot\n", "llm.temperature"),
        ("budget:\n  max_llm_calls: -3\n", "budget.max_llm_calls"),
        ("evaluation:\n  max_processes: 0\n", "evaluation.max_processes"),
        # strict types: no silent coercion of a boolean or a quoted number
        ("evox:\n  strategy_patience: true\n", "evox.strategy_patience"),
        ("max_concurrency: '4'\n", "max_concurrency"),
    ],
)
def test_wrong_types_in_run_config(task_copy: Path, tmp_path: Path, text: str, field: str) -> None:
    cfg = tmp_path / "my.yaml"
    cfg.write_text(text)
    code, lines = _start(task_copy, tmp_path / "run", "--config", str(cfg))
    _assert_clear_error(code, lines, tmp_path / "run", "my.yaml", field)


def test_scaffold_option_contradicting_the_config_files_population_kind(
    task_copy: Path, tmp_path: Path
) -> None:
    cfg = tmp_path / "my.yaml"
    cfg.write_text("population:\n  kind: islands\n")
    code, lines = _start(task_copy, tmp_path / "run", "--config", str(cfg), "--scaffold", "top_k")
    _assert_clear_error(
        code, lines, tmp_path / "run", "my.yaml", "scaffold 'top_k'", "population.kind"
    )


def test_negative_iterations_are_an_error_and_zero_only_evaluates(
    task_copy: Path, tmp_path: Path
) -> None:
    code, lines = _run(
        "run",
        str(task_copy),
        "--iterations",
        "-1",
        "--model",
        "openai:gpt-4o-mini",
        "--out",
        str(tmp_path / "neg"),
    )
    _assert_clear_error(code, lines, tmp_path / "neg", "iterations", "greater than or equal to 0")
    out = tmp_path / "zero"
    result = runner.invoke(
        app,
        [
            "run",
            str(task_copy),
            "--iterations",
            "0",
            "--model",
            "openai:gpt-4o-mini",
            "--quiet",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    records = [e for e in read_events(out / "events.jsonl") if e.get("node") == "record"]
    assert records == []  # evaluate-only: the initial program is scored, nothing is generated
    assert (out / "best_program.json").is_file()


@pytest.mark.parametrize("model", ["nosuchprovider:claude-3", "gpt-4o", "openai:"])
def test_unknown_model_provider(task_copy: Path, tmp_path: Path, model: str) -> None:
    code, lines = _run(
        "run", str(task_copy), "--iterations", "1", "--model", model, "--out", str(tmp_path / "r")
    )
    _assert_clear_error(code, lines, tmp_path / "r", "llm.model", model)


def test_hosted_model_without_key_writes_nothing(
    task_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    code, lines = _start(task_copy, tmp_path / "run")
    _assert_clear_error(code, lines, tmp_path / "run", "OPENAI_API_KEY")


# ------------------------------------------------------------------ concurrent use


def test_second_process_on_a_locked_run_directory_refuses(task_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "run",
            str(task_copy),
            "--iterations",
            "0",
            "--model",
            "openai:gpt-4o-mini",
            "--quiet",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    before = (out / "events.jsonl").read_text()
    with RunDirLock(out):  # another process in the middle of the run
        code, lines = _run("resume", str(out), "--quiet")
        assert code == 2, lines
        assert len(lines) == 1 and "in use by another evoduet process" in lines[0], lines
        assert str(os.getpid()) in lines[0]
    assert (out / "events.jsonl").read_text() == before  # the refused process wrote nothing
    code, lines = _run("resume", str(out), "--quiet")  # released: resuming works again
    assert code == 0, lines


def test_lock_is_held_by_a_live_run_and_released_when_it_is_killed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration._run_smoke", str(run_dir), "6", "0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 120
        while not any(e.get("node") == "generate" for e in read_events(run_dir / "events.jsonl")):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.time() < deadline, "the run did not start"
            time.sleep(0.1)
        code, lines = _run("resume", str(run_dir), "--quiet")
        assert code == 2 and "in use by another evoduet process" in lines[-1], lines
        assert f"pid {proc.pid}" in lines[-1]
    finally:
        proc.kill()
        proc.wait(timeout=30)
    lock = RunDirLock(run_dir)
    lock.acquire()  # the kernel dropped the killed holder's lock
    lock.release()


# ------------------------------------------------------------------ an existing run directory


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def finished_run(task_copy: Path, tmp_path: Path) -> Path:
    """A run directory of ``task_copy`` (the initial program evaluated, no iteration)."""
    out = tmp_path / "done"
    code, lines = _start(task_copy, out, "--iterations", "0")
    assert code == 0, lines
    return out


@pytest.mark.parametrize("extra", [(), ("--scaffold", "top_k"), ("--iterations", "5")])
def test_run_on_an_existing_run_directory_is_refused_and_points_to_resume(
    task_copy: Path, finished_run: Path, extra: tuple[str, ...]
) -> None:
    """`evoduet run --out` never continues (or reconfigures) a run silently."""
    before = _files(finished_run)
    code, lines = _start(task_copy, finished_run, *extra)
    assert code == 2 and len(lines) == 1, lines
    assert "already holds a run" in lines[0] and f"evoduet resume {finished_run}" in lines[0]
    assert _files(finished_run) == before


@pytest.mark.parametrize("name", ["checkpoints.sqlite", "programs.sqlite"])
def test_resume_from_a_damaged_database_is_one_line_naming_the_file(
    finished_run: Path, name: str
) -> None:
    (finished_run / name).write_bytes(b"this is not an SQLite database" * 100)
    before = _files(finished_run)
    code, lines = _run("resume", str(finished_run), "--quiet")
    assert code == 2 and len(lines) == 1, lines
    assert str(finished_run / name) in lines[0] and "damaged" in lines[0], lines
    assert _files(finished_run) == before


def test_resume_below_the_completed_iterations_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration._run_smoke", str(out), "2", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = _files(out)
    code, lines = _run("resume", str(out), "--iterations", "1", "--quiet")
    assert code == 2 and len(lines) == 1, lines
    assert "below the 2 iterations the run has already completed" in lines[0]
    assert _files(out) == before


def test_a_changed_configuration_cannot_continue_a_run_through_the_api(
    finished_run: Path, task_copy: Path
) -> None:
    from evoduet_graph import EvoDuetConfig, RunError, run

    stored = (finished_run / "config.yaml").read_text()
    cfg = EvoDuetConfig.model_validate(
        {"llm": {"model": "openai:gpt-4o-mini"}, "population": {"num_islands": 3}}
    )
    with pytest.raises(RunError, match=r"population\.num_islands.*evoduet resume"):
        run(task_copy, cfg, run_dir=finished_run)
    assert (finished_run / "config.yaml").read_text() == stored


# ------------------------------------------------------------------ other commands


def test_candidates_beyond_the_limit_are_an_error(task_copy: Path, tmp_path: Path) -> None:
    code, lines = _start(task_copy, tmp_path / "run", "--candidates", "100000")
    _assert_clear_error(code, lines, tmp_path / "run", "candidates", "less than or equal to 64")


def test_quiet_and_json_together_are_an_error(task_copy: Path, tmp_path: Path) -> None:
    code, lines = _start(task_copy, tmp_path / "run", "--json")
    _assert_clear_error(code, lines, tmp_path / "run", "--quiet and --json")


@pytest.mark.parametrize("command", ["report", "compare"])
def test_report_and_compare_refuse_a_task_folder(task_copy: Path, command: str) -> None:
    """A task folder has a config.yaml, but it is not a run directory."""
    code, lines = _run(command, str(task_copy))
    assert code == 2 and len(lines) == 1 and "not an evoduet run directory" in lines[0], lines
    assert not (task_copy / "report").exists()


def test_bench_with_non_integer_seeds(tmp_path: Path) -> None:
    code, lines = _run("bench", "--seeds", "0,a", "--out", str(tmp_path / "b"))
    assert code == 2 and len(lines) == 1, lines
    assert "--seeds '0,a': expected comma-separated integers" in lines[0]


def test_eval_of_a_missing_program_file(task_copy: Path, tmp_path: Path) -> None:
    code, lines = _run("eval", str(task_copy), str(tmp_path / "missing.py"))
    assert code == 2 and len(lines) == 1, lines
    assert f"cannot read the program {tmp_path / 'missing.py'}: No such file" in lines[0]


def test_resume_refuses_emptied_files_of_a_run_with_iterations(tmp_path: Path) -> None:
    """A 0-byte SQLite file opens as a new database and an empty config.yaml loads as the defaults.

    Either would silently restart or change the run, so both are refused.
    """
    base = tmp_path / "base"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration._run_smoke", str(base), "2", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, needle in [
        ("checkpoints.sqlite", "is empty although the run has completed 2"),
        ("programs.sqlite", "is empty although the run has completed 2"),
        ("config.yaml", "config.yaml is empty"),
    ]:
        out = tmp_path / name
        shutil.copytree(base, out)
        (out / name).write_bytes(b"")
        before = _files(out)
        code, lines = _run("resume", str(out), "--iterations", "3", "--quiet")
        assert code == 2 and len(lines) == 1, (name, lines)
        assert needle in lines[0], (name, lines)
        assert _files(out) == before, name
    out = tmp_path / "binary"
    shutil.copytree(base, out)
    (out / "config.yaml").write_bytes(bytes(range(128, 256)) * 10)
    code, lines = _run("resume", str(out), "--quiet")
    assert code == 2 and len(lines) == 1 and "is not UTF-8 text" in lines[0], lines


def test_resume_below_the_completed_iterations_names_where_the_total_came_from(
    finished_run: Path,
) -> None:
    with (finished_run / "events.jsonl").open("a") as f:  # as if 2 iterations had completed
        f.write('{"event": "node", "node": "record", "iteration": 2, "time": 0}\n')
    code, lines = _run("resume", str(finished_run), "--quiet")
    assert code == 2 and len(lines) == 1, lines
    assert "iterations: 0 in config.yaml is below the 2 iterations" in lines[0], lines
    assert "--iterations 0" not in lines[0]
    code, lines = _run("resume", str(finished_run), "--iterations", "1", "--quiet")
    assert code == 2 and "--iterations 1 is below the 2 iterations" in lines[0], lines


def test_resume_of_a_changed_task_folder_names_the_changed_files(
    task_copy: Path, finished_run: Path
) -> None:
    doc = next(p for p in sorted((task_copy / "docs").iterdir()) if p.is_file())
    doc.write_text(doc.read_text() + "\n# note\n")
    (task_copy / "docs" / "new.md").write_text("new")
    code, lines = _run("resume", str(finished_run), "--iterations", "1", "--quiet")
    assert code == 2 and len(lines) == 1, lines
    assert f"modified docs/{doc.name}" in lines[0] and "added docs/new.md" in lines[0], lines

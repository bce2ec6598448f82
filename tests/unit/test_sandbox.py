"""SandboxEvaluator: candidate faults become invalid outcomes; the test process never suffers."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from evoduet_graph.config import EvaluationConfig
from evoduet_graph.evaluation import (
    EvaluationOutcome,
    Evaluator,
    SandboxEvaluator,
    score_from_metrics,
    scrub_environment,
)
from evoduet_graph.task import Task, TaskError, load_task

# The evaluator imports the candidate and returns whatever its result() returns, so each test
# controls the outcome from the candidate's source.
EVALUATOR = """\
import importlib.util

def _load(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def evaluate(program_path):
    return _load(program_path).result()
"""

CASCADE_EVALUATOR = (
    EVALUATOR
    + """
def evaluate_stage1(program_path):
    return {"combined_score": _load(program_path).STAGE1, "stage1_only": 1.0}

def evaluate_stage2(program_path):
    score = _load(program_path).STAGE2
    if isinstance(score, str):
        return {"combined_score": 0.0, "error": score}
    return {"combined_score": score, "stage2_only": 2.0}

def evaluate_stage3(program_path):
    return {"combined_score": 1.0, "stage3_only": 3.0}
"""
)

OK_PROGRAM = "def result():\n    return {'combined_score': 0.5, 'x': 2}\n"


def make_task(
    root: Path, evaluator: str = EVALUATOR, config: str | None = None, name: str = "t"
) -> Task:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "initial_program.py").write_text(OK_PROGRAM)
    (folder / "evaluator.py").write_text(evaluator)
    if config is not None:
        (folder / "config.yaml").write_text(textwrap.dedent(config))
    return load_task(folder)


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path)


@pytest.fixture
def sandbox(task: Task) -> SandboxEvaluator:
    return SandboxEvaluator(task, timeout_s=10)


def _alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (zombies are dead, unreaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_dead(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


# ---------------------------------------------------------------- normal results


def test_valid_dict_result(sandbox: SandboxEvaluator) -> None:
    outcome = sandbox.evaluate(OK_PROGRAM, "p1")
    assert outcome.valid and outcome.error is None
    assert outcome.score == 0.5
    assert outcome.metrics == {"combined_score": 0.5, "x": 2.0}
    assert outcome.stage == 0
    assert outcome.elapsed_s > 0
    assert isinstance(sandbox, Evaluator)
    again = EvaluationOutcome.model_validate_json(outcome.model_dump_json())
    assert again == outcome


def test_score_is_mean_without_combined_score_and_text_goes_to_artifacts(
    sandbox: SandboxEvaluator,
) -> None:
    code = "def result():\n    return {'a': 1, 'b': 3.0, 'flag': True, 'note': 'hi'}\n"
    outcome = sandbox.evaluate(code)
    assert outcome.valid
    assert outcome.metrics == {"a": 1.0, "b": 3.0, "flag": 1.0}
    assert outcome.score == pytest.approx(5.0 / 3.0)
    assert outcome.artifacts["note"] == "hi"


def test_numpy_scalars_and_numeric_error_metric(sandbox: SandboxEvaluator) -> None:
    code = (
        "import numpy as np\n"
        "def result():\n"
        "    return {'combined_score': np.float32(0.25), 'n': np.int64(3), 'error': 0.1}\n"
    )
    outcome = sandbox.evaluate(code)
    assert outcome.valid, outcome.error
    assert outcome.score == 0.25
    assert outcome.metrics["n"] == 3.0 and outcome.metrics["error"] == 0.1


def test_score_from_metrics() -> None:
    assert score_from_metrics({"combined_score": 2.0, "a": 9.0}) == 2.0
    assert score_from_metrics({"a": 1.0, "b": 2.0, "error": 100.0}) == 1.5
    assert score_from_metrics({}) is None
    assert score_from_metrics({"combined_score": float("nan")}) is None


def test_temp_dir_is_fresh_outside_task_and_removed(task: Task, sandbox: SandboxEvaluator) -> None:
    code = "import os\ndef result():\n    return {'combined_score': 1.0, 'cwd': os.getcwd()}\n"
    outcome = sandbox.evaluate(code)
    cwd = Path(outcome.artifacts["cwd"])
    assert cwd.name.startswith("evoduet_eval_")
    assert not cwd.exists()
    assert task.path not in cwd.parents


def test_matplotlib_import_writes_no_warning_into_the_artifacts(sandbox: SandboxEvaluator) -> None:
    """Its config dir is in the private temp dir, so it prints no temp path to stderr."""
    code = (
        "import os\nimport matplotlib\n"
        "def result():\n"
        "    mpl = matplotlib.get_configdir()\n"
        "    return {'combined_score': 1.0, 'mpl': mpl, 'cwd': os.getcwd()}\n"
    )
    outcome = sandbox.evaluate(code)
    assert outcome.valid, outcome.error
    assert Path(outcome.artifacts["cwd"]) in Path(outcome.artifacts["mpl"]).parents
    assert "matplotlib" not in outcome.artifacts.get("stderr", "")


# ---------------------------------------------------------------- candidate faults


def test_timeout_kills_whole_process_group(tmp_path: Path, task: Task) -> None:
    pid_file = tmp_path / "grandchild.pid"
    code = textwrap.dedent(
        f"""\
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        while True:
            pass
        """
    )
    timeout = 1.5
    start = time.monotonic()
    # the candidate reports host pids through a file outside its temp dir: the detection
    # fallback (the namespace's PID and mount isolation is tested in test_sandbox_integrity)
    outcome = SandboxEvaluator(task, timeout_s=timeout, isolate_filesystem=False).evaluate(code)
    elapsed = time.monotonic() - start
    assert elapsed < timeout + 2
    assert not outcome.valid and outcome.score == 0.0
    assert outcome.error == "timeout after 1.5 s"
    assert "timeout" in outcome.artifacts
    grandchild = int(pid_file.read_text())
    assert _wait_dead(grandchild, within_s=2.0), f"grandchild {grandchild} survived"


def test_background_processes_are_killed_after_normal_exit(tmp_path: Path, task: Task) -> None:
    pid_file = tmp_path / "bg.pid"
    code = textwrap.dedent(
        f"""\
        import subprocess, sys
        def result():
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            open({str(pid_file)!r}, "w").write(str(child.pid))
            return {{"combined_score": 1.0}}
        """
    )
    sandbox = SandboxEvaluator(task, timeout_s=10, isolate_filesystem=False)  # host pids
    outcome = sandbox.evaluate(code)
    assert outcome.valid
    assert _wait_dead(int(pid_file.read_text()), within_s=2.0)


def test_lingering_thread_does_not_hold_the_evaluation(sandbox: SandboxEvaluator) -> None:
    code = (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,)).start()\n" + OK_PROGRAM
    )
    start = time.monotonic()
    outcome = sandbox.evaluate(code)
    assert outcome.valid
    assert time.monotonic() - start < 5


def test_memory_bomb_is_invalid(task: Task) -> None:
    code = (
        "def result():\n    block = bytearray(10 * 1024**3)\n    return {'combined_score': 1.0}\n"
    )
    outcome = SandboxEvaluator(task, timeout_s=10, memory_mb=1024).evaluate(code)
    assert not outcome.valid and outcome.score == 0.0
    assert "MemoryError" in (outcome.error or "")
    assert "MemoryError" in outcome.artifacts["traceback"]


def test_sys_exit_is_invalid(sandbox: SandboxEvaluator) -> None:
    outcome = sandbox.evaluate("import sys\nsys.exit(3)\n")
    assert not outcome.valid
    assert "sys.exit(3)" in (outcome.error or "")


def test_hard_exit_without_result_is_invalid(sandbox: SandboxEvaluator) -> None:
    code = "import os, sys\nprint('bye', file=sys.stderr, flush=True)\nos._exit(7)\n"
    outcome = sandbox.evaluate(code)
    assert not outcome.valid
    assert "exited with code 7 without writing a result" in (outcome.error or "")
    assert "bye" in outcome.artifacts["stderr"]


def test_exception_has_traceback_and_stderr(sandbox: SandboxEvaluator) -> None:
    code = textwrap.dedent(
        """\
        import sys
        def helper():
            raise ValueError("boom in helper")
        def result():
            print("diagnostic line", file=sys.stderr)
            helper()
        """
    )
    outcome = sandbox.evaluate(code)
    assert not outcome.valid and outcome.score == 0.0
    assert outcome.error == "evaluate raised ValueError: boom in helper"
    assert "helper()" in outcome.artifacts["traceback"]
    assert "ValueError: boom in helper" in outcome.artifacts["traceback"]
    assert "diagnostic line" in outcome.artifacts["stderr"]


@pytest.mark.parametrize(
    ("returned", "fragment"),
    [
        ("{'combined_score': float('nan')}", "combined_score is not finite"),
        ("{'combined_score': float('inf')}", "combined_score is not finite"),
        ("{'a': 1.0, 'b': float('nan')}", "not finite"),
        ("{'combined_score': 'great'}", "combined_score is not numeric"),
        ("{}", "no numeric metrics"),
        ("{'note': 'text only'}", "no numeric metrics"),
        ("[0.5]", "expected a dict of metrics or an EvaluationResult"),
        ("None", "expected a dict of metrics"),
        ("{'combined_score': 0.0, 'error': 'constraint violated'}", "constraint violated"),
    ],
)
def test_bad_scores_are_invalid(sandbox: SandboxEvaluator, returned: str, fragment: str) -> None:
    outcome = sandbox.evaluate(f"def result():\n    return {returned}\n")
    assert not outcome.valid
    assert outcome.score == 0.0
    assert fragment in (outcome.error or ""), outcome.error
    json.loads(outcome.model_dump_json())  # NaN never leaks into the JSON


def test_non_finite_secondary_metric_is_moved_to_artifacts(sandbox: SandboxEvaluator) -> None:
    outcome = sandbox.evaluate(
        "def result():\n    return {'combined_score': 0.7, 'aux': float('nan')}\n"
    )
    assert outcome.valid and outcome.score == 0.7
    assert "aux" not in outcome.metrics
    assert outcome.artifacts["non_finite_aux"] == "nan"


def test_missing_program_function_is_invalid(sandbox: SandboxEvaluator) -> None:
    outcome = sandbox.evaluate("def something_else():\n    return 1\n")
    assert not outcome.valid
    assert "AttributeError" in (outcome.error or "")
    assert "result" in outcome.artifacts["traceback"]


def test_evaluator_without_evaluate_function_is_invalid(tmp_path: Path, task: Task) -> None:
    broken = task.path / "broken_evaluator.py"  # evaluators run from the folder's snapshot
    broken.write_text("def score(path):\n    return {}\n")
    bad_task = task.model_copy(update={"evaluator_path": broken})
    outcome = SandboxEvaluator(bad_task, timeout_s=10).evaluate(OK_PROGRAM)
    assert not outcome.valid
    assert "defines no callable evaluate" in (outcome.error or "")


def test_syntax_error_in_candidate_is_invalid(sandbox: SandboxEvaluator) -> None:
    outcome = sandbox.evaluate("def result(:\n")
    assert not outcome.valid
    assert "SyntaxError" in (outcome.error or "")


def test_huge_output_is_capped(sandbox: SandboxEvaluator) -> None:
    code = textwrap.dedent(
        """\
        import sys
        sys.stdout.write("o" * 10_000_000 + "END-OF-STDOUT")
        sys.stderr.write("e" * 10_000_000 + "END-OF-STDERR")
        def result():
            raise RuntimeError("after the flood")
        """
    )
    outcome = sandbox.evaluate(code)
    assert not outcome.valid
    for stream, end in (("stdout", "END-OF-STDOUT"), ("stderr", "END-OF-STDERR")):
        text = outcome.artifacts[stream]
        assert len(text) <= 20_100
        assert text.endswith(end)
        assert "truncated" in text
    # Printing a lot is not a fault by itself.
    loud_ok = "print('x' * 10_000_000)\n" + OK_PROGRAM
    assert sandbox.evaluate(loud_ok).valid


def test_secrets_are_not_visible(
    monkeypatch: pytest.MonkeyPatch, sandbox: SandboxEvaluator
) -> None:
    monkeypatch.setenv("MY_API_KEY", "sekrit-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sekrit-2")
    monkeypatch.setenv("TAVILY_API_KEY", "sekrit-3")
    monkeypatch.setenv("GITHUB_TOKEN", "sekrit-4")
    monkeypatch.setenv("DB_PASSWORD", "sekrit-5")
    monkeypatch.setenv("LANGSMITH_PROJECT", "sekrit-6")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    code = (
        "import os\n"
        "def result():\n"
        "    env = '\\n'.join(f'{k}={v}' for k, v in os.environ.items())\n"
        "    return {'combined_score': 1.0, 'env': env}\n"
    )
    outcome = sandbox.evaluate(code)
    env = outcome.artifacts["env"]
    assert "sekrit" not in env
    assert "MY_API_KEY" not in env and "OPENAI_API_KEY" not in env
    assert "HARMLESS_SETTING=visible" in env
    assert "PATH=" in env


def test_scrub_environment() -> None:
    env = {
        "PATH": "/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "PYTHONPATH": "/x",
        "FOO_API_KEY": "s",
        "openai_base_url": "s",
        "ANTHROPIC_MODEL": "s",
        "HF_HOME": "s",
        "AWS_REGION": "s",
        "AZURE_X": "s",
        "GOOGLE_APPLICATION_CREDENTIALS": "s",
        "OPENROUTER_X": "s",
        "LANGCHAIN_TRACING_V2": "s",
        "MY_SECRET_THING": "s",
        "SECRET": "s",
        "SLACK_TOKEN": "s",
    }
    clean = scrub_environment(env)
    for kept in ("PATH", "HOME", "LANG", "PYTHONPATH"):
        assert clean[kept] == env[kept]
    assert "s" not in clean.values()
    assert clean["PYTHONHASHSEED"] == "0"


# ---------------------------------------------------------------- OpenEvolve compatibility


def test_openevolve_evaluation_result_object(tmp_path: Path) -> None:
    evaluator = textwrap.dedent(
        """\
        from openevolve.evaluation_result import EvaluationResult

        def evaluate(program_path):
            return EvaluationResult(
                metrics={"combined_score": 0.8, "speed": 2.0},
                artifacts={"log": "all good", "blob": b"raw bytes", "table": {"a": 1}},
            )
        """
    )
    task = make_task(tmp_path, evaluator=evaluator)
    outcome = SandboxEvaluator(task, timeout_s=10).evaluate(OK_PROGRAM)
    assert outcome.valid, outcome.error
    assert outcome.score == 0.8
    assert outcome.metrics == {"combined_score": 0.8, "speed": 2.0}
    assert outcome.artifacts["log"] == "all good"
    assert outcome.artifacts["blob"] == "raw bytes"
    assert json.loads(outcome.artifacts["table"]) == {"a": 1}


def test_duck_typed_result_object_and_artifact_error(tmp_path: Path) -> None:
    evaluator = textwrap.dedent(
        """\
        from types import SimpleNamespace

        def evaluate(program_path):
            return SimpleNamespace(metrics={"combined_score": 0.3},
                                   artifacts={"error": "compilation failed"})
        """
    )
    task = make_task(tmp_path, evaluator=evaluator)
    outcome = SandboxEvaluator(task, timeout_s=10).evaluate(OK_PROGRAM)
    assert not outcome.valid
    assert "compilation failed" in (outcome.error or "")


CASCADE_CONFIG = "evaluator:\n  cascade_evaluation: true\n  cascade_thresholds: [0.5, 0.95]\n"


@pytest.mark.parametrize(
    ("stage1", "stage2", "stage", "score", "keys"),
    [
        (0.3, 0.9, 1, 0.3, {"combined_score", "stage1_only"}),  # below threshold 0: stop
        (0.6, 0.9, 2, 0.9, {"combined_score", "stage1_only", "stage2_only"}),  # < 0.95
        (0.6, 0.97, 3, 1.0, {"combined_score", "stage1_only", "stage2_only", "stage3_only"}),
    ],
)
def test_cascade_thresholds(
    tmp_path: Path, stage1: float, stage2: float, stage: int, score: float, keys: set[str]
) -> None:
    task = make_task(tmp_path, evaluator=CASCADE_EVALUATOR, config=CASCADE_CONFIG)
    assert task.cascade and task.cascade_thresholds == [0.5, 0.95]
    code = f"STAGE1 = {stage1}\nSTAGE2 = {stage2}\n"
    outcome = SandboxEvaluator(task, timeout_s=10).evaluate(code)
    assert outcome.valid, outcome.error
    assert outcome.stage == stage
    assert outcome.score == score
    assert set(outcome.metrics) == keys


def test_cascade_stage_error_is_invalid(tmp_path: Path) -> None:
    task = make_task(tmp_path, evaluator=CASCADE_EVALUATOR, config=CASCADE_CONFIG)
    outcome = SandboxEvaluator(task, timeout_s=10).evaluate("STAGE1 = 0.9\nSTAGE2 = 'bad'\n")
    assert not outcome.valid and outcome.stage == 2
    assert "bad" in (outcome.error or "")


def test_cascade_exception_in_stage1(tmp_path: Path) -> None:
    task = make_task(tmp_path, evaluator=CASCADE_EVALUATOR, config=CASCADE_CONFIG)
    outcome = SandboxEvaluator(task, timeout_s=10).evaluate("STAGE2 = 1.0\n")  # no STAGE1
    assert not outcome.valid
    assert (outcome.error or "").startswith("evaluate_stage1 raised AttributeError")


def test_cascade_can_be_disabled(tmp_path: Path) -> None:
    task = make_task(tmp_path, evaluator=CASCADE_EVALUATOR, config=CASCADE_CONFIG)
    outcome = SandboxEvaluator(task, timeout_s=10, cascade=False).evaluate(
        "STAGE1 = 0.0\nSTAGE2 = 0.0\n" + OK_PROGRAM
    )
    assert outcome.valid and outcome.stage == 0 and outcome.score == 0.5


# ---------------------------------------------------------------- concurrency and setup


def test_evaluate_many_runs_concurrently_and_keeps_order(task: Task) -> None:
    codes = [
        f"import time\ndef result():\n    time.sleep(1.0)\n    return {{'combined_score': {i}}}\n"
        for i in range(4)
    ]
    sandbox = SandboxEvaluator(task, timeout_s=10, workers=4)
    start = time.monotonic()
    outcomes = sandbox.evaluate_many(codes, ids=["a", "b", "c", "d"])
    elapsed = time.monotonic() - start
    assert elapsed < 3.0
    assert [o.score for o in outcomes] == [0.0, 1.0, 2.0, 3.0]
    assert all(o.valid for o in outcomes)


def test_evaluate_many_edge_cases(sandbox: SandboxEvaluator) -> None:
    assert sandbox.evaluate_many([]) == []
    with pytest.raises(ValueError, match="ids"):
        sandbox.evaluate_many(["a", "b"], ids=["only-one"])
    mixed = sandbox.evaluate_many([OK_PROGRAM, "raise SystemExit(1)\n"])
    assert [o.valid for o in mixed] == [True, False]


def test_missing_evaluator_is_a_setup_error(task: Task) -> None:
    sandbox = SandboxEvaluator(task, timeout_s=10)
    task.evaluator_path.unlink()
    # a built sandbox evaluates from its run-start snapshot; a new one cannot start
    assert sandbox.evaluate(OK_PROGRAM).valid
    with pytest.raises(TaskError, match="evaluator"):
        SandboxEvaluator(task)


def test_bad_arguments(task: Task) -> None:
    with pytest.raises(ValueError, match="positive"):
        SandboxEvaluator(task, timeout_s=0)
    with pytest.raises(ValueError, match="not found"):
        SandboxEvaluator(task, python="/no/such/python")


def test_from_config(task: Task) -> None:
    cfg = EvaluationConfig(timeout_s=7, memory_mb=2048, workers=2, cascade=True)
    sandbox = SandboxEvaluator.from_config(task, cfg)
    assert (sandbox.timeout_s, sandbox.memory_mb, sandbox.workers) == (7.0, 2048, 2)
    assert sandbox.cascade is True
    default = SandboxEvaluator.from_config(task, EvaluationConfig())
    assert default.timeout_s == task.timeout_s and default.cascade == task.cascade


def test_outcome_survives_environment_of_parent(sandbox: SandboxEvaluator) -> None:
    """The parent's cwd and environment are untouched by an evaluation."""
    before = (os.getcwd(), dict(os.environ))
    sandbox.evaluate("import os\nos.environ['X_SET_BY_CANDIDATE'] = '1'\n" + OK_PROGRAM)
    assert (os.getcwd(), dict(os.environ)) == before


def test_rlimits_are_applied_in_the_child(task: Task) -> None:
    code = textwrap.dedent(
        """\
        import os, resource
        def result():
            return {
                "combined_score": 1.0,
                "as_limit": float(resource.getrlimit(resource.RLIMIT_AS)[0]),
                "core_limit": float(resource.getrlimit(resource.RLIMIT_CORE)[1]),
                "own_group": float(os.getpgid(0) == os.getpid()),
            }
        """
    )
    # the runner leads its own group in the fallback; under bwrap, bwrap leads it
    outcome = SandboxEvaluator(
        task, timeout_s=10, memory_mb=1500, isolate_filesystem=False
    ).evaluate(code)
    assert outcome.valid, outcome.error
    assert outcome.metrics["as_limit"] == 1500 * 1024 * 1024
    assert outcome.metrics["core_limit"] == 0.0
    assert outcome.metrics["own_group"] == 1.0  # the runner leads its own process group


def test_blas_threads_are_capped_unless_set(
    monkeypatch: pytest.MonkeyPatch, sandbox: SandboxEvaluator
) -> None:
    code = (
        "import os\ndef result():\n"
        "    return {'combined_score': 1.0, 'omp': os.environ['OMP_NUM_THREADS'],\n"
        "            'openblas': os.environ['OPENBLAS_NUM_THREADS']}\n"
    )
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    outcome = sandbox.evaluate(code)
    assert outcome.artifacts["omp"] == "3"
    assert 1 <= int(outcome.artifacts["openblas"]) <= 4

"""load_task / Task: OpenEvolve task folders unchanged, our task.yaml, and malformed folders."""

from __future__ import annotations

import logging
import math
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.evaluation import SandboxEvaluator
from evoduet_graph.task import Task, TaskError, load_task
from tests.fakes import ScriptedChatModel

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"

PROGRAM = """\
# EVOLVE-BLOCK-START
def value():
    return 2.0
# EVOLVE-BLOCK-END
"""

EVALUATOR = """\
import importlib.util

def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("prog", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": float(mod.value())}
"""


def write_task(
    root: Path,
    *,
    program: str | None = PROGRAM,
    evaluator: str | None = EVALUATOR,
    config: str | None = None,
    meta: str | None = None,
    name: str = "toy",
) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "initial_program.py": program,
        "evaluator.py": evaluator,
        "config.yaml": config,
        "task.yaml": meta,
    }
    for filename, text in files.items():
        if text is not None:
            (folder / filename).write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


# ---------------------------------------------------------------- bundled tasks


def test_load_circle_packing() -> None:
    task = load_task(TASKS / "circle_packing_26")
    assert task.name == "circle_packing_26"
    assert task.path.is_absolute() and task.path == (TASKS / "circle_packing_26").resolve()
    assert task.evaluator_path == task.path / "evaluator.py"
    assert task.direction == "max"
    assert task.metric == "sum_radii"
    assert task.sota_score == pytest.approx(2.635983)
    assert task.sota_source and "AlphaEvolve" in task.sota_source
    assert task.initial_score is not None and 0.5 < task.initial_score < 2.0
    assert task.timeout_s == 60.0
    assert task.has_evolve_blocks
    assert task.cascade is False  # config.yaml turns it off although evaluate_stage1 exists
    assert task.cascade_thresholds == [0.5]
    assert "26 circles" in task.instruction and "2.635" in task.instruction
    assert "def run_packing" in task.initial_program
    assert task.openevolve_config["evaluator"]["timeout"] == 60
    assert task.warnings == []
    assert task.language == "python"


def test_load_smoke_task() -> None:
    task = load_task(TASKS / "smoke_polygon_area")
    assert task.name == "smoke_polygon_area"
    assert task.metric == "area"
    assert task.sota_score == 3.0
    assert task.timeout_s == 10.0
    assert task.has_evolve_blocks
    assert task.cascade is False
    assert "convex hull" in task.instruction
    assert task.warnings == []


# ---------------------------------------------------------------- OpenEvolve folders


def test_openevolve_folder_with_unknown_keys_loads_with_warnings_and_evaluates(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder exactly as OpenEvolve users have it.

    No task.yaml, EvaluationResult import, helper module next to the evaluator, a config with keys
    OpenEvolve knows but we do not use (llm.api_base, database.similarity_threshold) and keys nobody
    knows.
    """
    folder = write_task(
        tmp_path,
        name="oe_task",
        evaluator="""\
        import importlib.util
        from openevolve.evaluation_result import EvaluationResult
        from scoring import double

        def evaluate(program_path):
            spec = importlib.util.spec_from_file_location("prog", program_path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            v = mod.value()
            return EvaluationResult(
                metrics={"combined_score": double(v), "raw": v},
                artifacts={"note": "evaluated"},
            )
        """,
        config="""\
        max_iterations: 50
        checkpoint_interval: 10
        log_level: INFO
        random_seed: 7
        diff_based_evolution: true
        early_stopping_patience: 5
        some_future_key: {nested: 1}
        llm:
          api_base: "https://api.example.com/v1"
          primary_model: "some-model"
          temperature: 0.6
          brand_new_llm_option: true
          models:
            - name: m1
              weight: 1.0
              unknown_model_field: 3
        prompt:
          system_message: "Make value() return a larger number."
          num_top_programs: 2
        database:
          population_size: 50
          similarity_threshold: 0.95
          feature_dimensions: ["complexity", "raw"]
        evaluator:
          timeout: 17
          parallel_evaluations: 2
          cascade_evaluation: true
        """,
    )
    (folder / "scoring.py").write_text("def double(x):\n    return 2.0 * x\n")

    with caplog.at_level(logging.WARNING, logger="evoduet_graph.task"):
        task = load_task(folder)

    assert task.name == "oe_task"
    assert task.instruction == "Make value() return a larger number."
    assert task.timeout_s == 17.0  # evaluator.timeout, no task.yaml
    assert task.metric == "combined_score" and task.direction == "max"
    assert task.initial_score is None and task.sota_score is None
    assert task.cascade is False  # cascade requested but no evaluate_stage1
    assert task.openevolve_config["database"]["similarity_threshold"] == 0.95
    joined = "\n".join(task.warnings)
    assert "some_future_key" in joined
    assert "llm.brand_new_llm_option" in joined
    assert "llm.models[0].unknown_model_field" in joined
    assert "evaluate_stage1" in joined
    for known in ("api_base", "similarity_threshold", "early_stopping_patience", "max_iterations"):
        assert known not in joined
    assert "some_future_key" in caplog.text

    outcome = SandboxEvaluator(task, timeout_s=20).evaluate(task.initial_program)
    assert outcome.valid, outcome.error
    assert outcome.score == 4.0
    assert outcome.metrics == {"combined_score": 4.0, "raw": 2.0}
    assert outcome.artifacts["note"] == "evaluated"

    # and it runs: 2 iterations through the graph, the sandboxed evaluator, a scripted model
    # answering with an OpenEvolve SEARCH/REPLACE diff (the folder asks for diffs)
    diff = "<<<<<<< SEARCH\n    return 2.0\n=======\n    return 3.5\n>>>>>>> REPLACE\n"
    llm = ScriptedChatModel(responses=[], default=diff)
    cfg = EvoDuetConfig.model_validate(
        {"iterations": 2, "population": {"num_islands": 1}, "novelty": {"enabled": False}}
    )
    result = run(folder, cfg, llm=llm, run_dir=tmp_path / "run")
    assert result.iterations == 2 and result.stop_reason is None
    assert result.best_score == 7.0  # double(3.5), scored by the folder's own evaluator
    assert "return 3.5" in result.best_program


def test_task_yaml_overrides_and_precedence(tmp_path: Path) -> None:
    folder = write_task(
        tmp_path,
        config="""\
        evaluator: {timeout: 99}
        """,
        meta="""\
        name: renamed
        direction: minimize
        metric: loss
        initial_score: 10
        sota_score: 2.5
        sota_source: paper
        timeout_s: 3.5
        instruction: "Minimise the loss."
        """,
    )
    task = load_task(folder)
    assert task.name == "renamed"
    assert task.direction == "min"
    assert task.metric == "loss"
    assert task.initial_score == 10.0 and task.sota_score == 2.5
    assert task.sota_source == "paper"
    assert task.timeout_s == 3.5  # task.yaml beats evaluator.timeout
    assert task.instruction == "Minimise the loss."  # no system_message in config.yaml


def test_system_message_beats_task_yaml_instruction(tmp_path: Path) -> None:
    folder = write_task(
        tmp_path,
        config='prompt: {system_message: "from config"}\n',
        meta='instruction: "from task.yaml"\n',
    )
    assert load_task(folder).instruction == "from config"


def test_generic_instruction_and_defaults(tmp_path: Path) -> None:
    folder = write_task(tmp_path, name="my_problem")
    task = load_task(folder)
    assert "my_problem" in task.instruction and "combined_score" in task.instruction
    assert task.timeout_s == 60.0
    assert task.openevolve_config == {}
    assert task.warnings == []
    assert task.cascade is False
    assert task.cascade_thresholds == [0.5, 0.75, 0.9]  # OpenEvolve's defaults
    assert task.has_evolve_blocks


def test_openevolve_template_name_is_not_an_instruction(tmp_path: Path) -> None:
    folder = write_task(tmp_path, config="prompt: {system_message: system_message}\n")
    assert load_task(folder).instruction != "system_message"


def test_cascade_defaults_on_when_stage1_exists(tmp_path: Path) -> None:
    """OpenEvolve's evaluator.cascade_evaluation defaults to true."""
    evaluator = (
        EVALUATOR + "\ndef evaluate_stage1(program_path):\n    return evaluate(program_path)\n"
    )
    on = load_task(write_task(tmp_path, name="a", evaluator=evaluator))
    assert on.cascade is True
    off = load_task(
        write_task(
            tmp_path,
            name="b",
            evaluator=evaluator,
            config="evaluator: {cascade_evaluation: false, cascade_thresholds: [0.2, 1]}\n",
        )
    )
    assert off.cascade is False
    assert off.cascade_thresholds == [0.2, 1.0]


def test_stage1_only_evaluator_is_accepted(tmp_path: Path) -> None:
    evaluator = "def evaluate_stage1(program_path):\n    return {'combined_score': 1.0}\n"
    task = load_task(write_task(tmp_path, evaluator=evaluator))
    assert task.cascade is True


def test_evaluator_is_checked_without_importing_it(tmp_path: Path) -> None:
    marker = tmp_path / "imported.txt"
    evaluator = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(1)\n" + EVALUATOR
    load_task(write_task(tmp_path, evaluator=evaluator))
    assert not marker.exists()


def test_evaluate_imported_from_helper_counts(tmp_path: Path) -> None:
    evaluator = "from helper import evaluate  # noqa\n"
    task = load_task(write_task(tmp_path, evaluator=evaluator))
    assert task.evaluator_path.name == "evaluator.py"


def test_unknown_task_yaml_key_warns(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path, meta="direction: max\nbudget_usd: 3\n"))
    assert any("budget_usd" in w for w in task.warnings)


def test_no_evolve_blocks(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path, program="def value():\n    return 1.0\n"))
    assert task.has_evolve_blocks is False


def test_task_is_frozen() -> None:
    task = load_task(TASKS / "smoke_polygon_area")
    with pytest.raises(ValidationError):
        task.name = "other"  # type: ignore[misc]


# ---------------------------------------------------------------- NDG and metric_value


def _task(**kw: object) -> Task:
    base = {
        "name": "t",
        "path": Path("/tmp/t"),
        "initial_program": "",
        "evaluator_path": Path("/tmp/t/evaluator.py"),
        "instruction": "x",
    }
    return Task.model_validate({**base, **kw})


def test_ndg_maximisation() -> None:
    task = _task(initial_score=1.0, sota_score=3.0)
    assert task.ndg(1.0) == 0.0
    assert task.ndg(2.0) == 50.0
    assert task.ndg(3.0) == 100.0
    assert task.ndg(4.0) == 150.0  # not clipped
    assert task.ndg(0.0) == -50.0


def test_ndg_minimisation_flips_both_signs() -> None:
    task = _task(direction="min", initial_score=10.0, sota_score=2.0)
    assert task.ndg(6.0) == 50.0
    assert task.ndg(2.0) == 100.0
    assert task.ndg(12.0) == -25.0
    # an unchanged minimised metric is 0.0, never -0.0 (printed "-0.00%")
    unchanged = task.ndg(10.0)
    assert unchanged is not None and math.copysign(1.0, unchanged) == 1.0


@pytest.mark.parametrize(
    ("initial", "sota", "value"),
    [(None, 3.0, 1.0), (1.0, None, 1.0), (2.0, 2.0, 1.0), (1.0, 3.0, math.nan)],
)
def test_ndg_undefined(initial: float | None, sota: float | None, value: float) -> None:
    assert _task(initial_score=initial, sota_score=sota).ndg(value) is None


def test_metric_value() -> None:
    task = _task(metric="sum_radii")
    assert task.metric_value({"sum_radii": 2, "combined_score": 0.1}) == 2.0
    assert task.metric_value({"combined_score": 0.1}) is None
    assert task.metric_value({"sum_radii": "2.0"}) is None
    assert task.metric_value({"sum_radii": math.nan}) is None
    assert task.metric_value({"sum_radii": True}) is None


# ---------------------------------------------------------------- malformed folders


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="does not exist"):
        load_task(tmp_path / "nope")


def test_path_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "file.txt"
    file.write_text("x")
    with pytest.raises(TaskError, match="not a directory"):
        load_task(file)


@pytest.mark.parametrize(
    ("files", "fragments"),
    [
        # a missing initial program is allowed (SkyDiscover): the model writes the first one
        ({"evaluator": None}, ["no evaluator", "evaluator.py", "evaluate(program_path)"]),
        ({"program": None, "evaluator": None}, ["no evaluator", "evaluator/ folder"]),
        ({"config": "llm: [unclosed\n"}, ["config.yaml", "not valid YAML"]),
        ({"config": "- a\n- b\n"}, ["config.yaml", "mapping", "list"]),
        ({"meta": "direction: max\n  metric: x\n"}, ["task.yaml", "not valid YAML"]),
        ({"meta": "just a string\n"}, ["task.yaml", "mapping", "str"]),
        ({"meta": "direction: up\n"}, ["task.yaml", "direction", "'max' or 'min'", "up"]),
        ({"meta": "initial_score: high\n"}, ["task.yaml", "initial_score", "high"]),
        ({"meta": "timeout_s: -5\n"}, ["task.yaml", "timeout_s", "greater than 0"]),
        ({"meta": "metric: [a, b]\n"}, ["task.yaml", "metric"]),
        ({"config": "evaluator: {timeout: soon}\n"}, ["evaluator.timeout", "soon"]),
        ({"config": "evaluator: {timeout: 0}\n"}, ["evaluator.timeout", "positive"]),
        ({"config": "evaluator: 5\n"}, ["`evaluator` must be a mapping"]),
        ({"config": "evaluator: {cascade_evaluation: maybe}\n"}, ["cascade_evaluation"]),
        ({"config": "evaluator: {cascade_thresholds: [a]}\n"}, ["cascade_thresholds"]),
        ({"config": "prompt: {system_message: 5}\n"}, ["prompt.system_message", "str"]),
        ({"evaluator": "def evaluate(:\n"}, ["evaluator.py", "syntax error", "line 1"]),
        ({"evaluator": "def score(p):\n    return {}\n"}, ["no `evaluate` function"]),
        ({"evaluator": "def f():\n    def evaluate(p): ...\n"}, ["no `evaluate` function"]),
        ({"program": "def value(:\n"}, ["initial_program.py", "syntax error"]),
    ],
)
def test_malformed_task_raises_helpful_error(
    tmp_path: Path, files: dict[str, str | None], fragments: list[str]
) -> None:
    kwargs: dict[str, str | None] = {"program": PROGRAM, "evaluator": EVALUATOR}
    kwargs.update(files)
    folder = write_task(tmp_path, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(TaskError) as info:
        load_task(folder)
    message = str(info.value)
    assert str(folder) in message
    for fragment in fragments:
        assert fragment in message, message


def test_task_error_is_a_value_error() -> None:
    assert issubclass(TaskError, ValueError)

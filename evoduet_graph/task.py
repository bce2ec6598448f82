"""Task folders: OpenEvolve task folders, unchanged, plus our optional ``task.yaml``.

A task folder holds (DESIGN.md §5):

- ``initial_program.py`` (required): the seed program, usually with
  ``# EVOLVE-BLOCK-START`` / ``# EVOLVE-BLOCK-END`` markers around the evolvable region;
- ``evaluator.py`` (required): ``evaluate(program_path) -> dict | EvaluationResult``, and
  optionally the OpenEvolve cascade ``evaluate_stage1/2/3``;
- ``config.yaml`` (optional): an OpenEvolve configuration. We read ``prompt.system_message``,
  ``evaluator.timeout``, ``evaluator.cascade_evaluation``, ``evaluator.cascade_thresholds`` and
  ``language``; every other key is kept verbatim in `Task.openevolve_config`. Keys OpenEvolve does
  not know are tolerated and reported as warnings;
- ``task.yaml`` (optional, ours): ``name``, ``direction``, ``metric``, ``initial_score``,
  ``sota_score``, ``sota_source``, ``timeout_s``, ``instruction``.

`load_task` never imports the evaluator (it may be slow or have side effects); it checks it
statically with `ast`.
"""

from __future__ import annotations

import ast
import logging
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

logger = logging.getLogger(__name__)

INITIAL_PROGRAM = "initial_program.py"
EVALUATOR = "evaluator.py"
OPENEVOLVE_CONFIG = "config.yaml"
TASK_META = "task.yaml"

EVOLVE_BLOCK_START = "# EVOLVE-BLOCK-START"
EVOLVE_BLOCK_END = "# EVOLVE-BLOCK-END"

#: OpenEvolve's default ``evaluator.cascade_thresholds``.
DEFAULT_CASCADE_THRESHOLDS: tuple[float, ...] = (0.5, 0.75, 0.9)
DEFAULT_TIMEOUT_S = 60.0

# Keys of OpenEvolve's ``Config`` dataclasses (openevolve/config.py). Unknown keys are not an
# error (OpenEvolve versions differ); they only produce a warning.
_OE_TOP_LEVEL: frozenset[str] = frozenset(
    {
        "max_iterations",
        "checkpoint_interval",
        "log_level",
        "log_dir",
        "random_seed",
        "language",
        "file_suffix",
        "diff_based_evolution",
        "max_code_length",
        "enforce_evolve_blocks",
        "diff_pattern",
        "early_stopping_patience",
        "convergence_threshold",
        "early_stopping_metric",
        "max_tasks_per_child",
        "allowed_files",
        "llm",
        "prompt",
        "database",
        "evaluator",
        "evolution_trace",
    }
)
_OE_LLM_MODEL: frozenset[str] = frozenset(
    {
        "api_base",
        "api_key",
        "name",
        "provider",
        "init_client",
        "weight",
        "system_message",
        "temperature",
        "top_p",
        "max_tokens",
        "timeout",
        "retries",
        "retry_delay",
        "random_seed",
        "reasoning_effort",
        "max_budget_usd",
        "max_ai_credits",
        "allow_all_tools",
        "manual_mode",
    }
)
_OE_SECTIONS: dict[str, frozenset[str]] = {
    "llm": _OE_LLM_MODEL
    | {
        "models",
        "evaluator_models",
        "primary_model",
        "primary_model_weight",
        "secondary_model",
        "secondary_model_weight",
    },
    "prompt": frozenset(
        {
            "template_dir",
            "system_message",
            "island_system_messages",
            "evaluator_system_message",
            "programs_as_changes_description",
            "system_message_changes_description",
            "initial_changes_description",
            "num_top_programs",
            "num_diverse_programs",
            "use_template_stochasticity",
            "template_variations",
            "use_meta_prompting",
            "meta_prompt_weight",
            "include_artifacts",
            "max_artifact_bytes",
            "artifact_security_filter",
            "suggest_simplification_after_chars",
            "include_changes_under_chars",
            "concise_implementation_max_lines",
            "comprehensive_implementation_min_lines",
            "diff_summary_max_line_len",
            "diff_summary_max_lines",
            "code_length_threshold",
        }
    ),
    "database": frozenset(
        {
            "db_path",
            "in_memory",
            "log_prompts",
            "population_size",
            "archive_size",
            "num_islands",
            "elite_selection_ratio",
            "exploration_ratio",
            "exploitation_ratio",
            "diversity_metric",
            "feature_dimensions",
            "feature_bins",
            "diversity_reference_size",
            "migration_interval",
            "migration_rate",
            "random_seed",
            "artifacts_base_path",
            "artifact_size_threshold",
            "cleanup_old_artifacts",
            "artifact_retention_days",
            "max_snapshot_artifacts",
            "novelty_llm",
            "embedding_model",
            "embedding_api_base",
            "similarity_threshold",
        }
    ),
    "evaluator": frozenset(
        {
            "timeout",
            "max_retries",
            "memory_limit_mb",
            "cpu_limit",
            "cascade_evaluation",
            "cascade_thresholds",
            "parallel_evaluations",
            "distributed",
            "use_llm_feedback",
            "llm_feedback_weight",
            "enable_artifacts",
            "max_artifact_storage",
            "evaluator_args",
        }
    ),
    "evolution_trace": frozenset(
        {
            "enabled",
            "format",
            "include_code",
            "include_prompts",
            "output_path",
            "buffer_size",
            "compress",
        }
    ),
}
# OpenEvolve's PromptConfig default for system_message is a template *name*, not a message.
_OE_TEMPLATE_NAMES = frozenset({"system_message", "evaluator_system_message"})

_EVALUATE_FUNCTIONS = ("evaluate", "evaluate_stage1")


class TaskError(ValueError):
    """A task folder is malformed. The message names the folder, the problem and the fix."""


class Task(BaseModel):
    """A loaded task folder (immutable).

    Scores: the evaluator's fitness is ``combined_score`` (higher is better, OpenEvolve). The
    *reported* quantity is ``metrics[metric]`` on its own scale, in ``direction``; the
    ``initial_score`` / ``sota_score`` fields are on that same scale and feed `Task.ndg`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="Task name (task.yaml `name`, else the folder name).")
    path: Path = Field(description="Absolute path of the task folder.")
    initial_program: str = Field(description="Source text of initial_program.py.")
    evaluator_path: Path = Field(description="Absolute path of evaluator.py.")
    instruction: str = Field(description="Problem statement given to the LLM (system message).")
    direction: Literal["max", "min"] = Field("max", description="Direction of `metric`.")
    metric: str = Field("combined_score", description="Evaluator metric holding the quantity.")
    initial_score: float | None = Field(None, description="`metric` of the initial program.")
    sota_score: float | None = Field(None, description="Best known `metric` value.")
    sota_source: str | None = Field(None, description="Where the SOTA value comes from.")
    timeout_s: float = Field(DEFAULT_TIMEOUT_S, gt=0, description="Per-candidate wall clock.")
    cascade: bool = Field(False, description="Run evaluate_stage1..3 (OpenEvolve cascade).")
    cascade_thresholds: list[float] = Field(
        default_factory=lambda: list(DEFAULT_CASCADE_THRESHOLDS),
        description="Threshold i gates stage i+2 (on combined_score, else the metric mean).",
    )
    has_evolve_blocks: bool = Field(False, description="Initial program has EVOLVE-BLOCK markers.")
    language: str = Field("python", description="Program language (config.yaml `language`).")
    openevolve_config: dict[str, Any] = Field(
        default_factory=dict, description="Raw parsed config.yaml ({} if absent)."
    )
    warnings: list[str] = Field(default_factory=list, description="Non-fatal load problems.")

    def metric_value(self, metrics: dict[str, Any]) -> float | None:
        """The reported quantity ``metrics[self.metric]``.

        Args:
            metrics: evaluator metrics (e.g. `EvaluationOutcome.metrics`).

        Returns:
            The value as a float, or None when it is missing, not numeric, or not finite.
        """
        value = metrics.get(self.metric)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        value = float(value)
        return value if math.isfinite(value) else None

    def ndg(self, metric_value: float) -> float | None:
        """Normalised distance gained: (value − initial) / (SOTA − initial) × 100.

        Computed on the metric's own scale. For minimisation both numerator and denominator
        change sign, so the same formula holds (DESIGN.md §6). Not clipped: beating SOTA gives
        more than 100, falling below the initial program gives a negative value.

        Args:
            metric_value: the metric value reached (e.g. the best program's ``sum_radii``).

        Returns:
            NDG in percent, or None when ``initial_score`` or ``sota_score`` is unknown, they are
            equal, or ``metric_value`` is not finite.
        """
        if self.initial_score is None or self.sota_score is None:
            return None
        span = self.sota_score - self.initial_score
        if span == 0 or not math.isfinite(metric_value):
            return None
        return (metric_value - self.initial_score) / span * 100.0


class _TaskMeta(BaseModel):
    """Schema of our ``task.yaml`` (all optional)."""

    model_config = ConfigDict(extra="ignore")

    name: str | None = None
    direction: Literal["max", "min"] = "max"
    metric: str = "combined_score"
    initial_score: float | None = None
    sota_score: float | None = None
    sota_source: str | None = None
    timeout_s: float | None = Field(None, gt=0)
    instruction: str | None = None

    @field_validator("direction", mode="before")
    @classmethod
    def _normalise_direction(cls, value: Any) -> Any:
        aliases = {
            "maximize": "max",
            "maximise": "max",
            "maximum": "max",
            "minimize": "min",
            "minimise": "min",
            "minimum": "min",
        }
        if isinstance(value, str):
            return aliases.get(value.strip().lower(), value.strip().lower())
        return value


_TASK_META_KEYS = frozenset(_TaskMeta.model_fields)


def load_task(path: str | Path) -> Task:
    """Load a task folder (an OpenEvolve task folder, unchanged, plus optional ``task.yaml``).

    Implements OpenEvolve's task contract: ``initial_program.py`` + ``evaluator.py`` (with
    ``evaluate`` or the ``evaluate_stage1`` cascade) + optional ``config.yaml``. Settings are
    resolved in this order: ``task.yaml`` first, then ``config.yaml``, then defaults
    (``timeout_s``: ``task.yaml timeout_s`` > ``evaluator.timeout`` > 60 s; ``instruction``:
    ``prompt.system_message`` > ``task.yaml instruction`` > a generic one). ``cascade`` is
    ``evaluator.cascade_evaluation`` (OpenEvolve's default: true) and the evaluator defining
    ``evaluate_stage1``. Unknown keys in either YAML file are logged and collected in
    `Task.warnings`; they never fail the load.

    Args:
        path: the task folder.

    Returns:
        The immutable `Task`.

    Raises:
        TaskError: the folder is missing or not a directory; a required file is missing or
            unreadable; a YAML file has a syntax error or is not a mapping; a value has the wrong
            type (e.g. ``direction: up``); the evaluator has a syntax error or defines neither
            ``evaluate`` nor ``evaluate_stage1``; the initial program is not valid Python or
            has an empty EVOLVE-BLOCK.
    """
    folder = Path(path).expanduser()
    if not folder.exists():
        raise TaskError(f"task folder {folder} does not exist; pass the path of a task folder")
    if not folder.is_dir():
        raise TaskError(
            f"task path {folder} is not a directory; pass the folder that holds "
            f"{INITIAL_PROGRAM} and {EVALUATOR}"
        )
    folder = folder.resolve()
    warnings: list[str] = []

    initial_path = folder / INITIAL_PROGRAM
    evaluator_path = folder / EVALUATOR
    missing = [p.name for p in (initial_path, evaluator_path) if not p.is_file()]
    if missing:
        raise TaskError(
            f"task folder {folder} is missing {', '.join(missing)}; an OpenEvolve task folder "
            f"needs {INITIAL_PROGRAM} (the seed program) and {EVALUATOR} (defining "
            f"evaluate(program_path))"
        )
    initial_program = _read_text(initial_path, folder)
    evaluator_source = _read_text(evaluator_path, folder)

    oe_config = _read_yaml_mapping(folder / OPENEVOLVE_CONFIG, folder)
    meta_raw = _read_yaml_mapping(folder / TASK_META, folder)

    warnings += _unknown_openevolve_keys(oe_config)
    warnings += [
        f"{TASK_META}: unknown key {key!r} ignored (known: {', '.join(sorted(_TASK_META_KEYS))})"
        for key in meta_raw
        if key not in _TASK_META_KEYS
    ]
    try:
        meta = _TaskMeta.model_validate(meta_raw)
    except ValidationError as exc:
        raise TaskError(_validation_message(folder / TASK_META, exc)) from None

    language = _config_value(oe_config, ("language",), str, folder) or "python"
    functions = _check_evaluator(evaluator_source, evaluator_path)
    if language == "python":
        _check_python(initial_program, initial_path, folder)
    _check_evolve_blocks(initial_program, initial_path)

    # Timeout: task.yaml > config.yaml evaluator.timeout > default.
    timeout_s = meta.timeout_s
    if timeout_s is None:
        oe_timeout = _config_value(oe_config, ("evaluator", "timeout"), (int, float), folder)
        if oe_timeout is not None:
            if oe_timeout <= 0:
                raise TaskError(
                    f"{folder / OPENEVOLVE_CONFIG}: evaluator.timeout must be a positive number "
                    f"of seconds, got {oe_timeout!r}"
                )
            timeout_s = float(oe_timeout)
    if timeout_s is None:
        timeout_s = DEFAULT_TIMEOUT_S

    # Cascade: OpenEvolve enables it by default; it only applies with evaluate_stage1.
    cascade_flag = _config_value(oe_config, ("evaluator", "cascade_evaluation"), bool, folder)
    cascade_flag = True if cascade_flag is None else cascade_flag
    cascade = bool(cascade_flag and "evaluate_stage1" in functions)
    thresholds_raw = _config_value(oe_config, ("evaluator", "cascade_thresholds"), list, folder)
    if thresholds_raw is None:
        thresholds = list(DEFAULT_CASCADE_THRESHOLDS)
    else:
        if not all(isinstance(t, int | float) and not isinstance(t, bool) for t in thresholds_raw):
            raise TaskError(
                f"{folder / OPENEVOLVE_CONFIG}: evaluator.cascade_thresholds must be a list of "
                f"numbers, got {thresholds_raw!r}"
            )
        thresholds = [float(t) for t in thresholds_raw]
    explicit_cascade = isinstance(oe_config.get("evaluator"), dict) and oe_config["evaluator"].get(
        "cascade_evaluation"
    )
    if explicit_cascade and "evaluate_stage1" not in functions:
        warnings.append(
            f"{OPENEVOLVE_CONFIG}: evaluator.cascade_evaluation is true but {EVALUATOR} "
            "defines no evaluate_stage1; evaluating directly with evaluate()"
        )

    name = meta.name or folder.name
    system_message = _config_value(oe_config, ("prompt", "system_message"), str, folder)
    if system_message is not None and system_message.strip() in _OE_TEMPLATE_NAMES:
        system_message = None  # OpenEvolve's default: a template name, not a message
    instruction = (
        (system_message or "").strip()
        or (meta.instruction or "").strip()
        or _generic_instruction(name, meta.metric, meta.direction)
    )

    for message in warnings:
        logger.warning("task %s: %s", name, message)

    return Task(
        name=name,
        path=folder,
        initial_program=initial_program,
        evaluator_path=evaluator_path,
        instruction=instruction,
        direction=meta.direction,
        metric=meta.metric,
        initial_score=meta.initial_score,
        sota_score=meta.sota_score,
        sota_source=meta.sota_source,
        timeout_s=timeout_s,
        cascade=cascade,
        cascade_thresholds=thresholds,
        has_evolve_blocks=EVOLVE_BLOCK_START in initial_program
        and EVOLVE_BLOCK_END in initial_program,
        language=language,
        openevolve_config=oe_config,
        warnings=warnings,
    )


def _read_text(path: Path, folder: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(
            f"task folder {folder}: {path.name} is not UTF-8 text ({exc}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise TaskError(f"task folder {folder}: cannot read {path.name}: {exc}") from None


def _read_yaml_mapping(path: Path, folder: Path) -> dict[str, Any]:
    """Parse an optional YAML file that must hold a mapping; absent or empty → {}."""
    if not path.exists():
        return {}
    text = _read_text(path, folder)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TaskError(
            f"task folder {folder}: {path.name} is not valid YAML; fix the syntax:\n{exc}"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TaskError(
            f"task folder {folder}: {path.name} must hold a mapping of keys to values "
            f"(e.g. `direction: max`), got a {type(data).__name__}"
        )
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise TaskError(f"task folder {folder}: {path.name} has non-string keys {bad!r}")
    return data


def _unknown_openevolve_keys(config: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for key, value in config.items():
        if key.startswith("early_stopping_"):
            continue
        if key not in _OE_TOP_LEVEL:
            found.append(f"{OPENEVOLVE_CONFIG}: unknown OpenEvolve key {key!r} ignored")
            continue
        allowed = _OE_SECTIONS.get(key)
        if allowed is None or not isinstance(value, dict):
            continue
        for sub in value:
            if sub not in allowed:
                found.append(f"{OPENEVOLVE_CONFIG}: unknown OpenEvolve key '{key}.{sub}' ignored")
        if key == "llm":
            for list_key in ("models", "evaluator_models"):
                models = value.get(list_key)
                if not isinstance(models, list):
                    continue
                for i, model in enumerate(models):
                    if isinstance(model, dict):
                        found += [
                            f"{OPENEVOLVE_CONFIG}: unknown OpenEvolve key "
                            f"'llm.{list_key}[{i}].{sub}' ignored"
                            for sub in model
                            if sub not in _OE_LLM_MODEL
                        ]
    return found


def _config_value(
    config: dict[str, Any],
    keys: tuple[str, ...],
    types: type | tuple[type, ...],
    folder: Path,
) -> Any:
    """Return ``config[k1][k2]...`` checked against ``types``; None when absent or null."""
    node: Any = config
    for i, key in enumerate(keys):
        if not isinstance(node, dict):
            where = ".".join(keys[:i])
            raise TaskError(
                f"{folder / OPENEVOLVE_CONFIG}: `{where}` must be a mapping, "
                f"got {type(node).__name__}"
            )
        if key not in node or node[key] is None:
            return None
        node = node[key]
    expected = types if isinstance(types, tuple) else (types,)
    wrong_bool = isinstance(node, bool) and bool not in expected
    if wrong_bool or not isinstance(node, expected):
        names = " or ".join(t.__name__ for t in expected)
        raise TaskError(
            f"{folder / OPENEVOLVE_CONFIG}: `{'.'.join(keys)}` must be {names}, "
            f"got {node!r} ({type(node).__name__})"
        )
    return node


def _check_evaluator(source: str, path: Path) -> set[str]:
    """Statically find ``evaluate`` / ``evaluate_stage1..3`` at module level (no import)."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(
            f"task folder {path.parent}: {path.name} has a syntax error at line {exc.lineno}: "
            f"{exc.msg}; fix it so the evaluator can be imported"
        ) from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if not any(fn in names for fn in _EVALUATE_FUNCTIONS):
        raise TaskError(
            f"task folder {path.parent}: {path.name} defines no `evaluate` function; add "
            "`def evaluate(program_path: str) -> dict:` returning metrics such as "
            '{"combined_score": ...} (or the cascade `evaluate_stage1`)'
        )
    return names & {"evaluate", "evaluate_stage1", "evaluate_stage2", "evaluate_stage3"}


def _check_python(source: str, path: Path, folder: Path) -> None:
    try:
        ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(
            f"task folder {folder}: {path.name} has a syntax error at line {exc.lineno}: "
            f"{exc.msg}; the initial program must be valid Python"
        ) from None


def _check_evolve_blocks(source: str, path: Path) -> None:
    """An EVOLVE-BLOCK with nothing (or only blank lines) between its markers leaves the model
    nothing to edit: a SEARCH cannot anchor in it and a rewrite has nowhere to go."""
    from evoduet_graph.diffs import evolve_regions

    lines = source.split("\n")
    for first, stop in evolve_regions(source):
        if not any(line.strip() for line in lines[first:stop]):
            raise TaskError(
                f"{path}: the EVOLVE-BLOCK at line {first} is empty; put the code the model may "
                "change between # EVOLVE-BLOCK-START and # EVOLVE-BLOCK-END"
            )


def _validation_message(path: Path, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        lines.append(f"  {loc}: {err['msg']} (got {err.get('input')!r})")
    return f"{path} has invalid values; fix them:\n" + "\n".join(lines)


def _generic_instruction(name: str, metric: str, direction: str) -> str:
    goal = "maximise" if direction == "max" else "minimise"
    return (
        f"You are an expert programmer improving a program for the task '{name}'. "
        f"The evaluator runs the program and reports the metric '{metric}'; {goal} it. "
        "Keep the program's public functions and their signatures, keep it deterministic, "
        "and only change code inside the EVOLVE-BLOCK markers when they are present."
    )

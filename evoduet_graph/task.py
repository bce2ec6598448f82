"""Task folders as users have them: OpenEvolve's and SkyDiscover's, unchanged, plus ``task.yaml``.

A task folder holds (docs/design.md §5):

- the program to evolve (optional): ``initial_program.<ext>`` in any language, or the file
  named by ``--program``; or a folder, ``initial_program/`` (or ``--program DIR``), whose text
  files are evolved together (`_load_folder_program`, `evoduet_graph.candidates.bundle`);
  the language comes from the config's ``language:`` (else ``file_suffix:``, else the
  file's suffix) (`evoduet_graph.tasks.languages`). Code between
  ``EVOLVE-BLOCK-START`` / ``EVOLVE-BLOCK-END`` marker lines (any comment syntax: ``#``,
  ``//``, ``--``, ``/* */``) is what the model may change; without markers the whole file may
  change (SkyDiscover's rule). Without a program, the first iteration asks the model for one
  from the instruction (SkyDiscover's "from scratch" start);
- the evaluator, detected as SkyDiscover does (``skydiscover/evaluation/__init__.py``):
  (a) ``evaluator.py`` with ``evaluate(program_path)`` (and optionally the OpenEvolve cascade
  ``evaluate_stage1/2/3``); (b) an ``evaluator/`` directory: its ``evaluator.py`` when that
  defines ``evaluate``, else its ``evaluate.sh`` (called as ``evaluate.sh PROGRAM train``,
  printing one JSON object: ``combined_score``, ``metrics``, ``artifacts``, ``status``);
- ``config.yaml`` (optional): an OpenEvolve or SkyDiscover configuration. We read
  ``prompt.system_message`` (also ``llm.system_message``), ``evaluator.timeout``,
  ``evaluator.cascade_evaluation``, ``evaluator.cascade_thresholds``, ``language`` and
  ``file_suffix`` here; `evoduet_graph.tasks.settings` reads the rest that is the task's business
  (``diff_based_*``, ``max_code_length`` / ``max_solution_length``, ``random_seed``, the model
  settings). Every key is kept verbatim in `Task.openevolve_config`; keys neither framework
  knows are reported as warnings;
- ``task.yaml`` (optional, ours): ``name``, ``direction``, ``metric``, ``initial_score``,
  ``sota_score``, ``sota_source``, ``timeout_s``, ``instruction``.

`load_task` never imports the evaluator (it may be slow or have side effects); it checks it
statically with `ast`.
"""

from __future__ import annotations

import ast
import logging
import math
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evoduet_graph.candidates.bundle import (
    BundleError,
    evolvable_paths,
    file_language,
    pack,
    read_folder,
    unpack,
)
from evoduet_graph.candidates.diffs import evolve_regions, has_evolve_blocks
from evoduet_graph.errors import UserError
from evoduet_graph.tasks.languages import Language, language_by_name, language_for_suffix
from evoduet_graph.tasks.openevolve_config import unknown_keys

logger = logging.getLogger(__name__)

INITIAL_PROGRAM = "initial_program.py"
INITIAL_PROGRAM_STEM = "initial_program"
EVALUATOR = "evaluator.py"
EVALUATOR_DIR = "evaluator"  # SkyDiscover: evaluator/evaluator.py or evaluator/evaluate.sh
EVALUATE_SCRIPT = "evaluate.sh"
OPENEVOLVE_CONFIG = "config.yaml"
TASK_META = "task.yaml"

EVOLVE_BLOCK_START = "# EVOLVE-BLOCK-START"
EVOLVE_BLOCK_END = "# EVOLVE-BLOCK-END"

#: OpenEvolve's default ``evaluator.cascade_thresholds``.
DEFAULT_CASCADE_THRESHOLDS: tuple[float, ...] = (0.5, 0.75, 0.9)
DEFAULT_TIMEOUT_S = 60.0

# OpenEvolve's PromptConfig default for system_message is a template *name*, not a message.
_OE_TEMPLATE_NAMES = frozenset({"system_message", "evaluator_system_message"})

_EVALUATE_FUNCTIONS = ("evaluate", "evaluate_stage1")


class TaskError(UserError, ValueError):
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
    evaluator_path: Path = Field(
        description="Absolute path of the evaluator: evaluator.py, evaluator/evaluator.py or "
        "evaluator/evaluate.sh."
    )
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
    has_evolve_blocks: bool = Field(
        False, description="Initial program has EVOLVE-BLOCK markers (a folder: in any file)."
    )
    language: str = Field("python", description="Program language (config.yaml `language`).")
    file_suffix: str = Field(".py", description="Suffix of candidate files (`.py`, `.rs`, ...).")
    program_file: str | None = Field(
        INITIAL_PROGRAM,
        description="The evolved program's file name in the folder (or the --program path); "
        "None: the folder has none and the first iteration asks the model for one.",
    )
    layout: Literal["openevolve", "skydiscover"] = Field(
        "openevolve", description="Where the evaluator was found: evaluator.py or evaluator/."
    )
    evaluator_kind: Literal["python", "shell"] = Field(
        "python",
        description="`python`: evaluate(program_path) of `evaluator_path`; `shell`: run the "
        "script `evaluator_path` (evaluate.sh PROGRAM) and parse the JSON it prints.",
    )
    openevolve_config: dict[str, Any] = Field(
        default_factory=dict, description="Raw parsed config.yaml ({} if absent)."
    )
    container: dict[str, str] | None = Field(
        None,
        description="Set by `evaluation.container.prepare_container`: the runtime and image "
        "that run evaluate.sh (`evaluation.container: true`); None: the local sandbox.",
    )
    warnings: list[str] = Field(default_factory=list, description="Non-fatal load problems.")
    program_kind: Literal["file", "folder"] = Field(
        "file",
        description="`file`: one evolved file; `folder`: `initial_program/` (or --program DIR) "
        "is the program, carried as a bundle text (`evoduet_graph.candidates.bundle`).",
    )
    folder_evolve_all: bool = Field(
        False,
        description="Folder programs: every text file may change (task.yaml `folder.evolve: "
        "all`); else only files with EVOLVE-BLOCK markers, between them.",
    )
    folder_new_files: bool = Field(
        False, description="Folder programs: answers may create files (`folder.new_files`)."
    )
    folder_carried: list[str] = Field(
        default_factory=list,
        description="Folder programs: binary files and build outputs of the initial folder, "
        "copied into every candidate folder, never shown to the model.",
    )
    program_dir: Path | None = Field(
        None, description="Folder programs: absolute path of the initial program folder."
    )

    @property
    def is_folder(self) -> bool:
        """Whether the program is a folder (a bundle text in the store and the prompts)."""
        return self.program_kind == "folder"

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
        change sign, so the same formula holds (docs/design.md §6). Not clipped: beating SOTA gives
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
        # + 0.0 turns the -0.0 of an unchanged minimised metric into 0.0
        return (metric_value - self.initial_score) / span * 100.0 + 0.0

    @property
    def lang(self) -> Language:
        """The program language (`evoduet_graph.tasks.languages.Language`)."""
        lang = language_by_name(self.language)
        if lang.suffix != self.file_suffix and self.file_suffix:
            return Language(
                lang.name, lang.display, self.file_suffix, lang.fence, lang.aliases, lang.tools
            )
        return lang

    @property
    def has_initial_program(self) -> bool:
        """Whether the folder has a program to start from (else the model writes the first)."""
        return self.program_file is not None

    @property
    def program_label(self) -> str:
        """How messages name the evolved program: its file name, or what stands in for it."""
        return self.program_file or "the program the model writes first (no initial program)"


class _FolderMeta(BaseModel):
    """``task.yaml`` ``folder:``: what the model may change in a folder program."""

    model_config = ConfigDict(extra="forbid")

    evolve: Literal["marked", "all"] = "marked"
    new_files: bool = False


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
    folder: _FolderMeta | None = None

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


def _task_language(
    config_language: str | None, config_suffix: str | None, initial_path: Path | None
) -> Language:
    """The task's language: the config's ``language``, else its suffix, else the program's."""
    if config_language:
        return language_by_name(config_language)
    if config_suffix:
        return language_for_suffix(config_suffix)
    if initial_path is not None:
        return language_for_suffix(initial_path.suffix or ".py")
    return language_by_name("python")


def _timeout_s(meta: _TaskMeta, oe_config: dict[str, Any], folder: Path) -> float:
    """Timeout: ``task.yaml`` > ``config.yaml`` ``evaluator.timeout`` > default."""
    if meta.timeout_s is not None:
        return meta.timeout_s
    oe_timeout = _config_value(oe_config, ("evaluator", "timeout"), (int, float), folder)
    if oe_timeout is None:
        return DEFAULT_TIMEOUT_S
    if oe_timeout <= 0:
        raise TaskError(
            f"{folder / OPENEVOLVE_CONFIG}: evaluator.timeout must be a positive number "
            f"of seconds, got {oe_timeout!r}"
        )
    return float(oe_timeout)


def _cascade(
    oe_config: dict[str, Any], functions: set[str], kind: str, folder: Path, warnings: list[str]
) -> tuple[bool, list[float]]:
    """Cascade evaluation and its thresholds.

    OpenEvolve enables cascade evaluation by default; it only applies with ``evaluate_stage1``
    (a warning goes to ``warnings`` when the config asks for it explicitly without one).
    """
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
    if explicit_cascade and "evaluate_stage1" not in functions and kind == "python":
        warnings.append(
            f"{OPENEVOLVE_CONFIG}: evaluator.cascade_evaluation is true but {EVALUATOR} "
            "defines no evaluate_stage1; evaluating directly with evaluate()"
        )
    return cascade, thresholds


def _system_message(oe_config: dict[str, Any], folder: Path) -> str | None:
    """The task's system message: ``prompt.system_message``, else ``llm.system_message``."""
    system_message: str | None = _config_value(oe_config, ("prompt", "system_message"), str, folder)
    if system_message is not None and system_message.strip() in _OE_TEMPLATE_NAMES:
        system_message = None  # OpenEvolve's default: a template name, not a message
    if system_message is None:  # OpenEvolve copies llm.system_message into every model
        system_message = _config_value(oe_config, ("llm", "system_message"), str, folder)
        if system_message is not None and system_message.strip() in _OE_TEMPLATE_NAMES:
            system_message = None
    return system_message


def load_task(path: str | Path, program: str | Path | None = None) -> Task:
    """Load a task folder (OpenEvolve's or SkyDiscover's, unchanged, plus optional ``task.yaml``).

    Implements both frameworks' task contracts (module docstring): the program
    (``program``, else ``initial_program<file_suffix>``, else ``initial_program.py``, else the
    one ``initial_program.*`` file; none is allowed), the evaluator (``evaluator.py``, else
    ``evaluator/evaluator.py`` defining ``evaluate``, else ``evaluator/evaluate.sh``) and the
    optional ``config.yaml``. Settings are resolved in this order: ``task.yaml`` first, then
    ``config.yaml``, then defaults (``timeout_s``: ``task.yaml timeout_s`` >
    ``evaluator.timeout`` > 60 s; ``instruction``: ``prompt.system_message`` >
    ``llm.system_message`` > ``task.yaml instruction`` > a generic one). ``cascade`` is
    ``evaluator.cascade_evaluation`` (OpenEvolve's default: true) and the evaluator defining
    ``evaluate_stage1``. Unknown keys in either YAML file are logged and collected in
    `Task.warnings`; they never fail the load.

    Args:
        path: the task folder.
        program: the file to evolve instead of ``initial_program.<ext>`` (absolute, or
            relative to the working directory or to the folder); its suffix gives the language
            when the config names none.

    Returns:
        The immutable `Task`.

    Raises:
        TaskError: the folder is missing or not a directory; no evaluator is found; several
            ``initial_program.*`` files compete; a folder program cannot be packed or has
            nothing the model may change (`_load_folder_program`); a
            file is unreadable; a YAML file has a syntax error or is not a mapping; a value has
            the wrong type (e.g. ``direction: up``); the Python evaluator has a syntax error or
            defines neither ``evaluate`` nor ``evaluate_stage1``; a Python initial program is
            not valid Python; an EVOLVE-BLOCK is empty.
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

    config_language = _config_value(oe_config, ("language",), str, folder)
    config_suffix = _config_value(oe_config, ("file_suffix",), str, folder) or _config_value(
        oe_config, ("evaluator", "file_suffix"), str, folder
    )
    if config_suffix is not None and not config_suffix.startswith("."):
        config_suffix = f".{config_suffix}"
    initial_path = _find_program(folder, program, config_suffix, config_language)
    layout, kind, evaluator_path, functions = _find_evaluator(folder)

    lang = _task_language(config_language, config_suffix, initial_path)
    file_suffix = config_suffix or (
        initial_path.suffix if initial_path is not None and initial_path.suffix else lang.suffix
    )
    language = lang.name

    program_kind: Literal["file", "folder"] = "file"
    folder_meta = meta.folder or _FolderMeta()
    carried: list[str] = []
    program_dir: Path | None = None
    if initial_path is not None and initial_path.is_dir():
        program_kind, program_dir = "folder", initial_path
        initial_program, carried, folder_lang = _load_folder_program(
            initial_path, folder, folder_meta
        )
        if not (config_language or config_suffix):
            lang = folder_lang
        file_suffix, language = "", lang.name
        try:
            program_file: str | None = str(initial_path.relative_to(folder))
        except ValueError:
            program_file = str(initial_path)
    elif initial_path is not None:
        initial_program = _read_text(initial_path, folder)
        if lang.is_python:
            _check_python(initial_program, initial_path, folder)
        _check_evolve_blocks(initial_program, initial_path)
        try:
            program_file = str(initial_path.relative_to(folder))
        except ValueError:
            program_file = str(initial_path)
    else:
        initial_program, program_file = "", None
        warnings.append(
            f"no initial program ({INITIAL_PROGRAM_STEM}{file_suffix}): the first iteration "
            "asks the model to write one from the instruction"
        )
    if kind == "shell":
        warnings += _container_path_warnings(evaluator_path)

    timeout_s = _timeout_s(meta, oe_config, folder)
    cascade, thresholds = _cascade(oe_config, functions, kind, folder, warnings)

    name = meta.name or folder.name
    system_message = _system_message(oe_config, folder)
    instruction = (
        (system_message or "").strip()
        or (meta.instruction or "").strip()
        or _generic_instruction(name, meta.metric, meta.direction, lang.display)
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
        has_evolve_blocks=(
            _has_markers(initial_program)
            if program_kind == "file"
            else any(_has_markers(text) for text in unpack(initial_program).values())
        ),
        language=language,
        file_suffix=file_suffix,
        program_file=program_file,
        layout=layout,
        evaluator_kind=kind,
        openevolve_config=oe_config,
        warnings=warnings,
        program_kind=program_kind,
        folder_evolve_all=folder_meta.evolve == "all",
        folder_new_files=folder_meta.new_files,
        folder_carried=carried,
        program_dir=program_dir,
    )


def _find_program(
    folder: Path, program: str | Path | None, suffix: str | None, language: str | None
) -> Path | None:
    """The program file or folder to evolve, or None when the task has none (module docstring).

    A folder ``initial_program/`` (or ``--program DIR``) is a folder program, as OpenEvolve's
    multi-file ``tsp_tour_minimization`` example has it.

    Raises:
        TaskError: ``program`` does not exist; several ``initial_program.*`` files and no
            config saying which.
    """
    if program is not None:
        given = Path(program).expanduser()
        candidates = [given] if given.is_absolute() else [Path.cwd() / given, folder / given]
        for path in candidates:
            if path.is_file() or path.is_dir():
                return path.resolve()
        raise TaskError(
            f"--program {program}: no such file or folder (looked in the working directory and in "
            f"{folder}); pass the program file to evolve"
        )
    names = [f"{INITIAL_PROGRAM_STEM}{suffix}"] if suffix else []
    if language:
        names.append(f"{INITIAL_PROGRAM_STEM}{language_by_name(language).suffix}")
    names.append(INITIAL_PROGRAM)
    for name in dict.fromkeys(names):
        if (folder / name).is_file():
            return folder / name
    if (folder / INITIAL_PROGRAM_STEM).is_dir():
        return folder / INITIAL_PROGRAM_STEM
    found = sorted(
        p
        for p in folder.glob(f"{INITIAL_PROGRAM_STEM}.*")
        if p.is_file() and not p.name.endswith(("~", ".pyc", ".bak", ".orig", ".swp"))
    )
    if len(found) > 1:
        raise TaskError(
            f"task folder {folder} has several initial programs "
            f"({', '.join(p.name for p in found)}); "
            "name the one to evolve with --program FILE or `file_suffix:` in config.yaml"
        )
    return found[0] if found else None


def _load_folder_program(
    program_dir: Path, folder: Path, meta: _FolderMeta
) -> tuple[str, list[str], Language]:
    """``(bundle, carried paths, language)`` of a folder program (docs/tasks.md).

    The bundle packs the folder's text files (`evoduet_graph.candidates.bundle.read_folder`);
    the language is that of most evolvable files (ties: the first in path order).

    Raises:
        TaskError: the folder cannot be packed, no file may change (no EVOLVE-BLOCK markers and
            no ``folder.evolve: all``), a Python file does not parse, or a block is empty.
    """
    try:
        contents = read_folder(program_dir)
    except (BundleError, OSError) as exc:
        raise TaskError(
            f"task folder {folder}: folder program {program_dir.name}/: {exc}"
        ) from None
    evolvable = evolvable_paths(contents.files, evolve_all=meta.evolve == "all")
    if not evolvable:
        raise TaskError(
            f"task folder {folder}: no file of the folder program {program_dir.name}/ has "
            "EVOLVE-BLOCK markers, so the model could change nothing; mark the code that may "
            "change in the files that evolve, or set `folder: {evolve: all}` in task.yaml"
        )
    for rel, text in contents.files.items():
        path = program_dir / rel
        if file_language(rel).is_python:
            _check_python(text, path, folder)
        _check_evolve_blocks(text, path)
    counts: dict[str, int] = {}
    for rel in evolvable:
        name = file_language(rel).name
        counts[name] = counts.get(name, 0) + 1
    top = max(counts, key=lambda n: counts[n])
    lang = next(file_language(rel) for rel in evolvable if file_language(rel).name == top)
    return pack(contents.files), contents.carried, lang


def _find_evaluator(
    folder: Path,
) -> tuple[Literal["openevolve", "skydiscover"], Literal["python", "shell"], Path, set[str]]:
    """``(layout, kind, path, evaluate functions)`` of the folder's evaluator.

    SkyDiscover's detection (``create_evaluator``) with its Python evaluator first: a
    top-level ``evaluator.py``; else ``evaluator/evaluator.py`` when it defines ``evaluate``
    (or the cascade's ``evaluate_stage1``); else ``evaluator/evaluate.sh``.

    Raises:
        TaskError: no evaluator, or a Python evaluator without ``evaluate`` (and no script).
    """
    top = folder / EVALUATOR
    if top.is_file():
        return "openevolve", "python", top, _check_evaluator(_read_text(top, folder), top)
    sub = folder / EVALUATOR_DIR
    if sub.is_dir():
        script = sub / EVALUATE_SCRIPT
        nested = sub / EVALUATOR
        if nested.is_file():
            source = _read_text(nested, folder)
            try:
                return "skydiscover", "python", nested, _check_evaluator(source, nested)
            except TaskError:
                if not script.is_file():
                    raise
        if script.is_file():
            return "skydiscover", "shell", script, set()
        raise TaskError(
            f"task folder {folder}: {EVALUATOR_DIR}/ holds neither {EVALUATOR} (defining "
            f"evaluate(program_path)) nor {EVALUATE_SCRIPT} (printing JSON); add one of them"
        )
    raise TaskError(
        f"task folder {folder} has no evaluator; add {EVALUATOR} (defining "
        f"evaluate(program_path) -> dict, OpenEvolve) or an {EVALUATOR_DIR}/ folder with "
        f"{EVALUATOR} or {EVALUATE_SCRIPT} (SkyDiscover)"
    )


_WORKDIR_RE = re.compile(r"(?im)^\s*WORKDIR\s+(\S+)")


def _container_path_warnings(script: Path) -> list[str]:
    """Warn when ``evaluate.sh`` names a path that exists only in the container.

    A warning when ``evaluate.sh`` names the Dockerfile's WORKDIR (e.g. ``/benchmark``),
    a path that exists only inside the container SkyDiscover builds.
    """
    dockerfile = script.parent / "Dockerfile"
    try:
        text = script.read_text(encoding="utf-8")
        workdir = _WORKDIR_RE.search(dockerfile.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return []
    if workdir is None or workdir.group(1) in {"/", "."}:
        return []
    path = workdir.group(1).rstrip("/")
    if f"{path}/" in text and not Path(path).exists():
        return [
            (
                f"{EVALUATOR_DIR}/{EVALUATE_SCRIPT} uses {path}/, the Dockerfile's WORKDIR, "
                "which exists only in its container: run with evaluation.container: true "
                "(Docker or Podman), or make the script use paths relative to the evaluator/ "
                "folder (its working directory here)"
            )
        ]
    return []


def _has_markers(source: str) -> bool:
    """Whether ``source`` has a well-formed EVOLVE-BLOCK region (any comment syntax)."""
    return has_evolve_blocks(source)


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
    """One warning per key of the task's config that OpenEvolve and SkyDiscover do not know."""
    return [
        f"{OPENEVOLVE_CONFIG}: unknown OpenEvolve key '{key}' ignored"
        for key in unknown_keys(config)
    ]


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
    """Reject an empty EVOLVE-BLOCK.

    An EVOLVE-BLOCK with nothing (or only blank lines) between its markers leaves the model
    nothing to edit: a SEARCH cannot anchor in it and a rewrite has nowhere to go.
    """
    lines = source.split("\n")
    for first, stop in evolve_regions(source):
        if not any(line.strip() for line in lines[first:stop]):
            raise TaskError(
                f"{path}: the EVOLVE-BLOCK at line {first} is empty; put the code the model may "
                "change between the EVOLVE-BLOCK-START and EVOLVE-BLOCK-END lines"
            )


def _validation_message(path: Path, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        lines.append(f"  {loc}: {err['msg']} (got {err.get('input')!r})")
    return f"{path} has invalid values; fix them:\n" + "\n".join(lines)


def _generic_instruction(name: str, metric: str, direction: str, language: str) -> str:
    goal = "maximise" if direction == "max" else "minimise"
    return (
        f"You are an expert programmer improving a {language} program for the task '{name}'. "
        f"The evaluator runs the program and reports the metric '{metric}'; {goal} it. "
        "Keep the program's public functions and their signatures, keep it deterministic, "
        "and only change code inside the EVOLVE-BLOCK markers when they are present."
    )

"""The ``openevolve`` bench method: the real OpenEvolve package, in its own virtual environment.

OpenEvolve (PyPI ``openevolve``, github.com/algorithmicsuperintelligence/openevolve) is
installed, pinned (`OPENEVOLVE_VERSION`), into a virtual environment of its own
(`ensure_openevolve`; default ``$EVODUET_CACHE_DIR/venvs`` or
``~/.cache/evoduet_graph/venvs/openevolve-<version>-py<XY>``), together with the versions of
numpy and scipy installed here, so evaluators and candidate programs import the same libraries
as under our sandbox. Nothing of OpenEvolve is imported into this process.

`run_openevolve` drives it through its command line on the task folder, unchanged::

    <venv>/bin/openevolve-run <task>/initial_program.py <task>/evaluator.py \
        --config <run>/openevolve_config.yaml --output <run>/output --iterations N \
        [--checkpoint <run>/output/checkpoints/checkpoint_K]

The config (`openevolve_config`) is the task's own ``config.yaml`` with the bench's settings
laid over it: ``max_iterations``, ``random_seed``, ``checkpoint_interval: 1`` (so a killed run
resumes from its last iteration), the endpoint (``llm.api_base``, ``llm.api_key``, one model in
``llm.models``, the same temperature / max_tokens / timeout / retries as our methods),
``evaluator.timeout`` (the task's time budget, as our sandbox uses) and an evolution trace
(``evolution_trace``: JSONL with every child's code, metrics and token usage, failures too).

OpenEvolve writes ``output/best/best_program.py`` (+ ``best_program_info.json``: metrics),
``output/checkpoints/checkpoint_<i>/`` (``metadata.json``, ``programs/*.json``,
``best_program.py``, ``best_program_info.json``) and ``output/logs/``. Its scores are its own;
the bench re-evaluates, through OUR `SandboxEvaluator`, the initial program, every program that
raised OpenEvolve's best score, and its final best program, so NDG is computed by the same code
for every method.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evoduet_graph import Evaluator, EvoDuetError, Task, score_from_metrics
from evoduet_graph.bench.common import (
    Endpoint,
    Explored,
    IterationSeries,
    MethodOutcome,
    Session,
    best_by_fitness,
)
from evoduet_graph.bench.server import die_with_parent, kill_process_group
from evoduet_graph.llm.factory import PLACEHOLDER_API_KEY
from evoduet_graph.rundir.lock import file_lock
from evoduet_graph.rundir.read import iter_jsonl
from evoduet_graph.task import EVALUATOR, INITIAL_PROGRAM
from evoduet_graph.tasks.openevolve_config import unknown_keys

__all__ = [
    "OPENEVOLVE_VERSION",
    "OpenEvolveEnv",
    "OpenEvolveError",
    "OpenEvolveRecord",
    "default_venv_dir",
    "ensure_openevolve",
    "latest_checkpoint",
    "mirrored_requirements",
    "openevolve_command",
    "openevolve_config",
    "read_best",
    "read_trace",
    "run_openevolve",
    "unknown_config_keys",
    "write_openevolve_config",
]

OPENEVOLVE_VERSION = "0.4.1"
"""The pinned OpenEvolve release (PyPI), the newest when the bench was written."""

MIRRORED_PACKAGES: tuple[str, ...] = ("numpy", "scipy")
"""Installed into OpenEvolve's environment at the versions installed here."""

CONFIG_FILE = "openevolve_config.yaml"
OUTPUT_DIR = "output"
TRACE_FILE = "evolution_trace.jsonl"
FAILURES_FILE = "evolution_trace_failures.jsonl"
LOG_FILE = "openevolve.log"
_MARKER = ".evoduet-openevolve.json"
_LOG_TAIL_CHARS = 4000


class OpenEvolveError(EvoDuetError, RuntimeError):
    """OpenEvolve could not be installed or its run failed; the message quotes its log."""


# ------------------------------------------------------------------------------------------
# installation
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenEvolveEnv:
    """An installed OpenEvolve environment.

    Attributes:
        venv: the virtual environment's folder.
        python: its interpreter.
        script: its ``openevolve-run`` console script.
        version: the installed OpenEvolve version.
        packages: the requirement strings it was installed with.
    """

    venv: Path
    python: Path
    script: Path
    version: str
    packages: tuple[str, ...] = ()


def default_venv_dir(version: str = OPENEVOLVE_VERSION) -> Path:
    """The default folder of OpenEvolve's virtual environment.

    ``$EVODUET_CACHE_DIR/venvs/openevolve-<version>-py<XY>`` (default cache:
    ``~/.cache/evoduet_graph``).
    """
    base = os.environ.get("EVODUET_CACHE_DIR")
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "evoduet_graph"
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    return root / "venvs" / f"openevolve-{version}-{tag}"


def mirrored_requirements() -> list[str]:
    """Pins of the packages installed here that OpenEvolve's environment mirrors.

    ``numpy==X``, ``scipy==Y``: the versions installed in this environment (skipped when a
    package is not installed here).
    """
    out = []
    for name in MIRRORED_PACKAGES:
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _venv_paths(venv: Path) -> tuple[Path, Path]:
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    return bindir / "python", bindir / "openevolve-run"


def _run_logged(cmd: list[str], log: Path, timeout_s: float) -> None:
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.run(
                cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OpenEvolveError(f"{cmd[0]} failed: {exc}{_tail(log)}") from None
    if proc.returncode != 0:
        raise OpenEvolveError(
            f"command failed with status {proc.returncode}: {' '.join(cmd)}{_tail(log)}"
        )


def ensure_openevolve(
    venv_dir: str | Path | None = None,
    *,
    version: str = OPENEVOLVE_VERSION,
    packages: Sequence[str] | None = None,
    python: str | None = None,
    log: Callable[[str], None] | None = None,
    timeout_s: float = 1800.0,
) -> OpenEvolveEnv:
    """Create (once) a virtual environment with ``openevolve==version`` installed.

    ``python -m venv VENV`` then ``VENV/bin/python -m pip install openevolve==VERSION
    numpy==.. scipy==..`` (pip's ordinary configuration: index, proxies). A marker file
    records what was installed; an environment whose marker is missing or differs (an install
    that was interrupted) is deleted and rebuilt. Concurrent callers serialise on a lock file.

    Args:
        venv_dir: the environment's folder; default `default_venv_dir`.
        version: the OpenEvolve release.
        packages: extra requirement strings; default `mirrored_requirements`.
        python: the interpreter that creates the venv; default this one.
        log: progress messages (e.g. ``print``).
        timeout_s: limit for each install command.

    Returns:
        The ready `OpenEvolveEnv`.

    Raises:
        OpenEvolveError: venv creation or pip failed (the message quotes ``install.log``), or
            the installed version is not ``version``.
    """
    venv = Path(venv_dir).expanduser() if venv_dir else default_venv_dir(version)
    venv = venv.absolute()
    requirements = [
        f"openevolve=={version}",
        *(mirrored_requirements() if packages is None else packages),
    ]
    venv_python, script = _venv_paths(venv)
    marker = venv / _MARKER
    say = log or (lambda _msg: None)
    with file_lock(venv.parent / f".{venv.name}.lock"):
        try:
            recorded = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = None
        if (
            isinstance(recorded, dict)
            and recorded.get("requirements") == requirements
            and script.is_file()
            and venv_python.exists()
        ):
            return OpenEvolveEnv(venv, venv_python, script, version, tuple(requirements))
        if venv.exists():
            shutil.rmtree(venv)
        venv.mkdir(parents=True)
        install_log = venv / "install.log"
        say(f"installing {' '.join(requirements)} into {venv} (log: {install_log})")
        start = time.monotonic()
        _run_logged([python or sys.executable, "-m", "venv", str(venv)], install_log, timeout_s)
        _run_logged(
            [
                str(venv_python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                *requirements,
            ],
            install_log,
            timeout_s,
        )
        installed = _installed_version(venv_python)
        if installed != version:
            raise OpenEvolveError(
                f"{venv} has openevolve {installed!r} installed, expected {version!r}"
            )
        marker.write_text(
            json.dumps(
                {"requirements": requirements, "version": installed, "installed_at": time.time()}
            ),
            encoding="utf-8",
        )
        say(f"OpenEvolve {installed} installed in {time.monotonic() - start:.0f} s")
    return OpenEvolveEnv(venv, venv_python, script, version, tuple(requirements))


def _installed_version(python: Path) -> str | None:
    probe = "import importlib.metadata as m; print(m.version('openevolve'))"
    try:
        out = subprocess.run(
            [str(python), "-c", probe], capture_output=True, text=True, timeout=120, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


# ------------------------------------------------------------------------------------------
# configuration
# ------------------------------------------------------------------------------------------


def openevolve_config(
    task: Task,
    *,
    iterations: int,
    seed: int,
    endpoint: Endpoint,
    trace_path: str | Path,
) -> dict[str, Any]:
    """OpenEvolve's configuration for one bench run.

    The task's ``config.yaml`` with the bench's settings laid over it.

    Kept from the task: ``prompt`` (its system message), ``database`` (islands, feature
    map, ...), ``evaluator`` (cascade, thresholds, ...), ``diff_based_evolution`` (unless the
    bench sets one edit format for every method: `Endpoint.diff_based`, full rewrites on the
    embedded model) and every other key. Set by the bench: ``max_iterations``, ``random_seed`` (and
    ``database.random_seed``), ``checkpoint_interval: 1``, ``log_level: INFO``, ``language``
    when missing, ``evaluator.timeout`` (the task's time budget, ``Task.timeout_s``, rounded up
    to whole seconds: OpenEvolve's field is an int), the whole ``llm`` section (the endpoint's
    model as the one model of ``llm.models``; the key as a ``${VAR}`` reference, never its
    value) and ``evolution_trace``.

    Returns:
        The configuration as a dict (what `write_openevolve_config` writes as YAML).
    """
    cfg: dict[str, Any] = copy.deepcopy(task.openevolve_config)
    cfg["max_iterations"] = int(iterations)
    cfg["random_seed"] = int(seed)
    cfg["checkpoint_interval"] = 1
    cfg["log_level"] = "INFO"
    cfg.setdefault("language", task.language)
    if endpoint.diff_based is not None:  # the bench's one edit format for every method
        cfg["diff_based_evolution"] = bool(endpoint.diff_based)
    if endpoint.api_key_env and os.environ.get(endpoint.api_key_env):
        api_key = "${" + endpoint.api_key_env + "}"
    else:
        api_key = PLACEHOLDER_API_KEY
    cfg["llm"] = {
        "api_base": endpoint.base_url or "https://api.openai.com/v1",
        "api_key": api_key,
        "models": [{"name": endpoint.model, "weight": 1.0}],
        "temperature": float(endpoint.temperature),
        "max_tokens": int(endpoint.max_tokens),
        "timeout": math.ceil(endpoint.timeout_s),
        "retries": int(endpoint.max_retries),
    }
    database = dict(cfg.get("database") or {})
    database["random_seed"] = int(seed)
    cfg["database"] = database
    evaluator = dict(cfg.get("evaluator") or {})
    evaluator["timeout"] = math.ceil(task.timeout_s)
    cfg["evaluator"] = evaluator
    cfg["evolution_trace"] = {
        "enabled": True,
        "format": "jsonl",
        "include_code": True,
        "include_prompts": False,
        "include_failures": True,
        "buffer_size": 1,
        "output_path": str(trace_path),
    }
    return cfg


def unknown_config_keys(cfg: dict[str, Any]) -> list[str]:
    """Keys of a bench-written config that OpenEvolve's config does not know.

    Keys of a config the bench wrote that are no field of OpenEvolve 0.4.1's config
    (`evoduet_graph.tasks.openevolve_config.OPENEVOLVE_FIELDS`; OpenEvolve's loader would
    drop them without a word). The task's own keys are checked when the task is loaded.
    """
    return unknown_keys(cfg, skydiscover=False)


def write_openevolve_config(
    task: Task,
    path: str | Path,
    *,
    iterations: int,
    seed: int,
    endpoint: Endpoint,
    trace_path: str | Path,
) -> dict[str, Any]:
    """Write `openevolve_config` as YAML to ``path`` and return it.

    Raises:
        OpenEvolveError: a key the bench sets is not an OpenEvolve config field.
    """
    cfg = openevolve_config(
        task, iterations=iterations, seed=seed, endpoint=endpoint, trace_path=trace_path
    )
    bad = unknown_config_keys(cfg)
    if bad:
        raise OpenEvolveError(f"keys unknown to OpenEvolve {OPENEVOLVE_VERSION}: {bad}")
    Path(path).write_text(
        "# OpenEvolve configuration written by `evoduet bench`: the task's config.yaml with\n"
        "# the bench's settings (iterations, seed, endpoint, checkpoints, trace) laid over it.\n"
        + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    return cfg


# ------------------------------------------------------------------------------------------
# output
# ------------------------------------------------------------------------------------------


@dataclass
class OpenEvolveRecord:
    """One OpenEvolve iteration, from its evolution trace.

    Attributes:
        iteration: OpenEvolve's iteration number (1-based).
        timestamp: unix time it was recorded.
        tokens: total tokens of its LLM call (None when the call returned nothing).
        metrics: the child's metrics by OpenEvolve's evaluation ({} for a failure).
        code: the child's source (None for a failure).
        error: why the iteration produced no child (None otherwise).
    """

    iteration: int
    timestamp: float
    tokens: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    code: str | None = None
    error: str | None = None

    @property
    def fitness(self) -> float | None:
        """OpenEvolve's fitness of the child, or None.

        OpenEvolve's fitness of the child (``combined_score``, else the mean of numeric
        metrics); None when the child is missing or its evaluator reported an error.
        """
        if self.code is None or _reported_error(self.metrics):
            return None
        numeric = {
            k: float(v)
            for k, v in self.metrics.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        return score_from_metrics(numeric)


def _reported_error(metrics: dict[str, Any]) -> bool:
    error = metrics.get("error")
    return isinstance(error, str) and bool(error.strip())


def _tokens(usage: Any) -> int | None:
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if not total:
        total = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
    return int(total)


def read_trace(trace_path: str | Path) -> list[OpenEvolveRecord]:
    """OpenEvolve's evolution trace and its failures file, one record per iteration.

    A resumed run repeats the iterations after its checkpoint; the latest record of each
    iteration wins.

    Args:
        trace_path: the trace JSONL (``evolution_trace.output_path``); its failures file is
            ``<stem>_failures.jsonl`` next to it (OpenEvolve's naming).
    """
    trace_path = Path(trace_path)
    failures_path = trace_path.with_name(f"{trace_path.stem}_failures.jsonl")
    latest: dict[int, OpenEvolveRecord] = {}
    records: list[OpenEvolveRecord] = []
    for obj in iter_jsonl(trace_path):
        raw_meta = obj.get("metadata")
        meta = raw_meta if isinstance(raw_meta, dict) else {}
        records.append(
            OpenEvolveRecord(
                iteration=int(obj.get("iteration", 0)),
                timestamp=float(obj.get("timestamp", 0.0)),
                tokens=_tokens(meta.get("token_usage")),
                metrics=dict(obj.get("child_metrics") or {}),
                code=obj.get("child_code") if isinstance(obj.get("child_code"), str) else "",
            )
        )
    for obj in iter_jsonl(failures_path):
        records.append(
            OpenEvolveRecord(
                iteration=int(obj.get("iteration", 0)),
                timestamp=float(obj.get("timestamp", 0.0)),
                tokens=_tokens(obj.get("token_usage")),
                error=str(obj.get("error") or "failed"),
            )
        )
    for rec in sorted(records, key=lambda r: r.timestamp):
        latest[rec.iteration] = rec
    return [latest[i] for i in sorted(latest)]


def latest_checkpoint(output_dir: str | Path) -> tuple[int, Path] | None:
    """``(iteration, folder)`` of the newest complete checkpoint (with ``metadata.json``)."""
    root = Path(output_dir) / "checkpoints"
    found: list[tuple[int, Path]] = []
    if root.is_dir():
        for child in root.iterdir():
            name = child.name
            if not name.startswith("checkpoint_") or not (child / "metadata.json").is_file():
                continue
            try:
                found.append((int(name.split("_")[-1]), child))
            except ValueError:
                continue
    return max(found) if found else None


def read_best(output_dir: str | Path) -> tuple[str, dict[str, Any], int | None] | None:
    """``(code, metrics, iteration)`` of OpenEvolve's best program.

    ``best/`` (written at the end of a run), else the newest checkpoint's copy; None when neither
    exists.
    """
    output_dir = Path(output_dir)
    folders = [output_dir / "best"]
    ck = latest_checkpoint(output_dir)
    if ck is not None:
        folders.append(ck[1])
    for folder in folders:
        code_path = folder / "best_program.py"
        if not code_path.is_file():
            continue
        info: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            info = json.loads((folder / "best_program_info.json").read_text(encoding="utf-8"))
        it = info.get("iteration")
        return (
            code_path.read_text(encoding="utf-8"),
            dict(info.get("metrics") or {}),
            int(it) if isinstance(it, int) else None,
        )
    return None


# ------------------------------------------------------------------------------------------
# running
# ------------------------------------------------------------------------------------------


def openevolve_command(
    env: OpenEvolveEnv,
    task: Task,
    *,
    config_path: Path,
    output_dir: Path,
    iterations: int,
    checkpoint: Path | None = None,
) -> list[str]:
    """The ``openevolve-run`` command line for a task folder (unchanged)."""
    cmd = [
        str(env.script),
        str(task.path / INITIAL_PROGRAM),
        str(task.path / EVALUATOR),
        "--config",
        str(config_path),
        "--output",
        str(output_dir),
        "--iterations",
        str(int(iterations)),
    ]
    if checkpoint is not None:
        cmd += ["--checkpoint", str(checkpoint)]
    return cmd


def _tail(path: Path | None, start: int = 0) -> str:
    if path is None or not path.is_file():
        return ""
    with open(path, "rb") as fh:
        fh.seek(start)
        text = fh.read().decode("utf-8", errors="replace")
    text = text[-_LOG_TAIL_CHARS:]
    return f"\n--- {path} (tail) ---\n{text}" if text.strip() else ""


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    # The task folder stays unchanged: no __pycache__ next to its evaluator.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


def run_openevolve(
    task: Task,
    run_dir: str | Path,
    *,
    iterations: int,
    seed: int,
    endpoint: Endpoint,
    env: OpenEvolveEnv,
    evaluator: Evaluator,
    session: Callable[[], contextlib.AbstractContextManager[None]],
    sessions: Callable[[], list[Session]],
    timeout_s: float | None = None,
) -> MethodOutcome:
    """Run (or resume) OpenEvolve on ``task`` for ``iterations`` iterations in ``run_dir``.

    Resumption: when ``run_dir/output`` holds a checkpoint at iteration K, OpenEvolve is
    started with ``--checkpoint`` for the remaining ``iterations − K`` iterations (nothing
    runs when K ≥ ``iterations``); without a checkpoint the output folder is cleared and the
    run starts afresh.

    Args:
        task: the task; its folder is passed to OpenEvolve unchanged.
        run_dir: this run's folder (config, output, log).
        iterations: total iterations.
        seed: ``random_seed``.
        endpoint: the model endpoint.
        env: the installed OpenEvolve.
        evaluator: OUR evaluator (the task's `SandboxEvaluator`) for the re-evaluations.
        session: context manager timing OpenEvolve's work as one session of the run.
        sessions: the run's sessions so far (for wall times), read after the run.
        timeout_s: wall limit of the OpenEvolve process (None: none).

    Returns:
        The `MethodOutcome`: best over the re-evaluated programs and the initial one, the
        best-so-far curve, LLM calls and tokens from the trace, wall times.

    Raises:
        OpenEvolveError: the process failed or timed out (its log tail is in the message),
            or it produced nothing to score; the task's program is a folder, which OpenEvolve
            cannot evolve (its ``tsp_tour_minimization`` example packs a folder with a driver
            of its own).
    """
    if task.is_folder:
        raise OpenEvolveError(
            f"task {task.name!r}: its program is a folder ({task.program_file}/), which "
            "OpenEvolve cannot evolve; compare with the openevolve-mode method instead"
        )
    run_dir = Path(run_dir).absolute()
    run_dir.mkdir(parents=True, exist_ok=True)
    output_dir = run_dir / OUTPUT_DIR
    trace_path = run_dir / TRACE_FILE
    config_path = run_dir / CONFIG_FILE
    log_path = run_dir / LOG_FILE
    write_openevolve_config(
        task,
        config_path,
        iterations=iterations,
        seed=seed,
        endpoint=endpoint,
        trace_path=trace_path,
    )
    notes: list[str] = []
    ck = latest_checkpoint(output_dir)
    done_before = ck[0] if ck else 0
    if done_before < iterations:
        checkpoint = ck[1] if ck else None
        if checkpoint is None:
            for stale in (output_dir, trace_path, run_dir / FAILURES_FILE):
                if stale.is_dir():
                    shutil.rmtree(stale)
                elif stale.exists():
                    stale.unlink()
        cmd = openevolve_command(
            env,
            task,
            config_path=config_path,
            output_dir=output_dir,
            iterations=iterations - done_before,
            checkpoint=checkpoint,
        )
        with session():
            note = _run_process(cmd, run_dir, log_path, timeout_s)
        if note:
            notes.append(note)
    return _outcome(task, run_dir, iterations, evaluator, sessions(), notes, env)


def _run_process(cmd: list[str], cwd: Path, log_path: Path, timeout_s: float | None) -> str | None:
    """Run OpenEvolve; return a note for a run that completed without any candidate.

    Raises:
        OpenEvolveError: non-zero exit (other than "no candidate"), timeout.
    """
    start = log_path.stat().st_size if log_path.is_file() else 0
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} $ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_subprocess_env(),
            start_new_session=True,
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - only calls prctl
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_process_group(proc)
            raise OpenEvolveError(
                f"OpenEvolve did not finish within {timeout_s:.0f} s{_tail(log_path, start)}"
            ) from None
        except BaseException:
            kill_process_group(proc)
            raise
    if rc == 0:
        return None
    tail = _tail(log_path, start)
    # OpenEvolve exits 1 with "Evolution failed: 0/N iterations produced a candidate program"
    # when no iteration yielded a program. With a reachable model that is a search outcome
    # (e.g. no reply held an applicable diff): the best stays the initial program. When the
    # model calls themselves failed it is an infrastructure failure.
    if "Evolution failed: 0/" in tail and "LLM generation failed" not in tail:
        line = next((ln.strip() for ln in tail.splitlines() if "Evolution failed: 0/" in ln), "")
        return f"OpenEvolve produced no candidate program ({line})"
    raise OpenEvolveError(f"OpenEvolve exited with status {rc}{tail}")


def _outcome(
    task: Task,
    run_dir: Path,
    iterations: int,
    evaluator: Evaluator,
    sessions: list[Session],
    notes: list[str],
    env: OpenEvolveEnv,
) -> MethodOutcome:
    """Score OpenEvolve's run with our evaluator (see the module docstring)."""
    records = read_trace(run_dir / TRACE_FILE)
    best_info = read_best(run_dir / OUTPUT_DIR)
    ck = latest_checkpoint(run_dir / OUTPUT_DIR)
    if best_info is None and not records and ck is None and not notes:
        raise OpenEvolveError(
            f"OpenEvolve left no trace, checkpoint or best program in {run_dir}"
            f"{_tail(run_dir / LOG_FILE)}"
        )

    # Which programs to re-evaluate: the initial one, each child that raised OpenEvolve's
    # best fitness (in iteration order), and its final best program.
    initial_out = evaluator.evaluate(task.initial_program, "openevolve_initial")
    initial = task.metric_value(initial_out.metrics) if initial_out.valid else None
    chosen: list[tuple[int, str, str]] = []  # (iteration, label, code)
    best_fitness = initial_out.score if initial_out.valid else -math.inf
    for rec in records:
        fit = rec.fitness
        if fit is not None and fit > best_fitness and rec.code:
            best_fitness = fit
            chosen.append((rec.iteration, f"openevolve_it{rec.iteration}", rec.code))
    if best_info is not None:
        code, _metrics, it = best_info
        if code not in {c for _, _, c in chosen} and code != task.initial_program:
            chosen.append((it if it is not None else iterations, "openevolve_best", code))

    explored = (
        [Explored(0, initial_out.score, initial, task.initial_program)]
        if initial is not None
        else []
    )
    reevaluated = []
    for it, label, code in chosen:
        out = evaluator.evaluate(code, label)
        value = task.metric_value(out.metrics) if out.valid else None
        reevaluated.append(
            {"iteration": it, "valid": out.valid, "metric": value, "error": out.error}
        )
        if value is not None:
            explored.append(Explored(max(0, min(it, iterations)), out.score, value, code))
    # the best by our evaluator's fitness, as for our runs (`best_by_fitness`)
    curve, best = best_by_fitness(sorted(explored, key=lambda p: p.iteration), iterations)
    calls_by_it: dict[int, int] = {}
    tokens_by_it: dict[int, int] = {}
    for rec in records:
        if rec.tokens is not None:
            calls_by_it[rec.iteration] = calls_by_it.get(rec.iteration, 0) + 1
            tokens_by_it[rec.iteration] = tokens_by_it.get(rec.iteration, 0) + rec.tokens
    stamps = {rec.iteration: rec.timestamp for rec in records}
    invalid = sum(1 for r in records if r.code is not None and r.fitness is None)
    # every iteration's child, failures (no applicable answer) included, as for our runs
    in_range = [r for r in records if 1 <= r.iteration <= iterations]
    valid_children = sum(1 for r in in_range if r.code is not None and r.fitness is not None)
    return MethodOutcome.from_series(
        IterationSeries(curve, calls_by_it, tokens_by_it, sessions, stamps, iterations),
        initial=initial,
        best=best.metric if best is not None else None,
        best_code=best.code if best is not None else None,
        notes=notes,
        details={
            "openevolve_version": env.version,
            "openevolve_venv": str(env.venv),
            "checkpoint": ck[0] if ck else None,
            "trace_records": len(records),
            "failed_iterations": sum(1 for r in records if r.error is not None),
            "invalid_children": invalid,
            "children": len(in_range),
            "valid_children": valid_children,
            "openevolve_best_metrics": best_info[1] if best_info else None,
            "reevaluated": reevaluated,
        },
    )

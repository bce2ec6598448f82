"""Child-process side of the sandbox: import a task's evaluator and evaluate one program.

Run by `SandboxEvaluator` as ``python runner.py <spec.json>`` inside a fresh temporary
directory, in its own process group, with rlimits and a scrubbed environment. This file is a
standalone script: it imports nothing from ``evoduet_graph`` (so the child starts fast and does
not depend on the package being importable) and only the standard library.

The spec (JSON) names ``evaluator`` (path of evaluator.py, or of a SkyDiscover ``evaluate.sh``
when ``evaluator_kind`` is ``shell``), ``task_dir``, ``program`` (the
candidate file), ``result`` (where to write the result), ``cascade`` (bool), ``thresholds``
(list of floats), ``evaluator_args`` (keyword arguments for ``evaluate``), ``memory_mb``,
``protected`` (folders the candidate must not write: the task folder, the snapshot the
evaluator is loaded from, run directories, the package) and ``report_fd`` (a pipe to the
parent, or null).

Tampering guard (`install_write_guard`): before the evaluator is imported, an audit hook
(PEP 578; it cannot be removed from Python code) refuses every Python-level write to a
``protected`` folder — ``open``/``os.open`` for writing, ``os.remove``/``rename``/``rmdir``/
``mkdir``/``chmod``/``truncate``/..., ``shutil.rmtree``/``copy*``/``move``, ``sqlite3.connect``
— with ``PermissionError``, paths resolved (symlinks, ``/proc/<pid>/fd`` and ``cwd`` links
included), refuses to start a program whose command line names a protected folder
(``subprocess``, ``os.system``, ``os.exec*``, ``os.posix_spawn``, ``os.spawn*``; a heuristic:
a command that builds the path at run time is not caught), and reports each attempt on
``report_fd`` at once, before the candidate can react;
the parent makes such a candidate invalid (``tampering: ...``). It complements the read-only
mount namespace (which also stops native code and subprocesses) and is the main defence of
the run directory where no namespace can be made.

The result (JSON, written atomically to ``result``; never printed, since the candidate may print
anything) holds ``metrics`` (name → float, possibly NaN/inf), ``text_metrics`` (name → str, the
non-numeric metric values), ``artifacts`` (name → str), ``stage`` (cascade stage reached, 0 when
direct), ``error`` (str or null) and ``traceback`` (str or null). The parent turns it into an
``EvaluationOutcome``; validity and the score are decided there.

OpenEvolve behaviour implemented here (openevolve/evaluator.py): the task folder goes first on
``sys.path`` so the evaluator's helper modules import; ``evaluate`` may return a dict or an
``EvaluationResult`` (``.metrics`` / ``.artifacts``); the cascade runs ``evaluate_stage1``,
continues to stage ``i + 1`` only when the metrics so far pass ``thresholds[i - 1]``
(``combined_score`` if numeric, else the mean of numeric metrics other than ``error``), and
merges the numeric metrics and the artifacts of the stages run. One deliberate deviation: an
exception (or a reported ``error`` string) in stage 2 or 3 makes the outcome invalid, where
OpenEvolve would keep the stage-1 score; the metrics gathered so far are still reported. When
``openevolve`` is not installed, a minimal ``openevolve.evaluation_result`` module with an
``EvaluationResult`` dataclass is installed into ``sys.modules`` first, so unchanged OpenEvolve
evaluators load. An ``async def evaluate`` (OpenEvolve's ``r_robust_regression``) is run to
completion with ``asyncio.run``. The evaluator's own folder goes on ``sys.path`` too
(SkyDiscover's ``evaluator/`` keeps helpers such as ``wrapper.py`` beside ``evaluator.py``).

SkyDiscover behaviour (``skydiscover/evaluation/container_evaluator.py``): with
``evaluator_kind: shell`` the script runs as ``bash evaluate.sh PROGRAM train`` with its own
folder as working directory (inside this sandboxed child: same process group, limits and
environment), and the one JSON object it prints on stdout is read: ``status`` other than
``success`` makes the outcome invalid (with ``artifacts.error`` as the reason when given),
``metrics`` are the numeric metrics and ``combined_score`` is added to them; a non-zero exit or
unparsable output is an error with the script's stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import inspect
import json
import numbers
import os
import subprocess
import sys
import threading
import traceback
import types
from typing import Any

EVALUATION_MODULE = "evaluation_module"  # the name OpenEvolve gives the evaluator module


@dataclasses.dataclass
class EvaluationResult:
    """Stand-in for ``openevolve.evaluation_result.EvaluationResult`` (same fields)."""

    metrics: dict[str, Any]
    artifacts: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, metrics: dict[str, Any]) -> EvaluationResult:
        """A result holding ``metrics`` and no artifacts (OpenEvolve's API)."""
        return cls(metrics=metrics)

    def to_dict(self) -> dict[str, Any]:
        """The metrics (OpenEvolve's API)."""
        return self.metrics

    def has_artifacts(self) -> bool:
        """True when the evaluator attached artifacts."""
        return bool(self.artifacts)

    def get_artifact_keys(self) -> list[str]:
        """The names of the attached artifacts."""
        return list(self.artifacts)


class BadResultError(TypeError):
    """The evaluator returned something that is neither a dict nor an EvaluationResult."""


def install_openevolve_shim() -> bool:
    """Make ``from openevolve.evaluation_result import EvaluationResult`` work.

    Returns:
        True when the shim was installed, False when the real ``openevolve`` imported.
    """
    try:
        import openevolve.evaluation_result  # noqa: F401 - optional: the task's, when it has one

        return False
    except Exception:  # noqa: BLE001 - not installed, or broken: fall back to the shim
        for name in [m for m in sys.modules if m == "openevolve" or m.startswith("openevolve.")]:
            del sys.modules[name]
    package = types.ModuleType("openevolve")
    package.__path__ = []  # a package, so submodule imports resolve through sys.modules
    module = types.ModuleType("openevolve.evaluation_result")
    module.EvaluationResult = EvaluationResult  # type: ignore[attr-defined]
    module.EVALUATION_FAILED_METRIC = "__evaluation_failed__"  # type: ignore[attr-defined]
    package.evaluation_result = module  # type: ignore[attr-defined]
    package.EvaluationResult = EvaluationResult  # type: ignore[attr-defined]
    sys.modules["openevolve"] = package
    sys.modules["openevolve.evaluation_result"] = module
    return True


def load_evaluator(path: str) -> types.ModuleType:
    """Import ``evaluator.py`` by path, as OpenEvolve does (module name ``evaluation_module``)."""
    spec = importlib.util.spec_from_file_location(EVALUATION_MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the evaluator from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[EVALUATION_MODULE] = module
    spec.loader.exec_module(module)
    return module


def _as_float(value: Any) -> float | None:
    """A metric value as float, or None when it is not numeric (bool counts as numeric)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str | bytes) or not hasattr(value, "__float__"):
        return None
    try:  # e.g. a 0-d or size-1 numpy array
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


def normalise_result(result: Any) -> tuple[dict[str, float], dict[str, str], dict[str, str]]:
    """Split a dict / EvaluationResult into numeric metrics, text metrics and artifacts.

    Raises:
        BadResultError: the result is neither a dict nor has a ``metrics`` dict.
    """
    raw_artifacts: dict[str, Any]
    if isinstance(result, dict):
        raw_metrics, raw_artifacts = result, {}
    elif isinstance(getattr(result, "metrics", None), dict):
        raw_metrics = result.metrics
        raw_artifacts = getattr(result, "artifacts", None) or {}
        if not isinstance(raw_artifacts, dict):
            raw_artifacts = {"artifacts": raw_artifacts}
    else:
        raise BadResultError(
            f"evaluate returned {type(result).__name__}; expected a dict of metrics or an "
            "EvaluationResult(metrics=..., artifacts=...)"
        )
    metrics: dict[str, float] = {}
    text_metrics: dict[str, str] = {}
    for key, value in raw_metrics.items():
        number = _as_float(value)
        if number is None:
            text_metrics[str(key)] = _as_text(value)
        else:
            metrics[str(key)] = number
    artifacts = {str(k): _as_text(v) for k, v in raw_artifacts.items()}
    return metrics, text_metrics, artifacts


def passes_threshold(metrics: dict[str, float], threshold: float) -> bool:
    """OpenEvolve's cascade gate: combined_score (or the mean, 'error' excluded) >= threshold."""
    if not metrics:
        return False
    if "combined_score" in metrics:
        return metrics["combined_score"] >= threshold
    values = [v for k, v in metrics.items() if k != "error"]
    if not values:
        return False
    return sum(values) / len(values) >= threshold


#: Audit events that write, delete or create a path → indices of their path arguments.
_PATH_EVENTS: dict[str, tuple[int, ...]] = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.mkdir": (0,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.chflags": (0,),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.utime": (0,),
    "os.mkfifo": (0,),
    "os.mknod": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copymode": (1,),
    "shutil.copystat": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
    "shutil.unpack_archive": (1,),
    "sqlite3.connect": (0,),
}
#: Audit events that start a program → index of their command line (a str or a sequence).
_COMMAND_EVENTS: dict[str, int] = {
    "subprocess.Popen": 1,
    "os.system": 0,
    "os.exec": 1,
    "os.posix_spawn": 1,
    "os.spawn": 2,
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_MAX_REPORTS = 20


def _protected(path: Any, roots: list[str]) -> str | None:
    """The real path of ``path`` when it lies in one of ``roots`` (real paths), else None."""
    if isinstance(path, int) or path is None:
        return None
    try:
        real = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError, OSError):
        return None
    for root in roots:
        if real == root or real.startswith(root + os.sep):
            return real
    return None


def _command_root(command: Any, roots: list[str]) -> str | None:
    """The first of ``roots`` named in a command (a string or an argument list), else None."""
    parts = [command] if isinstance(command, str | bytes) else command
    try:
        texts = [os.fsdecode(p) for p in parts if isinstance(p, str | bytes | os.PathLike)]
    except (TypeError, ValueError):
        return None
    for text in texts:
        for root in roots:
            if root in text:
                return root
    return None


def _path_arguments(event: str, args: tuple[Any, ...]) -> tuple[int, ...]:
    """Indices of the path arguments of an audit ``event`` that writes; ``()``: not a write."""
    if event == "open":
        if len(args) < 3 or not isinstance(args[2], int) or not args[2] & _WRITE_FLAGS:
            return ()
        return (0,)
    return _PATH_EVENTS.get(event, ())


def install_write_guard(roots: list[str], report_fd: int | None) -> None:
    """Refuse Python-level writes below ``roots`` (module docstring) and report them.

    Each refused attempt is written as one line ``<event> <path>`` to ``report_fd`` (at most
    `_MAX_REPORTS` lines) and raised as ``PermissionError`` in the candidate.
    """
    resolved = sorted({os.path.realpath(r) for r in roots if r})
    if not resolved:
        return
    named = sorted({*resolved, *(os.path.abspath(r) for r in roots if r)})
    busy = threading.local()
    reported = [0]

    def refuse(event: str, path: str) -> None:
        if report_fd is not None and reported[0] < _MAX_REPORTS:
            reported[0] += 1
            line = f"{event} {path}"[:500].replace("\n", " ") + "\n"
            with contextlib.suppress(OSError):
                os.write(report_fd, line.encode("utf-8", "replace"))
        raise PermissionError(
            f"evoduet sandbox: {event} of {path} refused (the task folder, the run directory "
            "and the evaluator are read-only for candidates)"
        )

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if getattr(busy, "on", False):
            return
        if event in _COMMAND_EVENTS:
            index = _COMMAND_EVENTS[event]
            root = _command_root(args[index], named) if index < len(args) else None
            if root is not None:  # a shell or tool pointed at a protected folder
                refuse(event, root)
            return
        indices = _path_arguments(event, args)
        if not indices:
            return
        busy.on = True
        try:
            hits = [
                p for p in (_protected(args[i], resolved) for i in indices if i < len(args)) if p
            ]
        finally:
            busy.on = False
        if hits:
            refuse(event, hits[0])

    sys.addaudithook(hook)


def _call(fn: Any, program: str, kwargs: dict[str, Any]) -> Any:
    result = fn(program, **kwargs) if kwargs else fn(program)
    if inspect.isawaitable(result):  # OpenEvolve evaluators may be `async def evaluate`
        return asyncio.run(_await(result))
    return result


async def _await(awaitable: Any) -> Any:
    return await awaitable


SCRIPT_OUTPUT_LIMIT = 200_000


def evaluate_script(spec: dict[str, Any], out: dict[str, Any]) -> None:
    """Run a SkyDiscover ``evaluate.sh PROGRAM train`` and read the JSON it prints.

    The script's folder is its working directory; stdout must hold one JSON object (the last
    line that parses as one is taken, so progress lines before it do no harm).
    """
    script = spec["evaluator"]
    out["phase"] = "running evaluate.sh"
    argv, name = ["bash", script, spec["program"], "train"], None
    container = spec.get("container")
    if container:  # evaluation.container: a fresh container of the task's image, no network
        name = f"evoduet-{os.getpid()}-{os.urandom(4).hex()}"
        inside = "/tmp/" + os.path.basename(spec["program"])
        argv = [
            container["runtime"],
            "run",
            "--rm",
            "--name",
            name,
            "--network",
            "none",
            "-v",
            f"{spec['program']}:{inside}:ro",
            container["image"],
            inside,
            "train",
        ]
    try:
        proc = subprocess.run(  # fixed argv, no shell; limits and process group are inherited
            argv,
            cwd=os.path.dirname(script),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=max(1.0, float(spec.get("timeout_s") or 3600) - 2) if name else None,
        )
    except subprocess.TimeoutExpired:
        if container is not None and name:
            subprocess.run([container["runtime"], "kill", name], capture_output=True, check=False)
        out["error"] = f"evaluate.sh in the container ran past the {spec.get('timeout_s')} s limit"
        return
    stdout = proc.stdout.decode("utf-8", errors="replace")[-SCRIPT_OUTPUT_LIMIT:]
    stderr = proc.stderr.decode("utf-8", errors="replace")[-SCRIPT_OUTPUT_LIMIT:]
    if stderr.strip():
        out["artifacts"]["evaluate_sh_stderr"] = stderr
    data = _last_json_object(stdout)
    if proc.returncode != 0:
        tail = (stderr.strip().splitlines() or ["(no stderr)"])[-1][:300]
        out["error"] = f"evaluate.sh exited with code {proc.returncode}: {tail}"
        if data is None:
            return
    if data is None:
        out["artifacts"]["evaluate_sh_stdout"] = stdout
        out["error"] = "evaluate.sh printed no JSON object on stdout"
        return
    raw_metrics = data.get("metrics")
    raw_metrics = raw_metrics if isinstance(raw_metrics, dict) else {}
    metrics, text_metrics, _ = normalise_result(dict(raw_metrics))
    if "combined_score" in data and "combined_score" not in metrics:
        score = _as_float(data["combined_score"])
        if score is not None:
            metrics["combined_score"] = score
    artifacts = data.get("artifacts")
    artifacts = artifacts if isinstance(artifacts, dict) else {}
    out["artifacts"].update({str(k): _as_text(v) for k, v in artifacts.items()})
    out["metrics"], out["text_metrics"] = metrics, text_metrics
    status = data.get("status", "success")
    if status != "success" and not out["error"]:
        reason = out["artifacts"].get("error") or ""
        out["error"] = f"evaluate.sh reported status {status!r}" + (f": {reason}" if reason else "")


def _last_json_object(text: str) -> dict[str, Any] | None:
    """The whole text as a JSON object, else the last line that is one."""
    candidates = [text.strip(), *reversed(text.strip().splitlines())]
    for chunk in candidates:
        chunk = chunk.strip()
        if not chunk.startswith("{"):
            continue
        try:
            value = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def evaluate_program(spec: dict[str, Any], out: dict[str, Any]) -> None:
    """Run the evaluator on the program named in ``spec``, filling ``out`` in place.

    ``out["phase"]`` names what was running when an exception escapes (for the message).
    """
    if spec.get("evaluator_kind") == "shell":
        evaluate_script(spec, out)
        return
    out["phase"] = "importing evaluator.py"
    module = load_evaluator(spec["evaluator"])
    program = spec["program"]
    evaluate = getattr(module, "evaluate", None)
    stage1 = getattr(module, "evaluate_stage1", None)
    use_cascade = callable(stage1) and (bool(spec.get("cascade")) or not callable(evaluate))

    if not use_cascade:
        if not callable(evaluate):
            out["error"] = (
                "evaluator.py defines no callable evaluate(program_path) (nor evaluate_stage1)"
            )
            return
        out["phase"] = "evaluate"
        metrics, text_metrics, artifacts = normalise_result(
            _call(evaluate, program, spec.get("evaluator_args") or {})
        )
        out.update(metrics=metrics, text_metrics=text_metrics, artifacts=artifacts, stage=0)
        return

    thresholds = [float(t) for t in spec.get("thresholds") or []]
    merged: dict[str, float] = {}
    for stage in (1, 2, 3):
        fn = getattr(module, f"evaluate_stage{stage}", None)
        if not callable(fn):
            break
        if stage > 1:
            gate = stage - 2
            if gate >= len(thresholds) or not passes_threshold(merged, thresholds[gate]):
                break
        out["phase"] = f"evaluate_stage{stage}"
        metrics, text_metrics, artifacts = normalise_result(_call(fn, program, {}))
        out["stage"] = stage
        if stage == 1:
            merged = dict(metrics)
        else:  # OpenEvolve merges numeric metrics other than 'error'
            merged.update({k: v for k, v in metrics.items() if k != "error"})
        out["metrics"] = dict(merged)
        out["text_metrics"].update(text_metrics)
        out["artifacts"].update(artifacts)
        if isinstance(text_metrics.get("error"), str) and text_metrics["error"]:
            break  # the stage reported a failure: later stages would not help


def describe_exception(exc: BaseException, phase: str, memory_mb: Any) -> str:
    """A one-line error message for an exception that escaped the evaluation."""
    if isinstance(exc, SystemExit):
        return f"program called sys.exit({exc.code!r}) during {phase}"
    if isinstance(exc, MemoryError):
        return f"MemoryError during {phase}: out of memory (address-space limit {memory_mb} MB)"
    if isinstance(exc, KeyboardInterrupt):
        return f"KeyboardInterrupt during {phase}"
    text = str(exc)
    name = type(exc).__name__
    return f"{phase} raised {name}: {text}" if text else f"{phase} raised {name}"


def write_result(path: str, out: dict[str, Any]) -> None:
    """Write ``out`` as JSON to ``path`` atomically (NaN/inf allowed)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(out, handle, allow_nan=True, default=str)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    """Entry point: ``runner.py <spec.json>``; exits via ``os._exit`` after writing the result."""
    if len(argv) != 2:
        print("usage: runner.py <spec.json>", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)

    # Running as a script puts this file's folder first on sys.path; candidates must not see
    # the package's internals as top-level modules. The task folder goes first (OpenEvolve).
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.path.insert(0, spec["task_dir"])
    evaluator_dir = os.path.dirname(os.path.abspath(spec["evaluator"]))
    if evaluator_dir != os.path.abspath(spec["task_dir"]):  # SkyDiscover: evaluator/ helpers
        sys.path.insert(0, evaluator_dir)

    out: dict[str, Any] = {
        "metrics": {},
        "text_metrics": {},
        "artifacts": {},
        "stage": 0,
        "error": None,
        "traceback": None,
        "phase": "starting",
    }
    report_fd = spec.get("report_fd")
    if spec.get("evaluator_kind") != "shell":
        # a SkyDiscover evaluate.sh runs the candidate outside this interpreter (and is itself
        # started from the protected snapshot): the read-only namespace or the parent's hash
        # checks protect it, a Python-level guard would only refuse the script's own start
        install_write_guard(
            [str(p) for p in spec.get("protected") or []],
            report_fd if isinstance(report_fd, int) else None,
        )
    try:
        install_openevolve_shim()
        evaluate_program(spec, out)
    except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt are faults too
        out["error"] = describe_exception(exc, out["phase"], spec.get("memory_mb"))
        out["traceback"] = traceback.format_exc()
    write_result(spec["result"], out)
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):  # a candidate may have closed or replaced it
            if stream is not None:
                stream.flush()
    # os._exit: skip atexit hooks and non-daemon threads a candidate may have left running.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

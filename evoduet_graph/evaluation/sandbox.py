"""Sandboxed evaluation of candidate programs (docs/design.md §5).

Candidate programs are untrusted LLM output. `SandboxEvaluator` evaluates each one in a child
process (``runner.py``) that

- runs in a fresh ``tempfile.mkdtemp`` directory (outside any run directory, removed afterwards)
  holding the candidate as ``program<suffix>`` (``program.py``, ``program.rs``: the task's
  `Task.file_suffix`, so the evaluator compiles or runs it as what it is); a folder program
  is unpacked there as the folder ``program/`` (its carried binary files copied from the task
  snapshot's initial program folder), and the evaluator receives that folder's path;
- is the leader of its own process group (``start_new_session=True``); on timeout the whole
  group gets ``SIGKILL`` so grandchildren die too, and stray group members are killed after a
  normal exit as well;
- has rlimits set in ``preexec_fn``: address space (``memory_mb``), no core files, CPU seconds
  (``cpu_time_s``, default a backstop for the wall clock) and file size (``max_file_mb``:
  bounds disk fillers and stdout/stderr floods, which go to files);
- is limited to ``max_processes`` tasks (fork bombs) by a per-candidate pids cgroup, and runs
  without network in a fresh network namespace (``unshare --net``) when this machine allows it;
  `evaluation.isolation` probes both once and `SandboxEvaluator.isolation` reports what is
  enforced (a run writes it to ``events.jsonl`` and warns about what is not);
- sees an environment scrubbed of secrets (`scrub_environment`), with BLAS/OpenMP threads
  capped (``OPENBLAS_NUM_THREADS`` etc., unless set) so numpy fits the address-space limit, and
  ``TMPDIR`` pointing into its private temp dir (removed afterwards, with whatever it holds);
- writes its result to a JSON file in the temp dir (never stdout); stdout/stderr go to files
  whose tails (`evoduet_graph.evaluation.outcome.OUTPUT_TAIL_BYTES`) become artifacts; the
  result is read into an `EvaluationOutcome` by `evoduet_graph.evaluation.outcome`;
- imports the evaluator and its helper modules from a pristine snapshot of the task folder
  taken when the sandbox is built (`evoduet_graph.evaluation.integrity.TaskSnapshot`, its hash
  in ``run.json``), never from the task folder itself, and cannot change it:

  * where bubblewrap can make a mount namespace (``filesystem_protection: namespace``, root or
    unprivileged user namespaces), the child runs with the whole filesystem read-only except
    its temp dir, a fresh ``/proc`` and no capabilities (`evaluation.isolation.BWRAP_ARGS`):
    the snapshot, the task folder, the run directory (`protect`), the program store and the
    event log cannot be written by any route;
  * elsewhere (``copy``: detection), each evaluation gets a private copy of the snapshot, an
    audit hook in the child refuses Python-level writes to the protected folders
    (`runner.install_write_guard`), and after the evaluation the copy and the task folder are
    hash-checked against the snapshot (a changed task folder is restored).

  Every detected attempt (a refused write, a changed copy or task folder) makes the candidate
  invalid with ``error = "tampering: <what>"`` and a ``tampering`` artifact; the evaluate node
  writes a ``tampering`` event and the candidate never enters the population.

Candidate faults (crash, ``sys.exit``, exception, timeout, out of memory, bad or non-finite
score, evaluator-reported ``error``) become an invalid `EvaluationOutcome` with score 0.0 and
artifacts (``stderr``, ``stdout``, ``traceback``, ``timeout``) for the next prompt; they never
raise. Only setup faults (missing task files, missing interpreter) raise.

Limits: a process that calls ``setsid`` leaves the process group (the cgroup, and bwrap's PID
namespace, still catch it where they are used); the candidate shares a process with the
evaluator, as in OpenEvolve, so it can still change *its own* evaluation in memory (e.g. patch
the loaded evaluator module): nothing it does persists into later evaluations or the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evoduet_graph.candidates.bundle import BundleError, materialise
from evoduet_graph.config import EvaluationConfig
from evoduet_graph.errors import EvoDuetError
from evoduet_graph.evaluation.base import EvaluationOutcome
from evoduet_graph.evaluation.integrity import TaskSnapshot
from evoduet_graph.evaluation.isolation import (
    BWRAP_ARGS,
    Isolation,
    PidsCgroup,
    probe_isolation,
    probe_network_namespace,
    probe_pids_cgroup,
    user_process_count,
)
from evoduet_graph.evaluation.limits import (
    SandboxLimits,
    rlimits_preexec,
)
from evoduet_graph.evaluation.outcome import (
    describe_exit,
    invalid_outcome,
    outcome_from_result,
    output_tail,
)
from evoduet_graph.task import Task, TaskError

logger = logging.getLogger(__name__)

RUNNER_PATH = Path(__file__).resolve().with_name("runner.py")
PROGRAM_FILE = "program.py"
#: Prefix of the ``error`` of a candidate caught tampering with the evaluation.
TAMPERING_PREFIX = "tampering: "
#: Most BLAS/OpenMP threads per child (when the environment does not set them).
BLAS_THREADS_MAX = 4
_THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

#: Environment variables never passed to a candidate (fnmatch patterns, upper-cased names).
SECRET_ENV_PATTERNS: tuple[str, ...] = (
    "*_API_KEY",
    "*_KEY",
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "OPENAI_*",
    "ANTHROPIC_*",
    "TAVILY_*",
    "OPENROUTER_*",
    "HF_*",
    "HUGGING_FACE_*",
    "AWS_*",
    "LANGSMITH_*",
    "LANGCHAIN_*",
    "GOOGLE_*",
    "GEMINI_*",
    "AZURE_*",
    "SSH_AUTH_SOCK",
    "RAY_*",  # a Ray worker's cluster address and auth settings (executor: ray)
)


class SandboxSetupError(EvoDuetError, RuntimeError):
    """The sandbox itself cannot run (interpreter or runner missing): not a candidate fault."""


def program_file_name(task: Task) -> str:
    """The candidate's name in the sandbox: ``program`` + suffix (a folder: ``program``)."""
    if task.is_folder:
        return "program"
    suffix = task.file_suffix if task.file_suffix.startswith(".") else f".{task.file_suffix}"
    return f"program{suffix}" if suffix != "." else PROGRAM_FILE


def scrub_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default: ``os.environ``) without secrets or provider variables.

    Drops every name matching `SECRET_ENV_PATTERNS` (case-insensitive), e.g. ``*_API_KEY``,
    ``*TOKEN*``, ``OPENAI_*``. Keeps everything else (``PATH``, ``HOME``, ``LANG``,
    ``PYTHONPATH``, ...) so evaluators still import numpy/scipy, and sets
    ``PYTHONDONTWRITEBYTECODE=1``, ``PYTHONUNBUFFERED=1`` and ``PYTHONHASHSEED=0``
    (deterministic hashing).
    """
    source = os.environ if env is None else env
    clean = {
        name: value
        for name, value in source.items()
        if not any(fnmatch.fnmatchcase(name.upper(), pat) for pat in SECRET_ENV_PATTERNS)
    }
    clean.update(PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", PYTHONHASHSEED="0")
    return clean


class SandboxEvaluator:
    """Runs a task's evaluator on candidate programs in killable, limited child processes.

    Implements `Evaluator`. See the module docstring for the isolation it provides.

    Args:
        task: the task whose ``evaluator.py`` scores candidates.
        limits: what the sandbox enforces (`SandboxLimits`; default: its defaults, with the
            task's timeout).
        workers: candidates evaluated concurrently by `evaluate_many`.
        cascade: use ``evaluate_stage1..3``; default ``task.cascade``. It only applies when the
            evaluator defines ``evaluate_stage1``.
        python: interpreter for the child (must be able to import what the evaluator imports).
        **overrides: single `SandboxLimits` fields laid over ``limits`` (``timeout_s=10``).

    Raises:
        TaskError: the task's evaluator file is missing, or its folder cannot be read.
        TypeError: an override is not a `SandboxLimits` field.
        ValueError: a limit is not positive or the interpreter does not exist.
    """

    def __init__(
        self,
        task: Task,
        *,
        limits: SandboxLimits | None = None,
        workers: int = 4,
        cascade: bool | None = None,
        python: str = sys.executable,
        **overrides: Any,
    ) -> None:
        chosen = dataclasses.replace(limits or SandboxLimits(), **overrides)
        if chosen.timeout_s is None:
            chosen = dataclasses.replace(chosen, timeout_s=float(task.timeout_s))
        chosen.check()
        self.limits = chosen
        self.task = task
        self.timeout_s = float(chosen.timeout_s or task.timeout_s)
        self.memory_mb = int(chosen.memory_mb)
        self.workers = int(workers)
        self.cascade = task.cascade if cascade is None else bool(cascade)
        self.python = python
        self.max_processes = None if chosen.max_processes is None else int(chosen.max_processes)
        self.max_file_mb = int(chosen.max_file_mb)
        self.cpu_time_s = None if chosen.cpu_time_s is None else float(chosen.cpu_time_s)
        self.isolate_network = bool(chosen.isolate_network)
        self.isolate_filesystem = bool(chosen.isolate_filesystem)
        self._isolation: Isolation | None = None
        #: Folders no candidate may write besides the task folder and its snapshot (`protect`).
        self.protected_paths: list[Path] = []
        self._snapshot_dir: Path | None = None
        self._snapshot_lock = threading.Lock()
        self._task_lock = threading.Lock()
        if self.workers <= 0:
            raise ValueError(f"workers must be positive, got {self.workers}")
        if not (shutil.which(python) or Path(python).is_file()):
            raise ValueError(f"python interpreter {python!r} not found")
        self._check_setup()
        self.snapshot = TaskSnapshot.take(task.path)
        self._evaluator_rel = _relative_to(task.evaluator_path, task.path)
        self._holder = Path(tempfile.mkdtemp(prefix="evoduet_snapshot_"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._holder, True)

    @property
    def task_sha256(self) -> str:
        """sha256 of the task folder when the sandbox was built (`TaskSnapshot.digest`)."""
        return self.snapshot.digest

    def protect(self, *paths: str | Path) -> None:
        """Also protect ``paths`` (e.g. the run directory) from candidates.

        read-only under the namespace (everything is), refused by the audit hook in the fallback.
        """
        for path in paths:
            resolved = Path(path).resolve()
            if resolved not in self.protected_paths:
                self.protected_paths.append(resolved)

    def close(self) -> None:
        """Remove the on-disk snapshot (also done when the sandbox is garbage-collected)."""
        self._cleanup()

    @classmethod
    def from_config(cls, task: Task, cfg: EvaluationConfig) -> SandboxEvaluator:
        """Build from the run configuration's ``evaluation`` section (`EvaluationConfig`)."""
        return cls(
            task, limits=SandboxLimits.from_config(cfg), workers=cfg.workers, cascade=cfg.cascade
        )

    @property
    def isolation(self) -> Isolation:
        """What this sandbox enforces on this machine (probed once per process, then cached).

        Network namespace or not, and how the process count is limited. See `Isolation.warnings` for
        what is requested but not enforced.
        """
        if self._isolation is None:
            self._isolation = probe_isolation(
                network=self.isolate_network,
                max_processes=self.max_processes,
                filesystem=self.isolate_filesystem,
            )
        return self._isolation

    # ------------------------------------------------------------------ public API

    def evaluate(self, code: str, program_id: str = "candidate") -> EvaluationOutcome:
        """Evaluate one candidate program in a sandboxed child process.

        Implements OpenEvolve's ``Evaluator.evaluate_program`` contract (direct ``evaluate`` or
        the ``evaluate_stage1..3`` cascade, dict or ``EvaluationResult`` returns), with a
        process-group kill on timeout instead of an abandoned thread.

        Args:
            code: the candidate's full source text.
            program_id: a label for logs and the temp dir name.

        Returns:
            The outcome; invalid (score 0.0, ``error`` set) for every candidate fault.

        Raises:
            SandboxSetupError: the child process could not be started at all.
        """
        if not RUNNER_PATH.is_file():
            raise SandboxSetupError(f"sandbox runner {RUNNER_PATH} is missing (broken install)")
        start = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=f"evoduet_eval_{_safe(program_id)}_"))
        try:
            outcome = self._run(code, tmp, start)
        except (TaskError, SandboxSetupError):
            raise
        except Exception as exc:  # a candidate fault must never escape
            logger.exception("evaluation of %s failed inside the sandbox driver", program_id)
            outcome = invalid_outcome(
                f"internal evaluation error: {type(exc).__name__}: {exc}", {}, {}, start
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        logger.debug(
            "evaluated %s: valid=%s score=%.6g stage=%d in %.2fs%s",
            program_id,
            outcome.valid,
            outcome.score,
            outcome.stage,
            outcome.elapsed_s,
            f" ({outcome.error})" if outcome.error else "",
        )
        return outcome

    def evaluate_many(
        self, codes: Sequence[str], ids: Sequence[str] | None = None
    ) -> list[EvaluationOutcome]:
        """Evaluate several candidates, up to ``workers`` at a time; results in input order.

        Args:
            codes: candidate sources.
            ids: labels, one per candidate; default ``candidate_<i>``.

        Raises:
            ValueError: ``ids`` and ``codes`` differ in length.
            TaskError | SandboxSetupError: as `evaluate` (setup faults only).
        """
        codes = list(codes)
        labels = [f"candidate_{i}" for i in range(len(codes))] if ids is None else list(ids)
        if len(labels) != len(codes):
            raise ValueError(f"got {len(codes)} programs but {len(labels)} ids")
        if not codes:
            return []
        if len(codes) == 1 or self.workers == 1:
            return [self.evaluate(c, i) for c, i in zip(codes, labels, strict=True)]
        workers = min(self.workers, len(codes))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evoduet-eval") as pool:
            return list(pool.map(self.evaluate, codes, labels))

    # ------------------------------------------------------------------ internals

    def _check_setup(self) -> None:
        if not self.task.evaluator_path.is_file():
            raise TaskError(
                f"task {self.task.name!r}: evaluator {self.task.evaluator_path} is missing; "
                "restore evaluator.py in the task folder"
            )
        if not RUNNER_PATH.is_file():
            raise SandboxSetupError(f"sandbox runner {RUNNER_PATH} is missing (broken install)")

    def _child_env(self, tmp: Path | None = None) -> dict[str, str]:
        """Scrubbed environment, with BLAS/OpenMP threads capped unless the user set them.

        OpenBLAS reserves tens of MB of address space per thread: on a many-core machine an
        uncapped numpy import alone can exceed RLIMIT_AS, and ``workers`` concurrent children
        would oversubscribe the cores anyway. With ``tmp`` (the private temp dir), ``TMPDIR``
        / ``TMP`` / ``TEMP`` and the XDG config and cache dirs point into it and ``PWD`` is it,
        so temporary files a candidate makes are removed with it and no path of the parent's
        working directory leaks. The XDG dirs are set because the home directory is read-only
        in the sandbox: a library that keeps a per-user config or cache (matplotlib) would
        otherwise print a warning naming a random temp dir on every import, and that stderr
        tail goes into the next prompt's recent attempts.
        """
        env = scrub_environment()
        threads = str(max(1, min(BLAS_THREADS_MAX, (os.cpu_count() or 1) // self.workers)))
        for name in _THREAD_ENV:
            env.setdefault(name, threads)
        env.pop("OLDPWD", None)
        if tmp is not None:
            scratch = tmp / "tmp"
            scratch.mkdir(exist_ok=True)
            env.update(TMPDIR=str(scratch), TMP=str(scratch), TEMP=str(scratch), PWD=str(tmp))
            # per-user config and cache dirs (XDG: matplotlib, fontconfig, ...): without a
            # writable one a library warns on stderr with a random temp path, which the next
            # prompt would show (recent attempts)
            env.update(
                XDG_CONFIG_HOME=str(scratch / "config"), XDG_CACHE_HOME=str(scratch / "cache")
            )
        return env

    def _argv(self, spec_path: Path, tmp: Path) -> list[str]:
        """The child's command line.

        The child's command line: the runner, inside bwrap (read-only filesystem, its own
        network namespace when isolating) or ``unshare --net``, as this machine allows.
        """
        argv = [self.python, str(RUNNER_PATH), str(spec_path)]
        isolation = self.isolation
        if isolation.filesystem == "namespace" and isolation.bwrap is not None:
            net = ["--unshare-net"] if self.isolate_network and isolation.network else []
            return [
                isolation.bwrap,
                *BWRAP_ARGS,
                *net,
                "--bind", str(tmp), str(tmp),
                "--chdir", str(tmp),
                "--",
                *argv,
            ]  # fmt: skip
        if self.isolate_network and isolation.network:
            unshare, _ = probe_network_namespace()
            if unshare is not None:
                argv = [unshare, "--net", "--", *argv]
        return argv

    def _process_limit(self) -> tuple[PidsCgroup | None, int | None]:
        """``(cgroup factory, nproc rlimit)`` for the process limit in force here."""
        if self.max_processes is None:
            return None, None
        kind = self.isolation.processes
        if kind == "cgroup":
            cgroup, _ = probe_pids_cgroup()
            return cgroup, None
        if kind == "rlimit":
            return None, user_process_count() + self.max_processes
        return None, None

    def _task_copy(self, tmp: Path) -> Path:
        """The folder this evaluation imports the evaluator from.

        The shared on-disk snapshot under a read-only namespace, else a private copy of the snapshot
        in ``tmp``.
        """
        if self.isolation.filesystem == "namespace":
            with self._snapshot_lock:
                if self._snapshot_dir is None:
                    self._snapshot_dir = self.snapshot.materialize(
                        self._holder / Path(self.task.path).name
                    )
                return self._snapshot_dir
        return self.snapshot.materialize(tmp / "task" / Path(self.task.path).name)

    def _spec(self, tmp: Path, task_dir: Path, report_fd: int | None) -> dict[str, Any]:
        evaluator_cfg = self.task.openevolve_config.get("evaluator")
        evaluator_args = (
            evaluator_cfg.get("evaluator_args") if isinstance(evaluator_cfg, dict) else None
        )
        protected = [task_dir, Path(self.task.path), *self.protected_paths, RUNNER_PATH.parents[1]]
        return {
            "evaluator": str(task_dir / self._evaluator_rel),
            "evaluator_kind": self.task.evaluator_kind,
            "container": self.task.container,
            "timeout_s": self.timeout_s,
            "task_dir": str(task_dir),
            "program": str(tmp / program_file_name(self.task)),
            "result": str(tmp / "result.json"),
            "cascade": self.cascade,
            "thresholds": list(self.task.cascade_thresholds),
            "evaluator_args": evaluator_args if isinstance(evaluator_args, dict) else {},
            "memory_mb": self.memory_mb,
            "protected": [str(p) for p in protected],
            "report_fd": report_fd,
        }

    def _tampering(
        self, task_dir: Path, before: tuple[str, TaskSnapshot] | None, attempts: list[str]
    ) -> list[str]:
        """What this evaluation changed or tried to change (empty: nothing).

        Restores what it changed. ``before`` (fallback only): the task folder's digest and the
        package's files before the evaluation.
        """
        found: list[str] = []
        changed = self.snapshot.changes(task_dir)
        if changed:
            found.append(f"the task snapshot it was evaluated with changed ({', '.join(changed)})")
            if task_dir == self._snapshot_dir:
                with self._snapshot_lock:
                    self.snapshot.restore(task_dir)
        if before is not None:
            task_before, package = before
            with self._task_lock:
                try:
                    after = TaskSnapshot.take(self.task.path).digest
                except TaskError as exc:
                    after = f"unreadable: {exc}"
                if after != task_before:
                    restored = self.snapshot.restore(Path(self.task.path))
                    found.append(
                        "the task folder changed during the evaluation ("
                        + (", ".join(restored) or after)
                        + "; restored from the run-start snapshot)"
                    )
                changed = package.restore(package.root)
                if changed:
                    found.append(
                        f"the evoduet_graph package changed during the evaluation "
                        f"({', '.join(changed)}; restored)"
                    )
        if attempts:
            shown = "; ".join(attempts[:4]) + (
                f"; +{len(attempts) - 4} more" if len(attempts) > 4 else ""
            )
            found.append(f"{len(attempts)} refused write(s) ({shown})")
        return found

    def _run(self, code: str, tmp: Path, start: float) -> EvaluationOutcome:
        task_dir = self._task_copy(tmp)
        before: tuple[str, TaskSnapshot] | None = None
        if self.isolation.filesystem != "namespace":
            # detection: what the task folder and the package (the runner) are now
            with self._task_lock:
                if self.snapshot.changes(Path(self.task.path)):
                    digest = TaskSnapshot.take(self.task.path).digest
                else:
                    digest = self.snapshot.digest
                before = (digest, TaskSnapshot.take(RUNNER_PATH.parents[1]))
        report_r, report_w = os.pipe()
        try:
            return self._run_child(code, tmp, start, task_dir, before, report_r, report_w)
        finally:
            for fd in (report_r, report_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _write_folder(
        self, code: str, target: Path, task_dir: Path, start: float
    ) -> EvaluationOutcome | None:
        """Unpack a folder candidate (a bundle) into ``target``, in the private temp dir.

        The carried files (binary files, build outputs) are copied from the initial program
        folder of the task snapshot this evaluation uses (a folder given with ``--program DIR``
        outside the task folder: from that folder). Returns an invalid outcome when the bundle
        cannot be unpacked, else None.
        """
        program_file = self.task.program_file or ""
        source = task_dir / program_file if not Path(program_file).is_absolute() else None
        if source is None or not source.is_dir():
            source = self.task.program_dir
        try:
            materialise(code, target, carried_from=source, carried=self.task.folder_carried)
        except BundleError as exc:
            return invalid_outcome(f"the folder program cannot be unpacked: {exc}", {}, {}, start)
        return None

    def _run_child(
        self,
        code: str,
        tmp: Path,
        start: float,
        task_dir: Path,
        before: tuple[str, TaskSnapshot] | None,
        report_r: int,
        report_w: int,
    ) -> EvaluationOutcome:
        spec = self._spec(tmp, task_dir, report_w)
        if self.task.is_folder:
            bad = self._write_folder(code, Path(spec["program"]), task_dir, start)
            if bad is not None:
                return bad
        else:
            Path(spec["program"]).write_text(code, encoding="utf-8")
        spec_path = tmp / "spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        stdout_path, stderr_path = tmp / "stdout.txt", tmp / "stderr.txt"
        if self.cpu_time_s is not None:
            cpu_s = max(1, math.ceil(self.cpu_time_s))
        else:
            cpu_s = math.ceil(self.timeout_s * max(1, os.cpu_count() or 1)) + 10
        cgroup_factory, nproc = self._process_limit()
        cgroup: Path | None = None
        if cgroup_factory is not None and self.max_processes is not None:
            try:
                cgroup = cgroup_factory.create(self.max_processes)
            except OSError as exc:
                logger.warning("no pids cgroup for this candidate: %s", exc)
        preexec = rlimits_preexec(
            self.memory_mb,
            cpu_s,
            fsize_bytes=self.max_file_mb << 20,
            nproc=nproc,
            join_cgroup=cgroup,
        )
        try:
            with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
                try:
                    proc = subprocess.Popen(  # fixed argv, no shell
                        self._argv(spec_path, tmp),
                        cwd=tmp,
                        env=self._child_env(tmp),
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        close_fds=True,
                        pass_fds=(report_w,),
                        start_new_session=True,
                        preexec_fn=preexec,  # noqa: PLW1509
                    )
                except (OSError, subprocess.SubprocessError) as exc:
                    raise SandboxSetupError(
                        f"cannot start the evaluation child {self.python!r}: {exc}"
                    ) from exc
                timed_out = False
                try:
                    returncode = proc.wait(timeout=self.timeout_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _kill_group(proc.pid)
                    returncode = proc.wait()
                finally:
                    _kill_group(proc.pid)  # stray background processes of the candidate
        finally:
            if (
                cgroup is not None
                and cgroup_factory is not None
                and not cgroup_factory.destroy(cgroup)
            ):
                logger.warning("could not remove the candidate cgroup %s", cgroup)
        stdout_tail = output_tail(stdout_path)
        stderr_tail = output_tail(stderr_path)
        streams = {"stderr": stderr_tail, "stdout": stdout_tail}

        if self.isolation.filesystem == "namespace" and 128 < returncode < 128 + 65:
            returncode = 128 - returncode  # bwrap exits 128 + N when the runner died of signal N
        attempts = _read_reports(report_r)
        tampering = self._tampering(task_dir, before, attempts)
        if tampering:
            logger.warning("candidate caught tampering: %s", "; ".join(tampering))
            return invalid_outcome(
                TAMPERING_PREFIX + "; ".join(tampering)[:1500],
                {},
                {
                    "tampering": "\n".join(tampering + [f"refused {a}" for a in attempts])
                    + "\nThe evaluator, the task folder and the run directory are read-only "
                    "for candidates; this candidate is invalid.",
                    **streams,
                },
                start,
            )
        if timed_out:
            return invalid_outcome(
                f"timeout after {self.timeout_s:g} s",
                {},
                {
                    "timeout": f"killed (whole process group) after {self.timeout_s:g} s "
                    "wall clock",
                    **streams,
                },
                start,
            )
        result_path = Path(spec["result"])
        if not result_path.is_file():
            return invalid_outcome(
                f"evaluation process {describe_exit(returncode)} without writing a result",
                {},
                streams,
                start,
            )
        try:
            data = json.loads(result_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            return invalid_outcome(f"unreadable evaluation result: {exc}", {}, streams, start)
        if not isinstance(data, dict):
            return invalid_outcome("evaluation result is not a JSON object", {}, streams, start)
        return outcome_from_result(data, streams, start, self.task.metric)


# ---------------------------------------------------------------------- helpers


def _read_reports(fd: int, limit: int = 64_000) -> list[str]:
    """The lines the child's write guard reported on the pipe ``fd``.

    The lines the child's write guard reported on the pipe ``fd`` (read without blocking:
    a stray process of the candidate may still hold the write end).
    """
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        try:
            chunk = os.read(fd, 4096)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    text = b"".join(chunks).decode("utf-8", "replace")
    return [line for line in text.splitlines() if line.strip()]


def _relative_to(path: Path, folder: Path) -> str:
    """``path`` relative to ``folder`` (POSIX).

    Raises:
        TaskError: it is not inside the folder (the snapshot could not hold it).
    """
    try:
        return Path(path).resolve().relative_to(Path(folder).resolve()).as_posix()
    except ValueError:
        raise TaskError(
            f"evaluator {path} is outside the task folder {folder}; it cannot be evaluated "
            "from the task's snapshot"
        ) from None


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", label)[:40] or "candidate"

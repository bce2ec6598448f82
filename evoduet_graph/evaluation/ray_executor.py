"""Distributed evaluation on Ray (``evaluation.executor: ray``).

`RayEvaluator` implements the `Evaluator` protocol like `SandboxEvaluator`, but every candidate
evaluates as one Ray task. Inside the task the **same** `SandboxEvaluator` runs the candidate in a
child process of the Ray worker, with the same limits as a local run: wall-clock timeout with a
process-group kill, address space, CPU seconds, file size, pids cgroup, private temp dir, an
environment scrubbed of secrets, a network namespace and the read-only filesystem (bwrap) where the
worker node allows them, else the tampering detection (private copy, audit hook, hash checks), and a
``tampering: ...`` invalid outcome for a caught candidate (docs/design.md §5). The driver's
run directory is passed on (`RayEvaluator.protect`): on a worker of the same machine it is as
unwritable as in a local run. `evaluation.workers` tasks are in flight at once, each reserving
`evaluation.ray_num_cpus_per_candidate` CPUs of the cluster.

Shipping the task. The driver packs the task folder's files (``evaluator.py``, helper modules,
data files; ``__pycache__`` and hidden entries skipped; at most `MAX_TASK_BUNDLE_BYTES`) into
Ray's object store once (`TaskBundle`, read and hashed like the local sandbox's
`evoduet_graph.evaluation.integrity.TaskSnapshot`). Each Ray task unpacks it into a fresh
temporary folder, evaluates there (from that folder's own snapshot) and removes it, so worker
nodes need no copy of the driver's filesystem and no candidate sees task files an earlier
candidate changed (a few ms per candidate for a small task). The task folder is read when the
evaluator is built: later edits to it are not seen by the workers.

What the workers need. The task function lives in this module, so every Ray worker must import
``evoduet_graph`` (the same version as the driver) and whatever the task's evaluator imports
(numpy, scipy, ...), with the same Python minor version as the driver (a Ray requirement):
install the package on every node, give a Ray runtime environment
(``evaluation.ray_runtime_env``, e.g. ``{"pip": ["evoduet-graph"]}``), or submit the run
itself as a Ray Job (``ray job submit --runtime-env-json ... -- evoduet run ...``).
Construction runs one probe task that imports the package on a worker and reports what its
sandbox enforces there (`RayEvaluator.isolation`).

Connecting (``evaluation.ray_address``). None: the Ray instance this process is already
connected to, else a new local instance (or the cluster in ``$RAY_ADDRESS``, Ray's own rule);
``auto``: the cluster running on this machine (``ray start --head``); ``ray://host:10001``:
Ray Client; ``host:6379``: a GCS address. Host/port addresses are first checked with one TCP
connection (`CONNECT_TIMEOUT_S`), because Ray itself waits minutes on an unreachable GCS; an
unreachable or refused cluster raises `RayUnavailableError` (a `ConfigError`) naming the
address before the run starts. Clusters with token authentication need the cluster's token on
the driver (``RAY_AUTH_TOKEN`` or Ray's token file); the sandbox never passes variables named
like ``*TOKEN*`` or ``RAY_*`` to a candidate.

Failures. Candidate faults are reported by the sandbox exactly as in a local run. A Ray task
that is lost (its worker process or node died, the object store lost its input, the cluster
connection dropped) or raised inside Ray becomes an invalid `EvaluationOutcome` (score 0,
``error`` starting with ``Ray task``, the Ray error in the ``ray`` artifact): the candidate is
recorded as failed and the run goes on. Ray reruns such a task ``evaluation.ray_max_retries``
times first (default 0: a candidate that kills its worker is not run again). Setup faults on a
worker (`TaskError`, `SandboxSetupError`) are raised, as the local sandbox raises them.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Self

from evoduet_graph._version import __version__
from evoduet_graph.config import ConfigError, EvaluationConfig
from evoduet_graph.evaluation.base import EvaluationOutcome
from evoduet_graph.evaluation.integrity import SnapshotTooLargeError, TaskSnapshot
from evoduet_graph.evaluation.isolation import Isolation, probe_isolation
from evoduet_graph.evaluation.limits import SandboxLimits
from evoduet_graph.evaluation.outcome import OUTPUT_TAIL_BYTES
from evoduet_graph.evaluation.sandbox import SandboxEvaluator, SandboxSetupError
from evoduet_graph.task import Task, TaskError

logger = logging.getLogger(__name__)

__all__ = [
    "CONNECT_TIMEOUT_S",
    "INIT_TIMEOUT_S",
    "MAX_TASK_BUNDLE_BYTES",
    "PROBE_TIMEOUT_S",
    "RAY_EXTRA",
    "RayEvaluator",
    "RayUnavailableError",
    "TaskBundle",
    "import_ray",
    "pack_task",
]

#: The pip extra that installs Ray.
RAY_EXTRA = "evoduet-graph[ray]"
#: Seconds the TCP reachability check of a ``host:port`` / ``ray://host:port`` address waits.
CONNECT_TIMEOUT_S = 5.0
#: Seconds construction waits for the probe task (a worker must start and import the package).
PROBE_TIMEOUT_S = 120.0
#: Largest task folder (sum of file sizes, bytes) shipped to the workers.
MAX_TASK_BUNDLE_BYTES = 100 << 20


INIT_TIMEOUT_S = 60.0
"""Seconds `connect` waits for ``ray.init`` before it reports the cluster unreachable (the
TCP reachability check before it waits `CONNECT_TIMEOUT_S`)."""


class RayUnavailableError(ConfigError):
    """Ray cannot be used for the evaluation.

    Ray cannot be used: the package is missing, the cluster is unreachable, or its workers
    cannot run the evaluation task. The message names the address and what to do.
    """


def import_ray() -> ModuleType:
    """Import ``ray`` (only ever done when ``evaluation.executor`` is ``ray``).

    Raises:
        RayUnavailableError: the package is not installed (the message gives the pip command).
    """
    try:
        import ray  # optional (the `ray` extra): only `evaluation.executor: ray` needs it
    except ImportError as exc:
        raise RayUnavailableError(
            "evaluation.executor is 'ray' but the ray package is not installed "
            f"({exc}); install it with: pip install '{RAY_EXTRA}' "
            "(in a checkout: pip install -e '.[ray]')"
        ) from None
    return ray


# ---------------------------------------------------------------------- the shipped task


@dataclass(frozen=True)
class TaskBundle:
    """A task folder packed for Ray workers.

    Attributes:
        task: the driver's `Task` (its paths are rebound on the worker).
        files: relative POSIX path → file content, every file of the folder.
        digest: sha256 (hex) of the paths and contents: identifies the bundle on a worker.
    """

    task: Task
    files: dict[str, bytes] = field(repr=False)
    digest: str

    @property
    def size(self) -> int:
        """Total bytes of the files."""
        return sum(len(b) for b in self.files.values())


def pack_task(task: Task, *, max_bytes: int = MAX_TASK_BUNDLE_BYTES) -> TaskBundle:
    """Read every file of ``task.path`` into a `TaskBundle`.

    Read every file of ``task.path`` into a `TaskBundle` (``__pycache__`` and names
    starting with ``.`` skipped; symlinks followed).

    Raises:
        TaskError: the folder cannot be read, lacks ``evaluator.py``, or holds more than
            ``max_bytes`` bytes.
    """
    root = Path(task.path)
    try:
        snapshot = TaskSnapshot.take(root, max_bytes=max_bytes)
    except SnapshotTooLargeError:
        raise TaskError(
            f"task folder {root} holds more than {max_bytes >> 20} MiB, too much to ship to "
            "Ray workers; move files the evaluator does not need (e.g. large docs/) out of the "
            "folder"
        ) from None
    except TaskError as exc:
        raise TaskError(f"cannot ship the task to Ray: {exc}") from None
    files = dict(snapshot.files)
    evaluator_rel = _relative_evaluator(task)
    if evaluator_rel not in files:
        raise TaskError(f"task {task.name!r}: {task.evaluator_path} is missing")
    return TaskBundle(task=task, files=files, digest=snapshot.digest)


def _relative_evaluator(task: Task) -> str:
    try:
        return Path(task.evaluator_path).relative_to(task.path).as_posix()
    except ValueError:
        raise TaskError(
            f"task {task.name!r}: evaluator {task.evaluator_path} is outside the task folder "
            f"{task.path}; it cannot be shipped to Ray workers"
        ) from None


# ---------------------------------------------------------------------- worker side


def unpack_task(bundle: TaskBundle, root: Path) -> Task:
    """Write ``bundle``'s files under ``root`` and return its `Task` with paths rebound there.

    The folder keeps the driver's folder name (``root/<name>``), so messages read the same.
    A folder program's ``initial_program/`` ships inside the task folder, so its carried
    binary files reach every candidate folder the worker unpacks; candidates themselves travel
    as their bundle text.
    """
    folder = root / Path(bundle.task.path).name
    for rel, data in bundle.files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    update: dict[str, Any] = {
        "path": folder,
        "evaluator_path": folder / _relative_evaluator(bundle.task),
    }
    program_file = bundle.task.program_file
    if bundle.task.is_folder and program_file and not Path(program_file).is_absolute():
        update["program_dir"] = folder / program_file  # the folder program ships with the task
    return bundle.task.model_copy(update=update)


def worker_sandbox(task: Task, settings: dict[str, Any]) -> SandboxEvaluator:
    """The `SandboxEvaluator` a Ray worker runs one candidate in.

    ``settings`` are the driver's resolved limits (`RayEvaluator.settings`). The sandbox's
    ``workers`` is set so that its BLAS/OpenMP thread cap equals the CPUs reserved per
    candidate (the local sandbox caps threads at cores / workers). What the machine enforces
    is probed once per worker process (`evoduet_graph.evaluation.isolation` caches it).
    """
    threads = max(1, int(float(settings["num_cpus"])))
    sandbox = SandboxEvaluator(
        task,
        limits=settings["limits"],
        workers=max(1, (os.cpu_count() or 1) // threads),
        cascade=settings["cascade"],
    )
    protected = settings.get("protected", [])
    sandbox.protect(*protected)
    return sandbox


def _evaluate_task(
    bundle: TaskBundle, settings: dict[str, Any], code: str, program_id: str
) -> EvaluationOutcome:
    """Body of the Ray task: evaluate one candidate in a fresh copy of the task folder.

    Body of the Ray task: unpack the task folder into a fresh temp folder (so no candidate
    sees files an earlier one changed), evaluate the candidate in the sandbox, remove it.
    """
    root = Path(tempfile.mkdtemp(prefix="evoduet_ray_task_"))
    sandbox: SandboxEvaluator | None = None
    try:
        sandbox = worker_sandbox(unpack_task(bundle, root), settings)
        return sandbox.evaluate(code, program_id)
    finally:
        if sandbox is not None:
            sandbox.close()
        shutil.rmtree(root, ignore_errors=True)


def _probe_task(
    isolate_network: bool, max_processes: int | None, isolate_filesystem: bool = True
) -> dict[str, Any]:
    """Body of the probe task: who the worker is and what its sandbox enforces."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "python": ".".join(map(str, sys.version_info[:3])),
        "evoduet_graph": __version__,
        "isolation": probe_isolation(
            network=isolate_network, max_processes=max_processes, filesystem=isolate_filesystem
        ),
    }


# ---------------------------------------------------------------------- driver side


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Open (and close) one TCP connection to a ``host:port`` or ``ray://host:port`` address.

    Raises:
        RayUnavailableError: no connection within ``timeout_s`` (refused, unresolvable host,
            timeout), naming the address.
    """
    try:
        host, port = _host_port(address)
    except ValueError:
        raise RayUnavailableError(
            f"Ray address {address!r} is not `auto`, `ray://HOST:PORT` or `HOST:PORT`"
        ) from None
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise RayUnavailableError(
            f"the Ray cluster at {address!r} is unreachable: no TCP connection to "
            f"{host}:{port} within {timeout_s:g} s ({exc}). Start it (`ray start --head`), "
            "check the host and port (Ray Client listens on 10001, the GCS on 6379), or set "
            "evaluation.ray_address: auto on a node of the cluster"
        ) from None


def connect(address: str | None) -> tuple[ModuleType, bool]:
    """Connect this process to Ray as ``evaluation.ray_address`` says (module docstring).

    Returns:
        ``(ray, started)``: the module, and whether this call initialised Ray (then the
        caller owns the connection and may shut it down).

    Raises:
        RayUnavailableError: ray is not installed, or the cluster cannot be reached.
    """
    ray = import_ray()
    if ray.is_initialized():
        if address is not None:
            logger.info("Ray is already initialised in this process; using it, not %s", address)
        return ray, False
    if address not in (None, "auto"):
        check_reachable(address)
    kwargs: dict[str, Any] = {"address": address, "log_to_driver": False}
    if address is None and not os.environ.get("RAY_ADDRESS"):
        # A new local instance: no dashboard, and no usage report unless the user opted in.
        # Started in this thread: Ray ties its GCS and raylet processes to the thread that
        # starts them (the parent-death signal is per thread), so an instance started in the
        # deadline thread below dies with that thread and every later call fails.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        kwargs["include_dashboard"] = False
        try:
            ray.init(**kwargs)
        except Exception as failure:  # noqa: BLE001 - reported as one line
            raise RayUnavailableError(
                f"cannot start a local Ray instance: {type(failure).__name__}: {failure}"
            ) from None
        return ray, True
    where = address or os.environ.get("RAY_ADDRESS") or "a new local instance"
    # ray.init retries without end against a TCP port that answers but is not a Ray GCS (the
    # dashboard port typed by mistake): it runs in a daemon thread with a deadline
    outcome: dict[str, BaseException | None] = {}

    def init() -> None:
        try:
            ray.init(**kwargs)
            outcome["error"] = None
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=init, name="evoduet-ray-init", daemon=True)
    thread.start()
    thread.join(INIT_TIMEOUT_S)
    if "error" not in outcome:
        raise RayUnavailableError(
            f"no Ray cluster answered at {where!r} within {INIT_TIMEOUT_S:.0f} s: is it the "
            "GCS port (6379 by default; Ray Client: ray://HOST:10001), not e.g. the dashboard "
            "(8265)?"
        )
    exc = outcome["error"]
    if exc is not None:
        hint = ""
        if "auth" in str(exc).lower() or "token" in str(exc).lower():
            hint = (
                "; the cluster uses token authentication: set RAY_AUTH_MODE=token and "
                "RAY_AUTH_TOKEN for this process"
            )
        raise RayUnavailableError(
            f"cannot connect to the Ray cluster at {where!r}: {type(exc).__name__}: {exc}{hint}"
        ) from None
    return ray, True


class RayEvaluator:
    """Evaluates candidates as Ray tasks, each in the worker's `SandboxEvaluator`.

    Implements `Evaluator`; see the module docstring for shipping, connection and failures.

    Args:
        task: the task whose ``evaluator.py`` scores candidates (its folder is shipped).
        address: ``evaluation.ray_address`` (None, ``auto``, ``ray://host:port``,
            ``host:port``).
        workers: Ray tasks in flight at once (`evaluate_many`; the ``evaluate`` node calls
            `evaluate` from this many threads).
        num_cpus_per_candidate: CPUs reserved per task (> 0, fractions allowed).
        max_retries: Ray reruns of a task whose worker or node died.
        runtime_env: Ray runtime environment of the tasks (None: the job's).
        probe_timeout_s: seconds to wait for the probe task at construction.
        limits: the sandbox limits (`SandboxLimits`), as `SandboxEvaluator` takes them.
        cascade: as `SandboxEvaluator` takes it.
        **overrides: single `SandboxLimits` fields laid over ``limits``.

    Raises:
        RayUnavailableError: ray is missing, the cluster is unreachable, or no worker ran the
            probe task (not importable there, or no free CPUs within ``probe_timeout_s``).
        TaskError: the task folder cannot be shipped.
        ValueError: a limit is not positive.
    """

    def __init__(
        self,
        task: Task,
        *,
        address: str | None = None,
        workers: int = 4,
        num_cpus_per_candidate: float = 1.0,
        max_retries: int = 0,
        runtime_env: dict[str, Any] | None = None,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
        limits: SandboxLimits | None = None,
        cascade: bool | None = None,
        **overrides: Any,
    ) -> None:
        # The driver-side sandbox validates the limits and resolves the task's defaults.
        local = SandboxEvaluator(task, limits=limits, workers=workers, cascade=cascade, **overrides)
        local.close()
        if num_cpus_per_candidate <= 0 or max_retries < 0:
            raise ValueError(
                "num_cpus_per_candidate must be positive and max_retries not negative, got "
                f"{num_cpus_per_candidate}, {max_retries}"
            )
        self.task = task
        self.address = address
        self.workers = local.workers
        self.timeout_s = local.timeout_s
        self.settings: dict[str, Any] = {
            "limits": local.limits,
            "cascade": local.cascade,
            "num_cpus": float(num_cpus_per_candidate),
            "protected": [],
        }
        bundle = pack_task(task)
        self.task_sha256 = bundle.digest
        self._ray, self._owns_ray = connect(address)
        ray = self._ray
        options: dict[str, Any] = {"num_cpus": float(num_cpus_per_candidate)}
        if runtime_env:
            options["runtime_env"] = dict(runtime_env)
        self._remote = ray.remote(_evaluate_task).options(max_retries=max_retries, **options)
        try:
            self._bundle_ref = ray.put(bundle)
            self.worker_info = self._probe(options, probe_timeout_s)
        except BaseException:
            self.close()
            raise
        worker_isolation: Isolation = self.worker_info["isolation"]
        where = f"on Ray worker {self.worker_info['host']}"
        self._isolation = replace(
            worker_isolation,
            network_detail=f"{worker_isolation.network_detail} ({where})",
            processes_detail=f"{worker_isolation.processes_detail} ({where})",
        )
        cpus = ray.cluster_resources().get("CPU", 0.0)
        if cpus < num_cpus_per_candidate:
            logger.warning(
                "the Ray cluster has %g CPUs now; each candidate needs %g (tasks wait for the "
                "autoscaler, if any)",
                cpus,
                num_cpus_per_candidate,
            )
        logger.info(
            "evaluating on Ray (%s): %d nodes, %g CPUs, %d candidates in flight, task bundle "
            "%d bytes",
            self.address or "local",
            len(ray.nodes()),
            cpus,
            self.workers,
            bundle.size,
        )

    @classmethod
    def from_config(cls, task: Task, cfg: EvaluationConfig) -> RayEvaluator:
        """Build from the run configuration's ``evaluation`` section (`EvaluationConfig`)."""
        return cls(
            task,
            address=cfg.ray_address,
            workers=cfg.workers,
            num_cpus_per_candidate=cfg.ray_num_cpus_per_candidate,
            max_retries=cfg.ray_max_retries,
            runtime_env=cfg.ray_runtime_env,
            limits=SandboxLimits.from_config(cfg),
            cascade=cfg.cascade,
        )

    @property
    def isolation(self) -> Isolation:
        """What the sandbox enforces on the Ray worker that ran the probe task.

        What the sandbox enforces on the Ray worker that ran the probe task (other nodes
        of a heterogeneous cluster may differ); the details name that worker's host.
        """
        return self._isolation

    def protect(self, *paths: str | Path) -> None:
        """Also protect ``paths`` (the driver's run directory) on the workers.

        Also protect ``paths`` (the driver's run directory) on the workers, as
        `SandboxEvaluator.protect` does locally (tasks submitted later carry them).
        """
        for path in paths:
            resolved = str(Path(path).resolve())
            if resolved not in self.settings["protected"]:
                self.settings["protected"] = [*self.settings["protected"], resolved]

    # ------------------------------------------------------------------ public API

    def evaluate(self, code: str, program_id: str = "candidate") -> EvaluationOutcome:
        """Evaluate one candidate as a Ray task (blocks until it finishes).

        Returns:
            The sandbox's outcome; an invalid outcome when the Ray task was lost or failed.

        Raises:
            TaskError / SandboxSetupError: a setup fault on the worker.
        """
        start = time.monotonic()
        return self._collect(self._submit(code, program_id), program_id, start)

    def evaluate_many(
        self, codes: Sequence[str], ids: Sequence[str] | None = None
    ) -> list[EvaluationOutcome]:
        """Evaluate several candidates, ``workers`` Ray tasks in flight; results in input order.

        Raises:
            ValueError: ``ids`` and ``codes`` differ in length.
            TaskError / SandboxSetupError: a setup fault on a worker (tasks still in flight
                are cancelled).
        """
        labels = list(ids) if ids is not None else [f"candidate_{i}" for i in range(len(codes))]
        if len(labels) != len(codes):
            raise ValueError(f"got {len(codes)} programs but {len(labels)} ids")
        results: list[EvaluationOutcome | None] = [None] * len(codes)
        pending: dict[Any, tuple[int, float]] = {}
        queue = iter(range(len(codes)))
        try:
            while True:
                while len(pending) < self.workers:
                    i = next(queue, None)
                    if i is None:
                        break
                    pending[self._submit(codes[i], labels[i])] = (i, time.monotonic())
                if not pending:
                    break
                ready, _ = self._ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i, start = pending.pop(ref)
                    results[i] = self._collect(ref, labels[i], start)
        except BaseException:
            for ref in pending:
                self._ray.cancel(ref, force=True)
            raise
        return [r for r in results if r is not None]

    def close(self) -> None:
        """Shut Ray down if this evaluator started the connection (idempotent)."""
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_ray = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _submit(self, code: str, program_id: str) -> Any:
        return self._remote.remote(self._bundle_ref, self.settings, code, program_id)

    def _collect(self, ref: Any, program_id: str, start: float) -> EvaluationOutcome:
        ray = self._ray
        try:
            outcome = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, TaskError | SandboxSetupError):
                raise cause from None
            return _lost(
                f"Ray task raised {type(cause or exc).__name__}: {cause or exc}", exc, start
            )
        except ray.exceptions.RayError as exc:  # worker/node died, object lost, cancelled, ...
            return _lost(f"Ray task lost ({type(exc).__name__}: {_last_line(exc)})", exc, start)
        except ConnectionError as exc:  # Ray Client lost its cluster
            return _lost(f"Ray task lost (connection: {exc})", exc, start)
        if not isinstance(outcome, EvaluationOutcome):
            return _lost(
                f"Ray task returned {type(outcome).__name__}, not an EvaluationOutcome",
                None,
                start,
            )
        logger.debug("evaluated %s on Ray: valid=%s", program_id, outcome.valid)
        return outcome

    def _probe(self, options: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        ray = self._ray
        probe = ray.remote(_probe_task).options(max_retries=0, **options)
        ref = probe.remote(
            self.settings["limits"].isolate_network,
            self.settings["limits"].max_processes,
            self.settings["limits"].isolate_filesystem,
        )
        where = self.address or "the local Ray instance"
        try:
            info: dict[str, Any] = ray.get(ref, timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            raise RayUnavailableError(
                f"no Ray worker at {where!r} ran the evaluation probe task within "
                f"{timeout_s:g} s: the cluster has no free {options['num_cpus']:g} CPU(s) "
                "(see `ray status`) or its workers cannot start"
            ) from None
        except (ray.exceptions.RayError, ConnectionError) as exc:
            raise RayUnavailableError(
                f"the Ray workers at {where!r} cannot run evoduet_graph's evaluation task "
                f"({type(exc).__name__}: {_last_line(exc)}); install evoduet-graph (the "
                "driver's version) and the evaluator's imports on every node, or set "
                "evaluation.ray_runtime_env"
            ) from None
        if info.get("evoduet_graph") != __version__:
            logger.warning(
                "Ray worker %s has evoduet_graph %s, the driver %s",
                info.get("host"),
                info.get("evoduet_graph"),
                __version__,
            )
        return info


def _last_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__


def _lost(error: str, exc: BaseException | None, start: float) -> EvaluationOutcome:
    """The invalid outcome of a candidate whose Ray task did not produce one."""
    detail = str(exc) if exc is not None else error
    if len(detail) > OUTPUT_TAIL_BYTES:
        detail = (
            f"[... {len(detail) - OUTPUT_TAIL_BYTES} chars truncated ...]\n"
            + detail[-OUTPUT_TAIL_BYTES:]
        )
    return EvaluationOutcome(
        metrics={},
        artifacts={"ray": detail} if detail else {},
        score=0.0,
        valid=False,
        error=error[:2000],
        elapsed_s=time.monotonic() - start,
        stage=0,
    )

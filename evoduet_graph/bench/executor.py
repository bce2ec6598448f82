"""``evoduet bench --executor ray``: every (task, method, seed) run as a Ray task.

A protocol of many runs (the paper's: tasks × methods × seeds × 100 iterations) finishes in
the time of its longest run when each run is a task on a Ray cluster. Each job is shipped to
its worker whole: the task folder and the job's folder as it stands (empty, or a killed run's
checkpoints, so the worker resumes it), packed as tar archives. The worker unpacks both into a
private temporary folder, runs the job with the same code the local executor runs
(`evoduet_graph.bench.jobs.execute_job`: ``bench_run.json`` written as it goes), and returns
the job's folder packed again; this process unpacks it over the job's folder in the bench's
output. Nothing needs a shared filesystem, so a worker on another machine works as one on this
machine does; a worker that dies loses only its own run's progress since it was shipped (the
next invocation ships the last gathered state again).

The model endpoint travels with the job: a hosted endpoint (``--model openai:<m>``) is reached
from any worker; the embedded model's server listens on this machine's loopback, so
``--model local`` suits a local Ray instance only. ``ray.init()`` joins the cluster named by
``RAY_ADDRESS`` (``ray start --head`` / a cluster launcher), else starts a local instance
(`evoduet_graph.evaluation.ray_executor.connect`, shared with the Ray evaluator), whose
workers get this process's import path.
Each run asks for ``EVODUET_RAY_CPUS`` CPUs (default 1) for its evaluator and model calls.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoduet_graph import load_task
from evoduet_graph.bench.common import BenchError, LogFn
from evoduet_graph.bench.jobs import BenchShared, Job, JobResult, RunState
from evoduet_graph.bench.openevolve_method import ensure_openevolve
from evoduet_graph.evaluation.ray_executor import RayUnavailableError, connect

__all__ = ["RAY_CPUS_ENV", "RaySession", "connect_ray", "pack_dir", "run_on_ray", "unpack_dir"]

RAY_CPUS_ENV = "EVODUET_RAY_CPUS"
"""CPUs each run asks Ray for (default 1)."""


def pack_dir(path: Path) -> bytes:
    """The folder's contents as an uncompressed tar archive (empty when it does not exist)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if path.is_dir():
            for child in sorted(path.iterdir()):
                tar.add(child, arcname=child.name)
    return buf.getvalue()


def unpack_dir(data: bytes, path: Path) -> None:
    """Replace the folder's contents with the archive's (members outside it refused)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(path, filter="data")


@dataclass(frozen=True)
class _Shipped:
    """One job as it travels to a worker."""

    task_name: str
    task_tar: bytes
    run_tar: bytes
    method: str
    seed: int
    iterations: int
    shared: BenchShared


def _run_shipped(job: _Shipped) -> tuple[bytes, JobResult, list[str]]:
    """On the worker: unpack, run with `execute_job`, pack the job's folder again."""
    messages: list[str] = []
    with tempfile.TemporaryDirectory(prefix="evoduet-bench-") as tmp:
        task_dir = Path(tmp) / "task" / job.task_name
        run_dir = Path(tmp) / "run"
        unpack_dir(job.task_tar, task_dir)
        unpack_dir(job.run_tar, run_dir)
        here = Job(load_task(task_dir), job.method, job.seed, job.iterations, run_dir)
        spec = job.shared.openevolve
        done = job.shared.run(
            here,
            openevolve=lambda: ensure_openevolve(
                spec.venv, version=spec.version, log=messages.append
            ),
            state=RunState(here),
            log=messages.append,
        )
        return pack_dir(run_dir), done, messages


RaySession = tuple[Any, bool]
"""``(ray module, whether this process started a local instance)``, from `connect_ray`."""


def connect_ray() -> RaySession:
    """Join the cluster named by ``RAY_ADDRESS``, else start a local Ray instance.

    The bench calls it before it writes anything or starts a model server, so an unreachable
    cluster leaves the output folder as it was.

    Raises:
        BenchError: Ray is not installed, or its cluster cannot be reached.
    """
    try:
        return connect(None)
    except RayUnavailableError as exc:
        raise BenchError(f"--executor ray: {exc}") from None


def run_on_ray(
    jobs: list[Job], shared: BenchShared, *, log: LogFn, session: RaySession | None = None
) -> Iterator[tuple[Job, JobResult]]:
    """Run ``jobs`` as Ray tasks; yield each with its result as it finishes.

    Each finished job's folder is unpacked over ``job.dir`` and its ``bench_run.json`` is
    re-saved with this machine's paths before it is yielded. ``session``: Ray as `connect_ray`
    gave it (default: connect now).

    Raises:
        BenchError: Ray is not installed, or its cluster cannot be reached.
    """
    ray, started = session or connect_ray()
    options: dict[str, Any] = {}
    if started and not os.environ.get("RAY_ADDRESS"):
        # a local instance: its workers import what this process imports (a checkout, a
        # user's plugin modules)
        path = os.pathsep.join(p for p in sys.path if p)
        options["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
    cpus = float(os.environ.get(RAY_CPUS_ENV) or 1)
    remote = ray.remote(num_cpus=cpus, max_retries=0, **options)(_run_shipped)
    futures = {}
    for job in jobs:
        shipped = _Shipped(
            task_name=job.task.path.name,
            task_tar=pack_dir(job.task.path),
            run_tar=pack_dir(job.dir),
            method=job.method,
            seed=job.seed,
            iterations=job.iterations,
            shared=shared.for_job(job),
        )
        futures[remote.remote(shipped)] = job
        log(f"ray  {job.label}: submitted")
    pending = list(futures)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        job = futures[ready[0]]
        try:
            packed, done, messages = ray.get(ready[0])
        except Exception as exc:  # noqa: BLE001 - a lost worker fails its run, not the bench
            message = f"{type(exc).__name__}: {exc}"
            state = RunState(job)
            state.save(status="failed", error=message[-4000:])
            log(f"FAIL {job.label}: the Ray task failed: {message.splitlines()[0][:300]}")
            yield job, JobResult("failed", message)
            continue
        unpack_dir(packed, job.dir)
        RunState(job).save()  # this machine's task path in bench_run.json
        for line in messages:
            log(f"  [{job.label}] {line}")
        yield job, done

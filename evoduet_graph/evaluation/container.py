"""``evaluation.container: true``: run a SkyDiscover ``evaluate.sh`` inside its own image.

SkyDiscover's ``ContainerizedEvaluator`` (``skydiscover/evaluation/container_evaluator.py``)
builds ``evaluator/Dockerfile`` once (``docker build -t <tag> evaluator/``) and runs
``evaluate.sh <candidate> train`` inside the container, reading the JSON it prints. Here the
image is built once per run with Docker or Podman (whichever answers), and each candidate runs
as ``<runtime> run --rm --network none -v <candidate>:/tmp/program<suffix>:ro <image>
/tmp/program<suffix> train`` from inside the usual sandboxed child (the image's ENTRYPOINT is
``evaluate.sh``, as in SkyDiscover's benchmark Dockerfiles), so the sandbox's timeout and
limits still bound it; on a timeout the runner kills the named container.

Deliberate deviation: SkyDiscover keeps one container running and ``docker exec``s into it;
here every candidate gets a fresh container without network (no state leaks between
candidates).

Where neither runtime is usable (no CLI, or no daemon), `prepare_container` raises a
`ContainerUnavailableError` whose one-line message says what failed.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess

from evoduet_graph.config import ConfigError
from evoduet_graph.task import EVALUATOR_DIR, Task

__all__ = ["ContainerUnavailableError", "prepare_container", "usable_runtime"]

BUILD_TIMEOUT_S = 1800
PROBE_TIMEOUT_S = 20


class ContainerUnavailableError(ConfigError):
    """``evaluation.container: true`` but no usable Docker/Podman, or the build failed."""


def usable_runtime() -> tuple[str | None, str]:
    """The first of docker / podman whose daemon answers ``info``.

    Returns:
        ``(runtime, detail)``: the runtime's name, or None and why none is usable.
    """
    problems = []
    for name in ("docker", "podman"):
        exe = shutil.which(name)
        if exe is None:
            problems.append(f"{name}: not installed")
            continue
        try:
            probe = subprocess.run(
                [exe, "info"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(f"{name}: {exc}")
            continue
        if probe.returncode == 0:
            return exe, f"{name} answers"
        lines = [line for line in (probe.stderr or probe.stdout).strip().splitlines() if line]
        problems.append(f"{name}: {lines[-1] if lines else f'exit code {probe.returncode}'}")
    return None, "; ".join(problems)


def prepare_container(task: Task) -> Task:
    """Build the task's evaluator image and return the task set to evaluate inside it.

    Raises:
        ContainerUnavailableError: the task has no ``evaluator/Dockerfile`` + ``evaluate.sh``,
            no runtime is usable, or the build fails.
    """
    folder = task.path / EVALUATOR_DIR
    if not (folder / "Dockerfile").is_file() or not (folder / "evaluate.sh").is_file():
        raise ContainerUnavailableError(
            f"evaluation.container: true needs {folder}/Dockerfile and evaluate.sh "
            "(SkyDiscover's containerised layout); this task has none"
        )
    runtime, detail = usable_runtime()
    if runtime is None:
        raise ContainerUnavailableError(
            "evaluation.container: true needs a usable Docker or Podman, and none is ("
            f"{detail}); start the daemon, or set evaluation.container: false to run "
            "evaluate.sh / evaluator.py in the local sandbox"
        )
    slug = re.sub(r"[^a-z0-9_.-]", "-", task.name.lower())[:40] or "task"
    tag = f"evoduet-{slug}-{hashlib.sha256(str(folder).encode()).hexdigest()[:8]}:latest"
    try:
        build = subprocess.run(
            [runtime, "build", "-t", tag, str(folder)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ContainerUnavailableError(f"building {folder}/Dockerfile failed: {exc}") from None
    if build.returncode != 0:
        tail = (build.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ContainerUnavailableError(f"building {folder}/Dockerfile failed: {tail}")
    return task.model_copy(
        update={
            "evaluator_kind": "shell",
            "evaluator_path": folder / "evaluate.sh",
            "container": {"runtime": runtime, "image": tag},
        }
    )

"""The evaluation sandbox's limits as one value, and the rlimits that apply them in the child.

`SandboxLimits` holds the seven per-candidate limits of an ``evaluation`` section (wall-clock
timeout, address space, process count, file size, CPU time, network and filesystem
isolation); `SandboxLimits.from_config` reads them, `SandboxLimits.check` refuses a limit that
is not positive. The local sandbox and every Ray worker's sandbox take the same value.
`rlimits_preexec` is the ``preexec_fn`` that applies the resource limits between fork and exec.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from evoduet_graph.config import EvaluationConfig

__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "DEFAULT_MAX_PROCESSES",
    "MAX_FILE_BYTES",
    "SandboxLimits",
    "rlimits_preexec",
]

#: Default RLIMIT_FSIZE of the child (MiB): largest file it may write, stdout/stderr included.
DEFAULT_MAX_FILE_MB = 256
#: Default most tasks (processes + threads) a candidate may have at once.
DEFAULT_MAX_PROCESSES = 64
#: RLIMIT_FSIZE at the default setting, in bytes.
MAX_FILE_BYTES = DEFAULT_MAX_FILE_MB << 20


@dataclass(frozen=True)
class SandboxLimits:
    """What the sandbox enforces on every candidate.

    Attributes:
        timeout_s: wall-clock seconds per candidate (whole cascade); None: the task's.
        memory_mb: address-space limit of the child (RLIMIT_AS), MiB.
        max_processes: most tasks (processes and threads) the candidate may have at once
            (a pids cgroup; see `evoduet_graph.evaluation.isolation`); None: no limit.
        max_file_mb: largest file the candidate may write (RLIMIT_FSIZE), MiB; its stdout
            and stderr files included.
        cpu_time_s: CPU seconds (RLIMIT_CPU); None: ``timeout_s`` × cores + 10, a backstop.
        isolate_network: run candidates in a fresh network namespace when possible.
        isolate_filesystem: run candidates on a read-only filesystem (bwrap) when possible;
            False: the detection fallback (private copy, audit hook, hash checks).
    """

    timeout_s: float | None = None
    memory_mb: int = 4096
    max_processes: int | None = DEFAULT_MAX_PROCESSES
    max_file_mb: int = DEFAULT_MAX_FILE_MB
    cpu_time_s: float | None = None
    isolate_network: bool = True
    isolate_filesystem: bool = True

    @classmethod
    def from_config(cls, cfg: EvaluationConfig) -> SandboxLimits:
        """The limits of the run configuration's ``evaluation`` section.

        Each limit is the section's setting of the same name.
        """
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls)})

    def check(self) -> None:
        """Refuse a limit that is not positive.

        Raises:
            ValueError: the message names the limits and their values.
        """
        if (self.timeout_s is not None and self.timeout_s <= 0) or self.memory_mb <= 0:
            raise ValueError(
                f"timeout_s and memory_mb must be positive, got {self.timeout_s}, {self.memory_mb}"
            )
        limits = (self.max_processes or 1, self.max_file_mb, self.cpu_time_s or 1)
        if min(limits) <= 0:
            raise ValueError(
                "max_processes, max_file_mb and cpu_time_s must be positive, got "
                f"{self.max_processes}, {self.max_file_mb}, {self.cpu_time_s}"
            )


def rlimits_preexec(
    memory_mb: int,
    cpu_s: int,
    *,
    fsize_bytes: int = MAX_FILE_BYTES,
    nproc: int | None = None,
    join_cgroup: Path | None = None,
) -> Callable[[], None]:
    """The ``preexec_fn`` applying rlimits in the child (values computed in the parent).

    With ``join_cgroup`` the child first moves itself into that cgroup (before exec, so
    everything the candidate starts is inside it); with ``nproc`` it sets RLIMIT_NPROC.
    """
    wanted = {
        resource.RLIMIT_AS: memory_mb * 1024 * 1024,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_CPU: cpu_s,
        resource.RLIMIT_FSIZE: fsize_bytes,
    }
    if nproc is not None:
        wanted[resource.RLIMIT_NPROC] = nproc
    limits: list[tuple[int, int, int]] = []
    for which, value in wanted.items():
        _, hard = resource.getrlimit(which)
        finite_hard = hard != resource.RLIM_INFINITY
        soft = min(value, hard) if finite_hard else value
        if which == resource.RLIMIT_CPU:  # SIGXCPU at the soft limit, SIGKILL 5 s later
            new_hard = min(soft + 5, hard) if finite_hard else soft + 5
        else:
            new_hard = soft
        limits.append((which, soft, new_hard))

    procs_file = str(join_cgroup / "cgroup.procs") if join_cgroup is not None else None

    def apply() -> None:  # runs between fork and exec: no locks, no allocation-heavy work
        if procs_file is not None:
            fd = os.open(procs_file, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # 0: the writing process itself
            finally:
                os.close(fd)
        for which, soft, hard in limits:
            resource.setrlimit(which, (soft, hard))

    return apply

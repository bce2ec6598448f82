"""What the evaluation sandbox can enforce on this machine: filesystem, network, processes.

Three isolation features depend on privileges and kernel features, so they are probed once per
process and reported (docs/design.md §5; the run writes the report to ``events.jsonl`` once and
warns when something is not enforced):

* **Read-only filesystem (tampering).** When bubblewrap (``bwrap``, Debian package
  ``bubblewrap``) can create a mount and PID namespace — as root, or as any user where
  unprivileged user namespaces are allowed — every candidate runs with the whole filesystem
  mounted read-only except its own private temp dir (`BWRAP_ARGS`): the task folder, its
  snapshot, the run directory, the program store, the event log and the installed package
  cannot be written or deleted by any route (Python, native code, subprocesses). The sandbox
  also gets a private ``/dev/shm``, a fresh ``/proc`` that shows only its own processes (the
  parent's ``/proc/<pid>/{cwd,fd,root}`` are out of reach) and no capabilities (so it cannot
  remount anything writable). Probed by running ``bwrap ... python -c ''``. Without it the
  sandbox falls back to *detection* (`evoduet_graph.evaluation.sandbox`): a private copy of
  the task snapshot per evaluation, hash checks of that copy and of the task folder after
  every evaluation (restored when changed), and an audit hook in the child that refuses
  Python-level writes (``open``, ``os``, ``shutil``, ``sqlite3``) to the protected folders.

* **No network.** When ``unshare --net`` (util-linux) works — root, or a user namespace that
  allows it — every candidate runs in a fresh network namespace that has only a loopback
  interface, which is down: no connection leaves the machine, and nothing on the host's
  loopback is reachable. Probed by running ``unshare --net -- python -c ''``.
* **Process limit (fork bombs).** ``RLIMIT_NPROC`` counts *every* process of the user and is
  not enforced for root, so it cannot bound one candidate. The sandbox instead puts each
  candidate into its own cgroup with ``pids.max`` (cgroup v1 ``pids`` hierarchy or cgroup v2
  with the ``pids`` controller) under ``<own cgroup>/evoduet``; a ``fork()`` beyond the limit
  fails with ``EAGAIN``, and after the evaluation every process still in the cgroup (also ones
  that left the process group with ``setsid``) is killed and the cgroup removed. Without a
  writable cgroup, a non-root user gets ``RLIMIT_NPROC`` set to the user's current process
  count plus the limit (approximate: other processes of the same user count too); root without
  a cgroup gets no process limit, and the report says so.

Measured on the development machine (root in a container, cgroup v1, bubblewrap 0.8 from
Debian 12): all three work; as a non-root user there, bwrap (user namespaces) and its network
namespace work too, the process limit falls back to RLIMIT_NPROC.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "BWRAP_ARGS",
    "Isolation",
    "PidsCgroup",
    "probe_bwrap",
    "probe_isolation",
    "probe_network_namespace",
    "probe_pids_cgroup",
    "user_process_count",
]

ProcessLimit = Literal["cgroup", "rlimit", "none"]
FilesystemProtection = Literal["namespace", "copy"]

#: bubblewrap options of every sandboxed evaluation (the candidate's writable temp dir, the
#: network namespace and the working directory are added per evaluation): the whole
#: filesystem read-only, the host's devices, a private /dev/shm, a PID namespace with its own
#: /proc, no capabilities, killed with its parent.
BWRAP_ARGS: tuple[str, ...] = (
    "--ro-bind", "/", "/",
    "--dev-bind", "/dev", "/dev",
    "--tmpfs", "/dev/shm",
    "--unshare-pid",
    "--proc", "/proc",
    "--cap-drop", "ALL",
    "--die-with-parent",
)  # fmt: skip

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_COUNTER = itertools.count(1)


_EVENT_KEYS = {
    "network_isolated": "network",
    "network": "network_detail",
    "process_limit": "processes",
    "processes": "processes_detail",
    "filesystem_protection": "filesystem",
    "filesystem": "filesystem_detail",
}
"""The ``sandbox`` event's key → the `Isolation` field it holds (the log's names)."""


@dataclass(frozen=True)
class Isolation:
    """What a `SandboxEvaluator` enforces here.

    Attributes:
        network: candidates run without network (a fresh network namespace).
        network_detail: how (the ``unshare`` path) or why not.
        processes: how the process count is limited: ``cgroup`` (pids.max), ``rlimit``
            (RLIMIT_NPROC, approximate) or ``none``.
        processes_detail: the limit and mechanism, or why there is none.
        filesystem: ``namespace`` (read-only filesystem in a bwrap mount namespace: writes to
            the protected folders are impossible) or ``copy`` (private copy of the snapshot
            per evaluation, hash checks and an audit hook: tampering is detected).
        filesystem_detail: exactly what is enforced (and why not more).
        bwrap: the bwrap executable used (``namespace`` only).
    """

    network: bool
    network_detail: str
    processes: ProcessLimit
    processes_detail: str
    filesystem: FilesystemProtection = "copy"
    filesystem_detail: str = "not probed"
    bwrap: str | None = None

    def warnings(self) -> list[str]:
        """One line per limit that is requested but not enforced."""
        out = []
        if not self.network and not self.network_detail.startswith("disabled"):
            out.append(
                f"evaluation sandbox: candidates can use the network ({self.network_detail})"
            )
        if self.filesystem != "namespace" and "disabled by" not in self.filesystem_detail:
            out.append(
                "evaluation sandbox: a candidate's writes to the task folder and the run "
                f"directory are detected, not prevented ({self.filesystem_detail})"
            )
        if self.processes == "none" and not self.processes_detail.startswith("disabled"):
            out.append(
                "evaluation sandbox: the number of processes a candidate may start is not "
                f"limited ({self.processes_detail})"
            )
        return out

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form (for the run's ``sandbox`` event, whose keys `_EVENT_KEYS` names)."""
        return {key: getattr(self, name) for key, name in _EVENT_KEYS.items()}


@functools.lru_cache(maxsize=1)
def probe_network_namespace() -> tuple[str | None, str]:
    """Whether ``unshare --net`` works here.

    Returns:
        ``(unshare_path, detail)``; ``unshare_path`` is None when a network namespace cannot
        be created, and ``detail`` says why.
    """
    exe = shutil.which("unshare")
    if exe is None:
        return None, "the `unshare` program (util-linux) is not installed"
    failure = _probe_failure(
        [exe, "--net", "--"],
        tool="`unshare --net`",
        refused="`unshare --net` failed (needs root or unprivileged user namespaces): ",
    )
    if failure is not None:
        return None, failure
    return exe, f"network namespace via {exe} --net"


def _probe_failure(prefix: list[str], *, tool: str, refused: str) -> str | None:
    """Run an empty Python program under ``prefix``; None when it ran, else why not.

    Args:
        prefix: the wrapper's command line up to the program (``[unshare, --net, --]``).
        tool: how the message names the wrapper when it cannot start.
        refused: the message's start when the wrapper exits non-zero (its last stderr line,
            or the exit code, follows).

    Returns:
        None on success, else a one-line reason.
    """
    try:
        probe = subprocess.run(
            [*prefix, sys.executable, "-c", ""], capture_output=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{tool} could not run: {exc}"
    if probe.returncode != 0:
        reason = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        return refused + (reason[-1] if reason else f"exit code {probe.returncode}")
    return None


NAMESPACE_DETAIL = (
    "read-only: the whole filesystem except the candidate's private temp dir (task snapshot, "
    "task folder, run directory, program store, event log and installed packages included), "
    "by bwrap ({exe}); fresh /proc in a PID namespace (the parent's /proc entries are not "
    "visible); private /dev/shm; no capabilities; snapshot hash-checked after every evaluation"
)
COPY_DETAIL = (
    "detection only ({why}): a private copy of the task snapshot per evaluation, hash-checked "
    "with the task folder after every evaluation (changes are tampering and are restored); "
    "Python-level writes (open, os, shutil, sqlite3) to the task folder, the snapshot, the "
    "run directory and the package, and commands naming them, are refused by an audit hook; "
    "writes to the run directory by native code, or by a subprocess whose command does not "
    "name it, are neither prevented nor detected"
)


@functools.lru_cache(maxsize=2)
def probe_bwrap(network: bool) -> tuple[str | None, str]:
    """Whether bubblewrap can run a sandboxed evaluation here.

    Whether bubblewrap can run a sandboxed evaluation here (`BWRAP_ARGS`, plus
    ``--unshare-net`` when ``network``).

    Returns:
        ``(bwrap_path, detail)``; the path is None when it cannot, and ``detail`` says why.
    """
    exe = shutil.which("bwrap")
    if exe is None:
        return None, "bubblewrap (`bwrap`) is not installed"
    argv = [exe, *BWRAP_ARGS, *(["--unshare-net"] if network else []), "--"]
    failure = _probe_failure(
        argv,
        tool="`bwrap`",
        refused="`bwrap` cannot create its namespaces here (needs root or unprivileged user "
        "namespaces): ",
    )
    if failure is not None:
        return None, failure
    return exe, f"bwrap at {exe}"


def _own_cgroup() -> tuple[Path, int] | None:
    """The directory of this process's pids cgroup and the cgroup version, if mounted."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1_mount = v2_mount = None
    for line in mounts:
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup" and "pids" in parts[3].split(","):
            v1_mount = Path(parts[1])
        elif parts[2] == "cgroup2" and v2_mount is None:
            v2_mount = Path(parts[1])
    for line in own:
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if v1_mount is not None and "pids" in controllers.split(","):
            return v1_mount / path.lstrip("/"), 1
        if v1_mount is None and v2_mount is not None and hid == "0" and controllers == "":
            return v2_mount / path.lstrip("/"), 2
    return None


_NAME_ATTEMPTS = 64
"""Names `PidsCgroup.create` tries before it gives up."""


class PidsCgroup:
    """Per-candidate cgroups with ``pids.max`` under ``<own cgroup>/evoduet``.

    Args:
        base: the parent cgroup directory of the per-candidate cgroups.
        version: 1 or 2 (``cgroup.kill`` is used on v2 when the kernel has it).
    """

    def __init__(self, base: Path, version: int) -> None:
        self.base = base
        self.version = version

    def create(self, limit: int) -> Path:
        """A fresh cgroup allowing ``limit`` tasks (processes and threads).

        A name already taken (a cgroup left by a killed run whose process id this process
        now has) is skipped for the next one; the leftover is removed when it holds no task.

        Raises:
            OSError: it cannot be created or configured.
        """
        for _ in range(_NAME_ATTEMPTS):
            path = self.base / f"e{os.getpid()}-{next(_COUNTER)}"
            try:
                path.mkdir()
                break
            except FileExistsError:
                if not self.pids(path):
                    with contextlib.suppress(OSError):
                        path.rmdir()
        else:
            raise OSError(f"no free cgroup name under {self.base} after {_NAME_ATTEMPTS} tries")
        try:
            (path / "pids.max").write_text(str(int(limit)))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise
        return path

    @staticmethod
    def pids(path: Path) -> list[int]:
        """Process ids still in the cgroup."""
        try:
            text = (path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split() if p.strip().isdigit()]

    def destroy(self, path: Path, *, within_s: float = 15.0) -> bool:
        """Kill every process left in the cgroup, then remove it.

        Kill every process left in the cgroup, then remove it (a fork bomb's dying processes
        can keep it busy for seconds on a loaded machine; it returns as soon as it is gone).

        Returns:
            True when the cgroup is gone.
        """
        kill_file = path / "cgroup.kill"
        deadline = time.monotonic() + within_s
        while True:
            pids = self.pids(path)
            if not pids:
                break
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        while True:
            try:
                path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)


@functools.lru_cache(maxsize=1)
def probe_pids_cgroup() -> tuple[PidsCgroup | None, str]:
    """Whether per-candidate pids cgroups can be made here.

    Returns:
        ``(cgroup_factory, detail)``; the factory is None when they cannot, and ``detail``
        says why.
    """
    found = _own_cgroup()
    if found is None:
        return None, "no cgroup hierarchy with the pids controller is mounted"
    own, version = found
    base = own / "evoduet"
    try:
        base.mkdir(exist_ok=True)
        if version == 2 and not (base / "pids.max").exists():
            (own / "cgroup.subtree_control").write_text("+pids")
        if version == 2:
            (base / "cgroup.subtree_control").write_text("+pids")
        factory = PidsCgroup(base, version)
        probe = factory.create(8)
        factory.destroy(probe)
    except OSError as exc:
        return None, f"cannot create a pids cgroup under {own}: {exc.strerror or exc}"
    return factory, f"cgroup v{version} pids.max under {base}"


def user_process_count(uid: int | None = None) -> int:
    """Tasks (processes and threads) of ``uid`` (default: this process's real uid)."""
    uid = os.getuid() if uid is None else uid
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        real_uid = threads = None
        for line in status.splitlines():
            if line.startswith("Uid:"):
                real_uid = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
        if real_uid == uid:
            total += threads or 1
    return total


def probe_isolation(
    *, network: bool, max_processes: int | None, filesystem: bool = True
) -> Isolation:
    """What a sandbox configured with these settings enforces on this machine.

    Args:
        network: whether network isolation is wanted (False: reported as disabled).
        max_processes: the wanted process limit (None: reported as disabled).
        filesystem: whether the read-only filesystem (bwrap) is wanted (False: the detection
            fallback, reported as disabled).
    """
    bwrap: str | None = None
    if filesystem:
        bwrap, why = probe_bwrap(network)
        if bwrap is not None:
            fs: FilesystemProtection = "namespace"
            fs_detail = NAMESPACE_DETAIL.format(exe=bwrap)
        else:
            fs, fs_detail = "copy", COPY_DETAIL.format(why=why)
    else:
        fs = "copy"
        fs_detail = COPY_DETAIL.format(why="disabled by evaluation.isolate_filesystem=false")
    if network and bwrap is not None:
        has_net, net_detail = True, f"network namespace via {bwrap} --unshare-net"
    elif network:
        exe, net_detail = probe_network_namespace()
        has_net = exe is not None
    else:
        has_net, net_detail = False, "disabled by evaluation.isolate_network=false"
    kind: ProcessLimit
    if max_processes is None:
        kind, detail = "none", "disabled by evaluation.max_processes=null"
    else:
        cgroup, cg_detail = probe_pids_cgroup()
        if cgroup is not None:
            kind, detail = "cgroup", f"{max_processes} tasks ({cg_detail})"
        elif os.geteuid() != 0 and resource.getrlimit(resource.RLIMIT_NPROC) is not None:
            kind = "rlimit"
            detail = (
                f"RLIMIT_NPROC = processes of uid {os.getuid()} + {max_processes} "
                f"(approximate; {cg_detail})"
            )
        else:
            kind = "none"
            detail = f"RLIMIT_NPROC is not enforced for root and {cg_detail}"
    return Isolation(
        network=has_net,
        network_detail=net_detail,
        processes=kind,
        processes_detail=detail,
        filesystem=fs,
        filesystem_detail=fs_detail,
        bwrap=bwrap,
    )

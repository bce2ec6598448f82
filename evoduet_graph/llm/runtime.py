"""The embedded model's llama.cpp runtime: which CPU kernels it runs, and whether they run.

The default install (``scripts/build_llama.py``, run by ``make run`` / ``make test``) builds
llama-cpp-python with llama.cpp's backends as loadable modules (``GGML_BACKEND_DL``) and no CPU
backend linked in, then adds llama.cpp's own CPU-variant modules for four instruction-set
levels (upstream's definitions in ``ggml/src/CMakeLists.txt``): ``x64`` (any x86-64),
``haswell`` (AVX2, FMA, F16C), ``skylakex`` (+ AVX-512) and ``zen4`` (+ AVX-512 VBMI, VNNI,
BF16). At run time `load_cpu_backend` loads the best module this machine can run.

Upstream's own selection (``ggml_backend_load_best``) scores the modules by ``cpuid`` alone, so
it picks a module whose instructions the CPU has but the kernel has not enabled for the process
(AMX, which needs a per-process permission, is the case that crashed a native build). Here the
choice reads the flags the kernel reports (``/proc/cpuinfo``, where it clears what it has not
enabled), no AMX variant is built, and the preflight (`ensure_runtime`) decodes a few tokens in
a child process before the first iteration, falling back to the next lower variant when that
child crashes. The result is cached per build, CPU and choice, so later runs pay nothing.

``EVODUET_LLAMA_CPU=<variant>`` forces a variant. A native build (``EVODUET_LLAMA_BUILD=native
make ...``) links its CPU backend and has no modules; nothing is loaded then.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from evoduet_graph.errors import EvoDuetError
from evoduet_graph.llm.model_file import INSTALL_HINT, LocalModelError, default_cache_dir

__all__ = [
    "CPU_VARIANTS",
    "REBUILD_HINT",
    "WORKER_ENTRY",
    "VARIANT_ENV",
    "ProbeResult",
    "RuntimeCrash",
    "RuntimeInfo",
    "child_env",
    "choose_variant",
    "cpu_flags",
    "crash_tail",
    "describe_exit",
    "ensure_runtime",
    "llama_cpp_module",
    "load_cpu_backend",
    "probe_runtime",
    "runtime_info",
    "with_variant_fallback",
]

WORKER_ENTRY = "import sys; from evoduet_graph.llm.worker import main; sys.exit(main())"
"""The model worker's command line (``python -c``), for its child processes and the probe.

``-c``, not ``-m``: the worker module is already imported by its package, and runpy would warn
about running it again as ``__main__``. `evoduet_graph.llm.worker` runs it; this module names it
as text, so the worker, which builds on this module, is not imported here."""

VARIANT_ENV = "EVODUET_LLAMA_CPU"
"""Environment variable that forces a CPU variant (one of `CPU_VARIANTS`' names)."""

REBUILD_HINT = "make reinstall-llama"
"""The command that rebuilds the embedded runtime (README: "Installing: what you get ...")."""

_AVX2 = frozenset({"avx", "avx2", "fma", "f16c", "bmi2"})
_AVX512 = _AVX2 | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}

CPU_VARIANTS: tuple[tuple[str, frozenset[str]], ...] = (
    ("zen4", _AVX512 | {"avx512vbmi", "avx512_vnni", "avx512_bf16"}),
    ("skylakex", _AVX512),
    ("haswell", _AVX2),
    ("x64", frozenset()),
)
"""The CPU variants a portable build ships, best first, with the ``/proc/cpuinfo`` flags each
needs (the instruction sets upstream compiles each with)."""

BUILD_INFO_FILE = "evoduet-build.json"
"""Written into ``llama_cpp/lib`` by ``scripts/build_llama.py``: flavour and variants."""

_PROBE_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class RuntimeInfo:
    """What is installed: the llama-cpp-python version, its build and the CPU.

    Attributes:
        version: llama-cpp-python's version, or None when it is not installed.
        lib_dir: its ``llama_cpp/lib`` directory.
        flavour: ``portable`` (CPU variants as modules), ``native`` (the build machine's own
            instruction set, linked in), or ``unknown`` (installed some other way).
        variants: the CPU-variant modules present, best first.
        chosen: the variant `choose_variant` picks here (None for builds without modules).
        cpu: the CPU's model name.
    """

    version: str | None
    lib_dir: str | None
    flavour: str
    variants: tuple[str, ...]
    chosen: str | None
    cpu: str

    @property
    def fingerprint(self) -> str:
        """Identifies this build on this CPU with this choice (the probe cache's key)."""
        parts = [self.version or "", self.flavour, ",".join(self.variants), self.cpu]
        parts.append(os.environ.get(VARIANT_ENV, ""))
        lib = Path(self.lib_dir) if self.lib_dir else None
        if lib is not None and lib.is_dir():
            for f in sorted(lib.iterdir()):
                with contextlib.suppress(OSError):
                    st = f.stat()
                    parts.append(f"{f.name}:{st.st_size}:{int(st.st_mtime)}")
        parts.append(" ".join(sorted(cpu_flags())))
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def cpu_flags() -> frozenset[str]:
    """The CPU flags the kernel reports for this machine (``/proc/cpuinfo``; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def _cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    return platform.processor() or platform.machine()


def choose_variant(
    flags: frozenset[str], available: tuple[str, ...], forced: str | None = None
) -> str | None:
    """The best variant of ``available`` whose instruction sets ``flags`` all include.

    Args:
        flags: the CPU flags (`cpu_flags`).
        available: variant names present in the build.
        forced: a variant the user asked for (``EVODUET_LLAMA_CPU``); used when present.

    Returns:
        A variant name, or None when ``available`` is empty.

    Raises:
        ValueError: ``forced`` is not one of ``available``.
    """
    if forced:
        if forced not in available:
            raise ValueError(
                f"{VARIANT_ENV}={forced!r} is not a CPU variant of this build "
                f"(it has: {', '.join(available) or 'none'})"
            )
        return forced
    for name, needs in CPU_VARIANTS:
        if name in available and needs <= flags:
            return name
    return available[-1] if available else None


def _lib_dir() -> Path | None:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def _variants_in(lib: Path) -> tuple[str, ...]:
    files = lib.glob("libggml-cpu-*.so*")
    present = {p.name.split(".so")[0].removeprefix("libggml-cpu-") for p in files}
    return tuple(name for name, _ in CPU_VARIANTS if name in present)


def runtime_info() -> RuntimeInfo:
    """The installed runtime, read from files only (llama.cpp is not loaded)."""
    try:
        version: str | None = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        version = None
    lib = _lib_dir() if version else None
    variants: tuple[str, ...] = ()
    flavour = "unknown"
    if lib is not None and lib.is_dir():
        variants = _variants_in(lib)
        with contextlib.suppress(OSError, ValueError):
            flavour = str(json.loads((lib / BUILD_INFO_FILE).read_text())["flavour"])
        if flavour == "unknown" and variants:
            flavour = "portable"
    chosen = None
    if variants:
        with contextlib.suppress(ValueError):
            chosen = choose_variant(cpu_flags(), variants, os.environ.get(VARIANT_ENV) or None)
    return RuntimeInfo(
        version=version,
        lib_dir=str(lib) if lib else None,
        flavour=flavour,
        variants=variants,
        chosen=chosen,
        cpu=_cpu_name(),
    )


def llama_cpp_module() -> Any:
    """llama-cpp-python's ``llama_cpp`` package, imported on first use.

    The one place that imports it: it is optional (the ``local`` extra), and importing it
    loads the native library, so the package imports it only once the embedded model is used.
    Its submodules (``_internals``, ``llama_grammar``, ``llama_chat_format``, ``llama_cache``)
    come with it.
    """
    import llama_cpp  # optional (the `local` extra); loads libllama, so only when a model is used

    return llama_cpp


def _libggml() -> ctypes.CDLL:
    """The ``libggml`` that ``libllama`` itself uses (imports llama_cpp).

    A wheel stores ``libggml.so``, ``.so.0`` and ``.so.0.x`` as three copies (zip has no
    symlinks), and ``llama_cpp._ggml`` opens another copy than the one ``libllama`` links:
    a backend registered there would be invisible to llama.cpp. The copy mapped into the
    process by ``libllama`` is found in ``/proc/self/maps``.
    """
    llama_cpp_module()  # loads libllama and the libggml it links
    soname = re.compile(r"libggml\.so\.\d+$")  # the name libllama asks for, not llama_cpp._ggml's
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and soname.search(fields[5]):
                return ctypes.CDLL(fields[5].strip())
    from llama_cpp import _ggml  # the fallback: not among what `llama_cpp_module` loads

    return _ggml.libggml  # type: ignore[no-any-return]


def load_cpu_backend(variant: str | None = None) -> str:
    """Register llama.cpp's CPU backend in this process; call before loading a model.

    Imports llama_cpp. A build that links its CPU backend needs nothing (``"built-in"``). A
    portable build gets the variant `choose_variant` picks loaded with ``ggml_backend_load``
    (which also refuses a module whose instructions ``cpuid`` lacks); ``variant`` (or
    ``EVODUET_LLAMA_CPU``) forces one.

    Returns:
        The variant loaded, or ``"built-in"``.

    Raises:
        RuntimeError: no CPU backend could be registered (the message names the modules tried).
    """
    lib = _libggml()
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_load.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_load.restype = ctypes.c_void_p
    if lib.ggml_backend_dev_count() > 0:
        return "built-in"
    info = runtime_info()
    if not info.variants or info.lib_dir is None:
        raise RuntimeError(
            f"llama.cpp has no CPU backend: no libggml-cpu-*.so in {info.lib_dir}; "
            f"rebuild the runtime with `{REBUILD_HINT}`"
        )
    forced = variant or os.environ.get(VARIANT_ENV) or None
    first = choose_variant(cpu_flags(), info.variants, forced)
    order = [first, *[v for v in info.variants if v != first]] if first else list(info.variants)
    tried = []
    for name in order:
        path = next(Path(info.lib_dir).glob(f"libggml-cpu-{name}.so*"))
        if lib.ggml_backend_load(str(path).encode()):
            return name
        tried.append(name)
        if forced:
            break  # a forced variant that does not load is an error, not a silent fallback
    raise RuntimeError(
        f"no CPU variant of llama.cpp loads on this CPU (tried {', '.join(tried)}); "
        f"rebuild the runtime with `{REBUILD_HINT}`"
    )


# --------------------------------------------------------------------------------------------
# The probe: a tiny decode in a child process, cached per build
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of one runtime probe.

    Attributes:
        ok: the child loaded the model and decoded tokens.
        variant: the CPU variant the child ran (``"built-in"`` for linked builds).
        seconds: wall time of the probe.
        reason: why it failed (the exit signal and the last lines the child wrote), or "".
        fingerprint: `RuntimeInfo.fingerprint` of the build probed.
        crashed: the child died natively (a signal, or no answer in time), as opposed to a
            Python error such as a model file llama.cpp cannot read.
    """

    ok: bool
    variant: str | None
    seconds: float
    reason: str
    fingerprint: str
    crashed: bool = True


def _cache_file() -> Path:
    return default_cache_dir() / "runtime-probe.json"


def _read_cache() -> dict[str, dict[str, object]]:
    try:
        data = json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(key: str, result: ProbeResult) -> None:
    data = _read_cache()
    data[key] = asdict(result)
    path = _cache_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)


def describe_exit(returncode: int) -> str:
    """``killed by SIGSEGV (Segmentation fault)`` or ``exited with status 3``."""
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
            return f"killed by {sig.name} ({signal.strsignal(sig) or sig.name})"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def crash_tail(lines: Iterable[str], n: int = 4) -> str:
    """A dead child's last words: its fatal error and innermost frames, else its last lines.

    ``faulthandler`` prints the crashing thread first (innermost frame first), then the other
    threads and the list of loaded extension modules; the frames that say where it crashed are
    the first ones after the "Fatal Python error" line.
    """
    kept = [line.strip() for line in lines if line.strip()]
    fatal = next((i for i, line in enumerate(kept) if line.startswith("Fatal Python")), None)
    if fatal is not None:
        frames = [line for line in kept[fatal + 1 :] if line.startswith("File ")][:n]
        return " | ".join([kept[fatal], *frames])
    return " | ".join(kept[-n:])


def child_env(variant: str | None = None) -> dict[str, str]:
    """The environment of a child that runs llama.cpp: this process's, with its import path.

    ``PYTHONPATH`` carries this interpreter's ``sys.path``, so the child imports the same
    package (a checkout on the path, a test's ``sys.path``) as the parent; ``variant`` forces a
    CPU variant (`VARIANT_ENV`).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    if variant:
        env[VARIANT_ENV] = variant
    return env


def probe_runtime(
    model_path: str | Path, *, variant: str | None = None, timeout_s: float = _PROBE_TIMEOUT_S
) -> ProbeResult:
    """Load the model and decode a few tokens in a child process (no cache).

    Args:
        model_path: the GGUF file.
        variant: a CPU variant to force in the child (None: its own choice).
        timeout_s: the child is killed after this long.
    """
    env = child_env(variant)
    info = runtime_info()
    started = time.perf_counter()
    cmd = [sys.executable, "-c", WORKER_ENTRY, "--probe", str(model_path)]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return ProbeResult(
            False, variant, timeout_s, f"no answer in {timeout_s:.0f} s", info.fingerprint
        )
    seconds = time.perf_counter() - started
    if proc.returncode == 0:
        return ProbeResult(
            True, _probed_variant(proc.stdout, variant), seconds, "", info.fingerprint
        )
    tail = crash_tail(proc.stderr.splitlines())
    reason = describe_exit(proc.returncode) + (f": {tail}" if tail else "")
    return ProbeResult(False, variant, seconds, reason, info.fingerprint, proc.returncode < 0)


def _probed_variant(stdout: str, asked: str | None) -> str | None:
    """The variant the probe reported on its last stdout line (``asked`` if it said nothing)."""
    lines = stdout.strip().splitlines()
    try:
        reply = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return asked
    found = reply.get("variant") if isinstance(reply, dict) else None
    return found if isinstance(found, str) else asked


class RuntimeCrash(EvoDuetError, RuntimeError):
    """A child process running llama.cpp died; the message says how (signal, last output)."""


T = TypeVar("T")


def with_variant_fallback(attempt: Callable[[str | None], T], *, what: str) -> T:
    """``attempt(variant)`` with this build's known-good CPU variant, else falling back.

    The first call for a build tries the default choice (``variant=None``), then, on a portable
    build, each lower variant in turn while ``attempt`` raises `RuntimeCrash`; the variant that
    worked is cached for the build (`RuntimeInfo.fingerprint`), so later calls go straight to
    it. ``EVODUET_LLAMA_CPU`` disables the fallback (a forced variant that crashes is an error).

    Args:
        attempt: starts something that runs llama.cpp in a child with the variant forced.
        what: names it in the error.

    Raises:
        LocalModelError: every variant tried crashed; the message names each failure and the fix.
    """
    info = runtime_info()
    key = info.fingerprint
    cached = _read_cache().get(key) or {}
    forced = os.environ.get(VARIANT_ENV) or None
    known = cached.get("variant") if cached.get("ok") else None
    candidates: list[str | None]
    if forced:
        candidates = [forced]
    elif known in info.variants:
        candidates = [str(known)]
    else:
        candidates = [None]
        if info.chosen in info.variants:
            candidates += list(info.variants[info.variants.index(info.chosen) + 1 :])
    failures = []
    for variant in candidates:
        started = time.perf_counter()
        try:
            result = attempt(variant)
        except RuntimeCrash as exc:
            failures.append(f"{variant or info.chosen or 'built-in'}: {exc}")
            continue
        if not cached.get("ok") or cached.get("variant") != (variant or info.chosen):
            seconds = time.perf_counter() - started
            _write_cache(key, ProbeResult(True, variant or info.chosen, seconds, "", key))
        return result
    raise LocalModelError(
        f"{what} crashed on this machine with llama-cpp-python {info.version} "
        f"({info.flavour} build; {'; '.join(failures)}); rebuild the runtime with "
        f"`{REBUILD_HINT}` (`evoduet doctor` shows the details)"
    )


def ensure_runtime(model_path: str | Path) -> str | None:
    """The in-process preflight: the runtime decodes in a child first (cached per build).

    Returns:
        The CPU variant to load in this process (None: the build's own choice).

    Raises:
        LocalModelError: llama-cpp-python is missing, the model does not load (a Python error
            in the child, not a crash: no other variant would help), or no variant decodes.
    """
    if runtime_info().version is None:
        raise LocalModelError(f"llama-cpp-python is not installed; install it with: {INSTALL_HINT}")

    def attempt(variant: str | None) -> str | None:
        result = probe_runtime(model_path, variant=variant)
        if result.ok:
            return variant
        if not result.crashed:
            raise LocalModelError(
                f"the embedded model did not load ({model_path}): {result.reason}"
            )
        raise RuntimeCrash(result.reason)

    return with_variant_fallback(attempt, what="the embedded model's runtime probe")

"""Build and install the embedded model's runtime: llama-cpp-python at the locked version.

Usage (the Makefile runs it; docs/install.md explains the choice):

    .venv/bin/python scripts/build_llama.py requirements/run.lock

``EVODUET_LLAMA_BUILD`` picks the build:

* ``portable`` (default): llama.cpp's backends as loadable modules (``GGML_BACKEND_DL``), no CPU
  backend linked in, plus llama.cpp's own CPU-variant modules ``x64``, ``haswell``,
  ``skylakex`` and ``zen4`` built from the same source; `evoduet_graph.llm.runtime` loads the
  best one this CPU and kernel run. Runs on any x86-64 CPU; no AMX variant (its kernels need
  a per-process permission that some kernels and sandboxes refuse, and crashed there).
* ``native``: llama.cpp's default, compiled for the build machine's own CPU (``-march=native``):
  a venv that must never move to another CPU, for a user who wants the last few percent.

The wheel is always built here with pip's cache off (``--no-cache-dir``): pip caches wheels it
built from a source distribution and would reuse one built with other flags for the same
version, which is how a native build reached machines it crashed on. The sdist is checked
against the lock's pin; cmake, ninja and wheel come from the lock too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("x64", "haswell", "skylakex", "zen4")  # `evoduet_graph.llm.runtime.CPU_VARIANTS`
CORE_FLAGS = {
    "portable": "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU=OFF -DLLAVA_BUILD=OFF",
    "native": "-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF",
}
VARIANT_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DGGML_NATIVE=OFF",
    "-DGGML_BACKEND_DL=ON",
    "-DGGML_CPU_ALL_VARIANTS=ON",
    "-DLLAMA_BUILD_COMMON=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_CURL=OFF",
]


def locked_version(lock: Path, name: str) -> str:
    """The ``name==X`` pin of ``lock``."""
    match = re.search(rf"^{re.escape(name)}(?:\[[^\]]*\])?==([^\s;]+)", lock.read_text(), re.M)
    if not match:
        sys.exit(f"{lock} does not pin {name}")
    return match.group(1)


def run(cmd: list[str], **kwargs: object) -> None:
    """Run ``cmd``, echoed, failing on a non-zero exit."""
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]


def main() -> int:
    """Build the wheel of the chosen flavour and install it."""
    if len(sys.argv) != 2:
        sys.exit("usage: build_llama.py LOCKFILE")
    lock = Path(sys.argv[1])
    flavour = os.environ.get("EVODUET_LLAMA_BUILD", "portable")
    if flavour not in CORE_FLAGS:
        sys.exit(f"EVODUET_LLAMA_BUILD={flavour!r}: use 'portable' (default) or 'native'")
    version = locked_version(lock, "llama-cpp-python")
    pip = [sys.executable, "-m", "pip"]
    tools = [f"{n}=={locked_version(lock, n)}" for n in ("cmake", "ninja", "wheel")]
    run([*pip, "install", "--quiet", *tools])
    bindir = Path(sys.executable).parent
    work = ROOT / "build" / f"llama-{version}-{flavour}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "dist").mkdir(parents=True)
    run(
        [*pip, "download", "--no-deps", "--no-binary", "llama-cpp-python", "--no-cache-dir"]
        + ["--dest", str(work), f"llama-cpp-python=={version}"]
    )
    sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    src = next(p for p in work.iterdir() if p.is_dir() and p.name.startswith("llama_cpp_python"))
    jobs = str(os.cpu_count() or 1)
    env = {**os.environ, "CMAKE_ARGS": CORE_FLAGS[flavour], "CMAKE_BUILD_PARALLEL_LEVEL": jobs}
    run([*pip, "wheel", "--no-deps", "--no-cache-dir", "-w", str(work / "dist"), str(src)], env=env)
    wheel = next((work / "dist").glob("llama_cpp_python-*.whl"))
    if flavour == "portable":
        wheel = add_cpu_variants(wheel, src, work, bindir, jobs, version)
    run([*pip, "install", "--no-deps", "--force-reinstall", "--no-cache-dir", str(wheel)])
    print(f"installed llama-cpp-python {version} ({flavour} build)")
    return 0


def add_cpu_variants(
    wheel: Path, src: Path, work: Path, bindir: Path, jobs: str, version: str
) -> Path:
    """Build llama.cpp's CPU-variant modules and put them into the wheel's ``llama_cpp/lib``."""
    build = work / "variants"
    cmake, ninja = str(bindir / "cmake"), str(bindir / "ninja")
    run(
        [cmake, "-S", str(src / "vendor" / "llama.cpp"), "-B", str(build), "-G", "Ninja"]
        + [f"-DCMAKE_MAKE_PROGRAM={ninja}", *VARIANT_FLAGS]
    )
    targets = [f"ggml-cpu-{v}" for v in VARIANTS]
    run([cmake, "--build", str(build), "-j", jobs, "--target", *targets])
    unpacked = work / "unpacked"
    run([sys.executable, "-m", "wheel", "unpack", "-d", str(unpacked), str(wheel)])
    root = next(unpacked.iterdir())
    lib = root / "llama_cpp" / "lib"
    for variant in VARIANTS:
        module = build / "bin" / f"libggml-cpu-{variant}.so"
        shutil.copy2(module, lib / module.name)
    info = {"flavour": "portable", "llama_cpp_python": version, "variants": list(VARIANTS)}
    (lib / "evoduet-build.json").write_text(json.dumps(info, indent=1) + "\n")
    out = work / "wheel"
    out.mkdir()
    run([sys.executable, "-m", "wheel", "pack", "-d", str(out), str(root)])
    return next(out.glob("*.whl"))


if __name__ == "__main__":
    sys.exit(main())

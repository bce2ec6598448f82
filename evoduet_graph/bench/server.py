"""A local OpenAI-compatible server for a GGUF model (llama-cpp-python's ``llama_cpp.server``).

The bench serves the embedded model once and points every method at it — our graph through
``openai:<alias>`` with ``llm.base_url``, OpenEvolve through ``llm.api_base`` — so all methods
talk to the identical model over the identical protocol. `LlamaCppServer` is a context manager:

.. code-block:: python

    with LlamaCppServer(model_path, alias="qwen") as server:
        print(server.base_url)          # http://127.0.0.1:<free port>/v1

The command it runs is llama-cpp-python's server through `evoduet_graph.bench.llama_server`
(which registers the portable build's CPU backend first), with the server's own arguments::

    python -m evoduet_graph.bench.llama_server --model FILE --model_alias ALIAS \
        --host 127.0.0.1 --port PORT --n_ctx N [--n_threads T] [--seed S] \
        [--draft_model prompt-lookup-decoding]

(the ``llama-cpp-python[server]`` extra: uvicorn, fastapi, sse-starlette, starlette-context,
pydantic-settings). Entering starts it in its own process group and waits until
``GET /v1/models`` answers; leaving kills the whole group (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from evoduet_graph import EvoDuetError

__all__ = [
    "SERVER_MODULES",
    "LlamaCppServer",
    "ServerDependencyError",
    "ServerError",
    "die_with_parent",
    "free_port",
    "kill_process_group",
    "missing_server_modules",
    "wait_ready",
]

SERVER_MODULES: tuple[str, ...] = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
"""Modules ``python -m llama_cpp.server`` imports (llama-cpp-python and its ``[server]`` extra)."""

SERVER_INSTALL_HINT = (
    "pip install 'llama-cpp-python[server]'  (or: pip install 'evoduet-graph[bench]')"
)

_LOG_TAIL_CHARS = 3000


class ServerError(EvoDuetError, RuntimeError):
    """The local model server could not be started or did not become ready."""


class ServerDependencyError(ServerError):
    """The interpreter lacks llama-cpp-python or its ``[server]`` extra."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that is free now (bound to port 0 and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes Linux send the child SIGTERM when its parent dies.

    ``prctl(PR_SET_PDEATHSIG, SIGTERM)``: a bench killed with SIGKILL leaves no model server
    or OpenEvolve process behind. The libc function is looked up here, in the parent; the
    child only calls it. None where unsupported (not Linux, no libc).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def apply() -> None:
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)

    return apply


def missing_server_modules(python: str | None = None) -> list[str]:
    """Modules of `SERVER_MODULES` that ``python`` cannot import (default: this interpreter).

    Only looks the modules up (``importlib.util.find_spec``); nothing is imported.
    """
    if python is None or Path(python).resolve() == Path(sys.executable).resolve():
        return [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    probe = (
        "import importlib.util, json, sys; "
        "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]))"
    )
    try:
        out = subprocess.run(
            [python, "-c", probe, *SERVER_MODULES],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return list(json.loads(out.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return list(SERVER_MODULES)


def _get_json(url: str, timeout_s: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read().decode("utf-8"))


def wait_ready(
    base_url: str,
    *,
    timeout_s: float = 120.0,
    interval_s: float = 0.25,
    process: subprocess.Popen[Any] | None = None,
    log_path: Path | None = None,
) -> dict[str, Any]:
    """Poll ``GET <base_url>/models`` until it answers with a model list.

    Args:
        base_url: the OpenAI-compatible base URL, e.g. ``http://127.0.0.1:8080/v1``.
        timeout_s: give up after this many seconds.
        interval_s: pause between attempts.
        process: the server process; if it exits while we wait, fail at once.
        log_path: the server's log file, quoted (tail) in error messages.

    Returns:
        The decoded JSON answer (``{"object": "list", "data": [{"id": ...}, ...]}``).

    Raises:
        ServerError: the process exited, or no valid answer within ``timeout_s``.
    """
    url = base_url.rstrip("/") + "/models"
    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    while True:
        if process is not None and process.poll() is not None:
            raise ServerError(
                f"the model server exited with status {process.returncode} before it was "
                f"ready{_log_tail(log_path)}"
            )
        try:
            data = _get_json(url, timeout_s=max(0.5, min(5.0, interval_s * 8)))
            if isinstance(data, dict) and isinstance(data.get("data"), list):
                return data
            last_error = f"unexpected answer {str(data)[:200]!r}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last_error = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise ServerError(
                f"the model server at {url} did not answer within {timeout_s:.0f} s "
                f"(last error: {last_error}){_log_tail(log_path)}"
            )
        time.sleep(interval_s)


def _log_tail(log_path: Path | None) -> str:
    if log_path is None or not log_path.is_file():
        return ""
    text = log_path.read_text(encoding="utf-8", errors="replace")[-_LOG_TAIL_CHARS:]
    return f"; server log {log_path} ends with:\n{text}" if text.strip() else ""


class LlamaCppServer:
    """``python -m llama_cpp.server`` for one GGUF file, as a context manager.

    Args:
        model_path: the GGUF file.
        alias: the model name clients send (``--model_alias``); OpenAI clients use it as
            ``model``.
        host: interface to bind; keep the default ``127.0.0.1`` (the server has no auth).
        port: TCP port; default: a free one (`free_port`).
        n_ctx: context window in tokens.
        n_threads: CPU threads; default: all cores.
        seed: llama.cpp sampling seed of the server (requests may carry their own).
        python: interpreter that runs the server; default: this one.
        log_path: where the server's stdout/stderr go; default: a file in the temp dir.
        startup_timeout_s: how long to wait for ``/v1/models`` to answer.
        prompt_lookup: prompt-lookup speculative decoding (llama-cpp-python's
            ``--draft_model prompt-lookup-decoding``): the continuation is drafted from the
            prompt by n-gram match and verified in one decode; the replies are distributed as
            without it (each position is still sampled from the model's own distribution and a
            draft token is kept only where the sample equals it), though a verify batch may
            round differently from one-token steps, so a long greedy reply can differ. A full
            rewrite copies most of its parent from the prompt, so this is the bench's
            counterpart of ``llm.local_prompt_lookup``.
        extra_args: appended to the command line verbatim.

    Attributes:
        process: the running server (None before ``start`` / after ``stop``).
        models: the ``/v1/models`` answer once ready.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        alias: str,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        seed: int | None = None,
        python: str | None = None,
        log_path: str | Path | None = None,
        startup_timeout_s: float = 180.0,
        prompt_lookup: bool = False,
        extra_args: list[str] | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.alias = alias
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.n_ctx = int(n_ctx)
        self.n_threads = n_threads
        self.seed = seed
        self.python = python or sys.executable
        self.log_path = (
            Path(log_path)
            if log_path is not None
            else Path(os.environ.get("TMPDIR", "/tmp")) / f"evoduet-llama-server-{self.port}.log"
        )
        self.startup_timeout_s = float(startup_timeout_s)
        self.prompt_lookup = prompt_lookup
        self.extra_args = list(extra_args or [])
        self.process: subprocess.Popen[bytes] | None = None
        self.models: dict[str, Any] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``http://<host>:<port>/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        """The server's command line (argv)."""
        cmd = [
            self.python,
            "-m",
            "evoduet_graph.bench.llama_server",  # llama_cpp.server, CPU backend loaded first
            "--model",
            str(self.model_path),
            "--model_alias",
            self.alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
        ]
        threads = self.n_threads or os.cpu_count() or 1
        cmd += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        if self.prompt_lookup:
            cmd += ["--draft_model", "prompt-lookup-decoding"]
        return cmd + self.extra_args

    def check_dependencies(self) -> None:
        """Fail early and clearly when the server cannot run at all.

        Raises:
            ServerDependencyError: llama-cpp-python or a ``[server]`` module is missing.
            ServerError: the model file does not exist.
        """
        missing = missing_server_modules(self.python)
        if missing:
            raise ServerDependencyError(
                f"the local model server needs llama-cpp-python with its [server] extra; "
                f"{self.python} cannot import: {', '.join(missing)}. Install: "
                f"{SERVER_INSTALL_HINT}"
            )
        if not self.model_path.is_file():
            raise ServerError(f"model file not found: {self.model_path}")

    def start(self) -> None:
        """Start the server in its own process group and wait until it answers.

        Raises:
            ServerDependencyError / ServerError: see `check_dependencies` and `wait_ready`.
        """
        if self.process is not None:
            return
        self.check_dependencies()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(self.command())}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=die_with_parent(),  # noqa: PLW1509 - only calls prctl
            )
        try:
            self.models = wait_ready(
                self.base_url,
                timeout_s=self.startup_timeout_s,
                process=self.process,
                log_path=self.log_path,
            )
        except BaseException:
            self.stop()
            raise

    def stop(self, grace_s: float = 10.0) -> None:
        """Kill the server's process group: SIGTERM, then SIGKILL after ``grace_s``."""
        proc, self.process = self.process, None
        if proc is None:
            return
        kill_process_group(proc, grace_s=grace_s)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def kill_process_group(proc: subprocess.Popen[Any], *, grace_s: float = 10.0) -> None:
    """Terminate the process group led by ``proc``.

    Terminate the process group led by ``proc`` (started with ``start_new_session=True``,
    so its group id is its pid).

    Sends SIGTERM to the group, waits up to ``grace_s`` for ``proc`` to exit, then SIGKILLs
    whatever is left of the group (children included). Safe on a process that has exited.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)

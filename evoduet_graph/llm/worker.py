"""The embedded model in a worker process of its own, so a native crash cannot take a run down.

llama.cpp is native code: a build whose kernels this CPU or kernel cannot run dies with SIGSEGV
or SIGILL, and an out-of-memory kill takes whatever process holds the weights. `ModelWorker`
runs the in-process engine of `evoduet_graph.llm.local` (the prompt cache and the batched
decoder included) in a child process (`runtime.WORKER_ENTRY`, run with ``python -c``) and forwards
calls to it over a socket pair (`multiprocessing.connection.Connection`: length-prefixed
pickles). Concurrent calls stay concurrent: the worker runs each in a thread of its own, so the
N candidates of an iteration still decode as one batch.

When the child dies (a signal, an abort, an OOM kill), every call in flight fails with
`ModelWorkerCrashed` (a retryable `ModelConnectionError`, so the caller's retry policy retries
it like a dropped connection) naming the exit signal and the last lines the child wrote (its
``faulthandler`` traceback); the next call starts a new child. A child that dies while starting
(loading the weights, then decoding one token) is retried with the next lower CPU variant
(`evoduet_graph.llm.runtime`), and the variant that works is remembered for the build.

The same entry point with ``--probe MODEL`` is the runtime probe (`runtime.probe_runtime`):
load, decode four tokens, print the variant as JSON, exit.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import importlib
import itertools
import json
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from typing import Any

from langchain_core.exceptions import ModelConnectionError

from evoduet_graph.errors import EvoDuetError
from evoduet_graph.llm import runtime
from evoduet_graph.llm.model_file import LocalModelError

__all__ = ["ModelWorker", "ModelWorkerCrashed", "WorkerSettings"]

IN_WORKER_ENV = "EVODUET_MODEL_WORKER"
"""Set to ``1`` in the worker's environment (the engine skips the parent's preflight there)."""

_STDERR_LINES = 40  # lines of the child's stderr kept for a crash report
_CLOSE_WAIT_S = 5.0


class ModelWorkerCrashed(EvoDuetError, ModelConnectionError):
    """The model worker died during a call; retryable (the next call starts a new worker).

    Attributes:
        reason: how it died (``killed by SIGSEGV (Segmentation fault)``) and its last output.
        crashes: crashes in a row without a successful call in between.
    """

    def __init__(self, message: str, *, reason: str = "", crashes: int = 1) -> None:
        super().__init__(message)
        self.reason = reason
        self.crashes = crashes

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_crash, (str(self), self.reason, self.crashes))


def _rebuild_crash(message: str, reason: str, crashes: int) -> ModelWorkerCrashed:
    return ModelWorkerCrashed(message, reason=reason, crashes=crashes)


@dataclass(frozen=True)
class WorkerSettings:
    """What the worker loads: the engine factory (``module:function``) and its arguments."""

    model_path: str
    n_ctx: int
    n_threads: int
    parallel: int
    prompt_cache_mib: int
    engine: str = "evoduet_graph.llm.local:load_engine"
    prompt_lookup: bool = True


def _import(path: str) -> Callable[..., Any]:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------------------------


class _Generation:
    """One worker process: its connection, the calls it has in flight, its last output."""

    def __init__(self, proc: subprocess.Popen[bytes], conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.pending: dict[int, Future[Any]] = {}
        self.stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self.dead = False
        self.send_lock = threading.Lock()

    def tail(self, n: int = 4) -> str:
        """The child's last words (`runtime.crash_tail`)."""
        return runtime.crash_tail(self.stderr, n)


class ModelWorker:
    """The parent's handle on the model worker: calls, crash detection, restarts.

    Args:
        settings: what the worker loads.
        start_timeout_s: the longest a start (loading the weights) may take.
    """

    def __init__(self, settings: WorkerSettings, *, start_timeout_s: float = 600.0) -> None:
        self.settings = settings
        self.start_timeout_s = start_timeout_s
        self.crashes = 0  # in a row, reset by a successful call
        self.starts = 0
        self.variant: str | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # guards _gen (starting, restarting)
        self._gen: _Generation | None = None
        self._closed = False
        _WORKERS.append(self)
        self._ensure_started()

    @property
    def pid(self) -> int | None:
        """The worker process's pid (None before the first start or after a crash)."""
        gen = self._gen
        return gen.proc.pid if gen is not None and not gen.dead else None

    # -- lifecycle -----------------------------------------------------------------------------

    def _spawn(self, variant: str | None) -> _Generation:
        parent_sock, child_sock = socket.socketpair()
        env = runtime.child_env(variant)
        env[IN_WORKER_ENV] = "1"
        fd = child_sock.fileno()
        proc = subprocess.Popen(
            [sys.executable, "-c", runtime.WORKER_ENTRY, str(fd)],
            pass_fds=(fd,),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        child_sock.close()
        gen = _Generation(proc, Connection(parent_sock.detach()))
        threading.Thread(target=self._drain_stderr, args=(gen,), daemon=True).start()
        return gen

    def _start_one(self, variant: str | None) -> _Generation:
        """Start a worker and wait for its ``ready`` (weights loaded, one token decoded)."""
        gen = self._spawn(variant)
        gen.conn.send(asdict(self.settings))
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if gen.conn.poll(0.2):
                try:
                    kind, payload = gen.conn.recv()
                except (EOFError, OSError):
                    break  # died while answering: reported below
                if kind == "ready":
                    self.variant = payload.get("variant")
                    gen.stderr.clear()  # start-up lines; a crash report shows what came after
                    threading.Thread(target=self._read, args=(gen,), daemon=True).start()
                    return gen
                self._reap(gen)
                raise LocalModelError(f"the embedded model could not be loaded: {payload}")
            if gen.proc.poll() is not None:
                break
            if time.monotonic() > deadline:
                self._reap(gen)
                raise LocalModelError(
                    f"the embedded model's worker did not load the model in "
                    f"{self.start_timeout_s:.0f} s"
                )
        rc = self._reap(gen)
        time.sleep(0.05)  # let the stderr reader take the last lines
        tail = gen.tail()
        raise runtime.RuntimeCrash(runtime.describe_exit(rc) + (f": {tail}" if tail else ""))

    def _ensure_started(self) -> _Generation:
        with self._lock:
            if self._closed:
                raise LocalModelError("the embedded model's worker was closed")
            if self._gen is not None and not self._gen.dead:
                return self._gen
            self.starts += 1
            self._gen = runtime.with_variant_fallback(
                self._start_one, what="the embedded model's worker"
            )
            return self._gen

    def _reap(self, gen: _Generation) -> int:
        gen.dead = True
        with contextlib.suppress(OSError):
            gen.conn.close()
        try:
            return gen.proc.wait(timeout=_CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            gen.proc.kill()
            return gen.proc.wait()

    def _drain_stderr(self, gen: _Generation) -> None:
        assert gen.proc.stderr is not None
        for raw in gen.proc.stderr:
            gen.stderr.append(raw.decode("utf-8", "replace"))

    def _read(self, gen: _Generation) -> None:
        """Deliver replies to their calls; on EOF, fail every call in flight as a crash."""
        while True:
            try:
                kind, call_id, payload = gen.conn.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:  # noqa: BLE001 - an unpicklable reply fails its call only
                for fut in list(gen.pending.values()):
                    if not fut.done():
                        fut.set_exception(RuntimeError(f"unreadable worker reply: {exc}"))
                continue
            waiting: Future[Any] | None = gen.pending.pop(call_id, None)
            if waiting is None:
                continue
            if kind == "ok":
                waiting.set_result(payload)
            else:
                waiting.set_exception(payload)
        if self._closed:
            return
        rc = self._reap(gen)
        time.sleep(0.05)  # let the stderr reader take the last lines
        with self._lock:
            self.crashes += 1
            crashes = self.crashes
        reason = runtime.describe_exit(rc) + (f": {gen.tail()}" if gen.tail() else "")
        message = (
            f"the embedded model's worker {reason} (crash {crashes} in a row; the next call "
            f"starts a new worker; if it keeps crashing, rebuild the runtime with "
            f"`{runtime.REBUILD_HINT}`)"
        )
        for fut in list(gen.pending.values()):
            if not fut.done():
                fut.set_exception(ModelWorkerCrashed(message, reason=reason, crashes=crashes))
        gen.pending.clear()

    # -- calls ---------------------------------------------------------------------------------

    def call(self, method: str, *args: Any) -> Any:
        """``engine.<method>(*args)`` in the worker, started (again) if needed.

        Returns:
            ``(result, seconds)``: what the engine returned and how long it took in the worker
            (the rest of the caller's wait is the process boundary).

        Raises:
            ModelWorkerCrashed: the worker died before answering.
            LocalModelError: the worker cannot be started.
            Exception: whatever the engine raised (re-raised as sent).
        """
        gen = self._ensure_started()
        call_id = next(self._ids)
        fut: Future[Any] = Future()
        gen.pending[call_id] = fut
        try:
            with gen.send_lock:
                gen.conn.send(("call", call_id, method, args))
        except (OSError, ValueError):
            pass  # the reader thread reports the crash to ``fut``
        if gen.dead and not fut.done():
            del gen.pending[call_id]
            raise ModelWorkerCrashed(
                f"the embedded model's worker was gone before the call "
                f"(rebuild the runtime with `{runtime.REBUILD_HINT}` if it keeps crashing)"
            )
        result = fut.result()
        with self._lock:
            self.crashes = 0
        return result

    def close(self) -> None:
        """Stop the worker (it frees the model); later calls raise."""
        with self._lock:
            self._closed = True
            gen, self._gen = self._gen, None
        if gen is None or gen.dead:
            return
        with contextlib.suppress(OSError, ValueError), gen.send_lock:
            gen.conn.send(("close", 0, "", ()))
        self._reap(gen)


_WORKERS: list[ModelWorker] = []


@atexit.register
def _close_workers() -> None:
    for worker in list(_WORKERS):
        with contextlib.suppress(Exception):
            worker.close()


# --------------------------------------------------------------------------------------------
# Child side
# --------------------------------------------------------------------------------------------


def _send(conn: Connection, lock: threading.Lock, message: tuple[Any, ...]) -> None:
    """Send a reply; one that would not pickle and unpickle goes as a plain error."""
    kind, call_id, payload = message
    try:
        data = pickle.dumps(message)
        pickle.loads(data)
    except Exception:  # noqa: BLE001 - e.g. an exception class with another __init__
        what = f"{type(payload).__name__}: {payload}" if kind == "error" else "unpicklable result"
        data = pickle.dumps(("error", call_id, RuntimeError(what)))
    with lock:
        conn.send_bytes(data)


def _run_call(engine: Any, conn: Connection, lock: threading.Lock, msg: tuple[Any, ...]) -> None:
    _, call_id, method, args = msg
    started = time.perf_counter()
    try:
        result = getattr(engine, method)(*args)
    except Exception as exc:  # noqa: BLE001 - every engine error goes back to its caller
        _send(conn, lock, ("error", call_id, exc))
        return
    _send(conn, lock, ("ok", call_id, (result, time.perf_counter() - started)))


def _serve(fd: int) -> int:
    faulthandler.enable()  # a native crash prints the Python stack to stderr (the crash report)
    conn = Connection(fd)
    settings = WorkerSettings(**conn.recv())
    try:
        engine = _import(settings.engine)(settings)
        engine.warm_up()
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a load failure
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return 1
    conn.send(("ready", {"pid": os.getpid(), "variant": getattr(engine, "variant", None)}))
    lock = threading.Lock()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg[0] == "close":
            break
        threading.Thread(target=_run_call, args=(engine, conn, lock, msg), daemon=True).start()
    with contextlib.suppress(Exception):
        engine.close()
    return 0


def _probe(model_path: str) -> int:
    faulthandler.enable()
    variant = runtime.load_cpu_backend()
    llama = runtime.llama_cpp_module().Llama(
        model_path=model_path, n_ctx=256, n_batch=64, verbose=False
    )
    llama.create_completion("def add(a, b):", max_tokens=4, temperature=0.0)
    print(json.dumps({"variant": variant}), flush=True)
    llama.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``worker FD`` (serve on a socket) or ``worker --probe MODEL`` (the runtime probe)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--probe":
        return _probe(args[1])
    if len(args) == 1 and args[0].isdigit():
        return _serve(int(args[0]))
    print("usage: worker FD | --probe MODEL", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

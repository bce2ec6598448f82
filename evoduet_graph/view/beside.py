"""``evoduet run --view``: ``evoduet view RUN_DIR`` in its own process beside the run.

The page is served by a separate process, so the run's process does none of the view's work
(reading and summarising the run directory would otherwise compete with the run's nodes for
the interpreter). The port is checked, and a free one picked for port 0, before the run starts,
so a taken port fails at once; the process starts at the run's first progress event, when the
run directory exists (`evoduet view` refuses a path that is not one yet), and is stopped when
the run ends.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from evoduet_graph.view.app import bind
from evoduet_graph.view.data import is_run_dir

__all__ = ["ViewBesideRun", "check_port"]


def check_port(host: str, port: int) -> int:
    """The port ``--view`` will use: ``port`` once it is free, or a free one for 0.

    Raises:
        OSError: ``host:port`` cannot be bound now.
    """
    sock = bind(host, port)
    try:
        return int(sock.getsockname()[1])
    finally:
        sock.close()


class ViewBesideRun:
    """Starts ``evoduet view RUN_DIR --port P`` once the run directory exists; `stop` ends it.

    Args:
        run_dir: the run's directory (it may not exist yet).
        host / port: where to serve (the port from `check_port`).
        on_url: called with the page's address once the server answers.
        on_error: called with a one-line reason when the server could not start (the run
            goes on without it).
    """

    def __init__(
        self,
        run_dir: Path,
        host: str,
        port: int,
        on_url: Callable[[str], None],
        on_error: Callable[[str], None],
    ) -> None:
        self.run_dir = run_dir
        self.host = host
        self.port = port
        self.on_url = on_url
        self.on_error = on_error
        self.url: str | None = None
        self._lock = threading.Lock()
        self._started = False
        self._stopped = False
        self._proc: subprocess.Popen[str] | None = None

    def poke(self) -> None:
        """Start the server once the run directory exists (call on every progress event)."""
        with self._lock:
            if self._started or self._stopped or not is_run_dir(self.run_dir):
                return
            self._started = True
        # its start (imports, reading the first line) must not hold up the run's event
        threading.Thread(target=self._start, name="evoduet-view-start", daemon=True).start()

    def _start(self) -> None:
        cmd = [sys.executable, "-m", "evoduet_graph.cli", "view", str(self.run_dir)]
        cmd += ["--host", self.host, "--port", str(self.port)]
        # the child's stderr goes to a file (a pipe nobody reads could fill up and stall it);
        # closing this end leaves the child's own descriptor open
        with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as errors:
            with self._lock:
                if self._stopped:
                    return
                proc = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True
                )
                self._proc = proc
            assert proc.stdout is not None
            line = proc.stdout.readline()  # "serving on http://HOST:PORT/"
            match = re.search(r"http://\S+", line)
            if match is None:
                proc.wait()
                errors.seek(0)
                reason = " ".join(errors.read().split()) or f"exit code {proc.returncode}"
                if not self._stopped:
                    self.on_error(f"--view: the page could not be served: {reason}")
                return
        self.url = match.group(0)
        if not self._stopped:
            self.on_url(self.url)

    def kill(self) -> None:
        """Kill the server now: no lock taken, nothing waited for.

        What an interrupted command does just before it ends at once
        (`evoduet_graph.cli.interrupt`), from a thread other than the one that may hold the lock.
        """
        self._stopped = True
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (idempotent; nothing to do when it never started)."""
        with self._lock:
            self._stopped = True
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

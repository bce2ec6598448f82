"""One process per run directory: an exclusive ``flock`` on ``<run_dir>/.lock``.

`run` / `resume` hold the lock for the whole run, so a second ``evoduet run --out DIR`` or
``evoduet resume DIR`` on the same directory refuses at once with a message naming the
holder, instead of interleaving checkpoints, program-store rows and search-database lines.
The kernel releases the lock when the holder exits, also after ``SIGKILL``, so a killed run
never leaves a stale lock behind; the pid written into the file is information only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["LOCK_FILE", "RunDirLock", "RunDirLockedError"]

LOCK_FILE = ".lock"


class RunDirLockedError(RuntimeError):
    """Another process holds the run directory's lock."""


class RunDirLock:
    """The exclusive lock of a run directory (a context manager; `acquire` / `release`).

    Args:
        run_dir: the run directory (must exist).
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> Self:
        """Take the lock without waiting.

        Raises:
            RunDirLockedError: another process (or another open of the file) holds it.
        """
        if self._fd is not None:
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            with contextlib.suppress(OSError):
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            os.close(fd)
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise RunDirLockedError(
                f"run directory {self.path.parent} is in use by another evoduet process{who}; "
                "wait for it to finish (or stop it) before running or resuming it again"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __del__(self) -> None:  # an abandoned lock object must not keep the directory locked
        with contextlib.suppress(Exception):
            self.release()

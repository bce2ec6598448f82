"""One process per run directory: an exclusive POSIX record lock on ``<run_dir>/.lock``.

`run` / `resume` hold the lock for the whole run, so a second ``evoduet run --out DIR`` or
``evoduet resume DIR`` on the same directory refuses at once with a message naming the
holder, instead of interleaving checkpoints, program-store rows and search-database lines.
The kernel releases the lock when the holder exits, also after ``SIGKILL``, so a killed run
never leaves a stale lock behind; the pid written into the file is information only.

Why ``fcntl.lockf`` and not ``flock``: a ``flock`` belongs to the open file description, which
a forked child shares until it execs. A run killed while it was starting an evaluation child
left that child holding the lock for the moment between ``fork`` and ``exec``, and an
immediate ``evoduet resume`` was refused. A POSIX record lock belongs to the process and is
never inherited by ``fork``. POSIX locks do not conflict inside one process, so the
directories this process holds are also kept in a process-wide registry, and the lock file
is never opened a second time while it is held (closing any descriptor of the file would
drop the process's lock).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

from evoduet_graph.errors import UserError
from evoduet_graph.rundir import layout

__all__ = ["RunDirLock", "RunDirLockedError"]


_HELD: set[str] = set()
_HELD_GUARD = threading.Lock()


class RunDirLockedError(UserError, RuntimeError):
    """Another process (or another `RunDirLock` of this process) holds the directory's lock."""


def _locked_error(run_dir: Path, holder: str) -> RunDirLockedError:
    who = f" (pid {holder})" if holder.isdigit() else ""
    return RunDirLockedError(
        f"run directory {run_dir} is in use by another evoduet process{who}; "
        "wait for it to finish (or stop it) before running or resuming it again"
    )


class RunDirLock:
    """The exclusive lock of a run directory (a context manager; `acquire` / `release`).

    Args:
        run_dir: the run directory (must exist).
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / layout.LOCK
        self._fd: int | None = None
        self._key: str | None = None

    @property
    def held(self) -> bool:
        """Whether this process holds the lock."""
        return self._fd is not None

    def acquire(self) -> Self:
        """Take the lock without waiting.

        Raises:
            RunDirLockedError: another process (or another open of the file) holds it.
        """
        if self._fd is not None:
            return self
        key = os.path.realpath(self.path)
        with _HELD_GUARD:
            if key in _HELD:  # held by this process: do not open (a close would unlock it)
                raise _locked_error(self.path.parent, str(os.getpid()))
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = ""
                with contextlib.suppress(OSError):
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                os.close(fd)
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                raise _locked_error(self.path.parent, holder) from None
            except BaseException:
                os.close(fd)
                raise
            _HELD.add(key)
            self._key = key
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
            fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd)
        with _HELD_GUARD:
            _HELD.discard(self._key or "")
            self._key = None

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


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive inter-process lock on ``path`` for the enclosed block.

    Exclusive inter-process lock on ``path`` for the enclosed block (``fcntl.flock``, as the
    run directory's lock): the one helper for short critical sections (assembling the
    embedded model, creating the OpenEvolve venv).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

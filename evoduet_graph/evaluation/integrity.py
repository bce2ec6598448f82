"""Task-folder integrity: the pristine snapshot every evaluation runs against (docs/design.md §5).

A candidate program is untrusted code that runs in the same process as the task's evaluator,
and LLM-written programs do try to rewrite the evaluator (found through ``sys.path[0]``, their
own stack frames, the environment or ``/proc``) so that every later candidate wins. The
sandbox therefore never runs the evaluator from the task folder itself:

* `TaskSnapshot.take` reads every file of the task folder into memory once, when the
  evaluator is built (run start), and hashes it (`TaskSnapshot.digest`, written to the run's
  ``run.json`` as ``task_sha256``). The in-memory copy is out of a candidate's reach; it is the
  reference that on-disk copies are checked against and restored from.
* Each evaluation imports the evaluator and its helper modules from an on-disk copy of the
  snapshot (`TaskSnapshot.materialize`), read-only where the machine allows a mount namespace
  (`evoduet_graph.evaluation.isolation`), a private copy per evaluation elsewhere.
* After every evaluation `TaskSnapshot.changes` compares that copy (and, without a mount
  namespace, the original task folder) with the snapshot; any difference is tampering: the
  candidate is invalid, the copy is discarded and the original folder restored
  (`TaskSnapshot.restore`).

Files are read the way the Ray executor ships a task: every regular file below the folder
(symlinks followed), ``__pycache__`` folders and names starting with ``.`` skipped.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from evoduet_graph.task import TaskError

__all__ = ["MAX_SNAPSHOT_BYTES", "TaskSnapshot", "folder_digest", "read_folder"]

#: Largest task folder (sum of file sizes, bytes) a snapshot holds.
MAX_SNAPSHOT_BYTES = 100 << 20
_SKIPPED_DIRS = frozenset({"__pycache__"})


class SnapshotTooLargeError(TaskError):
    """The task folder holds more than the snapshot limit."""


def read_folder(root: Path, *, max_bytes: int = MAX_SNAPSHOT_BYTES) -> dict[str, bytes]:
    """Every file below ``root`` as ``{relative POSIX path: bytes}`` (skip rules above).

    Raises:
        SnapshotTooLargeError: more than ``max_bytes`` bytes in all.
        OSError: a file or folder cannot be read.
    """
    files: dict[str, bytes] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _SKIPPED_DIRS and not d.startswith(".")
        )
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            data = path.read_bytes()
            total += len(data)
            if total > max_bytes:
                raise SnapshotTooLargeError(
                    f"task folder {root} holds more than {max_bytes >> 20} MiB"
                )
            files[path.relative_to(root).as_posix()] = data
    return files


def _digest(files: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return digest.hexdigest()


def file_digests(root: Path, *, max_bytes: int = MAX_SNAPSHOT_BYTES) -> dict[str, str]:
    """sha256 (hex) of each file `folder_digest` covers, by relative POSIX path.

    sha256 (hex) of each file `folder_digest` covers, by relative POSIX path (run.json's
    ``task_files``: a refused resume names the files that changed).

    Raises:
        TaskError: the folder cannot be read or is too large.
    """
    files = TaskSnapshot.take(root, max_bytes=max_bytes).files
    return {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(files.items())}


def changed_files(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """``modified x``, ``added y``, ``removed z`` between two `file_digests`."""
    return [
        f"{'added' if rel not in before else 'removed' if rel not in after else 'modified'} {rel}"
        for rel in sorted(before.keys() | after.keys())
        if before.get(rel) != after.get(rel)
    ]


def folder_digest(root: Path, *, max_bytes: int = MAX_SNAPSHOT_BYTES) -> str:
    """sha256 (hex) of a folder's paths and contents, as `TaskSnapshot.digest` computes it.

    Raises:
        TaskError: the folder cannot be read or is too large.
    """
    return TaskSnapshot.take(root, max_bytes=max_bytes).digest


@dataclass(frozen=True)
class TaskSnapshot:
    """A task folder's files, in memory, with their digest.

    Attributes:
        root: the folder it was taken from.
        files: relative POSIX path → content.
        digest: sha256 (hex) of the sorted paths and their contents' sha256.
    """

    root: Path
    files: Mapping[str, bytes] = field(repr=False)
    digest: str

    @classmethod
    def take(cls, root: str | Path, *, max_bytes: int = MAX_SNAPSHOT_BYTES) -> TaskSnapshot:
        """Read and hash ``root``.

        Raises:
            TaskError: the folder cannot be read, or holds more than ``max_bytes`` bytes.
        """
        folder = Path(root)
        try:
            files = read_folder(folder, max_bytes=max_bytes)
        except SnapshotTooLargeError as exc:
            raise SnapshotTooLargeError(
                f"{exc}, too much to snapshot for its evaluations; move files the evaluator "
                "does not need (e.g. large data or docs) out of the folder"
            ) from None
        except OSError as exc:
            raise TaskError(f"cannot read task folder {folder}: {exc}") from None
        return cls(root=folder, files=dict(files), digest=_digest(files))

    @property
    def size(self) -> int:
        """Total bytes of the files."""
        return sum(len(b) for b in self.files.values())

    def materialize(self, target: Path) -> Path:
        """Write the files under ``target`` (created; existing files are overwritten).

        Returns:
            ``target``.
        """
        target.mkdir(parents=True, exist_ok=True)
        for rel, data in self.files.items():
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return target

    def changes(self, folder: Path) -> list[str]:
        """How ``folder`` differs from the snapshot.

        ``modified X``, ``deleted X``, ``added X`` (sorted by path; empty when identical). An
        unreadable folder is reported as ``unreadable (...)``.
        """
        try:
            now = read_folder(folder, max_bytes=max(2 * self.size, MAX_SNAPSHOT_BYTES))
        except (OSError, TaskError) as exc:
            return [f"unreadable ({exc})"]
        if _digest(now) == self.digest:
            return []
        out: list[tuple[str, str]] = []
        for rel in self.files.keys() | now.keys():
            if rel not in now:
                out.append((rel, f"deleted {rel}"))
            elif rel not in self.files:
                out.append((rel, f"added {rel}"))
            elif now[rel] != self.files[rel]:
                out.append((rel, f"modified {rel}"))
        return [text for _, text in sorted(out)]

    def restore(self, folder: Path) -> list[str]:
        """Make ``folder`` equal to the snapshot again.

        Rewrite modified and deleted files, remove added ones (and folders left empty by that).

        Returns:
            The differences found before restoring (`changes`).
        """
        found = self.changes(folder)
        if not found:
            return found
        try:
            now = set(read_folder(folder, max_bytes=max(4 * self.size, MAX_SNAPSHOT_BYTES)))
        except (OSError, TaskError):
            now = set()
        for rel in now - set(self.files):
            path = folder / rel
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except OSError:
                continue
            parent = path.parent
            while parent != folder and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
        for rel, data in self.files.items():
            path = folder / rel
            try:
                if not path.is_file() or path.read_bytes() != data:
                    if path.is_symlink():
                        path.unlink()
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
            except OSError:
                continue
        return found

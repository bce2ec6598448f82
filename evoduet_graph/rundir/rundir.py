"""`RunDir`: a run directory checked once, for both the CLI and the API.

`RunDir.open` says in one line what is wrong with a path that should be a run directory (it
does not exist, is not a directory, is a task folder or any other folder), and with
``resumable=True`` also whether the run can be rebuilt from it (``run.json`` naming its task
folder, a non-empty ``config.yaml``). ``evoduet report``, ``evoduet compare``, ``evoduet
resume`` and `evoduet_graph.api.resume` all open run directories this way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoduet_graph.errors import UserError
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.read import read_json
from evoduet_graph.rundir.usage import completed_iterations
from evoduet_graph.task import Task, load_task

__all__ = ["RUN_HINT", "RunDir", "RunDirError"]

RUN_HINT = "pass the run directory that `evoduet run` printed (runs/<task>-<timestamp>)"
"""What to do instead, appended to every refusal."""


class RunDirError(UserError, ValueError):
    """The path is not a usable run directory; the message says why and what to do."""


@dataclass(frozen=True)
class RunDir:
    """An opened run directory.

    Attributes:
        path: the directory.
        meta: ``run.json`` (empty when the run has none yet, e.g. killed at its start).
    """

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, path: str | Path, *, resumable: bool = False) -> RunDir:
        """Check that ``path`` is a run directory written by ``evoduet run``.

        Args:
            path: the directory.
            resumable: also require what rebuilding the run needs: ``run.json`` with the
                task folder and a non-empty ``config.yaml``.

        Returns:
            The run directory with its ``run.json``.

        Raises:
            RunDirError: one line saying what is wrong and what to do.
        """
        rdir = Path(path)
        if not rdir.exists():
            raise RunDirError(f"no such directory; {RUN_HINT}")
        if not rdir.is_dir():
            raise RunDirError(f"not a directory; {RUN_HINT}")
        # config.yaml alone is not enough: an OpenEvolve task folder has one too
        if not any((rdir / name).is_file() for name in layout.MARKERS):
            raise RunDirError(
                f"not an evoduet run directory (neither {' nor '.join(layout.MARKERS)} is "
                f"there); {RUN_HINT}"
            )
        meta_path = rdir / layout.RUN_META
        if not resumable:
            return cls(rdir, read_json(meta_path) or {})
        for name in (layout.RUN_META, layout.CONFIG):
            if not (rdir / name).is_file():
                raise RunDirError(
                    f"{name} is missing, so the run cannot be rebuilt; {RUN_HINT}, or start a "
                    "new run with `evoduet run`"
                )
        config = rdir / layout.CONFIG
        if not config.read_text(encoding="utf-8", errors="replace").strip():
            raise RunDirError(
                f"{config} is empty, so the run's configuration is lost; restore it from a "
                "copy (the defaults would silently change the run)"
            )
        meta = read_json(meta_path)
        if meta is None or not isinstance(meta.get("task_dir"), str):
            raise RunDirError(f'{meta_path} is damaged; it must be a JSON object with "task_dir"')
        return cls(rdir, meta)

    @property
    def config_path(self) -> Path:
        """The run's ``config.yaml``."""
        return self.path / layout.CONFIG

    @property
    def studio(self) -> bool:
        """Whether the run was started through the graph input (its thread holds its place)."""
        return bool(self.meta.get("studio"))

    def completed_iterations(self) -> int:
        """The last iteration whose ``record`` node finished (0 if none)."""
        return completed_iterations(self.path)

    def load_task(self) -> Task:
        """The run's task, from the folder (and program) ``run.json`` names.

        Raises:
            evoduet_graph.task.TaskError: the folder cannot be loaded.
        """
        return load_task(self.meta["task_dir"], self.meta.get("program"))

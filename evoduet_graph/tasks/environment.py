"""Does this machine have what a task folder needs? Python requirements and toolchains.

* **Requirements.** A task's ``requirements.txt`` (and SkyDiscover's
  ``evaluator/requirements.txt``) names the Python packages its evaluator imports. They are
  checked against the environment the sandbox runs (this interpreter's) with
  ``packaging``'s requirement parser and ``importlib.metadata``; what is missing or at a
  version outside the specifier is named in one warning line at startup. Nothing is ever
  installed: installing is the user's decision. Lines that are not requirements (comments,
  ``-r`` / ``--index-url`` options, URLs) are skipped; a requirement whose environment marker
  does not apply here is not needed.
* **Toolchain.** A program in another language needs its compiler or interpreter (``Rscript``,
  ``cargo``, ``cc``). `check_toolchain` raises a one-line `ToolchainError` naming it when the
  evaluator calls one that is not installed (`evoduet_graph.tasks.languages.missing_toolchain`),
  instead of every candidate scoring 0 with the reason buried in an artifact.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from evoduet_graph.task import EVALUATOR_DIR, Task
from evoduet_graph.tasks.languages import ToolchainError, missing_toolchain

__all__ = ["check_toolchain", "missing_requirements", "requirements_warning"]

REQUIREMENTS = "requirements.txt"


def _requirement_files(task: Task) -> list[Path]:
    files = [task.path / REQUIREMENTS, task.path / EVALUATOR_DIR / REQUIREMENTS]
    return [f for f in files if f.is_file()]


def missing_requirements(task: Task) -> list[str]:
    """Requirements of the task's ``requirements.txt`` files not satisfied here.

    Returns:
        One entry per unmet requirement, e.g. ``"scipy (not installed)"`` or
        ``"numpy>=3 (installed 2.1.0)"``, in file order without repeats.
    """
    missing: dict[str, str] = {}
    for path in _requirement_files(task):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for raw in lines:
            line = raw.split("#", 1)[0].strip()
            if not line or line.startswith("-"):
                continue
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate():
                continue
            try:
                version = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                missing.setdefault(str(req), f"{req} (not installed)")
                continue
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                missing.setdefault(str(req), f"{req} (installed {version})")
    return list(missing.values())


def requirements_warning(task: Task) -> str | None:
    """The one-line startup warning for unmet requirements, or None when all are met."""
    missing = missing_requirements(task)
    if not missing:
        return None
    files = " and ".join(str(p.relative_to(task.path)) for p in _requirement_files(task))
    return (
        f"{files} of task {task.name!r} not satisfied in this environment: "
        f"{', '.join(missing)}; the evaluator may fail. Nothing is installed automatically: "
        f"install them yourself (e.g. pip install -r {files.split(' and ')[0]})"
    )


def check_toolchain(task: Task) -> None:
    """Raise when the task's evaluator calls a compiler/interpreter this machine lacks.

    Raises:
        ToolchainError: one line naming the task, the program and how to install it.
    """
    try:
        text = task.evaluator_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    problem = missing_toolchain(task.lang, text)
    if problem is not None:
        raise ToolchainError(f"task {task.name!r} ({task.program_label}): {problem}")

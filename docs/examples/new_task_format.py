"""A new task format: one JSON file holding the program, the evaluator and the metadata.

`write_task_folder` converts it into the task folder `evoduet_graph.load_task` reads
(``initial_program.py``, ``evaluator.py``, ``task.yaml``), so every run, report and bench works
on it unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

META_KEYS = ("name", "direction", "metric", "instruction", "timeout_s")
"""Keys of the JSON file that go into ``task.yaml`` as they are."""


def write_task_folder(spec_file: Path, folder: Path) -> Path:
    """Write the task folder for a JSON task file.

    Args:
        spec_file: a JSON object with ``program`` and ``evaluator`` (Python source) and any of
            `META_KEYS`.
        folder: where to write the task folder (created; existing files are replaced).

    Returns:
        ``folder``, ready for `evoduet_graph.load_task`.

    Raises:
        ValueError: the file is not a JSON object or lacks ``program`` / ``evaluator``.
    """
    spec = json.loads(spec_file.read_text(encoding="utf-8"))
    if not isinstance(spec, dict):
        raise ValueError(f"{spec_file}: a task file holds a JSON object")
    missing = [key for key in ("program", "evaluator") if not isinstance(spec.get(key), str)]
    if missing:
        raise ValueError(f"{spec_file}: missing {', '.join(missing)} (Python source text)")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "initial_program.py").write_text(spec["program"], encoding="utf-8")
    (folder / "evaluator.py").write_text(spec["evaluator"], encoding="utf-8")
    meta = {key: spec[key] for key in META_KEYS if key in spec}
    (folder / "task.yaml").write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
    return folder

"""A per-candidate cgroup name left by a killed run does not stop the next candidate's cgroup."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from evoduet_graph.evaluation import isolation
from evoduet_graph.evaluation.isolation import PidsCgroup


def test_a_leftover_cgroup_with_this_pid_and_counter_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "_COUNTER", itertools.count(1))
    busy = tmp_path / f"e{os.getpid()}-1"  # left by a killed run, a task still in it
    busy.mkdir()
    (busy / "cgroup.procs").write_text("999999\n")
    path = PidsCgroup(tmp_path, 1).create(8)
    assert path.name == f"e{os.getpid()}-2"
    assert (path / "pids.max").read_text() == "8"
    assert busy.exists()  # not removed: it still lists a task


def test_an_empty_leftover_cgroup_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "_COUNTER", itertools.count(1))
    empty = tmp_path / f"e{os.getpid()}-1"
    empty.mkdir()
    path = PidsCgroup(tmp_path, 1).create(8)
    assert path.name == f"e{os.getpid()}-2"
    assert not empty.exists()


def test_no_free_name_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "_COUNTER", itertools.repeat(1))
    busy = tmp_path / f"e{os.getpid()}-1"
    busy.mkdir()
    (busy / "cgroup.procs").write_text("999999\n")
    with pytest.raises(OSError, match="no free cgroup name"):
        PidsCgroup(tmp_path, 1).create(8)

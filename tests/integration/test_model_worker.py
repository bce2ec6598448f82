"""The embedded model's worker process: a native crash fails a call, never the run.

The worker process, its socket and the signals are real; the engine inside is scripted
(`tests.worker_fakes.ScriptedEngine`), so these run in seconds. The same crash on the real
llama.cpp engine is in `test_local_model.py`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from evoduet_graph.llm import local
from evoduet_graph.llm.worker import ModelWorkerCrashed
from tests.conftest import ROOT, SMOKE_TASK
from tests.worker_fakes import scripted_local_model

ENGINE = "tests.worker_fakes:ScriptedEngine"


@pytest.fixture
def fake_dir(tmp_path, monkeypatch):
    folder = tmp_path / "engine"
    folder.mkdir()
    monkeypatch.setenv("EVODUET_FAKE_DIR", str(folder))
    monkeypatch.delenv("EVODUET_FAKE_CRASH", raising=False)
    yield folder
    for engine in local._WORKER_ENGINES.values():  # workers are shared per settings
        engine.worker.close()
    local._WORKER_ENGINES.clear()


def _signal_when_holding(folder: Path, sig: signal.Signals, timeout: float = 60.0) -> list[int]:
    """Send ``sig`` to the worker once it holds a call; the pid it was sent to, in a list."""
    sent: list[int] = []

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            holding = folder / "holding"
            if holding.exists() and holding.read_text():
                pid = int(holding.read_text())
                os.kill(pid, sig)
                sent.append(pid)
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return sent


def test_a_signal_in_the_middle_of_a_call_fails_that_call_and_the_next_starts_a_worker(
    fake_dir, monkeypatch
):
    monkeypatch.setenv("EVODUET_FAKE_CRASH", "hold:2")
    llm = scripted_local_model()
    worker = llm._loaded.worker
    first_pid = worker.pid
    assert llm.invoke("hello").content  # call 1 answers
    sent = _signal_when_holding(fake_dir, signal.SIGSEGV)
    with pytest.raises(ModelWorkerCrashed) as caught:
        llm.invoke("hello again")  # call 2 is held, then the worker gets a real SIGSEGV
    assert sent == [first_pid]
    assert "killed by SIGSEGV" in str(caught.value) and "make reinstall-llama" in str(caught.value)
    assert caught.value.crashes == 1 and type(caught.value).is_retryable
    reply = llm.invoke("and again")  # call 3: a new worker
    assert reply.content and worker.pid not in (None, first_pid) and worker.starts == 2
    assert worker.crashes == 0
    assert reply.response_metadata["ipc_s"] >= 0


def test_sigkill_in_the_middle_of_a_call_is_reported_as_such(fake_dir, monkeypatch):
    monkeypatch.setenv("EVODUET_FAKE_CRASH", "hold:1")
    llm = scripted_local_model()
    _signal_when_holding(fake_dir, signal.SIGKILL)
    with pytest.raises(ModelWorkerCrashed, match="killed by SIGKILL"):
        llm.invoke("hello")


def test_crashes_in_a_row_are_counted_until_a_call_answers(fake_dir, monkeypatch):
    llm = scripted_local_model()
    worker = llm._loaded.worker
    monkeypatch.setenv("EVODUET_FAKE_CRASH", "every")  # read by workers started from now on
    worker.close()  # not a crash: the next worker starts with the new environment
    worker._closed = False
    for n in (1, 2):
        with pytest.raises(ModelWorkerCrashed) as caught:
            llm.invoke("hello")
        assert caught.value.crashes == n
    monkeypatch.delenv("EVODUET_FAKE_CRASH")
    assert llm.invoke("hello").content and worker.crashes == 0


def _config(tmp_path: Path, **extra: object) -> Path:
    cfg = {
        "llm": {"model": "local", "local_engine": ENGINE, "local_parallel": 1, "max_retries": 1},
        "gate": {"mode": "never"},
        **extra,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _evoduet(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evoduet_graph.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _iterations(run_dir: Path) -> list[int]:
    """The iteration of every ``record`` node event (one per recorded iteration), in order."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [
        int(e["iteration"]) for e in events if e.get("event") == "node" and e["node"] == "record"
    ]


def test_a_run_goes_on_after_a_worker_crash_in_the_middle_of_an_iteration(fake_dir, tmp_path):
    env = {**os.environ, "EVODUET_FAKE_CRASH": "hold:2"}  # the second generate call
    run_dir = tmp_path / "run"
    sent = _signal_when_holding(fake_dir, signal.SIGSEGV)
    proc = _evoduet(
        "run", str(SMOKE_TASK), "--iterations", "3", "--config", str(_config(tmp_path)),
        "--out", str(run_dir), env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(sent) == 1
    assert _iterations(run_dir) == [1, 2, 3]
    calls = (fake_dir / "kinds").read_text().split()
    assert calls.count("generate") == 3  # the crashed call was retried: one answer each


def test_a_crash_on_every_call_stops_the_run_with_one_line_and_resume_ends_it(fake_dir, tmp_path):
    run_dir = tmp_path / "run"
    config = _config(tmp_path, max_consecutive_model_failures=2)
    crashing = {**os.environ, "EVODUET_FAKE_CRASH": "every"}
    proc = _evoduet(
        "run", str(SMOKE_TASK), "--iterations", "4", "--config", str(config),
        "--out", str(run_dir), env=crashing,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    stop = [line for line in proc.stderr.splitlines() if "the run stopped" in line]
    assert len(stop) == 1, proc.stderr[-3000:]
    assert "killed by SIGSEGV" in stop[0] and "make reinstall-llama" in stop[0]
    assert "Fatal Python error: Segmentation fault" in stop[0]  # the worker's own report
    assert "evoduet resume" in stop[0]
    assert _iterations(run_dir) == [1, 2]
    healthy = {k: v for k, v in os.environ.items() if k != "EVODUET_FAKE_CRASH"}
    proc = _evoduet("resume", str(run_dir), env=healthy)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _iterations(run_dir) == [1, 2, 3, 4]  # nothing lost, nothing run twice
    answered = (fake_dir / "kinds").read_text().splitlines()
    assert len(answered) == 2  # the two resumed iterations; the crashed calls never answered

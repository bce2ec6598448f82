"""Ctrl-C and SIGTERM stop ``evoduet bench`` and ``evoduet run`` within seconds mid model call.

The model is a scripted OpenAI-compatible server on 127.0.0.1 whose answer to the second
generation request never comes (a full rewrite on the embedded model takes minutes). The
command, run as its own process, gets the signal while that request is in flight: it must be
gone within a few seconds, exit 130 with its "interrupted ... resume" line, and the same
command (``evoduet resume`` for a run) must then finish the run from its last checkpoint:
the finished iteration is kept, only the one in flight is asked for again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from evoduet_graph.bench.server import free_port
from evoduet_graph.rundir.events import read_events
from tests.conftest import RADIUS_UP, ROOT, SMOKE_TASK
from tests.fake_openai_server import FaultyServer, all_text

STOPPED_WITHIN_S = 20.0
"""How soon after the signal the process must be gone: the guard's grace (3 s), the exit, and
room for a loaded machine; the bug it guards against kept the process for the whole model call."""


class _Model:
    """The scripted endpoint: a probe is answered; generation request ``hang_at`` never is."""

    def __init__(self, hang_at: int | None) -> None:
        self.hang_at = hang_at
        self.generations = 0
        self.hanging = threading.Event()
        self._lock = threading.Lock()
        self.server = FaultyServer(self.fault, lambda _body: RADIUS_UP, sleep_s=3600)

    def fault(self, body: dict[str, Any]) -> str:
        if "Reply with OK" in all_text(body):  # the bench's probe of the endpoint
            return "ok"
        with self._lock:
            self.generations += 1
            if self.generations == self.hang_at:
                self.hanging.set()
                return "sleep"
        return "ok"


def _config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "population": {"num_islands": 2},
                "evaluation": {"workers": 1},
                "novelty": {"enabled": False},
                "prompt": {"diff_based": True},
                "llm": {"base_url": base_url, "max_retries": 0, "timeout_s": 1200},
            }
        )
    )
    return path


def _cli(*args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-test-not-used",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "evoduet_graph.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as in a terminal: Python's own SIGINT handler, whatever the test runner ignores
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )


def _interrupt_mid_call(
    proc: subprocess.Popen[str],
    model: _Model,
    signum: int,
    before: Callable[[], object] = lambda: None,
) -> str:
    """Send ``signum`` while the hanging request is in flight (after ``before()``).

    The process must end soon. Returns its stderr.
    """
    try:
        assert model.hanging.wait(180), "the command never sent the hanging request"
        before()
        time.sleep(0.5)  # well inside the call
        assert proc.poll() is None, proc.communicate()
        sent = time.monotonic()
        proc.send_signal(signum)
        try:
            _, err = proc.communicate(timeout=STOPPED_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"still running {STOPPED_WITHIN_S:.0f} s after {signal.Signals(signum).name} "
                "with a model call in flight"
            )
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 130, (proc.returncode, err)
    assert took < STOPPED_WITHIN_S
    return err


def _page_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


def _until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _generate_iterations(run_dir: Path) -> list[int]:
    return [
        e["iteration"]
        for e in read_events(run_dir / "events.jsonl")
        if e.get("event") == "node" and e.get("node") == "generate"
    ]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_bench_stops_within_seconds_mid_model_call_and_resumes(tmp_path, signum):
    out = tmp_path / "bench"
    bench = [
        "bench",
        "--tasks",
        str(SMOKE_TASK),
        "--methods",
        "openevolve-mode",
        "--seeds",
        "0",
        "--iterations",
        "2",
        "--model",
        "openai:fake-model",
        "--out",
        str(out),
    ]
    job = out / "runs" / "smoke_polygon_area" / "openevolve-mode" / "seed0"
    hanging = _Model(hang_at=2)  # iteration 1 is answered, iteration 2's call never is
    with hanging.server:
        cfg = _config(tmp_path, hanging.server.base_url)
        err = _interrupt_mid_call(_cli(*bench, "--config", str(cfg)), hanging, signum)
    assert "interrupted" in err and "run the same command again to resume" in err, err
    assert json.loads((job / "bench_run.json").read_text())["status"] == "running"
    assert _generate_iterations(job / "run") == [1]  # iteration 1 was recorded, not 2

    model = _Model(hang_at=None)
    with model.server:
        cfg = _config(tmp_path, model.server.base_url)
        proc = _cli(*bench, "--config", str(cfg))
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    state = json.loads((job / "bench_run.json").read_text())
    assert state["status"] == "done" and state["outcome"]["iterations"] == 2, state
    assert model.generations == 1  # only the iteration that was in flight is asked again
    assert _generate_iterations(job / "run") == [1, 2]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_run_stops_within_seconds_mid_model_call_and_resumes(tmp_path, signum):
    run_dir = tmp_path / "run"
    port = free_port()
    page = f"http://127.0.0.1:{port}/"
    hanging = _Model(hang_at=2)
    with hanging.server:
        cfg = _config(tmp_path, hanging.server.base_url)
        proc = _cli(
            "run",
            str(SMOKE_TASK),
            "--iterations",
            "2",
            "--model",
            "openai:fake-model",
            "--gate",
            "never",  # one model call per iteration, as the bench's openevolve-mode
            "--config",
            str(cfg),
            "--quiet",
            "--out",
            str(run_dir),
            "--view",
            "--view-port",
            str(port),
        )
        err = _interrupt_mid_call(
            proc,
            hanging,
            signum,
            before=lambda: _until(lambda: _page_answers(page), 120, "the page was not served"),
        )
    # the --view page server, a child nothing else stops, is killed with the run
    _until(lambda: not _page_answers(page), 10, "the page server outlived its run")
    assert f"interrupted: resume with `evoduet resume {run_dir}`" in " ".join(err.split()), err
    assert _generate_iterations(run_dir) == [1]

    model = _Model(hang_at=None)
    with model.server:
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        config["llm"]["base_url"] = model.server.base_url  # how the model is reached: applied
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
        proc = _cli("resume", str(run_dir), "--quiet")
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert model.generations == 1
    assert _generate_iterations(run_dir) == [1, 2]
    ends = [e for e in read_events(run_dir / "events.jsonl") if e.get("event") == "run_end"]
    assert [e["iterations"] for e in ends] == [2]

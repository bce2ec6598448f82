"""`evoduet_graph.cli.interrupt`: the line, the exit code, the grace period, a second signal.

The commands themselves, interrupted mid model call, are in
``tests/integration/test_interrupt.py``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
import typer

from evoduet_graph.cli.interrupt import EXIT_CODE, interruptible
from tests.conftest import ROOT

# the main thread waits for a worker that never ends, as LangGraph waits for a node in flight
_STUCK = """
import sys, threading, time
import typer
from evoduet_graph.cli.interrupt import interruptible

never = threading.Event()
worker = threading.Thread(target=never.wait)  # not a daemon: the interpreter waits for it too
worker.start()
try:
    with interruptible("resume it", grace_s=float(sys.argv[1])) as guard:
        guard.at_hard_exit(lambda: print("hard exit", flush=True))
        try:
            # inside the try: a signal that lands before print returns (the test has read the
            # line by then) must still meet the finally that never ends, as a node in flight
            print("ready", flush=True)
            never.wait()
        finally:
            never.wait()
except typer.Exit as exc:
    sys.exit(exc.exit_code)
"""


def _start(grace_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK, str(grace_s)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


def _finish(proc: subprocess.Popen[str], within_s: float) -> tuple[str, str, float]:
    start = time.monotonic()
    try:
        out, err = proc.communicate(timeout=within_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    return out, err, time.monotonic() - start


def test_a_keyboard_interrupt_prints_the_line_and_exits_130(capsys):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(typer.Exit) as exc, interruptible("run it again"):
        assert signal.getsignal(signal.SIGTERM) is not before  # SIGTERM is handled too
        raise KeyboardInterrupt
    assert exc.value.exit_code == EXIT_CODE == 130
    assert capsys.readouterr().err == "interrupted: run it again\n"
    assert signal.getsignal(signal.SIGTERM) is before  # restored


def test_a_body_without_signal_runs_as_it_is(capsys):
    with interruptible("run it again") as guard:
        guard.at_hard_exit(lambda: pytest.fail("no hard exit without a signal"))
    time.sleep(0.1)  # the watchdog has left
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_process_that_cannot_unwind_ends_after_the_grace_period(signum):
    proc = _start(grace_s=1.0)
    proc.send_signal(signum)
    out, err, took = _finish(proc, within_s=30)
    assert proc.returncode == EXIT_CODE, err
    assert 1.0 <= took < 15
    assert out == "hard exit\n"
    assert err == "interrupted: resume it\n"  # once


def test_a_second_signal_ends_it_at_once():
    proc = _start(grace_s=600.0)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert proc.poll() is None  # unwinding: waiting for the worker, within its grace period
    proc.send_signal(signal.SIGINT)
    out, err, took = _finish(proc, within_s=15)
    assert proc.returncode == EXIT_CODE, err
    assert out == "hard exit\n"
    assert err == "interrupted: resume it\n"

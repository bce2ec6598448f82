"""Ctrl-C and SIGTERM end ``evoduet run``, ``resume`` and ``bench`` within seconds.

Each of these commands runs under `interruptible`. The first SIGINT (Ctrl-C) or SIGTERM raises
KeyboardInterrupt in the main thread, as Python's own Ctrl-C does, and the command unwinds:
the live display ends, the bench stops its model server, and the command prints its one
``interrupted: ...`` line (how to resume) and exits 130.

That unwinding cannot always end soon. LangGraph runs a step's nodes in worker threads, and a
KeyboardInterrupt that leaves its stream waits for the nodes in flight (its executor joins
them): a model call runs to its end, up to ``llm.timeout_s`` (a full rewrite on the embedded
model takes minutes), and only then do the bench's model server and the run's files close.
Python would also wait for those threads before the process exits. So the command gets
`GRACE_S` seconds from the signal; a process still there then (or at a second signal) prints
the same line and ends at once (``os._exit(130)``) without waiting for any thread, exactly as a
kill at that moment would end it.

Nothing is lost that way: a run directory survives a kill at any point (docs/resume.md), so the
same command continues from the last checkpoint; the iteration (for a bench: the run's
iteration) that was in flight is done again, its model calls and evaluations made anew.
The bench's ``bench_run.json`` of that run still says ``running``, which the next invocation
continues. The children go with the process: the bench's model server and OpenEvolve get the
parent-death signal (`evoduet_graph.bench.server.die_with_parent`; the server's watchdog ends it
within a second of its parent, `evoduet_graph.bench.llama_server`), sandboxed evaluations are
killed with their parent (bubblewrap's ``--die-with-parent``; without bubblewrap they end at
their CPU-time limit), and the callbacks given to
`Interruptible.at_hard_exit` (the ``--view`` page server) run first. The run directory's lock is
the kernel's and is released with the process.

From Python (`evoduet_graph.run`, `evoduet_graph.bench.run_bench`) a KeyboardInterrupt unwinds
as any exception does, so it waits for the model call in flight.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import NoReturn

import typer

from evoduet_graph.cli.common import console

GRACE_S = 3.0
"""Seconds an interrupted command has to unwind before it ends at once."""

EXIT_CODE = 130
"""Exit code of an interrupted command (128 + SIGINT, the shell's code for Ctrl-C)."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interruptible:
    """The SIGINT/SIGTERM handling of one command (see the module docstring).

    Args:
        message: the line after ``interrupted:`` that says how to resume.
        grace_s: seconds to unwind before the process ends at once.
    """

    def __init__(self, message: str, *, grace_s: float = GRACE_S) -> None:
        self.message = message
        self.grace_s = grace_s
        self._hard_exit: list[Callable[[], object]] = []
        self._signalled = threading.Event()
        self._finished = threading.Event()
        self._said = False
        self._say_lock = threading.RLock()  # a second signal may come while it is held

    def at_hard_exit(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` before the process ends at once (kill a child nothing else kills).

        It runs on the watchdog thread while the main thread may be anywhere: it must be quick
        and safe to call then (its exceptions are ignored).
        """
        self._hard_exit.append(callback)

    def say(self) -> None:
        """Print the ``interrupted: ...`` line, once (the unwinding and the hard exit share it)."""
        with self._say_lock:
            if self._said:
                return
            self._said = True
        console.print("[yellow]interrupted[/]: ", end="")
        console.print(self.message, markup=False, highlight=False, soft_wrap=True)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._signalled.is_set():  # a second Ctrl-C: do not wait any longer
            self._end_now()
        self._signalled.set()  # starts the watchdog's grace period
        raise KeyboardInterrupt(signal.Signals(signum).name)

    def _watch(self) -> None:
        """Wait for a signal, then `grace_s`; end the process if it is still there."""
        self._signalled.wait()
        if self._finished.wait(self.grace_s):
            return
        self._end_now()

    def _end_now(self) -> NoReturn:
        """End the process at once, as a kill would, after the line and the callbacks."""
        for callback in self._hard_exit:
            with contextlib.suppress(Exception):
                callback()
        with self._say_lock:
            said, self._said = self._said, True
        text = "" if said else f"interrupted: {self.message}\n"
        with contextlib.suppress(OSError, ValueError):
            if sys.stderr.isatty():
                text = "\x1b[?25h\n" + text  # the live display hid the cursor
            os.write(2, text.encode("utf-8", "replace"))
        # buffered output (``--json`` lines, the bench's log) as far as it can go in a moment:
        # the main thread may hold a stream's lock, so no flush is waited for long
        for stream in (sys.stdout, sys.stderr):
            flusher = threading.Thread(target=_flush, args=(stream,), daemon=True)
            flusher.start()
            flusher.join(0.5)
        os._exit(EXIT_CODE)


def _flush(stream: object) -> None:
    with contextlib.suppress(Exception):
        stream.flush()  # type: ignore[attr-defined]


@contextlib.contextmanager
def interruptible(message: str, *, grace_s: float = GRACE_S) -> Iterator[Interruptible]:
    """Run the body under `Interruptible`: a SIGINT or SIGTERM ends the command within seconds.

    A KeyboardInterrupt out of the body (the first signal's, or Python's own) prints
    ``interrupted: <message>`` and exits 130 (`typer.Exit`). Outside the main thread no handler
    can be installed and the body runs as it is.
    """
    guard = Interruptible(message, grace_s=grace_s)
    try:
        previous = {s: signal.signal(s, guard._on_signal) for s in _SIGNALS}
    except ValueError:  # not the main thread
        previous = {}
    if previous:
        threading.Thread(target=guard._watch, name="evoduet-interrupt", daemon=True).start()
    interrupted = False
    try:
        yield guard
    except KeyboardInterrupt:
        interrupted = True
        guard.say()
        raise typer.Exit(EXIT_CODE) from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if not interrupted and not guard._signalled.is_set():
            guard._finished.set()  # done without a signal: the watchdog leaves
            guard._signalled.set()

"""``python -m llama_cpp.server`` with llama.cpp's CPU backend registered first.

The portable build of the embedded runtime links no CPU backend
(`evoduet_graph.llm.runtime`): a process must load the CPU-variant module for its machine
before it loads a model. llama-cpp-python's server does not, so the bench starts it through
this module (same arguments), which does and then runs the server unchanged.

It also leaves at once when the bench that started it is gone: the parent-death signal
(`evoduet_graph.bench.server.die_with_parent`) is a SIGTERM, which the server answers by
finishing the request in flight first (minutes of generation nobody will read); a watchdog
thread ends the process as soon as its parent changes.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time

from evoduet_graph.llm.runtime import load_cpu_backend


def _exit_with_parent(parent: int, poll_s: float = 1.0) -> None:
    """End this process (no cleanup: it holds nothing to save) once ``parent`` is gone."""
    while os.getppid() == parent:
        time.sleep(poll_s)
    os._exit(0)


def main() -> None:
    """Register the CPU backend, then run ``llama_cpp.server`` with this process's arguments."""
    threading.Thread(
        target=_exit_with_parent, args=(os.getppid(),), name="exit-with-parent", daemon=True
    ).start()
    load_cpu_backend()
    sys.argv[0] = "llama_cpp.server"
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

"""``python -m llama_cpp.server`` with llama.cpp's CPU backend registered first.

The portable build of the embedded runtime links no CPU backend
(`evoduet_graph.llm.runtime`): a process must load the CPU-variant module for its machine
before it loads a model. llama-cpp-python's server does not, so the bench starts it through
this module (same arguments), which does, sets one request default (below), and then runs
the server.

Its requests sample as the embedded model does in process: a request that sends no
``repeat_penalty`` gets `evoduet_graph.llm.model_file.REPEAT_PENALTY`, the value
`evoduet_graph.llm.local.LocalChatModel` uses (`serve_with_embedded_repeat_penalty`). No OpenAI
client sends that field, so this default is what every method of a bench (ours and OpenEvolve)
samples with; it is set here rather than left to llama-cpp-python's request models, whose
default (1.1 in 0.3.x) could change with a release while the in-process value would not.

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

from evoduet_graph.llm.model_file import REPEAT_PENALTY
from evoduet_graph.llm.runtime import load_cpu_backend


def _exit_with_parent(parent: int, poll_s: float = 1.0) -> None:
    """End this process (no cleanup: it holds nothing to save) once ``parent`` is gone."""
    while os.getppid() == parent:
        time.sleep(poll_s)
    os._exit(0)


def serve_with_embedded_repeat_penalty() -> None:
    """Make ``repeat_penalty`` default to `REPEAT_PENALTY` in the server's request models.

    Must run before the server builds its app (which reads the models' validators).
    """
    from llama_cpp.server import types

    for model in (types.CreateChatCompletionRequest, types.CreateCompletionRequest):
        model.model_fields["repeat_penalty"].default = REPEAT_PENALTY
        model.model_rebuild(force=True)


def main() -> None:
    """Register the CPU backend, then run ``llama_cpp.server`` with this process's arguments."""
    threading.Thread(
        target=_exit_with_parent, args=(os.getppid(),), name="exit-with-parent", daemon=True
    ).start()
    load_cpu_backend()
    serve_with_embedded_repeat_penalty()
    sys.argv[0] = "llama_cpp.server"
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

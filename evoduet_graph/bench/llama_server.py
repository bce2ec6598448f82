"""``python -m llama_cpp.server`` with llama.cpp's CPU backend registered first.

The portable build of the embedded runtime links no CPU backend
(`evoduet_graph.llm.runtime`): a process must load the CPU-variant module for its machine
before it loads a model. llama-cpp-python's server does not, so the bench starts it through
this module (same arguments), which does and then runs the server unchanged.
"""

from __future__ import annotations

import runpy
import sys

from evoduet_graph.llm.runtime import load_cpu_backend


def main() -> None:
    """Register the CPU backend, then run ``llama_cpp.server`` with this process's arguments."""
    load_cpu_backend()
    sys.argv[0] = "llama_cpp.server"
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

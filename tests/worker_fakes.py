"""A scripted engine for the real model worker process, and crash switches for it.

`ScriptedEngine` stands in for llama.cpp inside the real worker process
(`evoduet_graph.llm.worker`): the process, the socket, the restarts and the signals are real;
only the model is scripted. Its answers are `KnowledgeResponder`'s (gate no-op, full rewrites of
the smoke task's program with a growing radius). Environment switches, read in the worker:

* ``EVODUET_FAKE_DIR``: a folder for the call counter (kept across worker restarts) and the
  markers below;
* ``EVODUET_FAKE_CRASH=every``: every call kills the worker with a real SIGSEGV;
* ``EVODUET_FAKE_CRASH=hold:K``: call K writes ``holding`` (the worker's pid) into the folder
  and waits, so a test can send a signal to the worker in the middle of that call.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from evoduet_graph.llm.local import LocalChatModel
from tests.fakes import KnowledgeResponder, prompt_kind

_KINDS = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def _rewrite(call: int) -> str:
    from tests.fault_harness import smoke_program

    radius = min(1.0, 0.6 + 0.05 * call)
    return "```python\n" + smoke_program(radius, 3.141593) + "```\n"


class ScriptedEngine:
    """The worker engine interface (`complete`, `seed`, `clear_cache`, ...), scripted."""

    variant = "scripted"

    def __init__(self, settings: Any) -> None:
        self.folder = Path(os.environ.get("EVODUET_FAKE_DIR", "."))
        self.generated = 0
        self.responder = KnowledgeResponder(gate="no-op", generate=self._generate)

    def _generate(self, _messages: list[BaseMessage]) -> str:
        return _rewrite(self._count("generated"))

    def _count(self, name: str) -> int:
        """Increment and return a counter kept in the folder (survives worker restarts)."""
        path = self.folder / name
        with open(self.folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            n = int(path.read_text() or 0) + 1 if path.exists() else 1
            tmp = path.with_suffix(f".{os.getpid()}")
            tmp.write_text(str(n))
            os.replace(tmp, path)  # a worker killed right after never leaves a torn file
        return n

    def warm_up(self) -> None:
        pass

    def complete(self, payload: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        call = self._count("calls")
        mode = os.environ.get("EVODUET_FAKE_CRASH", "")
        if mode == "every":  # a real SIGSEGV in this thread, as a fault in a decode would be
            signal.pthread_kill(threading.get_ident(), signal.SIGSEGV)
        if mode.startswith("hold:") and call == int(mode.split(":")[1]):
            (self.folder / "holding").write_text(str(os.getpid()))
            time.sleep(60)
        messages = [_KINDS.get(m["role"], HumanMessage)(content=m["content"]) for m in payload]
        kind = prompt_kind(messages)
        with open(self.folder / "kinds", "a") as log:
            log.write(f"{call} {kind}\n")
        text = self.responder(messages)
        return {
            "content": text,
            "finish_reason": "stop",
            "input_tokens": sum(len(m["content"]) // 4 for m in payload),
            "output_tokens": len(text) // 4,
            "cache_read": 0,
            "metadata": {},
        }

    def seed(self, seed: int) -> None:
        pass

    def clear_cache(self) -> None:
        pass

    def close(self) -> None:
        pass


def scripted_local_model() -> LocalChatModel:
    """The embedded model's chat model with `ScriptedEngine` in its worker (``python:`` spec)."""
    return LocalChatModel(
        model_path=__file__, engine="tests.worker_fakes:ScriptedEngine", parallel=1
    )

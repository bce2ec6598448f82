"""Test fakes: a scripted chat model and a counting evaluator wrapper.

Fakes are for unit and integration tests only; every capability also runs for real.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from evoduet_graph.evaluation import EvaluationOutcome

Response = str | Exception | Callable[[list[BaseMessage]], str]


class ScriptedChatModel(BaseChatModel):
    """Chat model that answers from a script, in call order (thread-safe).

    Each entry is a string (the answer), an exception (raised) or a callable of the messages.
    After the script ends, ``default`` answers (or `IndexError` if None). Every answer carries
    ``usage_metadata`` (characters / 4 as token counts) so usage accounting is testable.
    """

    responses: list[Any]
    default: Any = None
    _index: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        return list(self._prompts)

    @property
    def calls(self) -> int:
        return self._index

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            i = self._index
            self._index += 1
            self._prompts.append(list(messages))
        item = self.responses[i] if i < len(self.responses) else self.default
        if item is None:
            raise IndexError(f"scripted model exhausted after {len(self.responses)} answers")
        if isinstance(item, Exception):
            raise item
        text = item(messages) if callable(item) else str(item)
        prompt_chars = sum(len(str(m.content)) for m in messages)
        usage = {
            "input_tokens": prompt_chars // 4 + 1,
            "output_tokens": len(text) // 4 + 1,
            "total_tokens": prompt_chars // 4 + len(text) // 4 + 2,
        }
        msg = AIMessage(content=text, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=msg)])


class CountingEvaluator:
    """Wraps an evaluator; appends one JSON line per evaluated program to ``log_path``."""

    def __init__(self, inner: Any, log_path: str | Path) -> None:
        self.inner = inner
        self.log_path = Path(log_path)
        self._lock = threading.Lock()

    def _log(self, ids: Sequence[str], codes: Sequence[str]) -> None:
        import hashlib

        with self._lock, self.log_path.open("a", encoding="utf-8") as fh:
            for pid, code in zip(ids, codes, strict=True):
                sha = hashlib.sha256(code.encode()).hexdigest()
                fh.write(json.dumps({"id": pid, "sha": sha}) + "\n")

    def evaluate(self, code: str, program_id: str = "candidate") -> EvaluationOutcome:
        out = self.inner.evaluate(code, program_id)
        self._log([program_id], [code])
        return out

    def evaluate_many(
        self, codes: Sequence[str], ids: Sequence[str] | None = None
    ) -> list[EvaluationOutcome]:
        ids = list(ids) if ids is not None else [f"c{i}" for i in range(len(codes))]
        out = self.inner.evaluate_many(codes, ids)
        self._log(ids, codes)
        return out

    def evaluated(self) -> list[dict[str, str]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

"""Weighted model ensembles: each call goes to one member, picked by seeded weighted choice.

OpenEvolve's ``LLMEnsemble`` (``openevolve/llm/ensemble.py``) samples one model per request
with probability weight / sum of weights from a ``random.Random`` seeded by the run's
``random_seed``; SkyDiscover's ``LLMPool`` does the same. `WeightedChoice` is that sampler
(thread-safe: the parallel ``generate`` branches share it) and `EnsembleChatModel` wraps the
members as one LangChain `BaseChatModel`, so every node, the structured-output helper and the
usage accounting see a single model.

API for other layers (per-node roles build on it):

* ``WeightedChoice(weights, seed).pick() -> int`` — the sampler alone;
* ``EnsembleChatModel.from_members([(name, model, weight), ...], seed=...)`` — the chat model;
  ``ensemble.last_member`` names the member that answered the latest call of this thread;
* `make_chat_model` (``evoduet_graph.llm.factory``) builds one from ``llm.models``.

Which member answered is recorded in each reply's ``response_metadata["ensemble_member"]``.
Each call gets its member's provider quirks (`evoduet_graph.llm.providers`): the prompt-cache
marker on the shared prefix, and for ``method="json_schema"`` the member's own structured
output (tool calling for Anthropic).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import ConfigDict, PrivateAttr

from evoduet_graph.llm.providers import mark_cache_prefix, structured_method

__all__ = ["EnsembleChatModel", "WeightedChoice"]


class WeightedChoice:
    """Seeded weighted choice of an index (thread-safe).

    Args:
        weights: one positive weight per option.
        seed: seed of the private ``random.Random``; equal seeds give equal pick sequences.

    Raises:
        ValueError: no weights, or a weight that is not a positive finite number.
    """

    def __init__(self, weights: Sequence[float], seed: int) -> None:
        values = [float(w) for w in weights]
        if not values:
            raise ValueError("a weighted choice needs at least one option")
        if any(not (w > 0 and w != float("inf")) for w in values):
            raise ValueError(f"weights must be positive finite numbers, got {values}")
        self.weights = values
        self._indices = list(range(len(values)))
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def pick(self) -> int:
        """The index of the next option, with probability weight / sum of weights."""
        if len(self._indices) == 1:
            return 0
        with self._lock:
            return self._rng.choices(self._indices, weights=self.weights, k=1)[0]


class EnsembleChatModel(BaseChatModel):
    """A chat model that forwards each call to one member, picked by `WeightedChoice`.

    Build it with `from_members`. ``with_structured_output`` picks a member per call too, and
    uses that member's own structured-output support (json_schema on an OpenAI endpoint).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    names: list[str]
    members: list[BaseChatModel]
    weights: list[float]
    seed: int = 0
    _choice: WeightedChoice = PrivateAttr()
    _local: threading.local = PrivateAttr(default_factory=threading.local)

    def model_post_init(self, context: Any, /) -> None:
        """Check the members line up with their weights and seed the choice."""
        if not (len(self.names) == len(self.members) == len(self.weights)):
            raise ValueError("names, members and weights must have the same length")
        self._choice = WeightedChoice(self.weights, self.seed)

    @classmethod
    def from_members(
        cls, members: Sequence[tuple[str, BaseChatModel, float]], *, seed: int
    ) -> EnsembleChatModel:
        """An ensemble of ``(name, model, weight)`` members, sampled with ``seed``."""
        return cls(
            names=[m[0] for m in members],
            members=[m[1] for m in members],
            weights=[float(m[2]) for m in members],
            seed=seed,
        )

    @property
    def _llm_type(self) -> str:
        return "weighted-ensemble"

    @property
    def last_member(self) -> str | None:
        """Name of the member that answered this thread's latest call (None before any)."""
        return getattr(self._local, "last", None)

    def pick_member(self) -> tuple[str, BaseChatModel]:
        """Draw the member for one call: ``(name, model)``."""
        index = self._choice.pick()
        self._local.last = self.names[index]
        return self.names[index], self.members[index]

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        """One member's reply (``stop``, ``run_manager`` and the rest passed through)."""
        name, member = self.pick_member()
        messages = mark_cache_prefix(member, messages)
        result = member._generate(messages, *args, **kwargs)
        for generation in result.generations:
            message = getattr(generation, "message", None)
            if message is not None:
                message.response_metadata["ensemble_member"] = name
        llm_output = dict(result.llm_output or {})
        llm_output["ensemble_member"] = name
        return ChatResult(generations=result.generations, llm_output=llm_output)

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        """Structured output from one member per call (the member's own implementation).

        ``method="json_schema"`` asks for the member's native structured output
        (`evoduet_graph.llm.providers.structured_method`).
        """

        def call(value: Any, config: RunnableConfig | None = None) -> Any:
            _, member = self.pick_member()
            member_kwargs = dict(kwargs)
            if member_kwargs.get("method") == "json_schema":
                member_kwargs["method"] = structured_method(member)
            if isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value):
                value = mark_cache_prefix(member, value)
            runnable = member.with_structured_output(schema, **member_kwargs)
            return runnable.invoke(value, config=config)

        return RunnableLambda(call)

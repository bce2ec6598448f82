"""Chat models and LLM helpers (docs/design.md §4, §6).

* `make_chat_model` — ``LLMConfig`` → ``BaseChatModel`` (``local``, ``openai:<model>``, any
  ``<provider>:<model>`` of LangChain's ``init_chat_model``, ``python:<module>:<factory>``, or
  a weighted ensemble of them from ``llm.models``); each provider's quirks as data in
  `evoduet_graph.llm.providers`;
* `EnsembleChatModel`, `WeightedChoice` — the seeded weighted ensemble
  (`evoduet_graph.llm.ensemble`);
* `structured_call` — typed output with the json_schema → json_mode → extraction → repair →
  default chain; `invoke_text` — plain text call; both raise `LLMCallError` for transport
  failures;
* text helpers: `message_text`, `strip_think`, `extract_code_block`, `extract_json_object`;
* usage accounting: `UsageTracker`, `track_node`, `NodeUsage`;
* the embedded model: `assemble_model`, `make_local_chat_model`, `LocalModelError`.
"""

from __future__ import annotations

from evoduet_graph.llm.ensemble import EnsembleChatModel, WeightedChoice
from evoduet_graph.llm.factory import (
    LLMConfigError,
    check_model,
    make_chat_model,
    parse_model_string,
)
from evoduet_graph.llm.local import LocalChatModel, make_local_chat_model
from evoduet_graph.llm.model_file import LocalModelError, assemble_model
from evoduet_graph.llm.structured import (
    LLMCallError,
    RetryPolicy,
    StructuredResult,
    invoke_text,
    is_transport_error,
    structured_call,
)
from evoduet_graph.llm.text import (
    extract_code_block,
    extract_json_object,
    message_text,
    strip_think,
)
from evoduet_graph.llm.usage import NodeUsage, UsageTracker, current_node, track_node

__all__ = [
    "check_model",
    "EnsembleChatModel",
    "LLMCallError",
    "LLMConfigError",
    "LocalChatModel",
    "LocalModelError",
    "NodeUsage",
    "RetryPolicy",
    "StructuredResult",
    "UsageTracker",
    "WeightedChoice",
    "assemble_model",
    "current_node",
    "extract_code_block",
    "extract_json_object",
    "invoke_text",
    "is_transport_error",
    "make_chat_model",
    "make_local_chat_model",
    "message_text",
    "parse_model_string",
    "strip_think",
    "structured_call",
    "track_node",
]

"""Prompt-lookup drafting on the real embedded model (`evoduet_graph.llm.prompt_lookup`).

Marked ``local_model``. The same short greedy call, with drafting on and off (two model
workers: ``llm.local_prompt_lookup`` true and false), gives the same reply token for token, and
with drafting on most of the reply (a function copied with a small change) comes from accepted
drafts in fewer decode steps than tokens. About a minute on 2 cores.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import make_local_chat_model

pytestmark = pytest.mark.local_model

CODE = '''def pack(n, width):
    """Place n unit circles on a square grid of the given width."""
    points = []
    for i in range(n):
        row, col = divmod(i, width)
        points.append((col + 0.5, row + 0.5))
    return points
'''

MESSAGES = [
    SystemMessage("You are a Python programmer. Answer with code only."),
    HumanMessage(
        "Rewrite this function so that the grid spacing is 1.1 instead of 1.0. "
        "Repeat the whole function.\n\n```python\n" + CODE + "```"
    ),
]


def _reply(lookup: bool):
    cfg = LLMConfig(
        model="local",
        local_n_ctx=2048,
        max_tokens=120,
        temperature=0.0,
        local_parallel=2,
        local_prompt_lookup=lookup,
    )
    model = make_local_chat_model(cfg)
    model.clear_cache()
    return model.invoke(MESSAGES)


def test_greedy_reply_is_identical_with_and_without_drafting():
    plain = _reply(False)
    drafted = _reply(True)
    assert str(plain.content).strip()
    assert drafted.content == plain.content
    assert drafted.usage_metadata["output_tokens"] == plain.usage_metadata["output_tokens"]
    meta, base = drafted.response_metadata, plain.response_metadata
    n_out = plain.usage_metadata["output_tokens"]
    assert base["draft_tokens"] == 0
    assert base["decode_steps"] >= n_out  # one token a step (the end-of-generation one too)
    assert meta["draft_accepted"] >= n_out // 2
    assert meta["decode_steps"] < n_out // 2

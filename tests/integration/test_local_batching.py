"""Batched candidates on the real embedded model (`evoduet_graph.llm.batching`).

Marked ``local_model`` (run under the machine's model lock, like `test_local_model.py`). Four
concurrent free-text calls decode as one llama.cpp batch: their replies are valid, differ
between seeds, repeat for fixed seeds, and the shared prompt is evaluated about once. About a
minute on 2 cores.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import make_local_chat_model, structured_call

pytestmark = pytest.mark.local_model

MESSAGES = [
    SystemMessage("You are a Python programmer. Answer with code only."),
    HumanMessage("Write a one-line Python expression that computes the mean of a list xs."),
]


class Answer(BaseModel):
    expression: str


@pytest.fixture(scope="module")
def llm():
    cfg = LLMConfig(
        model="local", local_n_ctx=2048, max_tokens=24, temperature=0.9, local_parallel=4
    )
    return make_local_chat_model(cfg)


def four(llm, seeds):
    llm.clear_cache()  # the same starting state: llama.cpp's rounding depends on KV layout
    with ThreadPoolExecutor(max_workers=len(seeds)) as pool:
        return list(pool.map(lambda s: llm.bind(seed=s).invoke(MESSAGES), seeds))


def test_four_candidates_decode_together_valid_distinct_and_repeatable(llm):
    first = four(llm, [11, 12, 13, 14])
    assert all(str(r.content).strip() and "\x00" not in str(r.content) for r in first)
    assert all(0 < r.usage_metadata["output_tokens"] <= 24 for r in first)
    assert all(r.response_metadata["finish_reason"] in ("stop", "length") for r in first)
    assert max(r.response_metadata["batch_size"] for r in first) >= 2  # decoded together
    prompt = first[0].usage_metadata["input_tokens"]
    reused = [r.usage_metadata["input_token_details"]["cache_read"] for r in first]
    assert sum(prompt - c for c in reused) < 2 * prompt  # shared prompt evaluated ~once
    assert len({str(r.content) for r in first}) >= 2  # different seeds, different candidates
    again = four(llm, [11, 12, 13, 14])
    assert [r.content for r in again] == [r.content for r in first]  # fixed seeds repeat


def test_single_and_structured_calls_work_after_a_batch(llm):
    four(llm, [1, 2, 3, 4])
    greedy = llm.bind(temperature=0.0)
    a = greedy.invoke(MESSAGES)
    b = greedy.invoke(MESSAGES)  # served from the cache the batch left, then its own
    assert str(a.content).strip() and a.content == b.content
    res = structured_call(llm.bind(max_tokens=48), MESSAGES, Answer, default=Answer(expression=""))
    assert res.method == "json_schema" and res.value.expression

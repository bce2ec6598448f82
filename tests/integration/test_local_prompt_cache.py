"""The prompt cache on the real embedded model (`evoduet_graph.llm.prompt_cache`).

Marked ``local_model`` (run under the machine's model lock, like `test_local_model.py`). Two
JSON-grammar calls with different questions after one shared system message, then the first
again: the third call starts from the first call's cached state (its whole prompt but the last
token reused), not from the live context (which shares only the system part). Then a batched
free-text call moves the live context, and the first prompt is served from the cache again.
About a minute on 2 cores.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import make_local_chat_model

pytestmark = pytest.mark.local_model

SYSTEM = SystemMessage(
    "You are a careful Python programmer who answers questions about the standard library. "
    "Answer with a JSON object with one key, answer, whose value is a short string. Keep the "
    "answer to a few words; never explain."
)
FIRST = [SYSTEM, HumanMessage("Which module holds the function that sorts lists in place?")]
SECOND = [SYSTEM, HumanMessage("Name the module that reads CSV files.")]
JSON = {"response_format": {"type": "json_object"}}


@pytest.fixture(scope="module")
def llm():
    cfg = LLMConfig(
        model="local",
        local_n_ctx=2048,
        max_tokens=16,
        temperature=0.0,
        local_parallel=2,
        local_prompt_cache_mib=256,
        local_isolation="none",  # the test reads the cache of the in-process Llama
    )
    model = make_local_chat_model(cfg)
    model.clear_cache()
    return model


def reused(msg):
    return msg.usage_metadata["input_token_details"]["cache_read"]


def test_the_first_prompt_again_is_served_from_the_cache(llm):
    structured = llm.bind(**JSON)
    first = structured.invoke(FIRST)
    second = structured.invoke(SECOND)
    third = structured.invoke(FIRST)
    prompt = first.usage_metadata["input_tokens"]
    assert not first.response_metadata["from_prompt_cache"] and reused(first) == 0
    shared = reused(second)  # the system part: what the live context alone offers the third
    assert 0 < shared < prompt - 1
    assert not second.response_metadata["from_prompt_cache"]
    assert third.response_metadata["from_prompt_cache"]
    assert reused(third) == prompt - 1  # all but the last token, from the first call's entry
    assert third.response_metadata["prompt_eval_s"] < first.response_metadata["prompt_eval_s"]
    assert json.loads(str(third.content))  # a loaded state still gives a valid reply
    assert llm._loaded.llama.cache.cache_size <= 256 * 2**20


def test_the_cache_and_the_batched_path_do_not_disturb_each_other(llm):
    structured = llm.bind(**JSON)
    structured.invoke(FIRST)
    free = llm.invoke(SECOND)  # batched free-text path: sequence 0 now holds SECOND's prompt
    assert "batch_size" in free.response_metadata and str(free.content).strip()
    again = structured.invoke(FIRST)  # loads the first call's state over the batch's context
    assert again.response_metadata["from_prompt_cache"]
    assert reused(again) == again.usage_metadata["input_tokens"] - 1
    assert json.loads(str(again.content))
    replies = llm.batch([SECOND, FIRST])  # a batch after a load: both sequences decode
    assert all(str(r.content).strip() and "\x00" not in str(r.content) for r in replies)
    assert max(r.response_metadata["batch_size"] for r in replies) >= 1

"""Prompt-lookup drafting on the real embedded model (`evoduet_graph.llm.prompt_lookup`).

Marked ``local_model``. The same short greedy call, with drafting on and off (two model
workers: ``llm.local_prompt_lookup`` true and false), gives the same reply token for token, and
with drafting on most of the reply (a function copied with a small change) comes from accepted
drafts in fewer decode steps than tokens. The distribution drafting draws from is the one
llama.cpp's own sampler chain draws from (a chi-square test over 2,000 draws of the chain).
About two minutes on 2 cores.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import make_local_chat_model
from evoduet_graph.llm.batching import SamplingParams

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


def test_the_drafting_distribution_is_the_sampler_chains():
    """Same logits: `distribution` (chain without its draw) vs llama.cpp's chain with ``dist``."""
    from scipy.stats import chisquare

    cfg = LLMConfig(model="local", local_n_ctx=1024, local_parallel=2, local_isolation="none")
    model = make_local_chat_model(cfg)
    loaded = model._loaded
    backend = loaded.decoder.backend
    params = SamplingParams(temperature=1.0, top_k=40, top_p=0.95, min_p=0.02, seed=0)
    with loaded.lock:
        tokens = loaded.llama.tokenize(b'# Ten fruit names\nfruits = ["', add_bos=False)
        last = len(tokens) - 1
        backend.decode([(t, i, 1, i == last) for i, t in enumerate(tokens)])
        try:
            filt = backend.new_filter(params)
            ids, probs = backend.distribution(filt, last)
            backend.free_sampler(filt)
            drawn = Counter()
            for seed in range(2000):
                sampler = backend.new_sampler(replace(params, seed=seed))
                drawn[backend.sample(sampler, last)] += 1
                backend.free_sampler(sampler)
        finally:
            backend.seq_rm(1)
    assert len(ids) >= 3 and abs(probs.sum() - 1.0) < 1e-6
    assert set(drawn) <= {int(i) for i in ids}  # nothing outside the support
    expected = probs * 2000
    big = expected >= 5  # chi-square cells: the likely tokens, the rest pooled
    observed = [drawn.get(int(i), 0) for i in ids[big]]
    wanted = list(expected[big])
    if not big.all():  # the unlikely tokens as one cell
        observed.append(2000 - sum(observed))
        wanted.append(2000 - expected[big].sum())
    assert chisquare(observed, np.array(wanted) * 2000 / sum(wanted)).pvalue > 1e-3

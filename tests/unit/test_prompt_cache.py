"""Unit tests of the embedded model's prompt cache: no model weights.

`evoduet_graph.llm.prompt_cache` and its wiring in `evoduet_graph.llm.local`: the config field,
``Llama.set_cache`` with the configured capacity (part of the model-sharing key), the cache's
bound and trimmed entries, and prompt tokens counted as reused from the entry llama-cpp-python
loads.
"""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace
from typing import Any

import llama_cpp
import numpy as np
import pytest
from llama_cpp.llama import Llama, LlamaState
from pydantic import ValidationError

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import local
from evoduet_graph.llm.prompt_cache import MIB, PromptStateCache, entry_bytes, reuse_source
from evoduet_graph.llm.worker import WorkerSettings

N_CTX, VOCAB = 16, 1000


def state(tokens: list[int], *, rows: int = 8, stale: list[int] | None = None) -> LlamaState:
    """A ``LlamaState`` as ``Llama.save_state`` builds it: the whole ``n_ctx`` token array."""
    ids = np.zeros(N_CTX, dtype=np.intc)
    full = tokens + (stale or [])
    ids[: len(full)] = full
    return LlamaState(
        input_ids=ids,
        scores=np.arange(rows * VOCAB, dtype=np.single).reshape(rows, VOCAB),
        n_tokens=len(tokens),
        llama_state=b"\x01" * 1000,
        llama_state_size=1000,
        seed=7,
    )


# ------------------------------------------------------------------------------ config


def test_prompt_cache_size_is_validated():
    assert LLMConfig().local_prompt_cache_mib == 0  # off by default: it did not pay (README)
    assert LLMConfig(local_prompt_cache_mib=0).local_prompt_cache_mib == 0
    for bad in (-1, "lots", 1.5):
        with pytest.raises(ValidationError, match="local_prompt_cache_mib"):
            LLMConfig(local_prompt_cache_mib=bad)


# ------------------------------------------------------------------------------ loading


class _FakeLlamaClass:
    """Stands in for ``llama_cpp.Llama``: records its arguments and the cache it is given."""

    made: list[_FakeLlamaClass] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.metadata = {"tokenizer.chat_template": "{{ messages }}"}
        self.cache: Any = None
        self.set_cache_calls = 0
        _FakeLlamaClass.made.append(self)

    def set_cache(self, cache: Any) -> None:
        self.cache = cache
        self.set_cache_calls += 1

    def close(self) -> None:
        pass


@pytest.fixture
def fake_llama_class(monkeypatch):
    _FakeLlamaClass.made = []
    monkeypatch.setattr(llama_cpp, "Llama", _FakeLlamaClass)
    monkeypatch.setattr(local, "_LOADED", {})
    monkeypatch.setattr(local.runtime, "ensure_runtime", lambda _path: None)
    monkeypatch.setattr(local.runtime, "load_cpu_backend", lambda _variant=None: "built-in")
    return _FakeLlamaClass


def test_load_sets_a_prompt_cache_of_the_configured_size(fake_llama_class, tmp_path):
    path = str(tmp_path / "m.gguf")
    cached = local._load_llama(WorkerSettings(path, 512, 1, 1, 64))
    llama = cached.llama
    assert llama.set_cache_calls == 1
    assert isinstance(llama.cache, PromptStateCache)
    assert llama.cache.capacity_bytes == 64 * MIB
    assert local._load_llama(WorkerSettings(path, 512, 1, 1, 64)) is cached  # shared per settings
    plain = local._load_llama(WorkerSettings(path, 512, 1, 1, 0))  # cache size: part of the key
    assert plain is not cached and plain.llama.cache is None and plain.llama.set_cache_calls == 0
    assert len(fake_llama_class.made) == 2


@pytest.mark.parametrize("bad", [-1, 2.5, True])
def test_load_rejects_a_bad_cache_size_before_loading(fake_llama_class, tmp_path, bad):
    with pytest.raises(ValueError, match="prompt_cache_mib"):
        local._load_llama(WorkerSettings(str(tmp_path / "m.gguf"), 512, 1, 1, bad))
    assert fake_llama_class.made == []


def test_make_local_chat_model_passes_the_cache_size(monkeypatch, tmp_path):
    seen: list[tuple[Any, ...]] = []

    def load(*args: Any) -> Any:
        seen.append(args)
        return local._Loaded(llama=SimpleNamespace(), lock=threading.Lock())

    monkeypatch.setattr(local, "_load_llama", load)
    monkeypatch.setattr(local, "assemble_model", lambda cache_dir=None: tmp_path / "m.gguf")
    cfg = LLMConfig(
        local_prompt_cache_mib=96,
        local_prompt_lookup=False,
        local_n_threads=2,
        local_isolation="none",
    )
    local.make_local_chat_model(cfg)
    (settings,) = seen[-1]
    assert (settings.prompt_cache_mib, settings.prompt_lookup) == (96, False)


# ------------------------------------------------------------------------------ the cache


@pytest.mark.parametrize("bad", [0, -5, 1.5, True])
def test_cache_capacity_must_be_positive_bytes(bad):
    with pytest.raises(ValueError, match="capacity_bytes"):
        PromptStateCache(bad)


def test_entries_keep_one_logits_row_and_count_their_full_size():
    cache = PromptStateCache(10 * MIB)
    entry = state([1, 2, 3, 4, 5])
    last_row = entry.scores[-1].copy()
    cache[(1, 2, 3, 4, 5, 6)] = entry
    kept = cache.cache_state[(1, 2, 3, 4, 5, 6)]
    assert kept.scores.shape == (1, VOCAB) and np.array_equal(kept.scores[0], last_row)
    assert kept.scores.base is None  # owns its row: the full copy is freed, not kept as a base
    assert entry_bytes(kept) == 1000 + N_CTX * 4 + VOCAB * 4
    assert cache.cache_size == entry_bytes(kept)  # not the llama.cpp state alone


def test_least_recently_used_entries_leave_when_the_bound_is_reached():
    one = 1000 + N_CTX * 4 + VOCAB * 4  # a kept entry: state, token array, one logits row
    cache = PromptStateCache(2 * one)
    cache[(1, 2, 3)] = state([1, 2, 3])
    cache[(4, 5, 6)] = state([4, 5, 6])
    assert cache[(1, 2, 9)].n_tokens == 3  # a look-up makes (1, 2, 3) the most recent
    cache[(7, 8, 9)] = state([7, 8, 9])
    assert list(cache.cache_state) == [(1, 2, 3), (7, 8, 9)]
    assert cache.cache_size <= cache.capacity_bytes
    small = PromptStateCache(one - 1)  # an entry larger than the bound is not kept
    small[(1,)] = state([1])
    assert len(small.cache_state) == 0
    cache.clear()
    assert cache.cache_size == 0


def test_llama_load_state_restores_a_trimmed_entry(monkeypatch):
    """``Llama.load_state`` (the library's) accepts the one-row logits: the row is broadcast."""
    import llama_cpp.llama as llama_module

    cache = PromptStateCache(10 * MIB)
    cache[(1, 2, 3, 4, 5)] = state([1, 2, 3, 4, 5])
    entry = cache.cache_state[(1, 2, 3, 4, 5)]
    restored: list[int] = []

    def set_data(ctx, buf, size):
        restored.append(size)
        return size

    monkeypatch.setattr(llama_module.llama_cpp, "llama_state_set_data", set_data)
    target = SimpleNamespace(
        scores=np.full((8, VOCAB), 3.0, np.single),
        input_ids=np.zeros(N_CTX, np.intc),
        n_tokens=0,
        _requires_eval=False,
        _seed=0,
        _ctx=SimpleNamespace(ctx=None),
    )
    Llama.load_state(target, entry)  # type: ignore[arg-type]
    assert restored == [1000] and target.n_tokens == 5 and target._requires_eval
    assert target.input_ids[:5].tolist() == [1, 2, 3, 4, 5]
    assert np.array_equal(target.scores[4], entry.scores[0])


# ------------------------------------------------------------------------------ reuse


def test_reuse_source_replays_the_libraries_load_decision():
    live = [1, 2, 3, 9, 9]
    a = state([1, 2, 3, 4, 5, 6])
    b = state([1, 2, 3, 4, 7])
    entries = [((1, 2, 3, 4, 5, 6, 42), a), ((1, 2, 3, 4, 7, 43), b)]
    assert reuse_source(live, entries, [1, 2, 3, 4, 5, 6, 8]) == ([1, 2, 3, 4, 5, 6], True)
    assert reuse_source(live, entries, [1, 2, 3, 4, 7, 0]) == ([1, 2, 3, 4, 7], True)
    # the live context matches as far as the best entry: no load (the library needs longer)
    assert reuse_source([1, 2, 3, 4, 5, 6], entries, [1, 2, 3, 4, 5, 6, 1]) == (
        [1, 2, 3, 4, 5, 6],
        False,
    )
    assert reuse_source(live, [], [1, 2, 3]) == (live, False)
    # ties between keys go to the first one in the cache's order
    assert reuse_source([], entries, [1, 2, 3, 4, 0]) == ([1, 2, 3, 4, 5, 6], True)


def test_reuse_source_compares_the_whole_token_array_as_the_library_does():
    """Stale slots past ``n_tokens`` can win the comparison; the reuse is still ``n_tokens``."""
    entry = state([1, 2], stale=[3, 4])
    got = reuse_source([1, 2, 3], [((1, 2, 5), entry)], [1, 2, 3, 4, 6])
    assert got == ([1, 2], True)


class _CachingLlama:
    """A llama with a prompt cache: replies, keeps the prompt tokens, records its params."""

    def __init__(self, live: list[int], cache: PromptStateCache) -> None:
        self.input_ids = np.zeros(N_CTX, dtype=np.intc)
        self.input_ids[: len(live) + 2] = [*live, 77, 77]  # stale slots behind n_tokens
        self.n_tokens = len(live)
        self.cache = cache
        self._seed = 1234
        self.params: list[dict[str, Any]] = []
        self.prompt: list[int] = []

    @property
    def _input_ids(self) -> np.ndarray:
        return self.input_ids[: self.n_tokens]

    def set_seed(self, seed: int) -> None:
        self._seed = seed

    def create_chat_completion(self, messages, **params):
        self.params.append(params)
        self.input_ids[: len(self.prompt)] = self.prompt
        self.n_tokens = len(self.prompt)
        return {
            "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(self.prompt), "completion_tokens": 1},
        }


def test_measured_completion_counts_tokens_reused_from_a_cache_entry():
    cache = PromptStateCache(10 * MIB)
    cache[(1, 2, 3, 4, 5, 6, 7, 8)] = state([1, 2, 3, 4, 5, 6, 7])  # an earlier gate call
    llama = _CachingLlama(live=[1, 2, 3, 9], cache=cache)  # the previous call shared 3
    llama.prompt = [1, 2, 3, 4, 5, 6, 7]  # the gate prompt again
    _, timing = local.measured_completion(llama, [], {"seed": None, "max_tokens": 4})
    assert timing.from_cache and timing.reused_tokens == 6  # last token evaluated again
    # the seed is drawn up front from the stream, as create_completion would: a loaded entry
    # restores its saved seed, which would otherwise replay earlier calls' seeds
    assert llama.params[0]["seed"] == random.Random(1234).randint(0, 2**32)
    llama.prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9]  # live now matches 7: no entry is longer
    _, timing = local.measured_completion(llama, [], {"seed": 5, "max_tokens": 4})
    assert not timing.from_cache and timing.reused_tokens == 7
    assert llama.params[1]["seed"] == 5


def test_measured_completion_compares_only_the_evaluated_tokens():
    """The stale slots of ``input_ids`` behind ``n_tokens`` are not counted as reused."""
    llama = _CachingLlama(live=[1, 2], cache=PromptStateCache(MIB))
    llama.cache = None  # no cache: the live context alone
    llama.prompt = [1, 2, 77, 77, 5]
    _, timing = local.measured_completion(llama, [], {"seed": None})
    assert timing.reused_tokens == 2 and not timing.from_cache
    assert llama.params[0]["seed"] is None  # without a cache the library draws the seed

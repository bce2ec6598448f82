"""Batched decoding (`evoduet_graph.llm.batching`) against a fake llama.cpp context.

The fake keeps a KV cache per sequence (position → token) and refuses to evaluate a token
whose earlier positions are missing, so a wrong prefix copy or position fails loudly. Its
"logits" are a hash of the sequence's tokens so far and its sampler draws from a seeded
generator: a sequence's output depends only on its prompt and seed, which lets the tests
compare a batched run with the same requests run one at a time.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections import deque

import pytest

from evoduet_graph.llm.batching import BatchDecoder, SamplingParams, SequenceRequest

EOG = 0


class FakeBackend:
    def __init__(self, n_ctx: int = 4096, n_batch: int = 64, stop_after: int = 12) -> None:
        self.n_ctx = n_ctx
        self.n_batch = n_batch
        self.stop_after = stop_after  # EOG once a sequence holds this many sampled tokens
        self.kv: dict[int, dict[int, int]] = {0: {}}
        self.cache: list[int] = []
        self.decodes: list[list[tuple[int, int, int, bool]]] = []
        self.logits: list[tuple[int, ...] | None] = []
        self.fail_next_decode = False
        self.samplers_alive = 0

    # -- protocol
    def cached_prefix(self) -> list[int]:
        return list(self.cache)

    def drop_cached(self) -> None:
        self.kv[0] = {}
        self.cache = []

    def adopt(self, seq_id: int, tokens: list[int]) -> None:
        assert [self.kv[seq_id][p] for p in range(len(tokens))] == tokens
        self.kv[0] = {p: t for p, t in enumerate(tokens)}
        self.cache = list(tokens)

    def seq_cp(self, src: int, dst: int, n: int) -> None:
        assert all(p in self.kv[src] for p in range(n)), "copying cells that do not exist"
        assert not self.kv.get(dst), f"sequence {dst} is still in use"
        self.kv[dst] = {p: self.kv[src][p] for p in range(n)}

    def seq_rm(self, seq_id: int) -> None:
        assert seq_id != 0
        self.kv.pop(seq_id, None)

    def used_cells(self) -> int:
        cells = {(p, t) for seq in self.kv.values() for p, t in seq.items()}
        return len(cells)

    def decode(self, tokens) -> None:
        assert 0 < len(tokens) <= self.n_batch
        if self.fail_next_decode:
            self.fail_next_decode = False
            raise RuntimeError("llama_decode returned 1 (no room left in the KV cache)")
        self.decodes.append(list(tokens))
        self.logits = []
        for tok, pos, seq, want in tokens:
            cells = self.kv.setdefault(seq, {})
            assert all(p in cells for p in range(pos)), f"seq {seq} misses cells before {pos}"
            assert pos not in cells, f"seq {seq} evaluates position {pos} twice"
            cells[pos] = tok
            history = tuple(cells[p] for p in range(pos + 1))
            self.logits.append(history if want else None)

    def new_sampler(self, params: SamplingParams):
        self.samplers_alive += 1
        return {"rng": random.Random(params.seed), "n": 0, "greedy": params.temperature == 0}

    def sample(self, sampler, index: int) -> int:
        history = self.logits[index]
        assert history is not None, "sampling an entry without logits"
        sampler["n"] += 1
        if sampler["n"] > self.stop_after:
            return EOG
        digest = hashlib.sha256(repr(history).encode()).digest()
        noise = 0 if sampler["greedy"] else sampler["rng"].randrange(5)
        return 1 + (digest[0] + noise) % 50

    def free_sampler(self, sampler) -> None:
        self.samplers_alive -= 1

    def is_eog(self, token: int) -> bool:
        return token == EOG

    def piece(self, token: int) -> bytes:
        return f"<{token}>".encode()


def req(prompt, seed=1, max_tokens=100, stop=(), temperature=0.7) -> SequenceRequest:
    return SequenceRequest(
        prompt=list(prompt),
        max_tokens=max_tokens,
        sampling=SamplingParams(seed=seed, temperature=temperature),
        stop=tuple(stop),
    )


def run(backend, requests, max_sequences=8):
    decoder = BatchDecoder(backend, max_sequences)
    decoder.run(deque(requests), threading.Lock())
    return decoder


PROMPT = list(range(100, 400))  # 300 tokens


def test_batch_equals_sequential_and_prompt_is_evaluated_once():
    alone = []
    for seed in (1, 2, 3, 4):
        backend = FakeBackend()
        r = req(PROMPT, seed=seed)
        run(backend, [r])
        alone.append((r.text, r.completion_tokens, r.finish_reason))
    backend = FakeBackend()
    batch = [req(PROMPT, seed=s) for s in (1, 2, 3, 4)]
    decoder = run(backend, batch)
    assert [(r.text, r.completion_tokens, r.finish_reason) for r in batch] == alone
    assert all(r.done.is_set() and r.error is None for r in batch)
    assert len({r.text for r in batch}) == 4  # different seeds, different outputs
    prompt_entries = sum(1 for d in backend.decodes for _, pos, _, _ in d if pos < len(PROMPT))
    assert prompt_entries == len(PROMPT) + 3  # once, plus the last token of each other seq
    assert [r.prompt_reused for r in batch] == [0, 299, 299, 299]
    assert decoder.steps == backend.stop_after  # the four decode together
    assert all(len(d) == 4 for d in backend.decodes[-decoder.steps :][:-1])
    assert all(r.batch_size == 4 for r in batch)
    assert backend.samplers_alive == 0
    assert set(backend.kv) == {0}  # batch sequences removed
    assert backend.cache == PROMPT  # the first prompt is Llama's cache, as a sequential call


def test_fixed_seed_is_deterministic_and_seeds_differ():
    texts = []
    for _ in range(2):
        batch = [req(PROMPT, seed=7), req(PROMPT, seed=8)]
        run(FakeBackend(), batch)
        texts.append([r.text for r in batch])
    assert texts[0] == texts[1]
    assert texts[0][0] != texts[0][1]


def test_cached_prefix_of_sequence_zero_is_reused():
    backend = FakeBackend()
    backend.kv[0] = {p: t for p, t in enumerate(PROMPT[:200])}
    backend.cache = PROMPT[:200]
    batch = [req(PROMPT, seed=1), req(PROMPT, seed=2)]
    run(backend, batch)
    assert [r.prompt_reused for r in batch] == [200, 299]
    prompt_entries = sum(1 for d in backend.decodes for _, pos, _, _ in d if pos < len(PROMPT))
    assert prompt_entries == 100 + 1


def test_different_prompts_share_their_common_prefix():
    other = PROMPT[:250] + list(range(900, 960))
    batch = [req(PROMPT, seed=1), req(other, seed=1)]
    run(FakeBackend(), batch)
    assert [r.prompt_reused for r in batch] == [0, 250]
    solo = req(other, seed=1)
    run(FakeBackend(), [solo])
    assert batch[1].text == solo.text


def test_max_tokens_and_stop_strings():
    backend = FakeBackend(stop_after=50)
    short = req(PROMPT, seed=1, max_tokens=5)
    full = req(PROMPT, seed=2)
    run(backend, [short, full])
    assert short.completion_tokens == 5 and short.finish_reason == "length"
    assert full.finish_reason == "stop" and full.completion_tokens == 50
    second_piece = full.text.split(">")[1] + ">"
    cut = req(PROMPT, seed=2, stop=[second_piece])
    run(FakeBackend(stop_after=50), [cut])
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.index(second_piece)]


def test_request_queued_during_a_batch_joins_it():
    backend = FakeBackend(stop_after=30)
    queue = deque([req(PROMPT, seed=1)])
    guard = threading.Lock()
    late = req(PROMPT, seed=2)
    decoder = BatchDecoder(backend, 4)
    original = backend.decode

    def decode_and_enqueue(tokens):
        original(tokens)
        if len(backend.decodes) == 10:
            with guard:
                queue.append(late)

    backend.decode = decode_and_enqueue
    decoder.run(queue, guard)
    assert late.done.is_set() and late.error is None
    assert late.prompt_reused == len(PROMPT) - 1  # from the live sequence
    assert late.batch_size == 2
    solo = req(PROMPT, seed=2)
    run(FakeBackend(stop_after=30), [solo])
    assert late.text == solo.text
    assert decoder.steps < 60  # overlapped, not one after the other


def test_more_requests_than_sequences_reuse_freed_ids():
    batch = [req(PROMPT, seed=s) for s in range(6)]
    backend = FakeBackend()
    run(backend, batch, max_sequences=2)
    assert all(r.done.is_set() and r.error is None for r in batch)
    assert max(len(d) for d in backend.decodes if all(p >= 300 for _, p, _, _ in d)) <= 2
    assert set(backend.kv) == {0}


def test_kv_room_limits_admission_and_everything_is_served():
    # 300-token prompt + 100 max tokens per request: ~400 cells each, 1 sequence fits in 700
    backend = FakeBackend(n_ctx=700)
    batch = [req(list(range(1000 + 400 * s, 1300 + 400 * s)), seed=s) for s in range(3)]
    run(backend, batch)
    assert all(r.error is None and r.completion_tokens > 0 for r in batch)
    assert all(r.batch_size == 1 for r in batch)


def test_too_long_prompt_fails_alone_and_max_tokens_is_clamped():
    backend = FakeBackend(n_ctx=400, stop_after=500)
    too_long = req(list(range(1, 500)))
    clamped = req(PROMPT, max_tokens=1000)
    run(backend, [too_long, clamped])
    assert isinstance(too_long.error, ValueError)
    assert "exceed context window" in str(too_long.error)
    assert clamped.error is None and clamped.finish_reason == "length"
    assert clamped.completion_tokens == 100


def test_decode_failure_fails_the_live_sequences_only():
    backend = FakeBackend()
    batch = [req(PROMPT, seed=1), req(PROMPT, seed=2)]
    original = backend.decode

    def fail_on_third_step(tokens):
        if len(backend.decodes) == 7:
            backend.decode = original
            raise RuntimeError("llama_decode returned 1 (no room left in the KV cache)")
        original(tokens)

    backend.decode = fail_on_third_step
    run(backend, batch)
    assert all(isinstance(r.error, RuntimeError) for r in batch)
    assert all(r.done.is_set() for r in batch)
    assert backend.samplers_alive == 0 and set(backend.kv) == {0}
    again = req(PROMPT, seed=3)
    run(backend, [again])  # the decoder is usable afterwards
    assert again.error is None


def test_greedy_sequences_are_identical():
    batch = [req(PROMPT, seed=s, temperature=0.0) for s in (1, 2, 3)]
    run(FakeBackend(), batch)
    assert len({r.text for r in batch}) == 1


def test_max_sequences_must_be_positive():
    with pytest.raises(ValueError):
        BatchDecoder(FakeBackend(), 0)


# ------------------------------------------------------------------ LocalChatModel integration


class _SlowBackend(FakeBackend):
    """Each decode takes a few milliseconds, as a real one takes tens."""

    def decode(self, tokens) -> None:
        time.sleep(0.003)
        super().decode(tokens)


class _TokenizingLlama:
    """What `LocalChatModel` needs of ``llama_cpp.Llama`` on the batched path."""

    def __init__(self) -> None:
        self.metadata: dict[str, str] = {}  # no chat template: ChatML
        self._seed = 1234
        self.calls: list[dict] = []

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return [100 + b for b in text]

    def set_seed(self, seed: int) -> None:
        self._seed = seed

    def create_chat_completion(self, messages, **kwargs):
        self.calls.append({"messages": messages, **kwargs})
        return {
            "choices": [{"message": {"content": '{"name": "x"}'}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        }


@pytest.fixture
def batched_model(monkeypatch, tmp_path):
    from evoduet_graph.config import LLMConfig
    from evoduet_graph.llm import local

    backend = _SlowBackend(n_ctx=8192, n_batch=512, stop_after=40)
    llama = _TokenizingLlama()
    loaded = local._Loaded(
        llama=llama,
        lock=threading.Lock(),
        parallel=4,
        decoder=BatchDecoder(backend, 4),
    )
    monkeypatch.setattr(local, "_load_llama", lambda *_args, **_kwargs: loaded)
    monkeypatch.setattr(local, "assemble_model", lambda cache_dir=None: tmp_path / "m.gguf")
    cfg = LLMConfig(model="local", max_tokens=64, local_parallel=4, local_isolation="none")
    return local.make_local_chat_model(cfg), backend, llama


def test_concurrent_calls_decode_as_one_batch(batched_model):
    from langchain_core.messages import HumanMessage, SystemMessage

    model, _, _ = batched_model
    messages = [SystemMessage("You improve programs."), HumanMessage("Improve this program.")]
    replies = model.batch([messages] * 4)  # LangChain's standard path: one thread per input
    assert len(replies) == 4 and all(r.content for r in replies)
    assert len({r.content for r in replies}) == 4  # seeds drawn per call differ
    assert max(r.response_metadata["batch_size"] for r in replies) >= 2
    prompt = replies[0].usage_metadata["input_tokens"]
    assert all(r.usage_metadata["input_tokens"] == prompt for r in replies)
    assert all(r.usage_metadata["output_tokens"] == 40 for r in replies)
    reused = [r.usage_metadata["input_token_details"]["cache_read"] for r in replies]
    evaluated = sum(prompt - c for c in reused)
    assert evaluated < 2 * prompt  # the shared prompt is evaluated about once, not 4 times
    assert all(r.response_metadata["finish_reason"] == "stop" for r in replies)
    assert all(r.response_metadata["decode_s"] > 0 for r in replies)


def test_fixed_seed_gives_the_same_reply(batched_model):
    from langchain_core.messages import HumanMessage

    model, _, _ = batched_model
    seeded = model.bind(seed=42)
    first = seeded.invoke([HumanMessage("hello")])
    again = seeded.invoke([HumanMessage("hello")])
    other = model.bind(seed=43).invoke([HumanMessage("hello")])
    assert first.content == again.content != other.content


def test_structured_calls_stay_single_sequence(batched_model):
    from langchain_core.messages import HumanMessage
    from pydantic import BaseModel

    class Name(BaseModel):
        name: str

    model, backend, llama = batched_model
    assert model.with_structured_output(Name).invoke([HumanMessage("a name")]).name == "x"
    assert len(llama.calls) == 1 and llama.calls[0]["response_format"]["type"] == "json_object"
    assert backend.decodes == []  # the grammar call never touched the batch decoder


def test_context_overflow_in_a_batch_is_a_context_overflow_error(batched_model):
    from langchain_core.exceptions import ContextOverflowError
    from langchain_core.messages import HumanMessage

    model, _, _ = batched_model
    with pytest.raises(ContextOverflowError):
        model.invoke([HumanMessage("x" * 9000)])


def test_calls_made_together_start_together_in_a_fixed_order():
    backend = FakeBackend()
    seed3, seed1 = req(PROMPT, seed=3), req(PROMPT, seed=1)
    queue = deque([seed3, seed1])
    guard = threading.Lock()
    late = req(PROMPT, seed=2)

    def add_late():
        time.sleep(0.01)  # a generate thread a little behind the others
        with guard:
            queue.append(late)

    adder = threading.Thread(target=add_late)
    adder.start()
    BatchDecoder(backend, 4).run(queue, guard)
    adder.join()
    last = len(PROMPT) - 1
    first_logits = [d for d in backend.decodes if any(pos == last for _, pos, _, _ in d)]
    assert len(first_logits) == 1 and len(first_logits[0]) == 3  # one decode for all three
    assert [seq for _, _, seq, _ in first_logits[0]] == [1, 2, 3]
    assert late.batch_size == 3 and late.prompt_reused == last
    # admitted by seed, whatever the arrival order: seed 1 evaluated the prompt
    assert (seed1.prompt_reused, late.prompt_reused, seed3.prompt_reused) == (0, last, last)
    assert sorted(backend.kv) == [0] and backend.cache == PROMPT

"""Prompt-lookup speculative decoding (`evoduet_graph.llm.prompt_lookup`, `BatchDecoder`).

The acceptance rule is checked on toy distributions: the tokens it emits must be distributed as
the sampler's own draws (a chi-square test over many draws, with a wrong rule as the control
that the test rejects). The decoder runs against a fake context whose "model" copies its prompt
with periodic edits, and which refuses a position evaluated twice or one whose earlier cells are
missing, so a KV cache not rolled back past a rejected draft fails loudly.
"""

from __future__ import annotations

import threading
from collections import Counter, deque

import numpy as np
import pytest
from scipy.stats import chisquare

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm.batching import BatchDecoder, SamplingParams, SequenceRequest
from evoduet_graph.llm.prompt_lookup import (
    DraftLength,
    PromptLookup,
    draw,
    find_draft,
    verify_draft,
)

# ------------------------------------------------------------------ the acceptance rule

IDS = np.array([3, 5, 7, 11, 13])
P = np.array([0.35, 0.25, 0.2, 0.15, 0.05])


def _first_token(draft: list[int], probs: np.ndarray, rng: np.random.Generator) -> int:
    out: list[int] = []
    verify_draft(draft, lambda i: (IDS, probs), lambda t, d: out.append(t) or False, rng)
    return out[0]


def _p_value(samples: list[int], probs: np.ndarray) -> float:
    counts = Counter(samples)
    observed = np.array([counts.get(int(t), 0) for t in IDS])
    assert observed.sum() == len(samples)  # nothing outside the support
    return float(chisquare(observed, probs * len(samples)).pvalue)


@pytest.mark.parametrize("drafted", [3, 7, 13, 99])  # likely, middling, unlikely, impossible
def test_emitted_token_is_distributed_as_the_sampler(drafted):
    rng = np.random.default_rng(drafted)
    samples = [_first_token([drafted], P, rng) for _ in range(20_000)]
    assert _p_value(samples, P) > 1e-3


def test_the_chi_square_bound_rejects_a_wrong_rule():
    """Control: accepting with p(d) but redrawing from p (d not removed) biases towards d."""
    rng = np.random.default_rng(0)
    samples = []
    for _ in range(20_000):
        accept = rng.random() < P[2]
        samples.append(7 if accept else draw(IDS, P, rng))
    assert _p_value(samples, P) < 1e-6


def test_a_chain_of_drafts_keeps_the_joint_distribution():
    """Two positions, the second conditional on the first: pairs follow p(x1) p(x2 | x1)."""
    second = {int(t): np.roll(P, k) for k, t in enumerate(IDS)}
    rng = np.random.default_rng(1)
    pairs = []
    for _ in range(30_000):
        out: list[int] = []

        def dist(i, out=out):
            return (IDS, P) if i == 0 else (IDS, second[out[0]])

        def emit(token, drafted, out=out):
            out.append(token)
            return len(out) < 2

        verify_draft([5, 5], dist, emit, rng)
        if len(out) < 2:  # the first draft token was rejected: the next step draws the second
            out.append(draw(IDS, second[out[0]], rng))
        pairs.append(tuple(out))
    joint = np.array([P[a] * second[int(IDS[a])][b] for a in range(5) for b in range(5)])
    counts = Counter(pairs)
    observed = np.array(
        [counts.get((int(IDS[a]), int(IDS[b])), 0) for a in range(5) for b in range(5)]
    )
    assert observed.sum() == len(pairs)
    assert chisquare(observed, joint * len(pairs)).pvalue > 1e-3


def test_greedy_point_mass_accepts_exactly_the_argmax_run():
    rng = np.random.default_rng(0)
    target = [4, 8, 15, 16]  # greedy tokens of four positions
    out: list[tuple[int, bool]] = []
    accepted = verify_draft(
        [4, 8, 99, 16],
        lambda i: (np.array([target[i]]), np.ones(1)),
        lambda t, d: out.append((t, d)) or True,
        rng,
    )
    assert accepted == 2
    assert out == [(4, True), (8, True), (15, False)]
    out.clear()
    assert (
        verify_draft(
            [4, 8],
            lambda i: (np.array([target[i]]), np.ones(1)),
            lambda t, d: out.append((t, d)) or True,
            rng,
        )
        == 2
    )
    assert out == [(4, True), (8, True), (15, False)]  # the token after a whole draft


def test_verification_stops_when_the_sequence_stops():
    out: list[int] = []
    accepted = verify_draft(
        [1, 2, 3],
        lambda i: (np.array([i + 1]), np.ones(1)),
        lambda t, d: out.append(t) or t < 2,
        np.random.default_rng(0),
    )
    assert out == [1, 2] and accepted == 2


# ------------------------------------------------------------------ drafting


def test_draft_copies_what_followed_the_last_ngram():
    history = [1, 2, 3, 4, 5, 6, 7, 9, 9, 2, 3, 4]
    assert find_draft(history, 3, ngram_max=3, ngram_min=1) == ([5, 6, 7], 4)
    assert find_draft(history, 10, ngram_max=3, ngram_min=1) == ([5, 6, 7, 9, 9, 2, 3, 4], 4)
    assert find_draft(history, 0, ngram_max=3, ngram_min=1) == ([], None)


def test_draft_prefers_longer_ngrams_then_the_followed_source_then_the_latest():
    # "3" occurs twice; the bigram "2 3" once: the longer match wins
    history = [7, 3, 8, 2, 3, 9, 0, 2, 3]
    assert find_draft(history, 2, ngram_max=2, ngram_min=1) == ([9, 0], 5)
    # two matches of the same size: the latest, unless the previous draft's source goes on
    history = [5, 6, 1, 5, 6, 2, 5, 6]
    assert find_draft(history, 1, ngram_max=2, ngram_min=2) == ([2], 5)
    assert find_draft(history, 1, ngram_max=2, ngram_min=2, follow=2) == ([1], 2)
    assert find_draft(history, 1, ngram_max=2, ngram_min=2, follow=4) == ([2], 5)  # not a match end


def test_no_draft_below_the_smallest_ngram():
    assert find_draft([1, 2, 3, 4], 4, ngram_max=3, ngram_min=2) == ([], None)
    assert find_draft([1, 2, 3, 1, 9], 4, ngram_max=3, ngram_min=2) == ([], None)
    assert find_draft([1, 2, 3, 1, 9], 4, ngram_max=3, ngram_min=1) == ([], None)
    assert find_draft([1, 2, 3, 1], 4, ngram_max=3, ngram_min=1) == ([2, 3, 1], 1)


def test_draft_length_grows_on_full_acceptance_and_shrinks_on_rejection():
    length = DraftLength.of(PromptLookup(first_draft=4, min_draft=2, max_draft=8))
    length.update(4, 4)
    assert length.value == 6
    length.update(6, 6)
    length.update(8, 8)
    assert length.value == 8  # capped
    length.update(8, 3)
    assert length.value == 7
    for _ in range(10):
        length.update(2, 0)
    assert length.value == 2  # floored
    length.update(0, 0)
    assert length.value == 2  # no draft: no evidence


def test_lookup_settings_are_checked():
    with pytest.raises(ValueError, match="ngram_min"):
        PromptLookup(ngram_min=3, ngram_max=2)
    with pytest.raises(ValueError, match="min_draft"):
        PromptLookup(min_draft=0)
    with pytest.raises(ValueError, match="first_draft"):
        PromptLookup(first_draft=40, max_draft=24)


def test_config_key_defaults_on_and_is_a_bool():
    assert LLMConfig().local_prompt_lookup is True
    assert LLMConfig(local_prompt_lookup=False).local_prompt_lookup is False
    with pytest.raises(ValueError, match="local_prompt_lookup"):
        LLMConfig(local_prompt_lookup="sometimes")


# ------------------------------------------------------------------ the decoder

PROMPT = list(range(100, 300))


def _next(history: tuple[int, ...]) -> int:
    """The toy model: copy the prompt's cycle, but skip ahead after every token ending in 7."""
    last = history[-1]
    step = 3 if last % 10 == 7 else 1
    return 100 + (last - 100 + step) % 200


class CopyBackend:
    """A fake context whose model copies its prompt with edits (greedy or noisy)."""

    def __init__(self, n_ctx: int = 4096, n_batch: int = 64) -> None:
        self.n_ctx = n_ctx
        self.n_batch = n_batch
        self.kv: dict[int, dict[int, int]] = {0: {}}
        self.logits: list[tuple[int, ...] | None] = []
        self.decoded = 0  # entries evaluated after the prompts
        self.truncations = 0
        self.samplers_alive = 0

    def cached_prefix(self) -> list[int]:
        return []

    def drop_cached(self) -> None:
        pass

    def adopt(self, seq_id, tokens) -> None:
        pass

    def seq_cp(self, src, dst, n) -> None:
        self.kv[dst] = {p: self.kv[src][p] for p in range(n)}

    def seq_rm(self, seq_id) -> None:
        self.kv.pop(seq_id, None)

    def truncate(self, seq_id, pos) -> None:
        self.truncations += 1
        cells = self.kv[seq_id]
        for p in [p for p in cells if p >= pos]:
            del cells[p]

    def decode(self, tokens) -> None:
        assert 0 < len(tokens) <= self.n_batch
        self.logits = []
        for tok, pos, seq, want in tokens:
            cells = self.kv.setdefault(seq, {})
            assert all(p in cells for p in range(pos)), f"seq {seq} misses cells before {pos}"
            assert pos not in cells, f"seq {seq} evaluates position {pos} twice"
            cells[pos] = tok
            self.logits.append(tuple(cells[p] for p in range(pos + 1)) if want else None)

    def _dist(self, history) -> tuple[np.ndarray, np.ndarray]:
        best = _next(history)
        return np.array([best, 100 + (best - 100 + 50) % 200]), np.array([0.9, 0.1])

    # sequential sampling (drafting off)
    def new_sampler(self, params: SamplingParams):
        self.samplers_alive += 1
        return {"rng": np.random.default_rng(params.seed), "greedy": params.temperature == 0}

    def sample(self, sampler, index) -> int:
        history = self.logits[index]
        assert history is not None
        if sampler["greedy"]:
            return _next(history)
        return draw(*self._dist(history), sampler["rng"])

    # drafting
    def new_filter(self, params: SamplingParams):
        self.samplers_alive += 1
        return {"greedy": params.temperature == 0, "accepted": []}

    def distribution(self, sampler, index):
        history = self.logits[index]
        assert history is not None, "a distribution of an entry without logits"
        if sampler["greedy"]:
            return np.array([_next(history)]), np.ones(1)
        return self._dist(history)

    def accept_token(self, sampler, token) -> None:
        sampler["accepted"].append(token)

    def free_sampler(self, sampler) -> None:
        self.samplers_alive -= 1

    def is_eog(self, token: int) -> bool:
        return False

    def piece(self, token: int) -> bytes:
        return f"<{token}>".encode()


def _run(requests, lookup: PromptLookup | None, backend: CopyBackend | None = None):
    backend = backend or CopyBackend()
    decoder = BatchDecoder(backend, 4, lookup)
    decoder.run(deque(requests), threading.Lock())
    assert backend.samplers_alive == 0
    return decoder, backend


def _req(seed: int, temperature: float = 0.0, max_tokens: int = 120, prompt=PROMPT):
    return SequenceRequest(
        prompt=list(prompt),
        max_tokens=max_tokens,
        sampling=SamplingParams(seed=seed, temperature=temperature),
    )


def test_greedy_output_is_identical_with_drafting_in_fewer_steps():
    other = PROMPT[:150] + PROMPT[:50]  # shares a prefix; its copy source is mid-prompt
    plain = [_req(s) for s in (1, 2)] + [_req(3, prompt=other)]
    drafted = [_req(s) for s in (1, 2)] + [_req(3, prompt=other)]
    off, _ = _run(plain, None)
    on, backend = _run(drafted, PromptLookup())
    assert [r.text for r in drafted] == [r.text for r in plain]
    assert all(r.completion_tokens == 120 and r.finish_reason == "length" for r in drafted)
    assert on.steps < off.steps / 2  # most of the copy is accepted in drafts
    assert backend.truncations > 0  # the edits cut drafts, their cells were removed
    for r in drafted:
        assert 0 < r.draft_accepted < r.draft_tokens
        assert r.decode_steps < r.completion_tokens
    assert all(r.draft_tokens == 0 and r.decode_steps == 120 for r in plain)


def test_sampled_output_follows_the_sampler_and_stays_within_the_limits():
    requests = [_req(s, temperature=0.7, max_tokens=90) for s in (1, 2, 3, 4)]
    _, backend = _run(requests, PromptLookup())
    for r in requests:
        tokens = [int(t) for t in r.text.strip("<>").split("><")]
        assert len(tokens) == r.completion_tokens == 90
        history = (*PROMPT, *tokens)
        for i, tok in enumerate(tokens):
            ids, _ = backend._dist(history[: len(PROMPT) + i])
            assert tok in ids  # every token is one the sampler could draw there
    assert len({r.text for r in requests}) == 4


def test_a_draft_never_passes_max_tokens_or_the_batch():
    requests = [_req(s, max_tokens=5) for s in (1, 2, 3, 4)]
    _, backend = _run(requests, PromptLookup(first_draft=20, max_draft=24), CopyBackend(n_batch=12))
    assert all(r.completion_tokens == 5 for r in requests)
    assert all(r.error is None for r in requests)

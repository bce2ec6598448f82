"""Prompt-lookup speculative decoding: drafting, the acceptance rule, the draft length.

A child program is mostly its parent copied with a few lines changed, and the parent is in the
prompt. Prompt-lookup decoding (Saxena, "Prompt Lookup Decoding", 2023; transformers'
``prompt_lookup_num_tokens``) drafts the continuation of a sequence from its own context: the
last few tokens are looked up earlier in the prompt (or the sequence's own output) and the
tokens that followed them there are proposed. The batched decoder
(`evoduet_graph.llm.batching`) evaluates the last sampled token and the draft in one
``llama_decode`` (about what reading them in a prompt costs), keeps the accepted prefix and
removes the KV cells of the rejected part.

The draft is deterministic (a point mass on the drafted token), so the speculative-sampling
acceptance rule (Leviathan et al., "Fast Inference from Transformers via Speculative
Decoding", 2023, §2.3; Chen et al., 2023, Algorithm 2) reduces to: accept a drafted token ``d``
with probability ``p(d)``, where ``p`` is the sampler's final distribution at that position
(after penalties, top-k, top-p, min-p and temperature: what llama.cpp's ``dist`` sampler draws
from); otherwise draw from ``p`` with ``d`` removed and renormalised, and stop. When every
drafted token is accepted, one more token is drawn from ``p`` at the position after the draft.
Each emitted token is thus distributed exactly as the sampler's own draw; with greedy decoding
``p`` is a point mass on the arg-max, so the output is the greedy output token for token
(llama.cpp's kernels may round a verify batch differently from single steps, as they do for any
batch shape: `evoduet_graph.llm.batching`).

Deviations from transformers' prompt lookup, named: the look-up tries n-gram sizes from
`PromptLookup.ngram_max` down to `PromptLookup.ngram_min` and, of several matches of the largest
size, prefers the one that continues the previous draft's source (a copy goes on where it was),
then the latest one (transformers takes the first); the draft length follows transformers'
"heuristic" schedule for assistant models (``num_assistant_tokens_schedule``: +2 when the whole
draft was accepted, -1 otherwise) within ``[min_draft, max_draft]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DraftLength",
    "PromptLookup",
    "draw",
    "find_draft",
    "verify_draft",
]

#: ``(token ids, probabilities)`` of the sampler's final distribution at one position.
Distribution = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class PromptLookup:
    """Settings of prompt-lookup drafting (one object per decoder).

    Attributes:
        ngram_max: longest n-gram looked up.
        ngram_min: shortest n-gram looked up (no draft below it).
        first_draft: draft length a sequence starts with.
        min_draft: shortest draft the schedule goes down to.
        max_draft: longest draft.
    """

    ngram_max: int = 4
    ngram_min: int = 2
    first_draft: int = 8
    min_draft: int = 2
    max_draft: int = 24

    def __post_init__(self) -> None:
        if not 1 <= self.ngram_min <= self.ngram_max:
            raise ValueError(f"need 1 <= ngram_min <= ngram_max, got {self}")
        if not 1 <= self.min_draft <= self.first_draft <= self.max_draft:
            raise ValueError(f"need 1 <= min_draft <= first_draft <= max_draft, got {self}")


@dataclass
class DraftLength:
    """A sequence's draft length, adapted to how much of its drafts is accepted.

    transformers' "heuristic" schedule: after a draft that was accepted whole the next one is two
    tokens longer, after one that was cut it is one shorter (within ``[low, high]``). A long
    copied run thus gets long drafts, an edited stretch short ones.
    """

    value: int
    low: int
    high: int

    @classmethod
    def of(cls, lookup: PromptLookup) -> DraftLength:
        """The starting length of ``lookup``."""
        return cls(lookup.first_draft, lookup.min_draft, lookup.max_draft)

    def update(self, drafted: int, accepted: int) -> None:
        """Adapt after a verify step that drafted ``drafted`` tokens and accepted ``accepted``."""
        if drafted <= 0:
            return
        if accepted >= drafted:
            self.value = min(self.high, self.value + 2)
        else:
            self.value = max(self.low, self.value - 1)


def find_draft(
    history: Sequence[int] | np.ndarray,
    length: int,
    *,
    ngram_max: int,
    ngram_min: int,
    follow: int | None = None,
) -> tuple[list[int], int | None]:
    """The draft for a sequence whose tokens (prompt, then output) are ``history``.

    The last ``n`` tokens are looked up earlier in ``history``, ``n`` from ``ngram_max`` down
    to ``ngram_min``; at the first size with a match, the match ending at ``follow`` (where the
    previous draft's source continues) is preferred, else the latest one. The draft is the (up
    to ``length``) tokens that followed the match.

    Returns:
        ``(draft, start)``: the drafted tokens and the index in ``history`` they were copied
        from; ``([], None)`` when nothing matches or ``length`` < 1.
    """
    if length < 1:
        return [], None
    hist = np.asarray(history, dtype=np.int64)
    size = len(hist)
    for n in range(min(ngram_max, size - 1), ngram_min - 1, -1):
        tail = hist[size - n :]
        # match starts s with s + n <= size - 1: at least one token follows the match
        starts = np.flatnonzero(hist[: size - n] == tail[0])
        for j in range(1, n):
            if not len(starts):
                break
            starts = starts[hist[starts + j] == tail[j]]
        if not len(starts):
            continue
        ends = starts + n
        start = int(follow) if follow is not None and follow in ends else int(ends[-1])
        return hist[start : start + length].tolist(), start
    return [], None


def draw(ids: np.ndarray, probs: np.ndarray, rng: np.random.Generator) -> int:
    """One token drawn from ``probs`` over ``ids`` (need not be normalised)."""
    cum = np.cumsum(probs, dtype=np.float64)
    index = int(np.searchsorted(cum, rng.random() * cum[-1], side="right"))
    return int(ids[min(index, len(ids) - 1)])


def verify_draft(
    draft: Sequence[int],
    distribution: Callable[[int], Distribution],
    emit: Callable[[int, bool], bool],
    rng: np.random.Generator,
) -> int:
    """The speculative-sampling acceptance rule for a deterministic draft (module docstring).

    Args:
        draft: the drafted tokens, in order.
        distribution: ``distribution(i)``: the sampler's final distribution at draft position
            ``i`` (0: the position of ``draft[0]``; ``len(draft)``: the position after the
            draft), given the tokens emitted so far. Called in order, after the emits before it.
        emit: ``emit(token, drafted)`` appends an output token (``drafted``: an accepted draft
            token); it returns False when the sequence has stopped (end of generation, a stop
            string, the token limit), which ends the verification.
        rng: the sequence's random generator.

    Returns:
        The number of drafted tokens accepted. At most one token that was not drafted is
        emitted after them (the replacement of the first rejected one, or the token after a
        fully accepted draft).
    """
    for i, token in enumerate(draft):
        ids, probs = distribution(i)
        hit = ids == token
        p_token = float(probs[hit].sum()) / float(probs.sum())
        if rng.random() < p_token:
            if not emit(token, True):
                return i + 1
            continue
        rest = np.where(hit, 0.0, probs)
        if rest.sum() <= 0.0:  # p(token) rounds to 1: nothing else could have been drawn
            if not emit(token, True):
                return i + 1
            continue
        emit(draw(ids, rest, rng), False)
        return i
    ids, probs = distribution(len(draft))
    emit(draw(ids, probs, rng), False)
    return len(draft)

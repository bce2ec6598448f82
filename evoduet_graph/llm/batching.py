"""Batched decoding of several completions on the embedded model.

The N candidates of one iteration reach the embedded model as N concurrent free-text calls
(one per ``Send("generate", ...)``). Served one after the other they cost N× one call; here
they decode as **one llama.cpp batch**: each call is a sequence id in llama.cpp's unified KV
cache, the prompt prefix they share is evaluated once and its KV cells are shared with
``llama_memory_seq_cp`` (no copy of the data, the cells get a second sequence id), and every
decode step evaluates one token of every live sequence in one ``llama_decode``: the weights
are read once per step for all sequences. On 2 CPU cores the matmuls are largely
compute-bound, so a step of 4 sequences still costs 2-3× a step of 1 (``batch_bench.py``):
batching saves the repeated prompt and part of the decode cost, not all of it. Each sequence has
its own sampler chain (the chain of
``llama_cpp.Llama`` — penalties, top-k, typical, top-p, min-p, temperature, seeded
distribution — so a batched call samples like a sequential one), its own stop handling
(end-of-generation token, stop strings, ``max_tokens``) and its own accounting.

This is continuous batching as llama.cpp's ``llama-server`` does it with ``--parallel N``,
done in process through llama-cpp-python's low-level API: a call that arrives while a batch
is decoding joins it at the next step (its prompt reuses the longest evaluated prefix of any
sequence), and a finished sequence leaves at once (its caller gets the reply while the others
go on). Why not ``llama-server``: the installed wheel ships no server binary, building one
costs minutes of compilation on a fresh machine and a child process to supervise; the batch
API needs neither (measurement in ``benchmarks/batch_bench.py``).

Reproducibility: llama.cpp's CPU kernels round differently for different batch shapes, so a
sequence's tokens can depend on what it was decoded with. Calls made together therefore start
together: a batch begins once the queue has been quiet for 30 ms (at most 250 ms), its
requests are admitted in (seed, prompt length) order, and the last prompt token of every
sequence of that round is evaluated in one decode. The same set of concurrent calls with fixed
seeds, from the same cache state, then gives the same replies, whichever thread came first
(the KV cells' layout changes the rounding too, so a different cache state may change later
tokens, as may joining a running batch or running alone).

Sequence 0 belongs to ``llama_cpp.Llama`` (its own prompt cache); batched sequences use ids
1..``max_sequences``. A batched prompt that starts like sequence 0's cached tokens reuses
them. When a batch ends its sequences are removed and the first request's prompt becomes
sequence 0's cache, exactly what a sequential call would have left there.

Prompt-lookup speculative decoding (`evoduet_graph.llm.prompt_lookup`, on by default for the
embedded model, ``llm.local_prompt_lookup: false`` turns it off): every decode step, each live
sequence whose last tokens occur earlier in its prompt or output gets a draft (the tokens that
followed them there); the step evaluates the last sampled token and the draft together, the
acceptance rule keeps a prefix of the draft plus one token, and the KV cells of the rejected
part are removed (``llama_memory_seq_rm``). With drafting, tokens are drawn in Python from the
sampler chain's final distribution (the chain without its last ``dist``/``greedy`` stage,
applied by llama.cpp; a numpy generator seeded with the call's seed): the output is distributed
as the sampler's own, but a fixed seed draws a different stream than with drafting off; with
greedy decoding the output is the same token for token (kernel rounding aside, as above).

`BatchDecoder` runs the schedule against a small `DecodeBackend` protocol; `LlamaBackend`
is the llama.cpp implementation, unit tests use a fake one.
"""

from __future__ import annotations

import ctypes
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from evoduet_graph.llm import runtime
from evoduet_graph.llm.prompt_lookup import (
    DraftLength,
    PromptLookup,
    draw,
    find_draft,
    verify_draft,
)

__all__ = [
    "BatchDecoder",
    "DecodeBackend",
    "LlamaBackend",
    "SamplingParams",
    "SequenceRequest",
    "common_prefix",
    "enable_parallel_sequences",
]


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings of one sequence (the fields of ``Llama.create_completion``)."""

    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    seed: int = 0


@dataclass(eq=False)
class SequenceRequest:
    """One completion to decode in a batch, and (once ``done`` is set) its result.

    Attributes:
        prompt: prompt token ids (chat template already applied).
        max_tokens: completion token limit.
        sampling: sampler settings, with the seed already resolved.
        stop: stop strings (the text ends before the first one found).
        text: completion text (set when done).
        completion_tokens: number of completion tokens sampled.
        finish_reason: ``"stop"`` (end of generation or a stop string) or ``"length"``.
        prompt_reused: prompt tokens not evaluated for this sequence (KV cells shared from
            sequence 0's cache or from another sequence of the batch).
        prompt_eval_s: seconds spent evaluating this sequence's own prompt tokens.
        decode_s: seconds from its first sampled token to its last (shared steps included).
        queued_s: seconds from submission to admission into a batch.
        batch_size: most sequences decoded together while this one was live.
        decode_steps: decode steps that sampled tokens for it (its first token's included).
        draft_tokens: tokens drafted for it by prompt lookup (0 with drafting off).
        draft_accepted: drafted tokens accepted.
        error: the exception that ended it, if any.
    """

    prompt: list[int]
    max_tokens: int
    sampling: SamplingParams
    stop: tuple[str, ...] = ()
    text: str = ""
    completion_tokens: int = 0
    finish_reason: str | None = None
    prompt_reused: int = 0
    prompt_eval_s: float = 0.0
    decode_s: float = 0.0
    queued_s: float = 0.0
    batch_size: int = 0
    decode_steps: int = 0
    draft_tokens: int = 0
    draft_accepted: int = 0
    error: BaseException | None = None
    submitted: float = field(default_factory=time.perf_counter)
    done: threading.Event = field(default_factory=threading.Event)


class DecodeBackend(Protocol):
    """What `BatchDecoder` needs from a model context (llama.cpp's semantics)."""

    n_ctx: int
    n_batch: int

    def cached_prefix(self) -> list[int]:
        """Tokens whose KV cells sequence 0 holds, from position 0."""

    def drop_cached(self) -> None:
        """Forget sequence 0's cache (frees its cells)."""

    def adopt(self, seq_id: int, tokens: list[int]) -> None:
        """Make sequence 0's cache the first ``len(tokens)`` cells of ``seq_id``."""

    def seq_cp(self, src: int, dst: int, n: int) -> None:
        """Share the cells of positions ``[0, n)`` of ``src`` with ``dst``."""

    def seq_rm(self, seq_id: int) -> None:
        """Remove every cell of ``seq_id``."""

    def decode(self, tokens: Sequence[tuple[int, int, int, bool]]) -> None:
        """Evaluate ``(token, pos, seq_id, want_logits)`` entries (at most ``n_batch``)."""

    def new_sampler(self, params: SamplingParams) -> Any:
        """A sampler chain for one sequence."""

    def sample(self, sampler: Any, index: int) -> int:
        """Sample (and accept) a token from the logits of entry ``index`` of the last decode."""

    def free_sampler(self, sampler: Any) -> None:
        """Free a sampler chain."""

    # -- prompt-lookup drafting (only called by a decoder with a `PromptLookup`)

    def new_filter(self, params: SamplingParams) -> Any:
        """The sampler chain of ``params`` without its final draw (``dist`` / ``greedy``)."""

    def distribution(self, sampler: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, probabilities)`` the sampler would draw from for entry ``index``.

        Greedy chains give a point mass on the token ``greedy`` would pick.
        """

    def accept_token(self, sampler: Any, token: int) -> None:
        """Tell a filter chain that ``token`` was emitted (repetition penalties)."""

    def truncate(self, seq_id: int, pos: int) -> None:
        """Remove the cells of ``seq_id`` at positions ``pos`` and after."""

    def is_eog(self, token: int) -> bool:
        """Whether ``token`` ends generation."""

    def piece(self, token: int) -> bytes:
        """The bytes of ``token``."""


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(eq=False)
class _Slot:
    req: SequenceRequest
    seq_id: int
    sampler: Any
    tokens: list[int]  # prompt + sampled tokens, in position order
    evaluated: int = 0  # positions [0, evaluated) have KV cells
    out: bytearray = field(default_factory=bytearray)
    started: float = 0.0
    rng: np.random.Generator | None = None  # drafting: draws from the filter's distribution
    length: DraftLength | None = None  # drafting: the adaptive draft length
    follow: int | None = None  # drafting: where the last draft's source continues


class BatchDecoder:
    """Continuous batching over one model context (see the module docstring).

    Args:
        backend: the model context.
        max_sequences: most sequences decoded together (ids ``1..max_sequences``).
        lookup: prompt-lookup drafting settings; None: one token per sequence per step.
    """

    #: A batch starts once no call has joined the queue for this long (at most `GATHER_MAX_S`),
    #: so calls made together (the N ``generate`` threads) start together.
    GATHER_QUIET_S = 0.03
    GATHER_MAX_S = 0.25

    def __init__(
        self, backend: DecodeBackend, max_sequences: int, lookup: PromptLookup | None = None
    ) -> None:
        if max_sequences < 1:
            raise ValueError("max_sequences must be at least 1")
        self.backend = backend
        self.max_sequences = max_sequences
        self.lookup = lookup
        self.steps = 0  # decode steps of the last run (for tests and benches)
        self._adopt: _Slot | None = None  # the run's first request: its prompt becomes seq 0's

    # ---------------------------------------------------------------- capacity

    def _need(self, req: SequenceRequest, shared: int) -> int:
        return len(req.prompt) - shared + req.max_tokens

    def _used(self, slots: dict[int, _Slot]) -> int:
        cached = len(self.backend.cached_prefix())
        return cached + sum(self._need(s.req, s.req.prompt_reused) for s in slots.values())

    # ---------------------------------------------------------------- schedule

    def run(self, queue: deque[SequenceRequest], guard: threading.Lock) -> None:
        """Serve ``queue`` until it is empty and every admitted sequence has finished.

        Requests appended to ``queue`` (under ``guard``) while the batch runs join it at the
        next step when a sequence id and KV room are free. Every request taken from the queue
        has ``done`` set when this returns (with ``error`` on failure); the caller must hold
        the model lock for the whole call.
        """
        slots: dict[int, _Slot] = {}
        self.steps = 0
        self._adopt = None
        self._gather(queue, guard)
        try:
            while True:
                admitted = self._admit(queue, guard, slots)
                if self._adopt is None and admitted:
                    self._adopt = admitted[0]
                if admitted:
                    self._start_round(admitted, slots)
                if not slots:
                    with guard:
                        if not queue:
                            break
                    continue
                self._step(slots)
        except BaseException as exc:
            for slot in list(slots.values()):
                self._finish(slot, slots, None, error=exc)
            raise

    def _gather(self, queue: deque[SequenceRequest], guard: threading.Lock) -> None:
        """Wait until the queue stops growing, then order it by (seed, prompt length).

        The same set of concurrent calls starts in the same order, whichever thread came first.
        """
        deadline = time.perf_counter() + self.GATHER_MAX_S
        with guard:
            seen = len(queue)
        while time.perf_counter() < deadline:
            time.sleep(self.GATHER_QUIET_S)
            with guard:
                now = len(queue)
            if now == seen:
                break
            seen = now
        with guard:
            ordered = sorted(queue, key=lambda r: (r.sampling.seed, len(r.prompt)))
            queue.clear()
            queue.extend(ordered)

    def _admit(
        self, queue: deque[SequenceRequest], guard: threading.Lock, slots: dict[int, _Slot]
    ) -> list[_Slot]:
        admitted: list[_Slot] = []
        with guard:
            while queue and len(slots) + len(admitted) < self.max_sequences:
                req = queue[0]
                if len(req.prompt) >= self.backend.n_ctx:
                    queue.popleft()
                    req.error = ValueError(
                        f"Requested tokens ({len(req.prompt)}) exceed context window of "
                        f"{self.backend.n_ctx}"
                    )
                    req.done.set()
                    continue
                req.max_tokens = max(1, min(req.max_tokens, self.backend.n_ctx - len(req.prompt)))
                # estimate: a prompt like one admitted in this round will share its cells
                peers = [*slots.values(), *admitted]
                shared = max(
                    [self._best_source(req, list(slots.values()))[1]]
                    + [
                        min(common_prefix(p.req.prompt, req.prompt), len(req.prompt) - 1)
                        for p in admitted
                    ]
                )
                pending = {s.seq_id: s for s in peers}
                if self._used(pending) + self._need(req, shared) > self.backend.n_ctx:
                    if pending:
                        break  # wait until a live sequence frees its cells
                    self.backend.drop_cached()  # alone: make room, it then fits
                    shared = 0
                queue.popleft()
                seq_id = min(set(range(1, self.max_sequences + 1)) - set(pending))
                req.prompt_reused = shared  # the estimate; `_start` sets the actual share
                req.queued_s = time.perf_counter() - req.submitted
                slot = _Slot(req=req, seq_id=seq_id, sampler=None, tokens=list(req.prompt))
                admitted.append(slot)
        return admitted

    def _best_source(self, req: SequenceRequest, live: Sequence[_Slot]) -> tuple[int | None, int]:
        """The sequence whose evaluated cells share the longest prefix with ``req``'s prompt.

        ``(0 for Llama's cache, a live sequence id, or None; shared tokens)``. At least one prompt
        token is left to evaluate (its logits give the first sampled token).
        """
        limit = len(req.prompt) - 1
        best: tuple[int | None, int] = (None, 0)
        n = min(common_prefix(self.backend.cached_prefix(), req.prompt), limit)
        if n > 0:
            best = (0, n)
        for slot in live:
            n = min(common_prefix(slot.tokens[: slot.evaluated], req.prompt), limit)
            if n > best[1]:
                best = (slot.seq_id, n)
        return best

    def _start_round(self, admitted: list[_Slot], slots: dict[int, _Slot]) -> None:
        """Start the sequences admitted together.

        For each, share the longest evaluated prefix and evaluate its prompt but the last token;
        then evaluate the last prompt token of all of them in one decode and sample each one's first
        token from it. Every sequence of a round thus gets its first logits from the same
        computation, whichever arrived first, so a fixed seed gives the same reply for the same set
        of concurrent calls.
        """
        backend = self.backend
        ready: list[_Slot] = []
        for slot in admitted:
            req = slot.req
            try:
                if self.lookup is None:
                    slot.sampler = backend.new_sampler(req.sampling)
                else:
                    slot.sampler = backend.new_filter(req.sampling)
                    slot.rng = np.random.default_rng(req.sampling.seed)
                    slot.length = DraftLength.of(self.lookup)
                src, shared = self._best_source(req, [*slots.values(), *ready])
                if src is not None:
                    backend.seq_cp(src, slot.seq_id, shared)
                slot.evaluated = req.prompt_reused = shared
                started = time.perf_counter()
                rest = slot.tokens[shared : len(req.prompt) - 1]
                for i in range(0, len(rest), backend.n_batch):
                    chunk = rest[i : i + backend.n_batch]
                    pos = shared + i
                    backend.decode(
                        [(tok, pos + j, slot.seq_id, False) for j, tok in enumerate(chunk)]
                    )
                slot.evaluated = len(req.prompt) - 1
                req.prompt_eval_s = time.perf_counter() - started
                ready.append(slot)
            except Exception as exc:  # noqa: BLE001 - this request fails, the batch goes on
                self._finish(slot, slots, None, error=exc)
        if not ready:
            return
        started = time.perf_counter()
        try:
            backend.decode([(s.tokens[s.evaluated], s.evaluated, s.seq_id, True) for s in ready])
        except Exception as exc:  # noqa: BLE001 - these requests fail, the batch goes on
            for slot in ready:
                self._finish(slot, slots, None, error=exc)
            return
        last_s = time.perf_counter() - started
        for slot in ready:
            slot.evaluated += 1
            slot.req.prompt_eval_s += last_s
            slot.started = time.perf_counter()
            slots[slot.seq_id] = slot
        for index, slot in enumerate(ready):
            slot.req.batch_size = len(slots)
            slot.req.decode_steps += 1
            self._accept(slot, slots, self._sample(slot, index))

    def _sample(self, slot: _Slot, index: int) -> int:
        """A token for ``slot`` from the logits of entry ``index`` (no draft)."""
        if self.lookup is None:
            return self.backend.sample(slot.sampler, index)
        assert slot.rng is not None
        token = draw(*self.backend.distribution(slot.sampler, index), slot.rng)
        self.backend.accept_token(slot.sampler, token)
        return token

    def _draft(self, slot: _Slot, room: int) -> list[int]:
        """The prompt-lookup draft of ``slot`` for this step (at most ``room`` tokens).

        It stays inside the sequence's KV reservation: accepted whole, plus the token after it,
        it does not pass ``max_tokens`` or the context.
        """
        lookup, req = self.lookup, slot.req
        if lookup is None or slot.length is None:
            return []
        limit = min(
            slot.length.value,
            req.max_tokens - req.completion_tokens - 1,
            self.backend.n_ctx - 1 - slot.evaluated,
            room,
        )
        draft, start = find_draft(
            slot.tokens,
            limit,
            ngram_max=lookup.ngram_max,
            ngram_min=lookup.ngram_min,
            follow=slot.follow,
        )
        slot.follow = start
        return draft

    def _step(self, slots: dict[int, _Slot]) -> None:
        """One decode step: the last sampled token of every live sequence (and its draft)."""
        live = list(slots.values())
        entries: list[tuple[int, int, int, bool]] = []
        plans: list[tuple[_Slot, int, list[int]]] = []
        room = self.backend.n_batch - len(live)
        for slot in live:
            draft = self._draft(slot, room)
            room -= len(draft)
            plans.append((slot, len(entries), draft))
            entries.append((slot.tokens[-1], slot.evaluated, slot.seq_id, True))
            entries += [(t, slot.evaluated + 1 + j, slot.seq_id, True) for j, t in enumerate(draft)]
        try:
            self.backend.decode(entries)
        except Exception as exc:  # noqa: BLE001 - no KV room etc.: these sequences fail
            for slot in live:
                self._finish(slot, slots, None, error=exc)
            return
        self.steps += 1
        for slot, index, draft in plans:
            slot.req.batch_size = max(slot.req.batch_size, len(live))
            slot.req.decode_steps += 1
            if self.lookup is None:
                slot.evaluated += 1
                self._accept(slot, slots, self.backend.sample(slot.sampler, index))
            else:
                self._verify(slot, slots, index, draft)

    def _verify(self, slot: _Slot, slots: dict[int, _Slot], index: int, draft: list[int]) -> None:
        """Keep the accepted prefix of ``slot``'s draft and one more token; drop the rest's cells.

        Entry ``index`` of the last decode holds the logits after the sequence's last token,
        ``index + 1 + i`` those after ``draft[i]``.
        """
        backend, req = self.backend, slot.req
        assert slot.rng is not None and slot.length is not None
        start = slot.evaluated  # position of the token evaluated before the draft
        req.draft_tokens += len(draft)
        emitted = 0

        def distribution(i: int) -> tuple[np.ndarray, np.ndarray]:
            return backend.distribution(slot.sampler, index + i)

        def emit(token: int, drafted: bool) -> bool:
            nonlocal emitted
            emitted += 1
            req.draft_accepted += drafted
            backend.accept_token(slot.sampler, token)
            return self._accept(slot, slots, token)

        accepted = verify_draft(draft, distribution, emit, slot.rng)
        slot.length.update(len(draft), accepted)
        if slot.follow is not None:
            slot.follow += emitted  # where the copy goes on if the next draft continues it
        slot.evaluated = start + 1 + accepted
        if accepted < len(draft) and slot.seq_id in slots and slots[slot.seq_id] is slot:
            backend.truncate(slot.seq_id, slot.evaluated)  # the rejected draft's cells

    def _accept(self, slot: _Slot, slots: dict[int, _Slot], token: int) -> bool:
        """Append a sampled token to its sequence; finish the sequence when it stops.

        Returns whether the sequence goes on.
        """
        req = slot.req
        if self.backend.is_eog(token):
            self._finish(slot, slots, "stop")
            return False
        slot.tokens.append(token)
        slot.out += self.backend.piece(token)
        req.completion_tokens += 1
        if req.stop:
            text = slot.out.decode("utf-8", errors="ignore")
            cut = min((i for i in (text.find(s) for s in req.stop if s) if i >= 0), default=-1)
            if cut >= 0:
                self._finish(slot, slots, "stop", text=text[:cut])
                return False
        if req.completion_tokens >= req.max_tokens:
            self._finish(slot, slots, "length")
            return False
        return True

    def _finish(
        self,
        slot: _Slot,
        slots: dict[int, _Slot],
        reason: str | None,
        *,
        text: str | None = None,
        error: BaseException | None = None,
    ) -> None:
        req = slot.req
        req.text = text if text is not None else slot.out.decode("utf-8", errors="ignore")
        req.finish_reason = reason
        req.error = error
        if slot.started:
            req.decode_s = time.perf_counter() - slot.started
        slots.pop(slot.seq_id, None)
        if slot.sampler is not None:
            self.backend.free_sampler(slot.sampler)
            slot.sampler = None
        if slot is self._adopt and error is None and slot.evaluated >= len(req.prompt):
            # what a sequential call of this prompt would have left in Llama's cache
            self.backend.adopt(slot.seq_id, list(req.prompt))
        self.backend.seq_rm(slot.seq_id)  # its id and cells are free for the next request
        req.done.set()


# --------------------------------------------------------------------------------------------
# llama.cpp backend
# --------------------------------------------------------------------------------------------


def enable_parallel_sequences(llama: Any, n_seq_max: int) -> None:
    """Recreate ``llama``'s context with ``n_seq_max`` sequences in one unified KV cache.

    ``llama_cpp.Llama`` creates its context with one sequence (``n_seq_max`` is not one of its
    arguments); a unified KV cache keeps the whole ``n_ctx`` available to every sequence and
    lets sequences share cells. Call right after construction, before any evaluation.
    """
    params = llama.context_params
    if params.n_seq_max >= n_seq_max and params.kv_unified:
        return
    params.n_seq_max = n_seq_max
    params.kv_unified = True
    ctx = runtime.llama_cpp_module()._internals.LlamaContext(
        model=llama._model, params=params, verbose=llama.verbose
    )
    old, llama._ctx = llama._ctx, ctx
    old.close()
    llama._stack.callback(ctx.close)
    llama.reset()


#: numpy layout of llama.cpp's ``llama_token_data`` (id, logit, p).
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


@dataclass
class _Filter:
    """A sampler chain without its final draw, and whether that draw was ``greedy``."""

    chain: Any  # llama_cpp._internals.LlamaSampler
    greedy: bool


class LlamaBackend:
    """`DecodeBackend` over a ``llama_cpp.Llama`` with several sequences.

    `DecodeBackend` over a ``llama_cpp.Llama`` whose context has several sequences
    (`enable_parallel_sequences`). Not thread-safe: the caller holds the model lock.
    """

    def __init__(self, llama: Any) -> None:
        llama_cpp = runtime.llama_cpp_module()
        self._lib = llama_cpp
        self.llama = llama
        self.n_ctx = llama.n_ctx()
        self.n_batch = llama.n_batch
        self._vocab = llama._model.vocab
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self._pieces: dict[int, bytes] = {}
        self._n_vocab = int(llama._n_vocab)
        self._ids = np.arange(self._n_vocab, dtype=np.int32)
        self._candidates = np.zeros(self._n_vocab, dtype=_TOKEN_DATA)  # llama_token_data[]

    def close(self) -> None:
        """Free the batch buffer."""
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None

    def cached_prefix(self) -> list[int]:
        """Tokens whose KV cells sequence 0 holds (``Llama``'s own cache)."""
        return cast(list[int], self.llama._input_ids.tolist())  # ndarray.tolist() is untyped

    def drop_cached(self) -> None:
        """Forget sequence 0's cache."""
        self.llama._ctx.kv_cache_seq_rm(0, 0, -1)
        self.llama.reset()

    def adopt(self, seq_id: int, tokens: list[int]) -> None:
        """Make sequence 0's cache the first ``len(tokens)`` cells of ``seq_id``."""
        llama = self.llama
        llama._ctx.kv_cache_seq_rm(0, 0, -1)
        llama._ctx.kv_cache_seq_cp(seq_id, 0, 0, len(tokens))
        llama.input_ids[: len(tokens)] = tokens
        llama.n_tokens = len(tokens)
        llama._requires_eval = True  # the context's logits are not this prompt's

    def seq_cp(self, src: int, dst: int, n: int) -> None:
        """Share the cells of positions ``[0, n)`` of ``src`` with ``dst``."""
        self.llama._ctx.kv_cache_seq_cp(src, dst, 0, n)

    def seq_rm(self, seq_id: int) -> None:
        """Remove every cell of ``seq_id`` (never 0: it belongs to ``llama_cpp.Llama``)."""
        if seq_id == 0:
            raise ValueError("sequence 0 belongs to llama_cpp.Llama")
        self._lib.llama_memory_seq_rm(self.llama._ctx.memory, seq_id, -1, -1)

    def decode(self, tokens: Sequence[tuple[int, int, int, bool]]) -> None:
        """Evaluate ``(token, pos, seq_id, want_logits)`` entries in one ``llama_decode``."""
        batch = self._batch
        if len(tokens) > self.n_batch:
            raise ValueError(f"{len(tokens)} tokens exceed the batch size {self.n_batch}")
        batch.n_tokens = len(tokens)
        for i, (tok, pos, seq_id, logits) in enumerate(tokens):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq_id
            batch.logits[i] = logits
        rc = self._lib.llama_decode(self.llama._ctx.ctx, batch)
        self.llama._requires_eval = True  # Llama's own "current logits" are gone
        if rc != 0:
            raise RuntimeError(
                f"llama_decode returned {rc}"
                + (" (no room left in the KV cache)" if rc == 1 else "")
            )

    def new_sampler(self, params: SamplingParams) -> Any:
        """The chain ``Llama._init_sampler`` builds (same order, same defaults)."""
        sampler = self._filter_chain(params)
        if params.temperature < 0.0 or params.temperature > 0.0:
            sampler.add_dist(params.seed)
        else:
            sampler.add_greedy()
        return sampler

    def new_filter(self, params: SamplingParams) -> Any:
        """`new_sampler`'s chain without its last stage (``dist`` or ``greedy``)."""
        return _Filter(self._filter_chain(params), greedy=params.temperature == 0.0)

    def _filter_chain(self, params: SamplingParams) -> Any:
        """Penalties, then (at a positive temperature) top-k, typical, top-p, min-p, temp."""
        sampler = self._lib._internals.LlamaSampler()
        sampler.add_penalties(
            n_vocab=self.llama._n_vocab,
            penalty_last_n=self.llama.last_n_tokens_size,
            penalty_repeat=params.repeat_penalty,
            penalty_freq=0.0,
            penalty_present=0.0,
        )
        if params.temperature > 0.0:
            sampler.add_top_k(params.top_k)
            sampler.add_typical(1.0, 1)
            sampler.add_top_p(params.top_p, 1)
            sampler.add_min_p(params.min_p, 1)
            sampler.add_temp(params.temperature)
        return sampler

    def sample(self, sampler: Any, index: int) -> int:
        """Sample (and accept) a token from the logits of entry ``index``."""
        return int(self._lib.llama_sampler_sample(sampler.sampler, self.llama._ctx.ctx, index))

    def distribution(self, sampler: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
        """What the full chain's last stage would draw from for entry ``index``.

        The filter chain runs in llama.cpp over every token's logit, as in
        ``llama_sampler_sample``; the probabilities are the softmax of the logits it leaves
        (what ``dist`` computes), or a point mass on the first largest one (``greedy``).
        """
        lib = self._lib
        logits = lib.llama_get_logits_ith(self.llama._ctx.ctx, index)
        if not logits:
            raise RuntimeError(f"no logits for batch entry {index}")
        cand = self._candidates
        cand["id"] = self._ids
        cand["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
        cand["p"] = 0.0
        cur = lib.llama_token_data_array(
            data=cand.ctypes.data_as(lib.llama_token_data_p),
            size=self._n_vocab,
            selected=-1,
            sorted=False,
        )
        lib.llama_sampler_apply(sampler.chain.sampler, ctypes.byref(cur))
        n = int(cur.size)
        address = ctypes.cast(cur.data, ctypes.c_void_p).value  # samplers may move the data
        if n == 0 or not address:
            raise RuntimeError("the sampler chain left no candidate token")
        raw = (ctypes.c_char * (n * _TOKEN_DATA.itemsize)).from_address(address)
        kept = np.frombuffer(memoryview(raw), dtype=_TOKEN_DATA)
        if sampler.greedy:
            best = int(np.argmax(kept["logit"]))
            return np.array([kept["id"][best]]), np.ones(1)
        scores = kept["logit"].astype(np.float64)
        probs = np.exp(scores - scores.max())
        return kept["id"].copy(), probs / probs.sum()

    def accept_token(self, sampler: Any, token: int) -> None:
        """Tell the filter chain that ``token`` was emitted (its penalties' history)."""
        self._lib.llama_sampler_accept(sampler.chain.sampler, token)

    def truncate(self, seq_id: int, pos: int) -> None:
        """Remove the cells of ``seq_id`` at positions ``pos`` and after."""
        if seq_id == 0:
            raise ValueError("sequence 0 belongs to llama_cpp.Llama")
        if not self._lib.llama_memory_seq_rm(self.llama._ctx.memory, seq_id, pos, -1):
            raise RuntimeError(f"llama.cpp could not remove positions >= {pos} of {seq_id}")

    def free_sampler(self, sampler: Any) -> None:
        """Free a sampler chain (or a filter's)."""
        (sampler.chain if isinstance(sampler, _Filter) else sampler).close()

    def is_eog(self, token: int) -> bool:
        """Whether ``token`` ends generation."""
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    def piece(self, token: int) -> bytes:
        """The bytes of ``token`` (cached)."""
        piece = self._pieces.get(token)
        if piece is None:
            size = 32
            while True:
                buf = ctypes.create_string_buffer(size)
                n = self._lib.llama_token_to_piece(self._vocab, token, buf, size, 0, False)
                if n >= 0:
                    break
                size = -n  # the piece needs this many bytes
            piece = self._pieces[token] = buf.raw[:n]
        return piece


def resolve_seed(llama: Any, seed: int | None) -> int:
    """The seed a sequential ``create_completion`` call would use.

    The seed a sequential ``create_completion`` call would use, advancing ``llama``'s seed
    stream the same way (``seed`` given: that seed; None: drawn from the previous one).
    """
    if seed is None:
        seed = random.Random(llama._seed).randint(0, 2**32)
    llama.set_seed(seed)
    return seed


def new_request(
    prompt: list[int],
    *,
    max_tokens: int,
    sampling: SamplingParams,
    stop: Sequence[str] = (),
    clock: Callable[[], float] = time.perf_counter,
) -> SequenceRequest:
    """A `SequenceRequest` stamped with its submission time."""
    return SequenceRequest(
        prompt=list(prompt),
        max_tokens=max_tokens,
        sampling=sampling,
        stop=tuple(stop),
        submitted=clock(),
    )

"""A small bounded in-memory prompt cache for the embedded model.

Within an iteration the gate, ``construct_query``, ``hypothetical_score`` and ``generate``
calls share a prefix (the run's system message and the context c_t). llama.cpp's live context
keeps only what the *previous* call evaluated; a call whose prompt shares more with an earlier
call than with the previous one evaluates that shared part again. llama-cpp-python's
``LlamaRAMCache`` (set with ``Llama.set_cache``) keeps the states of the last calls: before a
completion ``Llama._create_completion`` looks up the entry whose key (the tokens of an earlier
call, prompt and completion) shares the longest prefix with the new prompt, and loads that state
(``Llama.load_state``: llama.cpp's KV cells and ``input_ids``) when its prefix match is longer
than the live context's; after the completion it saves the new state under its tokens.

`PromptStateCache` is that ``LlamaRAMCache`` with two deliberate deviations, both about memory:

* its capacity counts what an entry really holds: llama.cpp's state *and* the arrays
  llama-cpp-python copies beside it (``LlamaRAMCache.cache_size`` counts the llama.cpp state
  alone, so "capacity" undercounted each entry by the logits copy);
* an entry keeps only the last row of the logits copy. ``Llama.save_state`` copies
  ``Llama.scores`` (``n_batch`` × vocabulary floats: 297 MiB for Qwen2.5 with ``n_batch=512``,
  more than three times the ~90 MiB of KV state of a 3,000-token prompt), but nothing reads those
  rows after a load: ``load_state`` sets ``_requires_eval`` and ``Llama.generate`` then
  evaluates at least the prompt's last token again, which writes fresh logits before any
  sampling. ``load_state`` broadcasts the kept row over the rows it restores.

The copy is still made by ``save_state`` on every sequential call (a transient allocation the
cache frees at once); only what the cache keeps is trimmed.

`reuse_source` replays llama-cpp-python's load decision to count the prompt tokens a call did not
evaluate, whether they came from the live context or from a cache entry.

Only the sequential path (``Llama.create_chat_completion``: the JSON-grammar calls, and every
call with ``local_parallel: 1``) uses the cache. The batched free-text path
(`evoduet_graph.llm.batching`) bypasses ``_create_completion``: it neither loads nor saves
entries and shares prefixes from the live context and its own sequences only. The two cannot
corrupt each other: both run under the model lock, a batch removes its sequences before it
returns (so a saved or loaded state only ever holds sequence 0), ``load_state`` copies an
entry's arrays (the live ``input_ids`` is never an entry's), and a batch reads the live
context's tokens afresh (``Llama._input_ids``) after a load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_cpp.llama_cache import LlamaRAMCache

from evoduet_graph.llm.batching import common_prefix

__all__ = ["MIB", "PromptStateCache", "entry_bytes", "reuse_source"]

MIB = 1 << 20


def entry_bytes(state: Any) -> int:
    """Memory one cache entry holds: llama.cpp's state plus the token and logits arrays."""
    return int(state.llama_state_size) + int(state.input_ids.nbytes) + int(state.scores.nbytes)


class PromptStateCache(LlamaRAMCache):
    """``LlamaRAMCache`` bounded by the memory its entries really hold.

    Least-recently-used entries are dropped until the entries fit ``capacity_bytes`` (an entry
    larger than the capacity is not kept). See the module docstring for the two deviations from
    ``LlamaRAMCache`` (true entry size, logits copy trimmed to its last row).

    Args:
        capacity_bytes: the most bytes the entries may hold together (> 0).

    Raises:
        ValueError: a capacity that is not a positive number of bytes.
    """

    def __init__(self, capacity_bytes: int) -> None:
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int):
            raise ValueError(f"capacity_bytes must be an int, got {capacity_bytes!r}")
        if capacity_bytes <= 0:
            raise ValueError(f"capacity_bytes must be positive, got {capacity_bytes}")
        super().__init__(capacity_bytes=capacity_bytes)

    @property
    def cache_size(self) -> int:
        """Bytes the entries hold (`entry_bytes` summed)."""
        return sum(entry_bytes(state) for state in self.cache_state.values())

    def __setitem__(self, key: Sequence[int], value: Any) -> None:
        """Keep ``value`` (a ``LlamaState``) with its logits copy cut to the last row."""
        if value.scores.ndim == 2 and value.scores.shape[0] > 1:
            # a copy that owns its row (a view would keep the whole copy alive through .base)
            value.scores = value.scores[-1:].copy()
        super().__setitem__(key, value)

    def clear(self) -> None:
        """Drop every entry."""
        self.cache_state.clear()


def reuse_source(
    live: Sequence[int],
    entries: Sequence[tuple[Sequence[int], Any]],
    prompt: Sequence[int],
) -> tuple[list[int], bool]:
    """The tokens a call's prompt is matched against, replaying llama-cpp-python's cache lookup.

    ``Llama._create_completion`` takes the entry whose key shares the longest prefix with the
    prompt (the first such key in the cache's order), compares the prefix match of that entry's
    token array with the live context's, and loads the entry only when it is longer.
    ``Llama.generate`` then keeps the common prefix of those tokens with the prompt
    (`evoduet_graph.llm.local.common_prefix_length` counts it).

    Args:
        live: the tokens the live context held before the call (``Llama._input_ids``).
        entries: the cache's ``(key, LlamaState)`` pairs before the call, in the cache's order.
        prompt: the call's prompt tokens.

    Returns:
        ``(the live tokens or the loaded entry's, whether an entry was loaded)``.
    """
    best_key_match, chosen = 0, None
    for key, state in entries:
        n = common_prefix(key, prompt)
        if n > best_key_match:
            best_key_match, chosen = n, state
    # the library compares the entry's whole token array (stale slots past n_tokens included)
    if chosen is not None and common_prefix(chosen.input_ids.tolist(), prompt) > common_prefix(
        live, prompt
    ):
        return chosen.input_ids[: chosen.n_tokens].tolist(), True
    return list(live), False

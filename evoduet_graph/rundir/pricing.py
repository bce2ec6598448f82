"""What a run's model calls and searches cost (docs/design.md §6): the one home for prices.

LLM prices come from `genai-prices`, a maintained catalogue of LLM inference API prices that
ships its data with the package (nothing is fetched at run time), overridden or extended by
``budget.prices`` in the configuration (model name or prefix → ``[USD per 1M input tokens, USD
per 1M output tokens]``; the longest matching key wins, and an override beats the catalogue).
The embedded ``local`` model costs USD 0, and so does a provider that runs on the user's own
machine (``ollama:``). A provider's model string (``anthropic:claude-...``) is priced by that
provider's entry in the catalogue (`evoduet_graph.llm.providers.Quirks.price_provider`), also
behind a ``base_url`` (a gateway of that provider); only ``openai:`` with a ``base_url`` is
priced by the URL's provider. Input tokens read from a provider's prompt cache are priced at
the catalogue's cache-read price (e.g. a tenth of the input price for Claude). A model
neither catalogue nor override knows (a self-hosted model behind an OpenAI-compatible server,
a test fake) is *unpriced*: its cost is None (``n/a`` in reports), and a
``budget.max_cost_usd`` cannot stop it.

Search calls cost credits on the Tavily backend: one per ``basic`` search, two per
``advanced`` one (``retrieval.tavily_search_depth``; Tavily's published credit table). The
offline backend is free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from genai_prices import Usage, calc_price

from evoduet_graph.llm.providers import PROVIDERS, provider_of, quirks_for

__all__ = [
    "LOCAL_MODELS",
    "TAVILY_CREDITS",
    "ModelPrice",
    "cost_usd",
    "model_name",
    "price_for",
    "search_credits",
]

LOCAL_MODELS = frozenset({"local"})
"""Model strings of the embedded model: they cost USD 0."""

TAVILY_CREDITS = {"basic": 1, "advanced": 2}
"""Tavily API credits per search, by ``search_depth``."""

_PROBE_TOKENS = 1_000_000


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1M input and output tokens of one model, and where the price came from.

    Attributes:
        input_per_mtok / output_per_mtok: USD per million input / output tokens.
        source: ``local`` (the embedded model or a model on the user's machine: 0),
            ``config`` (``budget.prices``) or ``genai-prices`` (the catalogue).
        cache_read_per_mtok: USD per million input tokens read from the provider's prompt
            cache (None: the input price).
    """

    input_per_mtok: float
    output_per_mtok: float
    source: Literal["local", "config", "genai-prices"]
    cache_read_per_mtok: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """USD for the given token counts (``cached_input_tokens`` is part of the input)."""
        cached = max(0, min(cached_input_tokens, input_tokens))
        cache_price = (
            self.input_per_mtok if self.cache_read_per_mtok is None else self.cache_read_per_mtok
        )
        return (
            (input_tokens - cached) * self.input_per_mtok
            + cached * cache_price
            + output_tokens * self.output_per_mtok
        ) / 1e6


def model_name(model: str) -> str:
    """The bare model name of a model string.

    The bare model name: ``openai:gpt-4o-mini`` and ``openai:openai/gpt-4o-mini``
    (OpenRouter style) both give ``gpt-4o-mini``; only a provider's prefix is removed
    (``ollama:qwen2.5-coder:7b`` and the name Ollama answers with, ``qwen2.5-coder:7b``, give
    the same name).
    """
    name = model.strip()
    if provider_of(name) is not None:
        name = name.split(":", 1)[1]
    return name.rsplit("/", 1)[-1].strip().lower()


def _catalogue_price(model: str, base_url: str | None) -> ModelPrice | None:
    """The catalogue's current list price of ``model`` (None when it does not know it).

    The provider is the model string's prefix (``openai:`` → OpenAI) when the endpoint is the
    provider's own (``base_url`` None); with another ``base_url`` the catalogue must know that
    URL's provider (OpenRouter, DeepSeek, ...), so a self-hosted server that serves a model
    under a catalogue name stays unpriced instead of getting a cloud price.
    """
    prefix = provider_of(model)
    provider_id = prefix
    if prefix is not None and prefix != "openai":
        base_url = None  # a gateway of the provider: the provider's price
        provider_id = quirks_for(prefix).price_provider

    def price(usage: Usage, name: str) -> Any:
        if base_url:
            return calc_price(usage, name, provider_api_url=base_url)
        return calc_price(usage, name, provider_id=provider_id)

    full = model.strip()
    if prefix is not None:
        full = full.split(":", 1)[1]
    full = full.strip().lower()  # OpenRouter names: ``openai/gpt-4o``
    for name in dict.fromkeys([full, model_name(model)]):
        try:
            inp = price(Usage(input_tokens=_PROBE_TOKENS, output_tokens=0), name)
            out = price(Usage(input_tokens=0, output_tokens=_PROBE_TOKENS), name)
            cached = price(Usage(input_tokens=_PROBE_TOKENS, cache_read_tokens=_PROBE_TOKENS), name)
        except (LookupError, ValueError):
            continue
        return ModelPrice(
            float(inp.total_price),
            float(out.total_price),
            "genai-prices",
            cache_read_per_mtok=float(cached.total_price),
        )
    return None


def price_for(
    model: str,
    overrides: Mapping[str, tuple[float, float]] | None = None,
    base_url: str | None = None,
) -> ModelPrice | None:
    """The price of ``model`` (a configured model string such as ``openai:gpt-4o-mini``).

    Args:
        model: the configured model string.
        overrides: ``budget.prices``: model name or prefix → (USD per 1M input, per 1M output).
        base_url: ``llm.base_url`` (None: the provider's own endpoint).

    Returns:
        ``local`` (and a provider on the user's machine, ``ollama:``): 0/0; else the
        override with the longest key that prefixes the model's name;
        else the catalogue's price (the catalogue matches dated names such as
        ``gpt-4o-mini-2024-07-18`` itself); else None (unpriced).
    """
    provider = provider_of(model)
    if model.strip().lower() in LOCAL_MODELS or (provider and PROVIDERS[provider].free):
        return ModelPrice(0.0, 0.0, "local")
    name = model_name(model)
    table = {model_name(k): v for k, v in (overrides or {}).items()}
    best = max((k for k in table if name.startswith(k)), key=len, default=None)
    if best is not None:
        inp, out = table[best]
        return ModelPrice(float(inp), float(out), "config")
    return _catalogue_price(model, base_url)


def cost_usd(
    model: str,
    input_tokens: int,
    output_tokens: int,
    overrides: Mapping[str, tuple[float, float]] | None = None,
    base_url: str | None = None,
    cached_input_tokens: int = 0,
) -> float | None:
    """USD for ``input_tokens`` / ``output_tokens`` of ``model``.

    USD for ``input_tokens`` (``cached_input_tokens`` of them read from the prompt cache) and
    ``output_tokens`` of ``model`` (0 for ``local``; None when the model is unpriced: see
    `price_for`).
    """
    price = price_for(model, overrides, base_url)
    if price is None:
        return None
    return price.cost(input_tokens, output_tokens, cached_input_tokens)


def search_credits(backend: str | None, calls: int, depth: str | None = "basic") -> int | None:
    """Tavily API credits of ``calls`` searches (None for other backends: no credits)."""
    if backend != "tavily":
        return None
    return calls * TAVILY_CREDITS.get(depth or "basic", TAVILY_CREDITS["basic"])

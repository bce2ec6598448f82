"""`evoduet_graph.rundir.pricing`: USD per model, and the report's cost lines.

Prices come from the genai-prices catalogue or ``budget.prices``, 0 for the embedded model; the
cost lines are checked for a priced fake model and the local one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.report.markdown import report_markdown
from evoduet_graph.report.summary import run_summary
from evoduet_graph.rundir.pricing import cost_usd, price_for, search_credits
from tests.conftest import RADIUS_UP, SMOKE_TASK
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel


def test_local_model_is_free() -> None:
    price = price_for("local")
    assert price is not None and price.source == "local"
    assert cost_usd("local", 10_000, 5_000) == 0.0


def test_catalogue_prices_openai_models_including_dated_and_openrouter_names() -> None:
    expected = calc_price(Usage(input_tokens=1000, output_tokens=200), "gpt-4o-mini")
    for model in ("openai:gpt-4o-mini", "openai:gpt-4o-mini-2024-07-18"):
        price = price_for(model)
        assert price is not None and price.source == "genai-prices"
        assert cost_usd(model, 1000, 200) == pytest.approx(float(expected.total_price))
    mini = price_for("openai:gpt-4o-mini")
    assert price_for("openai:gpt-4o").input_per_mtok > mini.input_per_mtok
    openrouter = "https://openrouter.ai/api/v1"
    assert price_for("openai:openai/gpt-4.1-mini", base_url=openrouter).source == "genai-prices"


def test_unpriced_models_and_config_overrides() -> None:
    assert price_for("openai:my-fake-model") is None
    assert cost_usd("openai:my-fake-model", 1000, 1000) is None
    # a self-hosted server that serves a catalogue name is not priced as the cloud model
    assert price_for("openai:gpt-4o-mini", base_url="http://127.0.0.1:8000/v1") is None
    overrides = {"my-fake": (2.0, 8.0)}
    price = price_for("openai:my-fake-model", overrides)
    assert price is not None and price.source == "config"
    assert cost_usd("openai:my-fake-model", 1_000_000, 500_000, overrides) == pytest.approx(6.0)
    # an override beats the catalogue; the longest key wins
    assert price_for("openai:gpt-4o-mini", {"gpt-4o": (9.0, 9.0)}).input_per_mtok == 9.0
    both = {"gpt-4o": (9.0, 9.0), "gpt-4o-mini": (1.0, 1.0)}
    assert price_for("openai:gpt-4o-mini", both).input_per_mtok == 1.0


def test_tavily_credits() -> None:
    assert search_credits("tavily", 5, "basic") == 5
    assert search_credits("tavily", 5, "advanced") == 10
    assert search_credits("offline", 5) is None


def _run(tmp_path: Path, model: str, **extra) -> Path:
    responder = KnowledgeResponder(gate="retrieve", generate=RADIUS_UP)
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": 2,
            "population": {"num_islands": 1},
            "evaluation": {"workers": 1},
            "gate": {"mode": "llm"},
            "retrieval": {"inner_rounds": 1, "search_retries": 0},
            "novelty": {"enabled": False},
            "llm": {"model": model},
            **extra,
        }
    )
    rdir = tmp_path / "run"
    llm = ScriptedChatModel(responses=[], default=responder)
    run(SMOKE_TASK, cfg, llm=llm, run_dir=rdir, searcher=FakeSearcher())
    return rdir


def test_report_computes_usd_for_a_priced_fake_model_without_a_budget(tmp_path: Path) -> None:
    rdir = _run(tmp_path, "openai:gpt-4o-mini")
    s = run_summary(rdir)
    total = s.llm.total
    assert total.input_tokens > 0 and total.output_tokens > 0
    expected = calc_price(
        Usage(input_tokens=int(total.input_tokens), output_tokens=int(total.output_tokens)),
        "gpt-4o-mini",
    )
    cost = s.cost
    assert cost.price_source == "genai-prices"
    assert cost.llm_usd == pytest.approx(float(expected.total_price))
    assert cost.search_calls == 2 and cost.search_backend == "offline"
    assert cost.search_credits is None
    text = report_markdown(rdir)
    assert f"| LLM cost (USD) | ${cost.llm_usd:.6f} |" in text
    assert "| search calls (failed) | 2 (0) |" in text


def test_report_uses_the_config_price_override(tmp_path: Path) -> None:
    rdir = _run(tmp_path, "openai:my-fake-model", budget={"prices": {"my-fake": [3.0, 6.0]}})
    s = run_summary(rdir)
    total = s.llm.total
    assert s.cost.price_source == "config"
    assert s.cost.llm_usd == pytest.approx(
        (total.input_tokens * 3.0 + total.output_tokens * 6.0) / 1e6
    )


def test_report_of_the_local_model_costs_zero(tmp_path: Path) -> None:
    rdir = _run(tmp_path, "local")
    s = run_summary(rdir)
    assert s.cost.llm_usd == 0.0 and s.cost.price_source == "local"
    assert "| LLM cost (USD) | $0.000000 |" in report_markdown(rdir)


def test_report_of_an_unpriced_model_says_so(tmp_path: Path) -> None:
    rdir = _run(tmp_path, "openai:my-fake-model")
    assert run_summary(rdir).cost.llm_usd is None
    assert "n/a (unpriced model)" in report_markdown(rdir)


def test_usage_cost_prices_each_model_on_its_own() -> None:
    """`budget.usage_cost`: every answered model at its own price through `price_for`.

    A name only a configured model string knows takes that string's price; an unpriced role model is
    None (0 in the total); usage without a model name and injected names at the run's model.
    """
    from evoduet_graph.rundir.budget import usage_cost
    from evoduet_graph.rundir.usage import UsageTotals

    prices = {"strong": (10.0, 20.0), "cheap": (1.0, 2.0)}
    totals = UsageTotals(
        input_tokens=4000,
        output_tokens=400,
        by_model={
            "cheap": {"calls": 1, "input_tokens": 1000, "output_tokens": 100},
            "free": {"calls": 1, "input_tokens": 1000, "output_tokens": 100},
            "ScriptedChatModel": {"calls": 1, "input_tokens": 1000, "output_tokens": 100},
        },
    )
    total, per_model = usage_cost(
        totals, "openai:strong", prices, "http://127.0.0.1:9/v1", ["openai:cheap", "openai:free"]
    )
    assert per_model["cheap"] == pytest.approx((1000 * 1.0 + 100 * 2.0) / 1e6)
    assert per_model["free"] is None  # a role model nobody prices
    assert per_model["ScriptedChatModel"] == pytest.approx((1000 * 10.0 + 100 * 20.0) / 1e6)
    # the 1000 / 100 tokens no event attributed to a model: the run's model
    assert per_model["openai:strong"] == pytest.approx((1000 * 10.0 + 100 * 20.0) / 1e6)
    assert total == pytest.approx(
        per_model["cheap"] + per_model["ScriptedChatModel"] + per_model["openai:strong"]
    )

"""Budgets: LLM calls, tokens, estimated cost and wall time.

A limit stops the run cleanly after the iteration in flight, resumably, with the reason in the
result, the events and the report; usage totals are counted from ``events.jsonl`` so they survive
resume.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.config import BudgetConfig
from evoduet_graph.report.markdown import report_markdown
from evoduet_graph.rundir.budget import STOP_PREFIX, Budget
from evoduet_graph.rundir.events import EventLog, read_events
from evoduet_graph.rundir.pricing import price_for
from evoduet_graph.rundir.usage import usage_from_events
from tests.conftest import SMOKE_TASK
from tests.fakes import ScriptedChatModel
from tests.fault_harness import InProcessEvaluator, parent_parameters, smoke_program


def _rewrite(messages: Any) -> str:
    radius, spread = parent_parameters(str(messages[-1].content))
    return f"```python\n{smoke_program(min(1.0, radius + 0.02), spread)}```"


def _slow_rewrite(messages: Any) -> str:
    time.sleep(1.0)
    return _rewrite(messages)


def _cfg(budget: dict[str, Any], **extra: Any) -> EvoDuetConfig:
    data: dict[str, Any] = {
        "iterations": 10,
        "gate": {"mode": "never"},  # the baseline: one model call per iteration, counted
        "population": {"num_islands": 2},
        "prompt": {"diff_based": False},
        "budget": budget,
        # a parent picked twice yields the same child: evaluate it (no novelty resample), so
        # one iteration is one model call
        "novelty": {"enabled": False},
    }
    data.update(extra)
    return EvoDuetConfig.model_validate(data)


def _run(cfg: EvoDuetConfig, run_dir: Path, answer: Any = _rewrite, **kw: Any) -> Any:
    llm = ScriptedChatModel(responses=[], default=answer)
    result = run(
        load_task(SMOKE_TASK),
        cfg,
        llm=llm,
        evaluator=InProcessEvaluator(SMOKE_TASK),
        run_dir=run_dir,
        **kw,
    )
    return result, llm


def test_no_budget_means_no_checks(tmp_path: Path) -> None:
    cfg = _cfg({}, iterations=2)
    result, _ = _run(cfg, tmp_path / "run")
    assert result.stop_reason is None and result.iterations == 2
    assert not [e for e in read_events(tmp_path / "run" / "events.jsonl") if e["event"] == "budget"]


def test_max_llm_calls_stops_after_the_iteration_in_flight(tmp_path: Path) -> None:
    result, llm = _run(_cfg({"max_llm_calls": 3}), tmp_path / "run")
    assert result.iterations == 3 and llm.calls == 3
    assert result.stop_reason and result.stop_reason.startswith(STOP_PREFIX)
    assert "3 LLM calls" in result.stop_reason and "budget.max_llm_calls=3" in result.stop_reason
    budget_events = [
        e for e in read_events(tmp_path / "run" / "events.jsonl") if e["event"] == "budget"
    ]
    assert [e["llm_calls"] for e in budget_events] == [1, 2, 3]
    assert "budget reached" in report_markdown(tmp_path / "run")


def test_usage_totals_survive_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first, _ = _run(_cfg({"max_llm_calls": 5}, iterations=2), run_dir)
    assert first.iterations == 2 and first.stop_reason is None
    # a new session (new process state: the budget is rebuilt from events.jsonl)
    second, llm = _run(_cfg({"max_llm_calls": 5}), run_dir)
    assert second.iterations == 5 and llm.calls == 3
    assert second.stop_reason and "5 LLM calls" in second.stop_reason
    # resuming a run that has spent its budget stops at once, without another call
    third, llm = _run(_cfg({"max_llm_calls": 5}), run_dir)
    assert llm.calls == 0 and third.iterations == 5
    assert third.stop_reason and third.stop_reason.startswith(STOP_PREFIX)
    # raising the limit continues it
    fourth, llm = _run(_cfg({"max_llm_calls": 7}), run_dir)
    assert fourth.iterations == 7 and llm.calls == 2
    totals = usage_from_events(read_events(run_dir / "events.jsonl"))
    assert totals.llm_calls == 7


def test_max_tokens(tmp_path: Path) -> None:
    result, llm = _run(_cfg({"max_tokens": 1}), tmp_path / "run")
    assert result.iterations == 1 and llm.calls == 1
    assert result.stop_reason and "tokens (budget.max_tokens=1)" in result.stop_reason


def test_max_cost_usd_with_built_in_and_configured_prices(tmp_path: Path) -> None:
    priced = {"llm": {"model": "openai:gpt-4o-mini"}}
    result, _ = _run(_cfg({"max_cost_usd": 1e-9}, **priced), tmp_path / "a")
    assert result.iterations == 1
    assert result.stop_reason and "estimated cost" in result.stop_reason
    # an unpriced model costs nothing: the cost limit never triggers
    result, _ = _run(
        _cfg({"max_cost_usd": 1e-9}, iterations=2, llm={"model": "openai:mine"}), tmp_path / "b"
    )
    assert result.stop_reason is None
    # ... unless the config prices it
    cfg = _cfg({"max_cost_usd": 1e-9, "prices": {"mine": [1.0, 1.0]}}, llm={"model": "openai:mine"})
    result, _ = _run(cfg, tmp_path / "c")
    assert result.iterations == 1 and "estimated cost" in (result.stop_reason or "")


def test_max_wall_s(tmp_path: Path) -> None:
    # the initial evaluation must fit in the budget even on a loaded machine; each iteration
    # then takes >= 1 s, so the budget is reached after a few iterations, never all ten
    result, _ = _run(_cfg({"max_wall_s": 3.0}), tmp_path / "run", answer=_slow_rewrite)
    assert 1 <= result.iterations < 10
    assert result.stop_reason and "wall time" in result.stop_reason


def test_budget_counts_previous_sessions_from_events(tmp_path: Path) -> None:
    events = EventLog(tmp_path / "events.jsonl")
    events.emit("run_start")
    events.emit("node", node="gate", llm_calls=2, input_tokens=100, output_tokens=10)
    events.emit("node", node="query_evolution", llm_calls=4, input_tokens=400, output_tokens=40)
    events.emit("node", node="construct_query", llm_calls=4, input_tokens=400, output_tokens=40)
    budget = Budget(BudgetConfig(max_llm_calls=10), "openai:gpt-4o", EventLog(events.path))
    totals = budget.totals()
    assert (totals.llm_calls, totals.input_tokens, totals.output_tokens) == (6, 500, 50)
    price = price_for("openai:gpt-4o")  # the catalogue's (pricing has its own tests)
    assert totals.cost_usd == pytest.approx(price.cost(500, 50)) and totals.cost_usd > 0
    assert budget.exceeded() is None
    assert Budget(BudgetConfig(max_llm_calls=6), "local", EventLog(events.path)).exceeded()


def test_cli_budget_stop_is_a_clean_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from evoduet_graph.cli import app
    from tests.fake_openai_server import FaultyServer, last_user_text

    def answer(body: dict[str, Any]) -> str:
        radius, spread = parent_parameters(last_user_text(body))
        return f"```python\n{smoke_program(min(1.0, radius + 0.02), spread)}```"

    monkeypatch.chdir(tmp_path)
    with FaultyServer(["ok"], content=answer) as server:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(
            f"budget: {{max_llm_calls: 2}}\nprompt: {{diff_based: false}}\n"
            f"llm: {{model: 'openai:m', base_url: '{server.base_url}', max_retries: 0}}\n"
        )
        result = CliRunner().invoke(
            app,
            [
                "run",
                str(SMOKE_TASK),
                "--iterations",
                "6",
                "--quiet",
                "--config",
                str(cfg),
                "--out",
                str(tmp_path / "run"),
            ],
        )
    assert result.exit_code == 0, result.output
    assert "stopped early" in result.output and "budget reached" in result.output

"""The budget keeps running totals.

Each event is folded in once, and a file-backed event log keeps nothing in memory (a long run is
O(n), not O(n²)).
"""

from __future__ import annotations

from pathlib import Path

from evoduet_graph.config import BudgetConfig
from evoduet_graph.rundir.budget import Budget
from evoduet_graph.rundir.events import EventLog, read_events
from evoduet_graph.rundir.usage import UsageTotals, usage_from_events


def _node(log: EventLog, i: int) -> None:
    log.emit(
        "node",
        node="generate" if i % 3 else "retrieve",  # retrieve includes its subgraph: not counted
        iteration=i,
        llm_calls=1,
        input_tokens=10 + i,
        output_tokens=5,
        llm_by_model={"m": {"calls": 1, "input_tokens": 10 + i, "output_tokens": 5}},
    )


def test_budget_totals_match_a_full_recount_across_sessions(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    first = EventLog(path)
    first.emit("run_start", resumed=False)
    for i in range(50):
        _node(first, i)
    first.close()

    second = EventLog(path)  # a resumed session
    second.emit("run_start", resumed=True)
    budget = Budget(BudgetConfig(max_llm_calls=10_000), "m", second)
    for i in range(50, 120):
        _node(second, i)
    totals = budget.totals()
    recount = usage_from_events(read_events(path))
    assert (totals.llm_calls, totals.input_tokens, totals.output_tokens) == (
        recount.llm_calls,
        recount.input_tokens,
        recount.output_tokens,
    )
    assert totals.by_model == recount.by_model
    assert totals.llm_calls == sum(1 for i in range(120) if i % 3)


def test_the_budget_never_rereads_the_events(tmp_path: Path, monkeypatch) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    budget = Budget(BudgetConfig(max_tokens=10**9), "m", log)

    def no_reread(self: EventLog) -> list:
        raise AssertionError("the budget re-read the events")

    monkeypatch.setattr(EventLog, "memory", property(no_reread))
    for i in range(1, 200):
        _node(log, i)
        assert budget.exceeded() is None
    assert budget.totals().llm_calls == sum(1 for i in range(1, 200) if i % 3)


def test_a_file_backed_log_keeps_no_events_in_memory(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    for i in range(100):
        _node(log, i)
    assert log._memory == []
    assert [e["iteration"] for e in log.memory] == list(range(100))  # read back from the file
    in_memory = EventLog(None)
    _node(in_memory, 1)
    assert len(in_memory.memory) == 1


def test_usage_totals_fold_one_event_at_a_time() -> None:
    totals = UsageTotals()
    totals.add({"event": "node", "node": "gate", "llm_calls": 2, "input_tokens": "x"})
    totals.add({"event": "node", "node": "retrieve", "llm_calls": 7})
    totals.add({"event": "search", "llm_calls": 9})
    assert (totals.llm_calls, totals.input_tokens) == (2, 0)

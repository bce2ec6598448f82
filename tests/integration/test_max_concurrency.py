"""``max_concurrency`` reaches LangGraph and bounds the parallel ``generate`` nodes.

``max_concurrency``: the knob reaches LangGraph's run config and bounds the parallel
``generate`` nodes of an iteration (benchmarks/parallel_bench.py measures the wall time).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from langgraph.config import get_config

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.api import graph_concurrency
from evoduet_graph.config import ConfigError
from evoduet_graph.nodes.generate import generate
from tests.conftest import RADIUS_UP
from tests.fakes import ScriptedChatModel
from tests.fault_harness import InProcessEvaluator

BARRIER_TIMEOUT_S = 60.0


class GenerateProbe:
    """A ``generate`` replacement that records the concurrency it sees.

    A ``generate`` replacement that records the run config's ``max_concurrency`` and how
    many ``generate`` nodes were in flight at once, then runs the real node.

    With ``barrier_parties`` set, each call waits until that many calls are in flight: it
    raises `threading.BrokenBarrierError` (failing the run) when the pool cannot hold them.
    """

    def __init__(self, barrier_parties: int | None = None) -> None:
        self.barrier = threading.Barrier(barrier_parties) if barrier_parties else None
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.seen_max_concurrency: set[Any] = set()

    def __call__(self, payload: Any, runtime: Any) -> Any:
        with self.lock:
            self.seen_max_concurrency.add(get_config().get("max_concurrency"))
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            if self.barrier is not None:
                self.barrier.wait(timeout=BARRIER_TIMEOUT_S)
            return generate(payload, runtime)
        finally:
            with self.lock:
                self.active -= 1


def _config(**kw: Any) -> EvoDuetConfig:
    base: dict[str, Any] = {
        "iterations": 1,
        "gate": {"mode": "never"},  # only the generate fan-out calls the model
        "population": {"num_islands": 1},
        "evaluation": {"workers": 2},
    }
    base.update(kw)
    return EvoDuetConfig.model_validate(base)


def test_default_runs_every_candidate_of_an_iteration_at_once(smoke_task_dir, tmp_path):
    """N=8 on any machine: all eight generate nodes are in flight together.

    N=8 on any machine: all eight generate nodes are in flight together (LangGraph's own
    default pool, min(32, cores + 4), holds only six on a 2-core machine).
    """
    probe = GenerateProbe(barrier_parties=8)
    cfg = _config(candidates=8)
    llm = ScriptedChatModel(responses=[], default=RADIUS_UP)
    result = run(
        smoke_task_dir,
        cfg,
        llm=llm,
        evaluator=InProcessEvaluator(smoke_task_dir),
        run_dir=tmp_path / "run",
        nodes={"generate": probe},
    )
    assert result.iterations == 1 and llm.calls == 8
    assert probe.peak == 8
    assert probe.seen_max_concurrency == {graph_concurrency(cfg)}
    assert graph_concurrency(cfg) >= 8


def test_explicit_max_concurrency_bounds_the_generate_fan_out(smoke_task_dir, tmp_path):
    probe = GenerateProbe(barrier_parties=2)
    cfg = _config(candidates=4, max_concurrency=2)
    llm = ScriptedChatModel(responses=[], default=RADIUS_UP)
    result = run(
        smoke_task_dir,
        cfg,
        llm=llm,
        evaluator=InProcessEvaluator(smoke_task_dir),
        run_dir=tmp_path / "run",
        nodes={"generate": probe},
    )
    assert result.iterations == 1 and llm.calls == 4
    assert probe.seen_max_concurrency == {2}
    assert probe.peak == 2


def test_graph_concurrency_rule():
    default_pool = min(32, (os.cpu_count() or 1) + 4)
    assert graph_concurrency(_config()) == default_pool
    assert graph_concurrency(_config(candidates=40)) == 40
    assert graph_concurrency(_config(candidates=2, candidates_after_retrieval=48)) == 48
    assert graph_concurrency(_config(candidates=40, max_concurrency=3)) == 3
    with pytest.raises(ConfigError, match="max_concurrency"):
        EvoDuetConfig().with_overrides({"max_concurrency": 0})

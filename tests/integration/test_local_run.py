"""End to end with the REAL embedded model: one iteration of the smoke task through the
whole outer graph (real model, real sandboxed evaluator, SQLite checkpoints).

Not skipped: CI installs the ``[local]`` extra. About 1-2 minutes on 2 cores.
"""

from __future__ import annotations

import json

import pytest

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.rundir.events import read_events

pytestmark = pytest.mark.local_model


def test_one_iteration_with_the_embedded_model(smoke_task_dir, tmp_path):
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": 1,
            "llm": {"model": "local", "max_tokens": 400, "local_n_ctx": 4096, "temperature": 0.2},
        }
    )
    result = run(smoke_task_dir, cfg, run_dir=tmp_path / "run")
    rdir = tmp_path / "run"
    assert result.iterations == 1
    events = list(read_events(rdir / "events.jsonl"))
    gen = [e for e in events if e.get("node") == "generate"]
    assert len(gen) == 1
    # one call, plus one resample when the novelty check rejected the first answer
    resamples = [e for e in events if e["event"] == "novelty_rejected" and e["resampled"]]
    assert gen[0]["llm_calls"] == 1 + len(resamples)
    assert gen[0]["output_tokens"] > 0 and gen[0]["input_tokens"] > 200
    cand = gen[0]["candidates"][0]
    assert cand["status"] in {"generated", "invalid", "duplicate"}
    best = json.loads((rdir / "best_program.json").read_text())
    assert best["score"] == pytest.approx(result.best_score)
    # the best never regresses below the initial program
    initial = next(e for e in events if e.get("node") == "initialize")["best_score"]
    assert result.best_score >= initial

"""`evoduet bench --methods` with the scaffold methods (``evoduet-topk``, ``evoduet-bestofn``,
``evoduet-evox``) and with configuration files given by stem (``configs/<stem>.yaml``) or path;
the results tables list them like the built-in methods. Scripted model and fake search backend."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evoduet_graph import EvoDuetConfig
from evoduet_graph.bench import BenchError, BenchSettings, run_bench
from evoduet_graph.bench.graph_method import config_method
from evoduet_graph.bench.runner import GRAPH_METHODS
from evoduet_graph.cli import app
from tests.conftest import RADIUS_UP, ROOT, SMOKE_TASK
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel

BASE = EvoDuetConfig.model_validate(
    {"population": {"num_islands": 2}, "evaluation": {"workers": 1}}
)


def _settings(out: Path, methods: list[str], **kw: Any) -> BenchSettings:
    base: dict[str, Any] = {
        "tasks": [SMOKE_TASK],
        "out": out,
        "methods": methods,
        "seeds": [0],
        "iterations": 2,
        "config": BASE,
    }
    base.update(kw)
    return BenchSettings(**base)


def _llm(_job) -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[], default=KnowledgeResponder(gate="retrieve", generate=RADIUS_UP)
    )


def _bench_run(out: Path, method: str) -> dict[str, Any]:
    path = out / "runs" / "smoke_polygon_area" / method / "seed0" / "bench_run.json"
    return json.loads(path.read_text())


def _config_of(out: Path, method: str) -> dict[str, Any]:
    import yaml

    path = out / "runs" / "smoke_polygon_area" / method / "seed0" / "run" / "config.yaml"
    return yaml.safe_load(path.read_text())


def test_scaffold_methods_and_config_stems_run_and_are_tabled(tmp_path):
    out = tmp_path / "bench"
    methods = [
        "evoduet",
        "evoduet-topk",
        "evoduet-bestofn",
        "evoduet-evox",
        "scaffold_evox",  # configs/scaffold_evox.yaml by stem
        str(ROOT / "configs" / "always_retrieve.yaml"),  # by path
    ]
    searchers: list[FakeSearcher] = []

    def searcher_factory(_job):
        searchers.append(FakeSearcher())
        return searchers[-1]

    result = run_bench(_settings(out, methods), llm_factory=_llm, searcher_factory=searcher_factory)
    labels = [
        "evoduet",
        "evoduet-topk",
        "evoduet-bestofn",
        "evoduet-evox",
        "scaffold_evox",
        "always_retrieve",
    ]
    assert sorted(result.ran) == sorted(f"smoke_polygon_area/{m}/seed0" for m in labels)
    assert not result.failed
    assert len(searchers) == len(labels)  # every method here can retrieve

    expected = {
        "evoduet": ("openevolve", "islands", "llm", 1),
        "evoduet-topk": ("top_k", "top_k", "llm", 1),
        "evoduet-bestofn": ("best_of_n", "top_k", "llm", 4),
        "evoduet-evox": ("evox", "islands", "llm", 1),
        "scaffold_evox": ("evox", "islands", "llm", 1),
        "always_retrieve": ("openevolve", "islands", "always", 1),
    }
    for label, (scaffold, kind, gate, n) in expected.items():
        cfg = _config_of(out, label)
        assert (cfg["scaffold"], cfg["population"]["kind"], cfg["gate"]["mode"]) == (
            scaffold,
            kind,
            gate,
        ), label
        assert cfg["candidates"] == n and cfg["iterations"] == 2 and cfg["seed"] == 0
        details = _bench_run(out, label)["outcome"]["details"]
        assert details["scaffold"] == scaffold and details["gate"] == gate
    assert _bench_run(out, "scaffold_evox")["outcome"]["details"]["config"].endswith(
        "configs/scaffold_evox.yaml"
    )
    # the evox methods wrote their strategy log
    assert (out / "runs/smoke_polygon_area/evoduet-evox/seed0/run/strategies.jsonl").is_file()

    with open(out / "runs.csv", newline="", encoding="utf-8") as fh:
        runs = {r["method"]: r for r in csv.DictReader(fh)}
    assert set(runs) == set(labels) and {r["status"] for r in runs.values()} == {"done"}
    summary = (out / "summary.md").read_text()
    assert "| task | evoduet | evoduet-topk | evoduet-bestofn | evoduet-evox |" in summary
    assert "scaffold_evox" in summary and "always_retrieve" in summary
    assert (out / "plots" / "ndg.png").is_file()

    # a second invocation with the same names skips every finished run
    again = run_bench(_settings(out, methods), llm_factory=_llm, searcher_factory=searcher_factory)
    assert not again.ran and len(again.skipped) == len(labels)


def test_config_method_resolution_and_errors(tmp_path):
    assert config_method("no_such_config") is None
    label, overlay, path = config_method("scaffold_top_k")  # type: ignore[misc]
    assert label == "scaffold_top_k" and path == ROOT / "configs" / "scaffold_top_k.yaml"
    assert overlay["scaffold"] == "top_k" and "iterations" not in overlay

    with_llm = tmp_path / "with_llm.yaml"
    with_llm.write_text("gate: {mode: llm}\nllm: {model: 'openai:gpt-4o-mini'}\n")
    with pytest.raises(BenchError, match="has an llm section"):
        config_method(str(with_llm))
    not_mapping = tmp_path / "list.yaml"
    not_mapping.write_text("- 1\n- 2\n")
    with pytest.raises(BenchError, match="must hold a mapping"):
        config_method(str(not_mapping))

    bad = tmp_path / "bad_scaffold.yaml"
    bad.write_text("scaffold: evox\npopulation: {kind: top_k}\n")
    with pytest.raises(BenchError, match="scaffold 'evox' runs over population.kind"):
        run_bench(_settings(tmp_path / "a", [str(bad)]), llm_factory=_llm)
    clash = tmp_path / "evoduet.yaml"
    clash.write_text("gate: {mode: always}\n")
    with pytest.raises(BenchError, match="named like the method 'evoduet'"):
        run_bench(_settings(tmp_path / "b", [str(clash)]), llm_factory=_llm)
    with pytest.raises(BenchError, match=r"unknown method\(s\) \['nope'\].*scaffold_evox"):
        run_bench(_settings(tmp_path / "c", ["nope"]), llm_factory=_llm)
    assert {"evoduet-topk", "evoduet-bestofn", "evoduet-evox"} <= set(GRAPH_METHODS)


def test_cli_help_lists_the_scaffold_methods():
    result = CliRunner().invoke(app, ["bench", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for name in ("evoduet-topk", "evoduet-bestofn", "evoduet-evox", "configs/"):
        assert name in text

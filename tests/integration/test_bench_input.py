"""``evoduet bench`` refuses bad input in one line, before it writes or starts anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evoduet_graph import EvoDuetConfig
from evoduet_graph.bench import BenchError, BenchSettings, run_bench
from evoduet_graph.bench import executor as bench_executor
from evoduet_graph.bench import runner as bench_runner
from evoduet_graph.bench.output import collect_runs
from evoduet_graph.cli import app
from evoduet_graph.evaluation.ray_executor import RayUnavailableError
from tests.conftest import RADIUS_UP, SMOKE_TASK
from tests.fakes import KnowledgeResponder, ScriptedChatModel

BASE = EvoDuetConfig.model_validate(
    {"population": {"num_islands": 2}, "evaluation": {"workers": 1}, "novelty": {"enabled": False}}
)


def _llm(_job: Any) -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[], default=KnowledgeResponder(gate="no-op", generate=RADIUS_UP)
    )


def _settings(out: Path, **kw: Any) -> BenchSettings:
    base: dict[str, Any] = {
        "tasks": [SMOKE_TASK],
        "out": out,
        "methods": ["openevolve-mode"],
        "seeds": [0],
        "iterations": 1,
        "config": BASE,
    }
    return BenchSettings(**(base | kw))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bench folder with one finished run (seed 0)."""
    out = tmp_path_factory.mktemp("bench")
    result = run_bench(_settings(out), llm_factory=_llm)
    assert result.ran and not result.failed
    return out


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda text: text[: len(text) // 2], "cannot be read"),
        (lambda text: "[1, 2]", "is not a JSON object"),
        (lambda text: text.replace('"seed": 0', '"seed": "x"'), "seed: Input should be"),
        (
            lambda text: json.dumps(
                json.loads(text) | {"outcome": {"iterations": 1, "best": "abc"}}
            ),
            "outcome.best: Input should be a valid number",
        ),
        (
            lambda text: json.dumps(
                json.loads(text) | {"outcome": json.loads(text)["outcome"] | {"points": 5}}
            ),
            "outcome.points: Input should be a valid list",
        ),
    ],
)
def test_a_damaged_run_record_is_refused_by_name_and_nothing_is_touched(
    finished, tmp_path, damage, message
):
    out = tmp_path / "bench"
    out.mkdir()
    for path in finished.rglob("*"):
        if path.is_file():
            dest = out / path.relative_to(finished)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(path.read_bytes())
    record = out / "runs" / "smoke_polygon_area" / "openevolve-mode" / "seed0" / "bench_run.json"
    record.write_text(damage(record.read_text()))
    before = _snapshot(out)
    # a second seed to run: the damaged record must stop the bench before it starts it
    with pytest.raises(BenchError, match=message) as caught:
        run_bench(_settings(out, seeds=[0, 1]), llm_factory=_llm)
    assert str(record) in str(caught.value)
    assert _snapshot(out) == before
    with pytest.raises(BenchError, match=message):
        collect_runs(out)


def test_an_out_path_that_is_a_file_is_refused(tmp_path):
    out = tmp_path / "afile"
    out.write_text("keep me")
    with pytest.raises(BenchError, match="is a file, not a folder"):
        run_bench(_settings(out), llm_factory=_llm)
    assert out.read_text() == "keep me"


def test_executor_ray_without_ray_is_refused_before_anything_is_written(
    finished, tmp_path, monkeypatch
):
    def no_ray() -> None:
        raise RayUnavailableError("no ray here")

    monkeypatch.setattr(bench_runner, "import_ray", no_ray)
    out = tmp_path / "bench"
    with pytest.raises(BenchError, match=r"--executor ray needs the ray package"):
        run_bench(_settings(out, executor="ray"), llm_factory=_llm)
    assert not out.exists()
    before = _snapshot(finished)
    with pytest.raises(BenchError, match=r"--executor ray needs the ray package"):
        run_bench(_settings(finished, seeds=[0, 1], executor="ray"), llm_factory=_llm)
    assert _snapshot(finished) == before


def test_an_unreachable_ray_cluster_is_refused_before_anything_is_written(
    finished, tmp_path, monkeypatch
):
    def unreachable(_address: object) -> None:
        raise RayUnavailableError("no Ray cluster answered at 127.0.0.1:1")

    monkeypatch.setattr(bench_executor, "connect", unreachable)
    before = _snapshot(finished)
    with pytest.raises(BenchError, match="--executor ray: no Ray cluster answered"):
        run_bench(_settings(finished, seeds=[0, 1], executor="ray"), llm_factory=_llm)
    assert _snapshot(finished) == before
    out = tmp_path / "bench"
    with pytest.raises(BenchError, match="no Ray cluster answered"):
        run_bench(_settings(out, executor="ray"), llm_factory=_llm)
    assert not out.exists()


def test_a_refused_model_start_leaves_no_empty_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = tmp_path / "new" / "deeper" / "bench"
    with pytest.raises(
        BenchError, match=r"needs an API key: \$OPENAI_API_KEY is not set"
    ) as caught:
        run_bench(_settings(out, model="openai:gpt-4o-mini"))
    assert "did not answer" not in str(caught.value)  # nothing was asked of the endpoint
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"seeds": [0, 0]}, r"seed\(s\) \[0\] listed twice"),
        ({"seeds": [-1]}, "seeds must be from 0 to 4294967295"),
        ({"seeds": [2**64]}, "seeds must be from 0 to 4294967295"),
        ({"tasks": [SMOKE_TASK, SMOKE_TASK]}, "two tasks are named smoke_polygon_area"),
        ({"config": BASE.with_overrides({"llm.model": "openai:m"})}, "sets llm.model"),
    ],
)
def test_settings_a_bench_cannot_run_are_refused_before_the_folder_exists(tmp_path, kw, message):
    out = tmp_path / "bench"
    with pytest.raises(BenchError, match=message):
        run_bench(_settings(out, **kw), llm_factory=_llm)
    assert not out.exists()


def test_the_cli_prints_a_model_string_as_it_is(tmp_path):
    """``anthropic:x:`` in a message stays text (no emoji markup), in one line."""
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "--out",
            str(tmp_path / "b"),
            "--tasks",
            str(SMOKE_TASK),
            "--methods",
            "openevolve",
            "--model",
            "anthropic:x",
        ],
    )
    assert result.exit_code == 2
    assert "--model anthropic:x: the openevolve method" in result.output
    assert "Traceback" not in result.output

"""Runs over the search-backend registry.

Several backends at once (``[offline, arxiv-fake]``), a user's ``langchain:`` retriever,
``exclude_domains``, the search cache within a run and across a resume, and ``stop_at_score``.

The real sandboxed evaluator on the smoke task, a scripted model (`KnowledgeResponder`), the
real offline BM25 backend over a small corpus and fakes of the web backends' clients.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evoduet_graph import EvoDuetConfig, resume, run
from evoduet_graph.nodes.stop_rules import TARGET_PREFIX
from evoduet_graph.rundir.events import read_events
from evoduet_graph.search import SearchDatabase, registry
from evoduet_graph.search.backends.arxiv import make_arxiv
from evoduet_graph.search.registry import BackendSpec
from tests.conftest import RADIUS_UP, SPREAD_UP
from tests.fakes import KnowledgeResponder, ScriptedChatModel
from tests.unit.test_search_backends import ARXIV_DOCS, FakeRetriever

ARXIV_FAKE = FakeRetriever(docs=ARXIV_DOCS)


@pytest.fixture(autouse=True)
def _arxiv_fake_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register ``arxiv-fake`` for this module's tests only, so other tests see the built-ins."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_backend(
        BackendSpec(
            "arxiv-fake",
            lambda cfg, task_dir: make_arxiv(cfg, client=ARXIV_FAKE),
            None,
            None,
            "arXiv with a fake retriever (tests)",
        )
    )


def _corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "circles.md").write_text(
        "# Points on a circle\n\nPut every point on the unit circle: radius 1.0 maximises the "
        "area of the polygon. query words: query 0 query 1.\n",
        encoding="utf-8",
    )
    (folder / "leak.md").write_text("# Unrelated\n\nNothing about points.\n", encoding="utf-8")
    return folder


def _config(tmp_path: Path, **dotted: Any) -> EvoDuetConfig:
    base = {
        "iterations": 1,
        "population": {"num_islands": 2},
        "evaluation": {"workers": 2},
        "gate": {"mode": "always"},
        "novelty": {"enabled": False},
        "retrieval": {
            "inner_rounds": 1,
            "search_retries": 0,
            "corpus": [str(_corpus(tmp_path))],
            "offline_include_pydoc": [],
            "index_cache_dir": str(tmp_path / "index"),
        },
    }
    return EvoDuetConfig.model_validate(base).with_overrides(dotted)


def _llm(queries: Any = None, generate: Any = RADIUS_UP) -> ScriptedChatModel:
    responder = KnowledgeResponder(generate=generate, queries=queries)
    return ScriptedChatModel(responses=[], default=responder)


def _events(rdir: Path, name: str) -> list[dict[str, Any]]:
    return [e for e in read_events(rdir / "events.jsonl") if e["event"] == name]


def test_offline_and_arxiv_fake_together(smoke_task_dir, tmp_path):
    cfg = _config(tmp_path, **{"retrieval.backend": ["offline", "arxiv-fake"]})
    rdir = tmp_path / "run"
    result = run(smoke_task_dir, cfg, llm=_llm(), run_dir=rdir)
    assert result.iterations == 1
    [search] = _events(rdir, "search")
    assert search["cached"] is False
    sources = {d.source for d in SearchDatabase(rdir / "search_database.jsonl").documents()}
    assert sources == {"offline", "arxiv"}
    assert any(u.startswith("http://arxiv.org/abs/") for u in search["urls"])
    assert any(u.startswith("file:") for u in search["urls"])
    assert "arxiv-fake" in (rdir / "config.yaml").read_text()


def test_user_langchain_retriever_feeds_the_evidence(smoke_task_dir, tmp_path):
    spec = "langchain:tests.search_plugins:make_retriever"
    cfg = _config(tmp_path, **{"retrieval.backend": spec})
    rdir = tmp_path / "run"
    llm = _llm(queries=lambda n, _t: ["points on the unit circle"])
    run(smoke_task_dir, cfg, llm=llm, run_dir=rdir)
    docs = SearchDatabase(rdir / "search_database.jsonl").documents()
    assert {d.url for d in docs} == {"papers/angles.md", "papers/polygons.md"}
    generate = [m for m in llm.prompts if "<evidence>" in str(m[-1].content)]
    assert generate and "unit circle" in str(generate[0][-1].content)


def test_exclude_domains_keeps_a_domain_out_of_the_evidence(smoke_task_dir, tmp_path):
    cfg = _config(
        tmp_path,
        **{"retrieval.backend": "arxiv-fake", "retrieval.exclude_domains": ["arxiv.org"]},
    )
    rdir = tmp_path / "run"
    run(smoke_task_dir, cfg, llm=_llm(), run_dir=rdir)
    [search] = _events(rdir, "search")
    assert search["urls"] == []
    assert SearchDatabase(rdir / "search_database.jsonl").documents() == []


def test_repeated_query_is_answered_from_the_cache_also_after_resume(smoke_task_dir, tmp_path):
    before = len(ARXIV_FAKE.queries)
    cfg = _config(tmp_path, **{"retrieval.backend": "arxiv-fake", "iterations": 2})
    rdir = tmp_path / "run"

    def same(n, _t):
        return ["circle packing"]

    run(smoke_task_dir, cfg, llm=_llm(queries=same, generate=RADIUS_UP), run_dir=rdir, iterations=2)
    searches = _events(rdir, "search")
    assert [s["cached"] for s in searches] == [False, True]
    assert searches[1]["fetched_at"] == searches[0]["fetched_at"]
    assert searches[1]["urls"] == searches[0]["urls"]
    calls = ARXIV_FAKE.queries[before:]
    assert calls == ["circle packing"]
    resume(rdir, llm=_llm(queries=same, generate=SPREAD_UP), iterations=3)
    searches = _events(rdir, "search")
    assert [s["cached"] for s in searches] == [False, True, True]
    assert ARXIV_FAKE.queries[before:] == ["circle packing"]  # the resumed run paid nothing


def test_cache_dir_is_shared_by_runs_and_cache_false_searches_again(smoke_task_dir, tmp_path):
    before = len(ARXIV_FAKE.queries)
    shared = str(tmp_path / "shared-cache")

    def same(n, _t):
        return ["shared query"]

    cfg = _config(tmp_path, **{"retrieval.backend": "arxiv-fake", "retrieval.cache_dir": shared})
    for name in ("a", "b"):
        run(smoke_task_dir, cfg, llm=_llm(queries=same), run_dir=tmp_path / name)
    assert ARXIV_FAKE.queries[before:] == ["shared query"]
    assert _events(tmp_path / "b", "search")[0]["cached"] is True
    cfg = _config(tmp_path, **{"retrieval.backend": "arxiv-fake", "retrieval.cache": False})
    rdir = tmp_path / "c"
    run(smoke_task_dir, cfg, llm=_llm(queries=same, generate=RADIUS_UP), run_dir=rdir, iterations=2)
    assert ARXIV_FAKE.queries[before:] == ["shared query"] * 3
    assert not (rdir / "search_cache.sqlite").exists()


# ------------------------------------------------------------------------------------------
# stop_at_score
# ------------------------------------------------------------------------------------------


def _plain(**dotted: Any) -> EvoDuetConfig:
    base = {"iterations": 4, "population": {"num_islands": 2}, "novelty": {"enabled": False}}
    return EvoDuetConfig.model_validate(base).with_overrides(dotted)


def test_stop_at_score_ends_the_run_when_the_metric_reaches_it(smoke_task_dir, tmp_path):
    llm = _llm(generate=RADIUS_UP)
    result = run(smoke_task_dir, _plain(stop_at_score=1.0), llm=llm, run_dir=tmp_path / "r")
    assert result.iterations == 1 and result.metric_value >= 1.0
    assert result.stop_reason.startswith(TARGET_PREFIX)
    assert "area" in result.stop_reason and "≥ 1 (stop_at_score)" in result.stop_reason


def test_stop_at_score_not_reached_runs_every_iteration(smoke_task_dir, tmp_path):
    result = run(
        smoke_task_dir,
        _plain(stop_at_score=2.9, iterations=2),
        llm=_llm(generate=RADIUS_UP),
        run_dir=tmp_path / "r",
    )
    assert result.iterations == 2 and result.stop_reason is None


def test_stop_at_score_met_by_the_initial_program_runs_no_iteration(smoke_task_dir, tmp_path):
    llm = _llm()
    result = run(smoke_task_dir, _plain(stop_at_score=0.1), llm=llm, run_dir=tmp_path / "r")
    assert result.iterations == 0 and result.stop_reason.startswith(TARGET_PREFIX)
    assert llm.calls == 0


def test_stop_at_score_can_be_raised_on_resume(smoke_task_dir, tmp_path):
    rdir = tmp_path / "r"
    run(smoke_task_dir, _plain(stop_at_score=1.0), llm=_llm(generate=RADIUS_UP), run_dir=rdir)
    cfg_path = rdir / "config.yaml"
    cfg_path.write_text(
        cfg_path.read_text().replace("stop_at_score: 1.0", "stop_at_score: 2.9"),
        encoding="utf-8",
    )
    result = resume(rdir, llm=_llm(generate=SPREAD_UP), iterations=2)
    assert result.iterations == 2 and result.stop_reason is None


def test_stop_at_score_for_a_minimised_metric():
    from types import SimpleNamespace

    from evoduet_graph.nodes.stop_rules import target_reached

    task = SimpleNamespace(direction="min", metric="loss", metric_value=lambda m: m.get("loss"))
    ctx: Any = SimpleNamespace(config=SimpleNamespace(stop_at_score=0.5), task=task)
    assert target_reached(ctx, {"loss": 0.4}).endswith("loss = 0.4 ≤ 0.5 (stop_at_score)")
    assert target_reached(ctx, {"loss": 0.6}) is None
    assert target_reached(ctx, {}) is None

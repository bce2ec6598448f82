"""Documentation that cannot drift.

The generated config reference, the ablation configs, the Python examples of docs/python-api.md
(executed), the graph picture of docs/graphs.md (compared with the code), and the README's promise
to a newcomer: short, with links that lead somewhere.
"""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel

from evoduet_graph.api import checked_config, validate_setup
from evoduet_graph.config import EvoDuetConfig, load_config
from tests.conftest import ROOT, load_script
from tests.fakes import ScriptedChatModel

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _gen_module():
    return load_script(ROOT / "scripts" / "gen_config_docs.py")


def test_config_reference_is_up_to_date():
    text = _gen_module().generate()
    current = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert current == text, (
        "docs/config.md is out of date with evoduet_graph/config.py: "
        "run `python scripts/gen_config_docs.py` and commit the result"
    )


def test_config_reference_lists_every_key_with_a_description():
    text = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert "(no description yet)" not in text, "give every config field a description="

    def keys(model, prefix=""):
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                yield from keys(ann, f"{prefix}{name}.")
            else:
                yield f"{prefix}{name}"

    for key in keys(EvoDuetConfig):
        assert f"| `{key}` |" in text, key


LADDER = {
    "openevolve_mode.yaml": {"gate.mode": "never"},
    "evoduet.yaml": {"gate.mode": "llm", "retrieval.inner_rounds": 3},
    "always_retrieve.yaml": {"gate.mode": "always"},
    "heuristic.yaml": {"gate.mode": "heuristic", "gate.retrieve_probability": 0.1},
    "stagnation.yaml": {"gate.mode": "stagnation"},
    "no_query_evolution.yaml": {"gate.mode": "llm", "retrieval.query_evolution_steps": 1},
    "parallel_8.yaml": {"gate.mode": "llm", "candidates_after_retrieval": 8},
    "oracle_documents.yaml": {"gate.mode": "oracle"},
    "joint_search.yaml": {"gate.mode": "never", "joint_search.enabled": True},
    "rerank.yaml": {
        "gate.mode": "llm",
        "retrieval.ranking": "listwise_rerank",
        "retrieval.inner_rounds": 1,
        "retrieval.query_evolution_steps": None,
    },
    "no_search_database.yaml": {
        "gate.mode": "llm",
        "retrieval.ranking": "listwise_rerank",
        "retrieval.inner_rounds": 1,
        "retrieval.use_search_database": False,
    },
    "select_relevance_novelty.yaml": {
        "gate.mode": "llm",
        "retrieval.ranking": "listwise_rerank",
        "retrieval.inner_rounds": 1,
        "retrieval.select_policy": "relevance_novelty",
    },
    "no_search_database_full_loop.yaml": {
        "gate.mode": "llm",
        "retrieval.ranking": "hypothetical",
        "retrieval.use_search_database": False,
    },
    "select_relevance_novelty_full_loop.yaml": {
        "gate.mode": "llm",
        "retrieval.ranking": "hypothetical",
        "retrieval.select_policy": "relevance_novelty",
    },
    "grounding_offline.yaml": {"gate.mode": "llm", "retrieval.grounding": "offline"},
    "grounding_online.yaml": {"gate.mode": "llm", "retrieval.grounding": "online"},
    "top_k.yaml": {"gate.mode": "llm", "population.kind": "top_k"},
    "scaffold_top_k.yaml": {"scaffold": "top_k", "population.kind": "top_k", "gate.mode": "llm"},
    "scaffold_best_of_n.yaml": {
        "scaffold": "best_of_n",
        "population.kind": "top_k",
        "candidates": 4,
        "gate.mode": "llm",
    },
    "scaffold_evox.yaml": {
        "scaffold": "evox",
        "population.kind": "islands",
        "evox.strategy_patience": 3,
        "gate.mode": "llm",
    },
}


@pytest.mark.parametrize("name", sorted(LADDER))
def test_ablation_config_loads(name):
    cfg = checked_config(load_config(ROOT / "configs" / name))  # the scaffold's population
    validate_setup(cfg)  # a gate that can retrieve has a search backend
    for key, expected in LADDER[name].items():
        value = cfg
        for part in key.split("."):
            value = getattr(value, part)
        assert value == expected, (name, key)


def test_every_shipped_config_is_in_the_ladder():
    assert sorted(p.name for p in (ROOT / "configs").glob("*.yaml")) == sorted(LADDER)


def _page(name: str) -> str:
    """The text of ``docs/<name>``."""
    return (DOCS / name).read_text(encoding="utf-8")


def test_python_api_examples_run(tmp_path, monkeypatch):
    """Execute every ``python`` block of docs/python-api.md as written.

    Only the chat-model factory is replaced by a scripted fake (no model download, no network).
    """
    import evoduet_graph.llm as llm_pkg

    blocks = re.findall(r"```python\n(.*?)```", _page("python-api.md"), re.DOTALL)
    assert blocks
    made: list[ScriptedChatModel] = []

    def fake_factory(cfg, **_kw):
        model = ScriptedChatModel(responses=[], default="no change")
        made.append(model)
        return model

    monkeypatch.setattr(llm_pkg, "make_chat_model", fake_factory)
    (tmp_path / "tasks").symlink_to(ROOT / "tasks")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVODUET_RUNS_DIR", str(tmp_path / "graph-runs"))  # graph.invoke's runs
    monkeypatch.delenv("EVODUET_CONFIG", raising=False)
    first = blocks[0]
    assert first.count("graph.invoke(") == 1 and "context=" not in first  # the one-line start
    for code in blocks:
        namespace: dict = {"__name__": "__readme__"}
        exec(compile(code, "docs/python-api.md", "exec"), namespace)  # noqa: S102 - our own docs
    assert made and all(m.calls > 0 for m in made)
    assert (tmp_path / "runs" / "demo" / "best_program.py").is_file()
    (graph_run,) = (tmp_path / "graph-runs").iterdir()  # the first example's run directory
    assert graph_run.name.startswith("circle_packing_26-")
    assert (graph_run / "best_program.py").is_file()


def test_graphs_page_matches_the_code():
    from evoduet_graph.graphs.render import mermaid

    blocks = re.findall(r"```mermaid\n(.*?)```", _page("graphs.md"), re.DOTALL)
    expected = mermaid("outer", xray=True).strip()
    assert any(b.strip() == expected for b in blocks), (
        "docs/graphs.md is stale: paste the output of `evoduet graph --xray`"
    )


def test_readme_is_short_and_its_links_lead_somewhere():
    """The README is what a newcomer reads first: at most 300 lines, links that resolve."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300, "README.md is the front page; move detail into docs/"
    assert "make run" in text and "make test" in text
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_every_docs_page_is_in_the_site_navigation():
    """mkdocs.yml's nav lists every page of docs/ (the strict build also fails otherwise)."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(nav):
        for item in nav:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            if isinstance(value, list):
                yield from pages(value)
            else:
                yield value

    assert config["docs_dir"] == "docs"
    assert sorted(pages(config["nav"])) == sorted(p.name for p in DOCS.glob("*.md"))

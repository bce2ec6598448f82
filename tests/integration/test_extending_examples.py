"""The worked examples of ``docs/extending.md`` run, and the document shows them as they are.

Every example lives as a file under ``docs/examples/``; the document quotes each file whole in
the fenced block after its ``<!-- file: ... -->`` marker, and the first test fails when a quote
and its file differ. The other tests run each example the way the document says, on the smoke
task (or the example's own task) with a scripted model and the real sandbox.
"""

from __future__ import annotations

import importlib.util
import json
import re
from types import ModuleType

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from evoduet_graph import (
    EvoDuetConfig,
    build_context,
    build_graph,
    checked_config,
    load_task,
    run,
)
from evoduet_graph.rundir.events import read_events
from evoduet_graph.search import registry
from tests.conftest import GARBAGE, RADIUS_UP, ROOT, SMOKE_TASK, diff
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel

DOC = ROOT / "docs" / "extending.md"
EXAMPLES = ROOT / "docs" / "examples"
QUOTE = re.compile(r"<!-- file: (?P<path>[^ ]+) -->\n```[a-z]*\n(?P<body>.*?)```\n", re.DOTALL)


def example(name: str) -> ModuleType:
    """Import ``docs/examples/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(f"extending_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def config(**values) -> EvoDuetConfig:
    base = {"iterations": 2, "population": {"num_islands": 2}, "evaluation": {"workers": 1}}
    return EvoDuetConfig.model_validate(base).with_overrides(values)


def test_the_document_quotes_every_example_file_as_it_is():
    quotes = {m["path"]: m["body"] for m in QUOTE.finditer(DOC.read_text(encoding="utf-8"))}
    files = {str(p.relative_to(ROOT)) for p in EXAMPLES.iterdir() if p.is_file()}
    assert set(quotes) == files
    for path, body in quotes.items():
        assert body == (ROOT / path).read_text(encoding="utf-8"), f"{path} differs from its quote"


def test_a_replacement_gate_decides_every_iteration(tmp_path):
    gate = example("new_node").alternating_gate
    llm = ScriptedChatModel(responses=[], default=KnowledgeResponder(generate=GARBAGE))
    run(
        SMOKE_TASK,
        config(iterations=3),
        llm=llm,
        run_dir=tmp_path / "run",
        searcher=FakeSearcher(),
        nodes={"gate": gate},
    )
    events = list(read_events(tmp_path / "run" / "events.jsonl"))
    ran = [(e["node"], e["iteration"]) for e in events if e["event"] == "node"]
    assert [i for node, i in ran if node == "gate"] == [1, 2, 3]
    assert [i for node, i in ran if node == "query_evolution"] == [1, 3]  # the odd iterations
    assert [i for node, i in ran if node == "generate"] == [1, 2, 3]


@pytest.fixture
def scratch_registry(monkeypatch):
    """The backend registry as it is, restored after the test."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def test_a_registered_backend_is_configured_by_name_and_feeds_the_run(tmp_path, scratch_registry):
    module = example("new_backend")
    with pytest.raises(ValueError, match="unknown search backend 'glossary'"):
        checked_config(config(**{"retrieval.backend": "glossary"}))  # names: checked at setup
    module.register()
    assert "glossary" in registry.backend_choices().split("|")
    cfg = config(**{"iterations": 1, "gate.mode": "always", "retrieval.backend": "glossary"})
    llm = ScriptedChatModel(responses=[], default=KnowledgeResponder(generate=GARBAGE))
    run(SMOKE_TASK, cfg, llm=llm, run_dir=tmp_path / "run")  # the registry builds the searcher
    lines = (tmp_path / "run" / "search_database.jsonl").read_text(encoding="utf-8")
    urls = set(re.findall(r'"url": ?"(glossary:[a-z-]+)"', lines))
    assert urls and urls <= {
        "glossary:convex-hull",
        "glossary:shoelace-formula",
        "glossary:regular-polygon",
    }


def test_the_glossary_backend_refuses_to_start_empty():
    module = example("new_backend")
    searcher = module.GlossarySearcher({})
    with pytest.raises(module.SearchUnavailableError, match="no entries"):
        searcher.preflight()
    ranked = module.GlossarySearcher(module.GLOSSARY).search("area of a convex hull", 2)
    assert [d.title for d in ranked] == ["convex hull", "shoelace formula"]


def test_an_injected_scaffold_chooses_the_parents_and_adds_its_instruction():
    module = example("new_scaffold")
    llm = ScriptedChatModel(responses=[RADIUS_UP, GARBAGE])
    cfg = config(scaffold="top_k", **{"gate.mode": "never"})
    ctx = build_context(load_task(SMOKE_TASK), cfg, None, llm=llm)
    ctx.scaffold = module.RoundRobinScaffold()
    graph = build_graph().compile(checkpointer=InMemorySaver())
    state = graph.invoke({"max_iterations": 2}, {"configurable": {"thread_id": "t"}}, context=ctx)
    # iteration 1: the best (initial); iteration 2: the second best of [it00001-c0, initial]
    assert state["best_id"] == "it00001-c0"
    assert state["parent_id"] == "initial"
    generate_prompts = ["\n".join(str(m.content) for m in p) for p in llm.prompts]
    assert len(generate_prompts) == 2
    assert all(module.INSTRUCTION in text for text in generate_prompts)


def test_a_json_task_file_becomes_a_task_folder_that_runs(tmp_path):
    module = example("new_task_format")
    folder = module.write_task_folder(EXAMPLES / "tiny_task.json", tmp_path / "tiny")
    task = load_task(folder)
    assert (task.name, task.metric, task.direction) == ("tiny_value", "value", "max")
    llm = ScriptedChatModel(responses=[diff("    return 1.0", "    return 4.0")])
    result = run(
        folder, config(iterations=1, **{"gate.mode": "never"}), llm=llm, run_dir=tmp_path / "run"
    )
    assert result.metric_value == pytest.approx(4.0)


def test_a_json_task_file_without_an_evaluator_is_refused(tmp_path):
    module = example("new_task_format")
    spec = tmp_path / "broken.json"
    spec.write_text(json.dumps({"program": "x = 1\n"}), encoding="utf-8")
    with pytest.raises(ValueError, match="missing evaluator"):
        module.write_task_folder(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written for a refused file

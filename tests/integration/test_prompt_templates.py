"""Prompt templates a user overrides from a folder (``prompt.template_dir``)."""

from __future__ import annotations

import pytest

from evoduet_graph import run
from evoduet_graph.prompts import (
    PromptOverrideError,
    load_prompt,
    template_overrides,
    using_templates,
)
from tests.conftest import RADIUS_UP
from tests.fakes import KnowledgeResponder, ScriptedChatModel
from tests.integration.test_knowledge_run import _config

MARK = "HOUSE STYLE: answer like a careful numerical analyst."


def _system(folder, extra: str = "") -> None:
    folder.mkdir(exist_ok=True)
    (folder / "system.md").write_text(f"{MARK}\n$instruction\n{extra}(in $language_name)\n")


def test_a_users_template_replaces_the_bundled_one_in_every_request(smoke_task_dir, tmp_path):
    folder = tmp_path / "templates"
    _system(folder)
    llm = ScriptedChatModel(
        responses=[], default=KnowledgeResponder(gate="no-op", generate=RADIUS_UP)
    )
    cfg = _config(iterations=1, **{"gate.mode": "llm", "prompt.template_dir": str(folder)})
    run(smoke_task_dir, cfg, llm=llm, run_dir=tmp_path / "run")
    systems = [str(m[0].content) for m in llm.prompts]
    assert len(systems) >= 2  # the gate's and the mutation's requests
    assert all(s.startswith(MARK) for s in systems)
    # outside a run the bundled template is untouched
    assert not load_prompt("system").startswith(MARK)


def test_without_a_folder_the_bundled_templates_are_used(smoke_task_dir, tmp_path):
    llm = ScriptedChatModel(
        responses=[], default=KnowledgeResponder(gate="no-op", generate=RADIUS_UP)
    )
    run(smoke_task_dir, _config(iterations=1), llm=llm, run_dir=tmp_path / "run")
    assert all(not str(m[0].content).startswith(MARK) for m in llm.prompts)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("system.md", f"{MARK}\n$instruction\n", r"system\.md.*missing: \$language_name"),
        ("system.md", "$instruction $language_name $tone\n", r"unknown: \$tone"),
        ("sytem.md", "$instruction $language_name\n", r"sytem\.md replaces no bundled template"),
        ("system.md", "$instruction $language_name costs 5$\n", r"invalid `\$`"),
    ],
)
def test_a_template_that_cannot_stand_in_is_refused_at_startup_naming_it(
    smoke_task_dir, tmp_path, name, text, message
):
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / name).write_text(text)
    llm = ScriptedChatModel(
        responses=[], default=KnowledgeResponder(gate="no-op", generate=RADIUS_UP)
    )
    cfg = _config(iterations=1, **{"prompt.template_dir": str(folder)})
    with pytest.raises(PromptOverrideError, match=message):
        run(smoke_task_dir, cfg, llm=llm, run_dir=tmp_path / "run")
    assert llm.calls == 0


def test_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(PromptOverrideError, match="is not a folder"):
        template_overrides(tmp_path / "nope")


def test_the_override_holds_only_inside_the_block(tmp_path):
    folder = tmp_path / "t"
    _system(folder)
    with using_templates(folder):
        assert load_prompt("system").startswith(MARK)
    assert not load_prompt("system").startswith(MARK)
    with using_templates(None):
        assert not load_prompt("system").startswith(MARK)

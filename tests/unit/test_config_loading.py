"""Loading a run configuration (`evoduet_graph.config`).

Defaults, YAML files, dotted overrides, partial configurations laid over a base, and the errors
a bad file or value gives.

Every error is a `ConfigError` whose message names the file (or the override source) and the
offending key, and loading never changes the inputs it was given.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from evoduet_graph.config import (
    ConfigError,
    EvoDuetConfig,
    deep_merge,
    load_config,
    merge_config,
)
from evoduet_graph.startup import checked_config


def write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------
# defaults and files
# ------------------------------------------------------------------------------------------


def test_no_file_gives_the_documented_defaults():
    cfg = load_config(None)
    assert cfg == EvoDuetConfig()
    assert (cfg.iterations, cfg.candidates, cfg.seed) == (10, 1, 42)
    assert cfg.scaffold == "openevolve"
    assert cfg.population.kind is None  # the scaffold chooses it when the run starts
    assert checked_config(cfg).population.kind == "islands"
    assert cfg.candidates_after_retrieval is None
    assert cfg.max_consecutive_failures == 10
    assert cfg.max_consecutive_model_failures == 3
    assert cfg.memory is None and cfg.stop_at_score is None
    assert cfg.allow_invalid_initial is False


def test_a_partial_file_keeps_the_defaults_of_everything_it_leaves_out(tmp_path):
    path = write(tmp_path, "iterations: 4\ngate:\n  mode: llm\nevaluation:\n  workers: 2\n")
    cfg = load_config(path)
    defaults = EvoDuetConfig()
    assert cfg.iterations == 4
    assert cfg.gate.mode == "llm"
    assert cfg.evaluation.workers == 2
    # the rest of each touched section, and every untouched section, are the defaults
    assert cfg.gate.model_dump(exclude={"mode"}) == defaults.gate.model_dump(exclude={"mode"})
    assert cfg.evaluation.timeout_s == defaults.evaluation.timeout_s
    assert cfg.retrieval == defaults.retrieval
    assert cfg.seed == defaults.seed


def test_an_empty_file_is_all_defaults(tmp_path):
    assert load_config(write(tmp_path, "")) == EvoDuetConfig()
    assert load_config(write(tmp_path, "# only a comment\n", "c.yaml")) == EvoDuetConfig()


def test_a_path_given_as_text_loads_the_same(tmp_path):
    path = write(tmp_path, "seed: 7\n")
    assert load_config(str(path)) == load_config(path)
    assert load_config(str(path)).seed == 7


def test_to_yaml_round_trips_every_key(tmp_path):
    cfg = load_config(None).with_overrides(
        {"iterations": 3, "scaffold": "top_k", "retrieval.inner_rounds": 2, "seed": 5}
    )
    again = load_config(write(tmp_path, cfg.to_yaml()))
    assert again == cfg
    assert checked_config(again).population.kind == "top_k"


# ------------------------------------------------------------------------------------------
# file errors
# ------------------------------------------------------------------------------------------


def test_a_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="config file not found: .*nope.yaml"):
        load_config(missing)


def test_a_directory_is_not_a_config_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path)


def test_invalid_yaml_is_reported_with_the_file(tmp_path):
    path = write(tmp_path, "iterations: [1, 2\n")
    with pytest.raises(ConfigError, match=r"run.yaml is not valid YAML"):
        load_config(path)


def test_a_file_that_is_not_utf8_is_reported(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes("seed: 1 # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_config(path)


@pytest.mark.parametrize(("text", "kind"), [("- 1\n- 2\n", "list"), ("just text\n", "str")])
def test_a_file_that_is_not_a_mapping_is_refused(tmp_path, text, kind):
    with pytest.raises(ConfigError, match=f"must hold a mapping, got {kind}"):
        load_config(write(tmp_path, text))


# ------------------------------------------------------------------------------------------
# unknown keys and wrong values
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("iteration: 3\n", "iteration"),  # a typo of a top-level key
        ("gate:\n  mdoe: llm\n", "gate.mdoe"),  # a typo inside a section
        ("retrieval:\n  backend: offline\n  topk: 3\n", "retrieval.topk"),
    ],
)
def test_an_unknown_key_is_an_error_that_names_it_and_the_file(tmp_path, text, where):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert f"invalid configuration in {path}" in message
    assert f"  {where}: Extra inputs are not permitted" in message


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("iterations: ten\n", "iterations"),
        ('iterations: "3"\n', "iterations"),  # strict: a quoted number is text, not a number
        ("seed: 1.5\n", "seed"),
        ("allow_invalid_initial: yes please\n", "allow_invalid_initial"),
        ("gate: llm\n", "gate"),  # a section must be a mapping
        ("candidates: 0\n", "candidates"),  # below its lower bound
        ("iterations: -1\n", "iterations"),
    ],
)
def test_a_value_of_the_wrong_type_or_range_is_an_error_naming_the_key(tmp_path, text, where):
    with pytest.raises(ConfigError, match=rf"(?m)^  {where}: "):
        load_config(write(tmp_path, text))


def test_an_unknown_scaffold_is_an_error_naming_the_key_when_the_run_starts(tmp_path):
    cfg = load_config(write(tmp_path, "scaffold: nsga\n"))  # the registry checks the name
    with pytest.raises(ConfigError, match=r"^scaffold: unknown scaffold 'nsga'; known: "):
        checked_config(cfg)


def test_every_bad_key_of_a_file_is_reported_at_once(tmp_path):
    path = write(tmp_path, "iterations: ten\nseeed: 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "  iterations: " in str(info.value)
    assert "  seeed: " in str(info.value)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


# ------------------------------------------------------------------------------------------
# dotted overrides (the CLI's options) and partial configurations
# ------------------------------------------------------------------------------------------


def test_overrides_set_dotted_keys_and_leave_the_original_alone():
    base = EvoDuetConfig()
    cfg = base.with_overrides({"iterations": 2, "gate.mode": "llm", "evaluation.workers": 3})
    assert (cfg.iterations, cfg.gate.mode, cfg.evaluation.workers) == (2, "llm", 3)
    assert base == EvoDuetConfig()


def test_an_override_of_none_keeps_the_current_value():
    base = EvoDuetConfig().with_overrides({"seed": 9})
    assert base.with_overrides({"seed": None, "iterations": None}) == base


@pytest.mark.parametrize("key", ["iteratons", "gate.mdoe", "gate.mode.deeper", "nosuch.key"])
def test_an_unknown_override_key_is_refused(key):
    with pytest.raises(ConfigError, match=f"unknown config key '{key}'"):
        EvoDuetConfig().with_overrides({key: 1})


def test_a_bad_override_value_names_its_source_and_key():
    with pytest.raises(ConfigError) as info:
        EvoDuetConfig().with_overrides({"candidates": 0}, source="--candidates")
    assert "invalid configuration in --candidates" in str(info.value)
    assert "  candidates: " in str(info.value)


def test_merge_config_lays_a_partial_configuration_over_a_base_section_by_section():
    base = EvoDuetConfig().with_overrides({"gate.mode": "llm", "evaluation.workers": 3})
    data = {"evaluation": {"timeout_s": 12.0}, "iterations": 5}
    before = copy.deepcopy(data)
    cfg = merge_config(base, data, source="task config")
    assert cfg.evaluation.timeout_s == 12.0
    assert cfg.evaluation.workers == 3  # the base's value of a key the partial leaves out
    assert cfg.gate.mode == "llm"
    assert cfg.iterations == 5
    assert data == before  # the input is not changed


def test_merge_config_errors_name_the_source():
    with pytest.raises(ConfigError, match="invalid configuration in task config"):
        merge_config(EvoDuetConfig(), {"evaluation": {"workrs": 2}}, source="task config")


def test_deep_merge_merges_nested_mappings_into_new_dicts():
    base = {"a": {"x": 1, "y": {"p": 1}}, "b": 2}
    extra = {"a": {"y": {"q": 2}}, "b": {"now": "a mapping"}, "c": 3}
    snapshot = copy.deepcopy(base)
    out = deep_merge(base, extra)
    assert out == {"a": {"x": 1, "y": {"p": 1, "q": 2}}, "b": {"now": "a mapping"}, "c": 3}
    assert base == snapshot  # nothing merged into the inputs
    assert out["a"] is not base["a"]

"""Each file in ``configs/`` differs from the method only in its ladder row's keys.

Every file in ``configs/`` differs from ``configs/evoduet.yaml`` only in the keys that
define its row of the ablation ladder (README "Baselines and ablations").

Both files are loaded with `load_config` (defaults filled in) and flattened to dotted keys; the
keys whose values differ must be a subset of the row's allowed keys below. Novelty rejection,
model settings, budgets, iterations and seed may differ in no row, and a new file in
``configs/`` fails until its row is listed here.
"""

from __future__ import annotations

from typing import Any

import pytest

from evoduet_graph.config import load_config
from tests.conftest import ROOT

CONFIGS = ROOT / "configs"
REFERENCE = CONFIGS / "evoduet.yaml"
SCAFFOLD_POPULATION = {"population.kind", "population.top_k"}
RERANK = {
    "retrieval.ranking",
    "retrieval.inner_rounds",
    "retrieval.queries_per_round",
    "retrieval.rerank_relevance_weight",
    "retrieval.rerank_novelty_weight",
    "retrieval.rerank_max_document_chars",
}

ALLOWED: dict[str, set[str]] = {
    "evoduet.yaml": set(),
    "openevolve_mode.yaml": {"gate.mode", "retrieval.backend"},
    "oracle_documents.yaml": {"gate.mode", "retrieval.oracle_documents"},
    "joint_search.yaml": {
        "gate.mode",
        "joint_search.enabled",
        "joint_search.max_calls",
        "joint_search.protocol",
    },
    "stagnation.yaml": {"gate.mode", "gate.stagnation_patience"},
    "always_retrieve.yaml": {"gate.mode"},
    "heuristic.yaml": {"gate.mode", "gate.retrieve_probability"},
    "rerank.yaml": RERANK,
    "no_query_evolution.yaml": {"retrieval.query_evolution_steps", "retrieval.inner_rounds"},
    # the world-knowledge scaffold's rows on top of the listwise-rerank row
    "no_search_database.yaml": {*RERANK, "retrieval.use_search_database"},
    "select_relevance_novelty.yaml": {
        *RERANK,
        "retrieval.select_policy",
        "retrieval.documents_per_entry",
    },
    # the same knobs on the paper's full inner loop
    "no_search_database_full_loop.yaml": {"retrieval.use_search_database"},
    "select_relevance_novelty_full_loop.yaml": {
        "retrieval.select_policy",
        "retrieval.documents_per_entry",
        "retrieval.rerank_relevance_weight",
        "retrieval.rerank_novelty_weight",
    },
    "grounding_offline.yaml": {
        "retrieval.grounding",
        "retrieval.grounding_documents",
        "retrieval.grounding_max_documents",
    },
    "grounding_online.yaml": {"retrieval.grounding", "retrieval.grounding_max_documents"},
    "parallel_8.yaml": {
        "candidates",
        "candidates_after_retrieval",
        "evaluation.workers",
        "max_concurrency",
    },
    "top_k.yaml": SCAFFOLD_POPULATION,
    "scaffold_top_k.yaml": {"scaffold", *SCAFFOLD_POPULATION},
    "scaffold_best_of_n.yaml": {"scaffold", "candidates", *SCAFFOLD_POPULATION},
    "scaffold_evox.yaml": {
        "scaffold",
        "population.kind",
        "evox.strategy_patience",
        "evox.initial_rule",
        "evox.history",
        "evox.max_instruction_chars",
    },
}
"""The keys each row may change; everything else must equal configs/evoduet.yaml."""

NEVER_ALLOWED = ("novelty.", "llm.", "budget.", "iterations", "seed", "prompt.")


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (lists, scalars and empty mappings are leaves)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def differing_keys(path: Any) -> set[str]:
    reference = flatten(load_config(REFERENCE).model_dump(mode="json"))
    row = flatten(load_config(path).model_dump(mode="json"))
    assert reference.keys() == row.keys()
    return {k for k in reference if reference[k] != row[k]}


FILES = sorted(CONFIGS.glob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_config_differs_from_the_method_only_in_its_rows_keys(path):
    assert path.name in ALLOWED, f"{path.name}: a new row; list its allowed keys in ALLOWED"
    extra = differing_keys(path) - ALLOWED[path.name]
    assert not extra, f"{path.name} changes keys outside its row: {sorted(extra)}"


def test_no_row_may_change_novelty_models_budgets_or_the_run_length():
    for name, keys in ALLOWED.items():
        assert not [k for k in keys if k.startswith(NEVER_ALLOWED)], name


def test_every_listed_row_has_its_file_and_changes_something():
    for name in ALLOWED:
        assert (CONFIGS / name).is_file(), name
        if name != "evoduet.yaml":
            assert differing_keys(CONFIGS / name), f"{name} is identical to the method"


def test_an_unrelated_knob_is_caught(tmp_path):
    """The diff is real: a row file that also turns novelty off fails its check."""
    text = (CONFIGS / "oracle_documents.yaml").read_text(encoding="utf-8")
    bad = tmp_path / "oracle_documents.yaml"
    bad.write_text(text + "novelty:\n  enabled: false\n", encoding="utf-8")
    assert differing_keys(bad) - ALLOWED["oracle_documents.yaml"] == {"novelty.enabled"}

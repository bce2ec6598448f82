"""OpenEvolve's configuration schema: the one copy the task loader and the bench share.

`OPENEVOLVE_FIELDS` holds, per section, the fields of OpenEvolve 0.4.1's config dataclasses
(``openevolve/config.py``: ``Config``, ``LLMConfig`` / ``LLMModelConfig``, ``PromptConfig``,
``DatabaseConfig``, ``EvaluatorConfig``, ``EvolutionTraceConfig``); ``""`` is the top level
and ``"llm.models"`` one entry of ``llm.models`` / ``llm.evaluator_models``.
`SKYDISCOVER_FIELDS` adds the keys SkyDiscover's ``Config`` (``skydiscover/config.py``) has
beyond them. A task folder's ``config.yaml`` may use either (`unknown_keys` warns about the
rest, since OpenEvolve loads YAML with dacite, which silently drops unknown keys); the bench
checks the keys it writes for the real OpenEvolve against `OPENEVOLVE_FIELDS` alone.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OPENEVOLVE_FIELDS", "SKYDISCOVER_FIELDS", "accepted_fields", "unknown_keys"]

OPENEVOLVE_FIELDS: dict[str, frozenset[str]] = {
    "": frozenset(
        {
            "checkpoint_interval",
            "checkpoint_on_improvement",
            "convergence_threshold",
            "database",
            "diff_based_evolution",
            "diff_pattern",
            "early_stopping_metric",
            "early_stopping_patience",
            "enforce_evolve_blocks",
            "evaluator",
            "evolution_trace",
            "file_suffix",
            "full_rewrite_probability",
            "language",
            "llm",
            "log_dir",
            "log_level",
            "logger_prefix",
            "max_code_length",
            "max_iterations",
            "max_tasks_per_child",
            "prompt",
            "random_seed",
        }
    ),
    "llm": frozenset(
        {
            "allow_all_tools",
            "api_base",
            "api_key",
            "evaluator_models",
            "init_client",
            "manual_mode",
            "max_ai_credits",
            "max_budget_usd",
            "max_tokens",
            "models",
            "name",
            "primary_model",
            "primary_model_weight",
            "provider",
            "random_seed",
            "reasoning_effort",
            "retries",
            "retry_delay",
            "secondary_model",
            "secondary_model_weight",
            "system_message",
            "temperature",
            "timeout",
            "top_p",
            "weight",
        }
    ),
    "llm.models": frozenset(
        {
            "allow_all_tools",
            "api_base",
            "api_key",
            "init_client",
            "manual_mode",
            "max_ai_credits",
            "max_budget_usd",
            "max_tokens",
            "name",
            "provider",
            "random_seed",
            "reasoning_effort",
            "retries",
            "retry_delay",
            "system_message",
            "temperature",
            "timeout",
            "top_p",
            "weight",
        }
    ),
    "prompt": frozenset(
        {
            "artifact_security_filter",
            "code_length_threshold",
            "comprehensive_implementation_min_lines",
            "concise_implementation_max_lines",
            "diff_summary_max_line_len",
            "diff_summary_max_lines",
            "evaluator_system_message",
            "include_artifacts",
            "include_changes_under_chars",
            "initial_changes_description",
            "island_system_messages",
            "max_artifact_bytes",
            "meta_prompt_weight",
            "num_diverse_programs",
            "num_top_programs",
            "programs_as_changes_description",
            "suggest_simplification_after_chars",
            "system_message",
            "system_message_changes_description",
            "template_dir",
            "template_variations",
            "use_meta_prompting",
            "use_template_stochasticity",
        }
    ),
    "database": frozenset(
        {
            "archive_size",
            "artifact_retention_days",
            "artifact_size_threshold",
            "artifacts_base_path",
            "cleanup_old_artifacts",
            "db_path",
            "diversity_metric",
            "diversity_reference_size",
            "elite_selection_ratio",
            "embedding_api_base",
            "embedding_model",
            "exploitation_ratio",
            "exploration_ratio",
            "feature_bins",
            "feature_dimensions",
            "in_memory",
            "log_prompts",
            "max_snapshot_artifacts",
            "migration_interval",
            "migration_rate",
            "novelty_llm",
            "num_islands",
            "population_size",
            "random_seed",
            "similarity_threshold",
        }
    ),
    "evaluator": frozenset(
        {
            "cascade_evaluation",
            "cascade_thresholds",
            "cpu_limit",
            "distributed",
            "enable_artifacts",
            "evaluator_args",
            "llm_feedback_weight",
            "max_artifact_storage",
            "max_retries",
            "memory_limit_mb",
            "parallel_evaluations",
            "timeout",
            "use_llm_feedback",
        }
    ),
    "evolution_trace": frozenset(
        {
            "buffer_size",
            "compress",
            "enabled",
            "format",
            "include_code",
            "include_failures",
            "include_prompts",
            "output_path",
        }
    ),
}
"""OpenEvolve 0.4.1's config fields by section (``""``: top level)."""

SKYDISCOVER_FIELDS: dict[str, frozenset[str]] = {
    "": frozenset(
        {
            "agentic",
            "allowed_files",
            "alphaevolve",
            "benchmark",
            "context_builder",
            "diff_based_generation",
            "human_feedback_enabled",
            "human_feedback_file",
            "human_feedback_mode",
            "max_parallel_iterations",
            "max_solution_length",
            "monitor",
            "search",
            "system_prompt_override",
        }
    ),
    "llm": frozenset(
        {
            "guide_models",
        }
    ),
    "evaluator": frozenset(
        {
            "evaluation_file",
            "file_suffix",
            "inject_evaluator_context",
            "is_image_mode",
            "llm_as_judge",
        }
    ),
}
"""Keys SkyDiscover's config has beyond `OPENEVOLVE_FIELDS`, by section."""


def accepted_fields(section: str, *, skydiscover: bool = True) -> frozenset[str]:
    """The fields of ``section`` (``""``: top level; ``"llm.models"``: one model entry).

    Args:
        section: the section name.
        skydiscover: also accept SkyDiscover's keys.

    Returns:
        The field names (empty for an unknown section).
    """
    fields = OPENEVOLVE_FIELDS.get(section, frozenset())
    if skydiscover:
        fields = fields | SKYDISCOVER_FIELDS.get(section, frozenset())
    return fields


def unknown_keys(config: dict[str, Any], *, skydiscover: bool = True) -> list[str]:
    """Dotted names of the keys of ``config`` that are no OpenEvolve (or SkyDiscover) field.

    ``early_stopping_*`` keys pass (OpenEvolve versions differ there); sections the schema
    does not list are not looked into.

    Args:
        config: a parsed ``config.yaml`` (or the config the bench writes).
        skydiscover: also accept SkyDiscover's keys.

    Returns:
        ``["key", "section.key", "llm.models[0].key", ...]`` in file order.
    """
    found: list[str] = []
    top = accepted_fields("", skydiscover=skydiscover)
    for key, value in config.items():
        if key.startswith("early_stopping_"):
            continue
        if key not in top:
            found.append(key)
            continue
        allowed = accepted_fields(key, skydiscover=skydiscover)
        if not allowed or not isinstance(value, dict):
            continue
        found += [f"{key}.{sub}" for sub in value if sub not in allowed]
        if key != "llm":
            continue
        model_fields = accepted_fields("llm.models", skydiscover=skydiscover)
        for list_key in ("models", "evaluator_models"):
            models = value.get(list_key)
            if not isinstance(models, list):
                continue
            for i, model in enumerate(models):
                if isinstance(model, dict):
                    found += [
                        f"llm.{list_key}[{i}].{sub}" for sub in model if sub not in model_fields
                    ]
    return found

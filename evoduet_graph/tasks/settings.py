"""The task config's own settings in a run: which are used, which are ignored, and why.

A task folder's ``config.yaml`` (OpenEvolve's or SkyDiscover's) carries settings that are the
task's business and settings that are the user's. `apply_task_settings` folds the first kind
into the run configuration where the user left them unset, and says in one line per setting
what it used:

* ``prompt.system_message`` (also ``llm.system_message``): the instruction (`load_task`);
* ``evaluator.timeout``, ``evaluator.cascade_evaluation`` / ``cascade_thresholds``: the
  evaluation (`load_task`), unless ``evaluation.timeout_s`` / ``evaluation.cascade`` are set;
* ``diff_based_evolution`` (OpenEvolve) / ``diff_based_generation`` (SkyDiscover):
  ``prompt.diff_based`` when that is null (auto). Deliberate deviation: with the embedded
  1.5B model (``llm.model: local``) the auto choice, full rewrites, is kept, because that model
  follows the diff format unreliably; ``prompt.diff_based: true`` forces diffs;
* ``max_code_length`` (OpenEvolve) / ``max_solution_length`` (SkyDiscover): ``max_code_length``
  when that is null; a longer child is invalid with that reason (`generate`);
* ``random_seed``: ``seed`` when the run's seed is the default (42);
* the model settings (``llm.models`` with weights, ``primary_model`` / ``secondary_model`` with
  their weights, ``api_base``, ``temperature``, ``max_tokens``, ``api_key`` as ``${VAR}``):
  used only with ``--model task`` (``llm.model: task``), as a weighted ensemble (OpenEvolve's
  ``LLMConfig.__post_init__`` rules: ``primary_model_weight`` defaults to 1.0, a secondary
  model with weight 0 is left out); otherwise reported as ignored in one line.
  Model names become ``openai:<name>`` (an OpenAI-compatible endpoint, ``api_base``).

The result is written to the run's ``config.yaml``, so ``evoduet resume`` keeps it. Applying
it again to its own result changes nothing and reports the same lines (a value equal to the
task's counts as used), so the CLI, `run` and `resume` may each call it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from evoduet_graph.config import ConfigError, EvoDuetConfig
from evoduet_graph.task import Task

__all__ = ["TaskSettings", "apply_task_settings", "task_models"]

DEFAULT_SEED = 42
_ENV_REF = re.compile(r"^\$\{?(\w+)\}?$")


@dataclass
class TaskSettings:
    """What `apply_task_settings` did.

    Attributes:
        config: the run configuration with the task's settings folded in.
        used: one line per task setting in force (``"diff_based_generation=true →
            prompt.diff_based"``).
        ignored: one line per task setting not used, with the reason.
    """

    config: EvoDuetConfig
    used: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The summary lines a run prints (``task config: used ...`` / ``... ignored ...``)."""
        out = []
        if self.used:
            out.append("task config: using " + "; ".join(self.used))
        out += [f"task config: {line}" for line in self.ignored]
        return out


def _get(config: dict[str, Any], *keys: str) -> Any:
    node: Any = config
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _model_name(name: str) -> str:
    text = name.strip()
    if text.lower() == "local" or text.lower().startswith("openai:"):
        return text
    return f"openai:{text}"


def task_models(task: Task) -> list[dict[str, Any]]:
    """The task config's models as ``llm.models`` entries (empty when it names none).

    Reads ``llm.models`` (``name``, ``weight``, ``api_base``, ``temperature``, ``max_tokens``,
    ``api_key``) and OpenEvolve's older ``primary_model`` / ``secondary_model`` with their
    weights; section-level ``api_base`` / ``temperature`` / ``max_tokens`` / ``api_key`` fill
    what a model leaves unset. A literal ``api_key`` is never copied (the run's
    ``config.yaml`` would hold it); ``${VAR}`` becomes ``api_key_env: VAR``.
    """
    llm = _get(task.openevolve_config, "llm")
    if not isinstance(llm, dict):
        return []
    raw: list[dict[str, Any]] = []
    if isinstance(llm.get("models"), list):
        raw = [m for m in llm["models"] if isinstance(m, dict) and m.get("name")]
    if llm.get("primary_model"):
        raw.append({"name": llm["primary_model"], "weight": llm.get("primary_model_weight")})
        secondary_weight = llm.get("secondary_model_weight")
        if llm.get("secondary_model") and (secondary_weight is None or secondary_weight > 0):
            raw.append({"name": llm["secondary_model"], "weight": secondary_weight})
    out = []
    for model in raw:
        entry: dict[str, Any] = {
            "model": _model_name(str(model["name"])),
            "weight": _number(model.get("weight")) or 1.0,
        }
        base_url = model.get("api_base") or llm.get("api_base")
        if isinstance(base_url, str) and base_url:
            entry["base_url"] = base_url
        for ours, theirs in (("temperature", "temperature"), ("max_tokens", "max_tokens")):
            number = _number(model.get(theirs, llm.get(theirs)))
            if number is not None:
                entry[ours] = int(number) if ours == "max_tokens" else number
        key = model.get("api_key", llm.get("api_key"))
        if isinstance(key, str) and (ref := _ENV_REF.match(key.strip())):
            entry["api_key_env"] = ref.group(1)
        out.append(entry)
    return out


def _models_summary(models: list[dict[str, Any]]) -> str:
    return ", ".join(
        f"{m['model'].removeprefix('openai:')} (weight {m['weight']:g})" for m in models
    )


def _diff_based(
    raw: dict[str, Any], config: EvoDuetConfig, settings: TaskSettings, overrides: dict[str, Any]
) -> None:
    """The task config's diff setting as ``prompt.diff_based``, when the run leaves it open.

    The first of ``diff_based_evolution`` (OpenEvolve) and ``diff_based_generation``
    (SkyDiscover) that is set counts; the embedded model ignores a ``true`` (it writes full
    rewrites).
    """
    for key in ("diff_based_evolution", "diff_based_generation"):
        value = raw.get(key)
        if not isinstance(value, bool):
            continue
        if config.prompt.diff_based is value:
            settings.used.append(f"{key}={str(value).lower()}")
        elif config.prompt.diff_based is not None:
            settings.ignored.append(
                f"{key}={str(value).lower()} ignored: prompt.diff_based="
                f"{str(config.prompt.diff_based).lower()} is set"
            )
        elif config.llm.model.strip().lower() == "local" and not config.llm.models and value:
            settings.ignored.append(
                f"{key}=true not used with the embedded model (it follows the diff format "
                "unreliably; it writes full rewrites); set prompt.diff_based: true to force diffs"
            )
        else:
            overrides["prompt.diff_based"] = value
            settings.used.append(f"{key}={str(value).lower()}")
        return


def _code_length(
    raw: dict[str, Any], config: EvoDuetConfig, settings: TaskSettings, overrides: dict[str, Any]
) -> None:
    """The task config's length limit as ``max_code_length``, unless the run sets another.

    The first of ``max_code_length`` (OpenEvolve) and ``max_solution_length`` (SkyDiscover)
    that is set counts.
    """
    for key in ("max_code_length", "max_solution_length"):
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            continue
        if config.max_code_length in (None, value):
            overrides["max_code_length"] = value
            settings.used.append(f"{key}={value}")
        else:
            settings.ignored.append(
                f"{key}={value} ignored: max_code_length={config.max_code_length} is set"
            )
        return


def apply_task_settings(task: Task, config: EvoDuetConfig) -> TaskSettings:
    """Fold the task config's own settings into ``config`` (module docstring).

    Args:
        task: the loaded task.
        config: the run configuration as the user gave it.

    Returns:
        `TaskSettings`: the new configuration and the lines that say what was used/ignored.

    Raises:
        ConfigError: ``llm.model: task`` but the task config names no models.
    """
    raw = task.openevolve_config
    settings = TaskSettings(config=config)
    overrides: dict[str, Any] = {}

    if task.instruction and (
        _get(raw, "prompt", "system_message") or _get(raw, "llm", "system_message")
    ):
        settings.used.append("prompt.system_message as the instruction")
    if _get(raw, "evaluator", "timeout") is not None:
        if config.evaluation.timeout_s is None:
            settings.used.append(f"evaluator.timeout={task.timeout_s:g} s")
        else:
            settings.ignored.append(
                "evaluator.timeout ignored: evaluation.timeout_s="
                f"{config.evaluation.timeout_s:g} is set"
            )
    if task.cascade:
        thresholds = ", ".join(f"{t:g}" for t in task.cascade_thresholds)
        settings.used.append(f"cascade evaluation (thresholds {thresholds})")

    _diff_based(raw, config, settings, overrides)
    _code_length(raw, config, settings, overrides)

    seed = raw.get("random_seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        if config.seed in (DEFAULT_SEED, seed):
            overrides["seed"] = seed
            settings.used.append(f"random_seed={seed}")
        else:
            settings.ignored.append(f"random_seed={seed} ignored: seed={config.seed} is set")

    models = task_models(task)
    if config.llm.model.strip().lower() == "task":
        if not models:
            raise ConfigError(
                f"llm.model: --model task uses the model settings of {task.path / 'config.yaml'}, "
                "but it names none (llm.models or llm.primary_model); pass another --model"
            )
        if not config.llm.models:
            overrides["llm.models"] = models
        settings.used.append("models " + _models_summary(models) + " (--model task)")
    elif models:
        settings.ignored.append(
            f"model settings ({_models_summary(models)}) ignored: the run uses "
            f"{config.llm.model}; pass --model task to use them"
        )
    if overrides:
        settings.config = config.with_overrides(overrides, source=f"{task.path / 'config.yaml'}")
    return settings

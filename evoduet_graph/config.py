"""Run configuration: every knob of an EvoDuet run, its default and its meaning.

`EvoDuetConfig` is a pydantic model. It loads from YAML (`load_config`), merges CLI overrides
(`EvoDuetConfig.with_overrides`) and is written verbatim to ``<run_dir>/config.yaml`` so that
``evoduet resume`` rebuilds the same run. Defaults follow the reference implementation of the
paper (DESIGN.md §1) and OpenEvolve's ``config.yaml`` for the population.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ConfigError(ValueError):
    """A configuration file or override is malformed; the message names the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LLMConfig(_Section):
    """Chat model settings (DESIGN.md §4)."""

    model: str = Field(
        "local",
        description="`local` (embedded Qwen2.5-Coder-1.5B GGUF) or `openai:<model>` for any "
        "OpenAI-compatible endpoint (OpenAI, OpenRouter, vLLM, Ollama, llama.cpp server).",
    )
    base_url: str | None = Field(
        None, description="OpenAI-compatible base URL; default: $OPENAI_BASE_URL or OpenAI."
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable with the key.")
    temperature: float = Field(0.7, ge=0.0, le=2.0, description="Sampling temperature.")
    max_tokens: int = Field(1024, ge=16, description="Completion token limit per call.")
    timeout_s: float = Field(300.0, gt=0, description="Per-request timeout in seconds.")
    max_retries: int = Field(3, ge=0, description="Retries of a failed request (with backoff).")
    local_n_ctx: int = Field(8192, ge=512, description="Context window of the embedded model.")
    local_n_threads: int | None = Field(
        None, description="CPU threads for the embedded model; default: all cores."
    )
    local_cache_dir: str | None = Field(
        None,
        description="Folder of the assembled GGUF; default $EVODUET_CACHE_DIR, else "
        "~/.cache/evoduet_graph/models.",
    )


class GateConfig(_Section):
    """Retrieval gate (DESIGN.md §1, paper §3.2)."""

    mode: Literal["never", "always", "llm", "heuristic", "stagnation"] = Field(
        "never",
        description="`never`: always no-op; `always`: retrieve every iteration; `llm`: the "
        "knowledge-gap gate; `heuristic`: retrieve with probability `retrieve_probability`; "
        "`stagnation`: retrieve after `stagnation_patience` iterations without improvement.",
    )
    retrieve_probability: float = Field(
        0.3, ge=0.0, le=1.0, description="`heuristic` gate: probability of `retrieve` (seeded)."
    )
    stagnation_patience: int = Field(
        3,
        ge=1,
        description="`stagnation` gate: retrieve after this many iterations without a new best.",
    )


class PopulationConfig(_Section):
    """Program database. Names and defaults follow OpenEvolve's `database:` section."""

    kind: Literal["islands", "top_k"] = Field(
        "islands", description="`islands`: MAP-Elites islands (OpenEvolve); `top_k`: best k."
    )
    population_size: int = Field(1000, ge=1, description="Max programs kept (all islands).")
    archive_size: int = Field(100, ge=1, description="Elite archive size.")
    num_islands: int = Field(5, ge=1, description="Number of islands.")
    feature_dimensions: list[str] = Field(
        default_factory=lambda: ["complexity", "diversity"],
        description="MAP-Elites axes: built-ins `complexity`, `diversity`, `score`, or any "
        "numeric metric name the evaluator returns.",
    )
    feature_bins: int = Field(10, ge=1, description="Bins per feature dimension.")
    elite_selection_ratio: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="`islands`: share of the island's top programs taken as inspirations "
        "first; `top_k`: probability that the parent is the best program.",
    )
    exploration_ratio: float = Field(
        0.2, ge=0.0, le=1.0, description="Probability of a uniformly random island parent."
    )
    exploitation_ratio: float = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="Probability of a parent from the elite archive; the rest of the time "
        "the parent is fitness-weighted on the island.",
    )
    migration_interval: int = Field(50, ge=1, description="Generations between migrations.")
    migration_rate: float = Field(0.1, ge=0.0, le=1.0, description="Share of island migrated.")
    top_k: int = Field(10, ge=1, description="Size of the `top_k` population.")


class PromptConfig(_Section):
    """What the mutation prompt shows (OpenEvolve `prompt:` section)."""

    num_top_programs: int = Field(
        3, ge=0, description="Top programs shown in the mutation prompt (besides the parent)."
    )
    num_inspirations: int = Field(
        2, ge=0, description="Inspiration programs shown in the mutation prompt."
    )
    history_programs: int = Field(3, ge=0, description="Recent attempts shown with errors.")
    max_artifact_chars: int = Field(800, ge=0, description="Stderr/traceback chars shown.")
    max_program_chars: int = Field(12000, ge=200, description="Truncation of shown programs.")
    max_document_chars: int = Field(2000, ge=100, description="Evidence chars per document.")
    diff_based: bool | None = Field(
        None,
        description="true: ask for SEARCH/REPLACE diffs (OpenEvolve's default); false: full "
        "rewrites; null (auto): diffs, except rewrites for the embedded 1.5B model, which "
        "follows the diff format unreliably.",
    )


class EvaluationConfig(_Section):
    """Sandboxed evaluator (DESIGN.md §5)."""

    timeout_s: float | None = Field(
        None, gt=0, description="Per-candidate wall clock; default: the task's time budget."
    )
    memory_mb: int = Field(4096, ge=64, description="Address-space limit of the child.")
    workers: int = Field(4, ge=1, description="Candidates evaluated concurrently.")
    cascade: bool | None = Field(
        None, description="Use evaluate_stage1..3 when present; default: the task's config."
    )
    max_processes: int | None = Field(
        64,
        ge=1,
        description="Most tasks (processes + threads) a candidate may have at once: a pids "
        "cgroup per candidate (fork bombs fail with EAGAIN); RLIMIT_NPROC when no cgroup can "
        "be made and not root; null: no limit. The run reports what this machine enforces.",
    )
    max_file_mb: int = Field(
        256, ge=1, description="Largest file a candidate may write (RLIMIT_FSIZE), MiB; "
        "stdout/stderr included."
    )
    cpu_time_s: float | None = Field(
        None, gt=0, description="CPU seconds of a candidate (RLIMIT_CPU); default: "
        "timeout × cores + 10 (a backstop for the wall clock)."
    )
    isolate_network: bool = Field(
        True,
        description="Run candidates without network (a fresh network namespace via "
        "`unshare --net`) when this machine allows it; the run warns once when it does not.",
    )


class RetrievalConfig(_Section):
    """World-knowledge layer (DESIGN.md §1); used when the gate can retrieve."""

    backend: Literal["none", "tavily", "offline"] = Field(
        "offline",
        description="Search backend: `offline` (BM25 over the task's docs/, --corpus folders "
        "and numpy/scipy API docs), `tavily` (needs TAVILY_API_KEY), `none`.",
    )
    corpus: list[str] = Field(default_factory=list, description="Extra offline corpus folders.")
    inner_rounds: int = Field(3, ge=1, description="R: query-evolution rounds.")
    queries_per_round: int = Field(1, ge=1, description="Q: queries per round.")
    results_per_query: int = Field(5, ge=1, description="Documents requested per query.")
    top_k: int = Field(3, ge=1, description="K: documents retained.")
    select_policy: Literal["delta", "relevance_novelty", "recency", "full"] = Field(
        "delta",
        description="Which D_search records the gate and query constructor see: `delta` "
        "(highest and lowest realised Δ), `relevance_novelty`, `recency`, `full`.",
    )
    select_num: int = Field(5, ge=0, description="How many D_search records are shown.")
    query_evolution_steps: int | None = Field(
        None,
        ge=1,
        description="Ablation: 1 = one search + LLM reranking, no reflection rounds "
        "(overrides inner_rounds); None = inner_rounds.",
    )
    max_query_chars: int = Field(300, ge=10, description="Cap on a query's length.")
    search_timeout_s: float = Field(30.0, gt=0, description="Per-query search timeout.")
    search_retries: int = Field(2, ge=0, description="Retries (with backoff) per query.")
    tavily_search_depth: Literal["basic", "advanced"] = Field(
        "basic", description="Tavily `search_depth` (`advanced` costs more credits)."
    )
    tavily_include_raw_content: bool = Field(
        False, description="Ask Tavily for the full page text and use it as the content."
    )
    offline_include_pydoc: list[str] = Field(
        default_factory=lambda: ["numpy", "scipy"],
        description="Installed packages whose docstrings join the offline corpus.",
    )
    index_cache_dir: str | None = Field(
        None, description="Offline index cache; default $EVODUET_CACHE_DIR/index."
    )


class BudgetConfig(_Section):
    """Spending limits of a run (all optional). Reaching one stops the run cleanly after the
    iteration in flight, with a resumable checkpoint and the reason as ``stop_reason``; totals
    count every process of the run (they survive ``evoduet resume``)."""

    max_llm_calls: int | None = Field(None, ge=1, description="Most chat-model calls.")
    max_tokens: int | None = Field(
        None, ge=1, description="Most tokens (input + output) over all calls."
    )
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        description="Most estimated spend in USD for priced models (built-in price table "
        "`evoduet_graph.budget.DEFAULT_PRICES`, extended/overridden by `prices`); unpriced "
        "models (e.g. `local`) cost 0.",
    )
    max_wall_s: float | None = Field(
        None, gt=0, description="Most wall-clock seconds of the run, summed over resumes."
    )
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="Extra prices: model name (or prefix) → [USD per 1M input tokens, USD "
        "per 1M output tokens]; overrides the built-in table.",
    )


class EvoDuetConfig(_Section):
    """Every knob of a run. Unknown keys are an error (typos must not pass silently).

    Raises:
        ConfigError: from `load_config` / `with_overrides` when a key or value is invalid.
    """

    iterations: int = Field(10, ge=0, description="Outer-loop iterations.")
    candidates: int = Field(1, ge=1, description="N: candidates generated per iteration.")
    candidates_after_retrieval: int | None = Field(
        None,
        ge=1,
        description="N after a retrieve / look-up decision (parallel mode: 8); None = "
        "`candidates`.",
    )
    seed: int = Field(42, description="Seed of parent selection and sampling.")
    max_consecutive_failures: int = Field(
        10, ge=1, description="Stop after this many iterations without any valid candidate."
    )
    llm: LLMConfig = Field(default_factory=LLMConfig)
    gate: GateConfig = Field(default_factory=GateConfig)
    population: PopulationConfig = Field(default_factory=PopulationConfig)
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    allow_invalid_initial: bool = Field(
        False,
        description="Start even when the initial program fails its own evaluation (by "
        "default a new run stops at startup with the evaluator's error).",
    )

    def with_overrides(self, overrides: dict[str, Any]) -> EvoDuetConfig:
        """Return a copy with dotted-key overrides applied, e.g. ``{"llm.model": "local"}``.

        ``None`` values are ignored so CLI options left unset keep the file's value.

        Raises:
            ConfigError: an unknown key or an invalid value.
        """
        data = self.model_dump()
        for key, value in overrides.items():
            if value is None:
                continue
            node = data
            parts = key.split(".")
            for part in parts[:-1]:
                if part not in node or not isinstance(node[part], dict):
                    raise ConfigError(f"unknown config key {key!r}")
                node = node[part]
            if parts[-1] not in node:
                raise ConfigError(f"unknown config key {key!r}")
            node[parts[-1]] = value
        return _validate(data, source="overrides")

    def to_yaml(self) -> str:
        """The full configuration as YAML (what ``<run_dir>/config.yaml`` holds)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def _validate(data: Any, source: str) -> EvoDuetConfig:
    try:
        return EvoDuetConfig.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"  {'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        ]
        raise ConfigError(f"invalid configuration in {source}:\n" + "\n".join(lines)) from None


def load_config(path: str | Path | None = None) -> EvoDuetConfig:
    """Load an `EvoDuetConfig` from a YAML file (``None``: all defaults).

    Raises:
        ConfigError: the file is missing, is not YAML, is not a mapping, or has invalid keys.
    """
    if path is None:
        return EvoDuetConfig()
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping, got {type(data).__name__}")
    return _validate(data, source=str(path))

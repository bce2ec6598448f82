"""Run configuration: every knob of an EvoDuet run, its default and its meaning.

`EvoDuetConfig` is a pydantic model. It loads from YAML (`load_config`), merges CLI overrides
(`EvoDuetConfig.with_overrides`) and is written verbatim to ``<run_dir>/config.yaml`` so that
``evoduet resume`` rebuilds the same run. Defaults follow the reference implementation of the
paper (docs/design.md §1) and OpenEvolve's ``config.yaml`` for the population.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from evoduet_graph.errors import UserError

# candidates per iteration: each is one LLM call and one evaluation in the same step; more
# than this is a typo (a search that wide is several runs, or several islands)
MAX_CANDIDATES = 64


class ConfigError(UserError, ValueError):
    """A configuration file or override is malformed; the message names the key."""


class _Section(BaseModel):
    # strict: a YAML `true` is not an integer and a quoted "4" is not a number (pydantic's lax
    # mode would coerce both silently); ints are still accepted for floats
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True)


class WeightedModelConfig(_Section):
    """One member of a weighted model ensemble (``llm.models``).

    One member of a weighted model ensemble (``llm.models``; OpenEvolve's ``llm.models``
    entries, ``primary_model`` / ``secondary_model`` with their weights).
    """

    model: str = Field(description="A model string, as `llm.model`.")
    weight: float = Field(1.0, gt=0, description="Relative probability of being picked.")
    base_url: str | None = Field(None, description="Endpoint of this member; default llm's.")
    api_key_env: str | None = Field(None, description="Key variable; default llm's.")
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="Default llm's.")
    max_tokens: int | None = Field(None, ge=16, description="Default llm's.")


class LLMConfig(_Section):
    """Chat model settings (docs/design.md §4)."""

    model: str = Field(
        "local",
        description="`local` (embedded Qwen2.5-Coder-1.5B GGUF), `openai:<model>` for any "
        "OpenAI-compatible endpoint (OpenAI, OpenRouter, vLLM, Ollama, llama.cpp server), "
        "`<provider>:<model>` for any other provider of LangChain's `init_chat_model` "
        "(`anthropic:`, `google_genai:`, `ollama:`, `bedrock_converse:`, `mistralai:`, "
        "`groq:`, ...; its integration package is an extra), `python:<module>:<factory>` for "
        "a chat model of your own, or `task`: the model settings of the task folder's "
        "config.yaml, as `models`.",
    )
    models: list[WeightedModelConfig] = Field(
        default_factory=list,
        description="A weighted ensemble: each call picks one member with probability "
        "weight / sum of weights (seeded by `seed`); empty: the one `model`.",
    )
    base_url: str | None = Field(
        None,
        description="Endpoint: an OpenAI-compatible base URL for `openai:` (default: "
        "$OPENAI_BASE_URL or OpenAI), else the provider's own endpoint setting (a gateway).",
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="Environment variable with the key; left at its default, another provider "
        "reads its own (ANTHROPIC_API_KEY, GOOGLE_API_KEY, ...: docs/models.md).",
    )
    temperature: float = Field(0.7, ge=0.0, le=2.0, description="Sampling temperature.")
    top_p: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="Nucleus sampling; None: not sent (the embedded model keeps its 0.95). A "
        "provider that refuses it together with `temperature` (Anthropic) gets `temperature` "
        "only, with one warning at startup.",
    )
    max_tokens: int = Field(1024, ge=16, description="Completion token limit per call.")
    timeout_s: float = Field(300.0, gt=0, description="Per-request timeout in seconds.")
    max_retries: int = Field(3, ge=0, description="Retries of a failed request (with backoff).")
    call_deadline_s: float = Field(
        60.0,
        gt=0,
        description="Per-call deadline in seconds: a request to an `openai:` endpoint waits at "
        "most this long (and at most `timeout_s`), and no retry starts after it. A connected "
        "but silent endpoint then fails each call after this long, and the run stops after "
        "`max_consecutive_model_failures` such iterations (defaults: about 3 min with gate "
        "`never`, 6 min with the llm gate). Raise it for servers that take longer to answer "
        "one request (e.g. a CPU llama.cpp server writing long programs).",
    )
    local_n_ctx: int = Field(8192, ge=512, description="Context window of the embedded model.")
    local_n_threads: int | None = Field(
        None, description="CPU threads for the embedded model; default: all cores."
    )
    local_parallel: int = Field(
        8,
        ge=1,
        le=64,
        description="Free-text calls of the embedded model decoded together as one llama.cpp "
        "batch (the N candidates of an iteration: shared prompt evaluated once, one decode step "
        "for all); 1 serves them one at a time.",
    )
    local_prompt_lookup: bool = Field(
        True,
        description="Prompt-lookup speculative decoding in the embedded model's batched decoder: "
        "each step drafts the continuation of every sequence from its prompt (a child copies "
        "its parent) or its own output, verifies the draft in the same decode and keeps the "
        "accepted prefix; the output is distributed exactly as without it (greedy: the same "
        "tokens). false: one token per sequence per step. Free-text calls with "
        "`local_parallel` > 1 only. `evoduet bench --model local` passes it to its model "
        "server (llama-cpp-python's `--draft_model prompt-lookup-decoding`).",
    )
    local_prompt_cache_mib: int = Field(
        0,
        ge=0,
        description="Memory (MiB) of the embedded model's in-memory prompt cache "
        "(llama-cpp-python's `LlamaRAMCache`; entries counted at their full size, the logits "
        "copy cut to one row): a sequential call (JSON grammar: gate, query, hypothetical "
        "scores; every call with `local_parallel: 1`) can start from the state of an earlier "
        "call that shares more of its prompt than the previous call did. An entry is about "
        "28 KiB per token (45 MiB for 1,600 tokens). 0 (default): off, because it did not pay "
        "on the gate-llm bench: 512 MiB served 2-3 of 11 calls from the cache, about 3% of the "
        "prompt tokens, while saving an entry after every sequential call took 0.7-0.9 s and "
        "the peak RSS grew by 0.7 GiB (README, prompt caching).",
    )
    local_isolation: Literal["process", "none"] = Field(
        "process",
        description="Where the embedded model runs. `process` (default): in a worker process "
        "of its own, so a native crash (SIGSEGV, SIGILL, an out-of-memory kill) fails that call "
        "with its reason, the worker restarts for the next call and the call is retried like "
        "any failed model call; `none`: inside the run's process (a crash ends the run).",
    )
    local_engine: str = Field(
        "evoduet_graph.llm.local:load_engine",
        description="`module:function` the embedded model's worker process builds its engine "
        "with (called with the worker's settings; returns an object with `complete`, `seed`, "
        "`clear_cache`, `warm_up`, `close`): the llama.cpp engine by default; another inference "
        "library, or a scripted engine in tests, plugs in here.",
    )
    local_cache_dir: str | None = Field(
        None,
        description="Folder of the assembled GGUF; default $EVODUET_CACHE_DIR, else "
        "~/.cache/evoduet_graph/models.",
    )
    roles: dict[str, str | dict[str, Any]] = Field(
        default_factory=dict,
        description="Model per node: `gate`, `construct_query`, `hypothetical_score`, "
        "`rerank`, `generate`, `revise_strategy` → a model string (`openai:<m>`, `local`) or "
        "a mapping of `model`, `base_url`, `api_key_env`, `temperature`, `max_tokens`, "
        "`timeout_s`, `max_retries` laid over this section. Unmapped nodes use `model` (the "
        "paper's one-model setting). Usage and cost are reported per model. Role names and "
        "models are checked when the run starts (`evoduet_graph.llm.roles.check_roles`).",
    )


class GateConfig(_Section):
    """Retrieval gate (docs/design.md §1, paper §3.2)."""

    mode: Literal["never", "always", "llm", "heuristic", "stagnation", "oracle"] = Field(
        "llm",
        description="`llm` (default, the method): the knowledge-gap gate decides no-op / "
        "look-up / retrieve each iteration; `never`: always no-op (the OpenEvolve baseline, "
        "`configs/openevolve_mode.yaml`); `always`: retrieve every iteration; `heuristic`: "
        "retrieve with probability `retrieve_probability`; `stagnation`: retrieve after "
        "`stagnation_patience` iterations without improvement; `oracle`: no gate and no "
        "search, the fixed documents of `retrieval.oracle_documents` go into every mutation "
        "prompt (paper §2.2 baseline).",
    )
    retrieve_probability: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="`heuristic` gate: probability of `retrieve` (seeded); 0.1 as in the "
        "world-knowledge scaffold's random-rate control.",
    )
    stagnation_patience: int = Field(
        3,
        ge=1,
        description="`stagnation` gate: retrieve after this many iterations without a new best.",
    )
    review: bool = Field(
        False,
        description="Pause at every gate decision for a person to keep or change it "
        "(LangGraph interrupt: Studio shows it, the CLI asks on the terminal).",
    )


class PopulationConfig(_Section):
    """Program database. Names and defaults follow OpenEvolve's `database:` section."""

    kind: Literal["islands", "top_k"] | None = Field(
        None,
        description="`islands`: MAP-Elites islands (OpenEvolve); `top_k`: best k. Null (left "
        "out): the `scaffold` chooses it when the run starts: `islands` for `openevolve` and "
        "`evox`, `top_k` for `top_k` and `best_of_n`; `openevolve` also runs over `top_k`, the "
        "other scaffolds only over their own kind (another value is a configuration error). "
        "`<run_dir>/config.yaml` holds the kind the run used.",
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
    snapshot_interval: int = Field(
        100,
        ge=1,
        description="Iterations between full population snapshots in programs.sqlite; in "
        "between, each iteration journals one small operation (constant bytes per iteration).",
    )


class PromptConfig(_Section):
    """What the mutation prompt shows (OpenEvolve `prompt:` section)."""

    num_top_programs: int = Field(
        3,
        ge=0,
        description=(
            "Top programs shown in the context c_t (besides the parent): in the mutation "
            "prompt and every knowledge-layer prompt of the iteration."
        ),
    )
    num_inspirations: int = Field(
        2,
        ge=0,
        description=(
            "Inspiration programs shown in the context c_t (mutation and knowledge-layer prompts)."
        ),
    )
    history_programs: int = Field(3, ge=0, description="Recent attempts shown.")
    other_programs: Literal["diff", "code"] = Field(
        "diff",
        description="How the context c_t shows the top programs and inspirations: `diff` (a "
        "unified diff against the current program, at most 30 lines: shorter, and it says what "
        "they do differently) or `code` (each program's code in full, cut at "
        "`max_program_chars`, as OpenEvolve's prompt shows them). A folder program's are "
        "always diffs, file by file.",
    )
    failed_attempts: Literal["outcome", "details"] = Field(
        "outcome",
        description="What the recent attempts show of an invalid attempt: `outcome` (its "
        "iteration, parent and outcome line only, as OpenEvolve's history, which gives a failed "
        "attempt's outcome and not its code or traceback) or `details` (also its error, its "
        "change as a diff and its artifact tails, as valid attempts show). The default is "
        "`outcome`: on the embedded 1.5B model, shown a failed change and its traceback, "
        "children wrote the same failure again (recorded prompts replayed both ways: "
        "`benchmarks/results/local/attempts_ab`).",
    )
    max_artifact_chars: int = Field(800, ge=0, description="Stderr/traceback chars shown.")
    max_program_chars: int = Field(12000, ge=200, description="Truncation of shown programs.")
    max_document_chars: int = Field(2000, ge=100, description="Evidence chars per document.")
    diff_based: bool | None = Field(
        None,
        description="true: ask for SEARCH/REPLACE diffs (OpenEvolve's default); false: full "
        "rewrites; null (auto): diffs, except rewrites for the embedded 1.5B model, which "
        "follows the diff format unreliably.",
    )
    rewrite_scope: Literal["program", "block"] = Field(
        "program",
        description="What a full rewrite returns: `program` (the whole file, as OpenEvolve "
        "asks) or `block` (only the body of the parent's one EVOLVE-BLOCK; fewer output "
        "tokens). The default stays `program`: on the embedded 1.5B model the block form gave "
        "fewer valid children (smoke task, same seed: 3/15 vs 9/12).",
    )
    template_dir: str | None = Field(
        None,
        description="A folder of your own prompt templates: each `<name>.md` there replaces "
        "the bundled template of that name (`evoduet_graph/prompts/<name>.md`), with exactly "
        "its `$placeholders`; checked at startup (an unknown name or a missing placeholder is "
        "an error naming the file).",
    )


class EvaluationConfig(_Section):
    """Sandboxed evaluator (docs/design.md §5)."""

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
        256,
        ge=1,
        description="Largest file a candidate may write (RLIMIT_FSIZE), MiB; "
        "stdout/stderr included.",
    )
    cpu_time_s: float | None = Field(
        None,
        gt=0,
        description="CPU seconds of a candidate (RLIMIT_CPU); default: "
        "timeout × cores + 10 (a backstop for the wall clock).",
    )
    isolate_network: bool = Field(
        True,
        description="Run candidates without network (a fresh network namespace via "
        "`unshare --net`) when this machine allows it; the run warns once when it does not.",
    )
    container: bool = Field(
        False,
        description="Run a SkyDiscover task's evaluator/evaluate.sh inside the image its "
        "evaluator/Dockerfile builds (Docker or Podman; a fresh container per candidate, no "
        "network); a clear error when neither is usable.",
    )
    isolate_filesystem: bool = Field(
        True,
        description="Run candidates on a read-only filesystem (bubblewrap mount namespace: "
        "only their temp dir is writable) when this machine allows it; otherwise, or when "
        "false, tampering with the task folder or run directory is detected (private copy of "
        "the task snapshot, audit hook, hash checks) instead of prevented, and the run warns.",
    )
    executor: Literal["local", "ray"] = Field(
        "local",
        description="Where candidates evaluate: `local` (sandboxed child processes of this "
        "machine) or `ray` (one Ray task per candidate, the same sandbox and limits on the "
        "Ray worker; needs the `ray` extra: pip install 'evoduet-graph[ray]').",
    )
    ray_address: str | None = Field(
        None,
        description="`executor: ray` only. Null: use the Ray instance this process is "
        "connected to, else start a local one (or join $RAY_ADDRESS); `auto`: attach to the "
        "cluster running on this machine; `ray://host:10001`: a remote cluster through Ray "
        "Client; `host:6379`: a cluster's GCS address. An unreachable address fails at start.",
    )
    ray_num_cpus_per_candidate: float = Field(
        1.0,
        gt=0,
        description="`executor: ray` only: CPUs Ray reserves for each candidate's task "
        "(fractions allowed); `workers` tasks are in flight at once.",
    )
    ray_max_retries: int = Field(
        0,
        ge=0,
        description="`executor: ray` only: times Ray reruns a candidate whose worker or node "
        "died (0: the candidate is recorded as a failed evaluation and the run goes on).",
    )
    ray_runtime_env: dict[str, Any] | None = Field(
        None,
        description="`executor: ray` only: a Ray runtime environment for the evaluation tasks, "
        "e.g. {pip: [evoduet-graph]} or {py_modules: [...]} when the workers lack the package.",
    )

    @model_validator(mode="after")
    def _check_ray(self) -> EvaluationConfig:
        if self.executor != "ray" and (
            self.ray_address is not None or self.ray_runtime_env is not None
        ):
            raise ValueError(
                "evaluation.ray_address / ray_runtime_env are set but evaluation.executor is "
                f"{self.executor!r}; set evaluation.executor: ray to evaluate on Ray"
            )
        address = self.ray_address
        if address is not None and address != "auto":
            host_port = address.removeprefix("ray://")
            host, sep, port = host_port.rpartition(":")
            if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(
                    f"evaluation.ray_address {address!r} is not `auto`, `ray://HOST:PORT` "
                    "(Ray Client, port 10001 by default) or `HOST:PORT` (the GCS, port 6379)"
                )
        return self


class RetrievalConfig(_Section):
    """World-knowledge layer (docs/design.md §1); used when the gate can retrieve."""

    backend: str | list[str] = Field(
        "offline",
        description="Search backend, or a list of them searched together (results merged, "
        "de-duplicated by normalised URL): offline|tavily|arxiv|wikipedia|duckduckgo|searxng|"
        "exa|brave|langchain:<module>:<factory>|none (the registry "
        "`evoduet_graph.search.registry`, which checks the names when the run starts and "
        "takes backends registered by you too; see docs/search.md's table of search sources). "
        "`offline` is BM25 over the task's docs/, --corpus folders and numpy/scipy API docs; "
        "`langchain:<module>:<factory>` loads a LangChain retriever or search tool of yours.",
    )
    exclude_domains: list[str] = Field(
        default_factory=list,
        description="Domains never used as evidence (a task's published answer, say): passed "
        "to the backends that support it (Tavily, Exa) and filtered out of every backend's "
        "results; subdomains included.",
    )
    review_queries: bool = Field(
        False,
        description="Pause before every search with the proposed queries for a person to "
        "approve or edit them (LangGraph interrupt: Studio shows them, the CLI asks on the "
        "terminal); the edited queries are the ones searched and recorded.",
    )
    cache: bool = Field(
        True,
        description="Answer a query already sent to the same backend (same options) in this "
        "run from the search cache (`<run_dir>/search_cache.sqlite`), with the original "
        "timestamp; false: always search.",
    )
    cache_dir: str | None = Field(
        None,
        description="Keep the search cache in this folder instead, shared by every run that "
        "names it (a repeated run or bench pays for no query twice and sees the same results).",
    )
    searxng_url: str | None = Field(
        None, description="`searxng`: the instance URL; default $SEARX_HOST."
    )
    wikipedia_lang: str = Field("en", description="`wikipedia`: language edition (en, de, ...).")
    corpus: list[str] = Field(default_factory=list, description="Extra offline corpus folders.")
    inner_rounds: int = Field(3, ge=1, description="R: query-evolution rounds.")
    queries_per_round: int = Field(1, ge=1, description="Q: queries per round.")
    results_per_query: int = Field(5, ge=1, description="Documents requested per query.")
    top_k: int = Field(3, ge=1, description="K: documents retained.")
    select_policy: Literal["delta", "relevance_novelty", "recency", "full"] = Field(
        "delta",
        description="Which D_search records the gate and query constructor see: `delta` "
        "(highest and lowest realised Δ), `relevance_novelty` (by the relevance/novelty "
        "assessments stored at retrieval time: the listwise reranker's ratings, else the "
        "hypothetical scores, weighted by rerank_relevance_weight / rerank_novelty_weight; "
        "no LLM call), `recency`, `full`.",
    )
    select_num: int = Field(5, ge=0, description="How many D_search records are shown.")
    query_evolution_steps: int | None = Field(
        None,
        ge=1,
        description="R of the paper's loop when set (overrides inner_rounds): 1 = one round "
        "of construct_query → search → hypothetical_score, no reflection rounds "
        "(configs/no_query_evolution.yaml). Not the scaffold's listwise-rerank row: that is "
        "`ranking: listwise_rerank` (configs/rerank.yaml). None = inner_rounds.",
    )
    ranking: Literal["hypothetical", "listwise_rerank"] = Field(
        "hypothetical",
        description="How the inner loop ranks the documents of a round: `hypothetical` "
        "(the paper's hypothetical evidence scoring: a predicted child score per document); "
        "`listwise_rerank` (the world-knowledge scaffold's `query_evolution_steps: 1` row: "
        "one call ranks all returned documents by actionable relevance and marginal "
        "novelty, weights below, and the top K are kept).",
    )
    rerank_relevance_weight: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Listwise rerank / relevance-novelty selection: "
        "weight of actionable relevance.",
    )
    rerank_novelty_weight: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Listwise rerank / relevance-novelty selection: weight of marginal novelty.",
    )
    rerank_max_document_chars: int = Field(
        1200, ge=100, description="Listwise rerank: characters of each document shown."
    )
    use_search_database: bool = Field(
        True,
        description="false: stateless retrieval (ablation): the gate may only choose no-op "
        "or retrieve (prompt gate_stateless.md, no database section), queries are built "
        "without D_search, nothing is persisted to search_database.jsonl and no Δ is "
        "credited; look-up is impossible.",
    )
    documents_per_entry: int = Field(
        3, ge=0, description="Documents shown per D_search record in the gate's selection."
    )
    oracle_documents: str | None = Field(
        None,
        description="`gate.mode: oracle`: a folder of text/Markdown documents or a JSONL "
        "file of {url, title, content} objects; None = the task's `oracle/` folder.",
    )
    grounding: Literal["none", "offline", "online"] = Field(
        "none",
        description="Seed D_search before the first iteration so look-up can use it from "
        "iteration 1: `offline` from `grounding_documents`; `online` by one search on the "
        "task instruction; `none`.",
    )
    grounding_documents: str | None = Field(
        None,
        description="`grounding: offline`: a JSONL file of {url, title, content} objects or a "
        "folder of documents; None = the task's `docs/` folder.",
    )
    grounding_max_documents: int = Field(
        10, ge=1, description="Most documents a grounding seeds into D_search."
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
    tavily_topic: Literal["general", "news", "finance"] = Field(
        "general", description="Tavily `topic`: the search category."
    )
    tavily_time_range: Literal["day", "week", "month", "year"] | None = Field(
        None, description="Tavily `time_range`: only pages from this last period; null: any."
    )
    tavily_include_domains: list[str] = Field(
        default_factory=list, description="Tavily `include_domains`: search only these domains."
    )
    offline_include_pydoc: list[str] = Field(
        default_factory=lambda: ["numpy", "scipy"],
        description="Installed packages whose docstrings join the offline corpus.",
    )
    index_cache_dir: str | None = Field(
        None, description="Offline index cache; default $EVODUET_CACHE_DIR/index."
    )

    @field_validator("backend")
    @classmethod
    def _strip_backends(cls, value: str | list[str]) -> str | list[str]:
        # the names themselves are checked by the registry when the run starts
        if isinstance(value, str):
            return value.strip()
        names = [n.strip() for n in value]
        return names[0] if len(names) == 1 else names

    @property
    def backend_names(self) -> list[str]:
        """``backend`` as a list of names."""
        return [self.backend] if isinstance(self.backend, str) else list(self.backend)


StrategyRule = Literal["best", "top_k_uniform", "diverse_island", "recent_improver"]
"""Parent-selection rules an EvoX strategy chooses from (`evoduet_graph.scaffolds.evox`)."""


class EvoXConfig(_Section):
    """EvoX-style strategy loop (``scaffold: evox``).

    When progress stagnates, one structured LLM call revises the search strategy (parent-selection
    rule + an instruction added to the mutation prompt) from the population-state descriptor and the
    measured effect of earlier strategies.
    """

    strategy_patience: int = Field(
        3,
        ge=1,
        description="Revise the strategy after this many iterations without a new best, "
        "counted from the later of the last improvement and the current strategy's start "
        "(or its last failed revision).",
    )
    initial_rule: StrategyRule = Field(
        "diverse_island",
        description="Parent-selection rule of the initial strategy (which has no "
        "instruction): `diverse_island` behaves exactly as the `openevolve` scaffold until "
        "the first revision.",
    )
    history: int = Field(
        5,
        ge=0,
        description="Past strategies (with their measured effect) kept in the checkpointed "
        "state and shown to the revision prompt; every strategy is also a `strategy` event "
        "in `<run_dir>/events.jsonl`.",
    )
    max_instruction_chars: int = Field(
        300, ge=20, description="Cap on the strategy instruction added to the mutation prompt."
    )


class NoveltyConfig(_Section):
    """Novelty rejection before evaluation (`evoduet_graph.candidates.novelty`).

    A child that is a near-duplicate of its parent or of a population program is recorded as
    ``duplicate`` with the reason and never evaluated; ``generate`` may ask the model once more.

    Checks, in order: the sha256 of the normalised code (comments, docstrings and layout
    dropped with Python's `tokenize`), then the normalised token edit similarity, then
    (optionally) the cosine similarity of code embeddings.
    """

    enabled: bool = Field(
        True,
        description="Check every generated child before evaluation; false evaluates every "
        "child (exact copies of an evaluated program still come from the evaluation cache).",
    )
    max_similarity: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Reject when the token similarity (1 − token edit distance / longer "
        "length, on normalised code) to a reference is at least this. A one-token edit of an "
        "N-token program scores 1 − 1/N, and small edits are where improvements come from: "
        "of 20 distinct children of the embedded model in real runs, the 3 that beat their "
        "parent had 0.74, 0.98 and 0.99 (`benchmarks/novelty_bench.py similarity`), so 0.95 "
        "would have rejected 2 of the 3. The default 1.0 leaves only the exact check; lower "
        "it (e.g. 0.97) to trade small edits for exploration.",
    )
    compare_with: Literal["parent", "parent_and_population"] = Field(
        "parent_and_population",
        description="References: the parent only, or the parent, the programs the prompt "
        "showed (top programs, inspirations) and the best population programs.",
    )
    max_compared: int = Field(
        200,
        ge=0,
        description="Most references besides the parent. Cost (`benchmarks/novelty_bench.py "
        "cost`): tokenising a program once (cached, a few ms) and one token edit distance "
        "per reference (~40 µs at ~400 tokens); 200 references ≈ 18 ms a check.",
    )
    resample: bool = Field(
        True,
        description="On a rejection, ask the model once more with the same prompt; a second "
        "rejection records the candidate as `duplicate`. An answer that leaves the parent "
        "unchanged (an identical rewrite, a diff that changes nothing) is resampled the same "
        "way; unchanged twice, it stays invalid.",
    )
    embeddings: str | None = Field(
        None,
        description="Optional embedding check after the token check: `minilm` (offline "
        "all-MiniLM-L6-v2 from the `embeddings` extra, which pulls torch) or a dotted path "
        "`package.module:factory` returning a LangChain `Embeddings`; null: no embedding "
        "check.",
    )
    max_cosine: float = Field(
        0.999,
        ge=-1.0,
        le=1.0,
        description="Reject when the embedding cosine similarity to a reference is at least "
        "this. With MiniLM (chunked, below) the two improving children above had 0.9978 and "
        "0.9982, and the smoke task's radius 0.6 → 1.0 edit 0.9978: embeddings rate small "
        "edits as near-identical by nature, so keep it high.",
    )
    embedding_chunk_chars: int = Field(
        600,
        ge=50,
        description="Programs are embedded as the mean of chunks of at most this many "
        "characters (whole lines), so the model's input window (MiniLM: 256 word pieces, "
        "~750 characters of code) never cuts a program off.",
    )


class JointSearchConfig(_Section):
    """Joint-level in-loop search (paper §2.3 baseline): no gate and no inner loop.

    The mutation call itself may search before it writes the candidate.
    """

    enabled: bool = Field(
        False,
        description="Let `generate` search: a LangChain search tool over the run's backend "
        "(native tool calling), or a structured query-or-answer reply for models without "
        "it (see `protocol`).",
    )
    max_calls: int = Field(3, ge=0, description="Most searches one mutation call may make.")
    max_result_chars: int = Field(
        6000,
        ge=500,
        description="Most characters of search results one mutation call sees, split evenly "
        "over its documents (max_calls × retrieval.results_per_query): the method's evidence "
        "budget (top_k × prompt.max_document_chars), so the row sees no more text than the "
        "method and fits the embedded model's context.",
    )
    protocol: Literal["auto", "tools", "structured"] = Field(
        "auto",
        description="`tools`: bind the search tool (the model must support tool calling); "
        "`structured`: each turn the model replies with JSON {action: search|answer, "
        "query}; `auto`: tools when the chat model supports native tool calling, else "
        "structured (the embedded model and the bench's llama.cpp server take `structured`).",
    )


class BudgetConfig(_Section):
    """Spending limits of a run (all optional).

    Reaching one stops the run cleanly after the iteration in flight, with a resumable checkpoint
    and the reason as ``stop_reason``; totals count every process of the run (they survive ``evoduet
    resume``).
    """

    max_llm_calls: int | None = Field(None, ge=1, description="Most chat-model calls.")
    max_tokens: int | None = Field(
        None, ge=1, description="Most tokens (input + output) over all calls."
    )
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        description="Most estimated spend in USD for priced models (the genai-prices "
        "catalogue, overridden/extended by `prices`: `evoduet_graph.rundir.pricing`); "
        "`local` costs 0, and a model neither prices cannot be stopped by this limit.",
    )
    max_wall_s: float | None = Field(
        None, gt=0, description="Most wall-clock seconds of the run, summed over resumes."
    )
    # lax: YAML and JSON write the pair as a list
    prices: dict[str, Annotated[tuple[float, float], Strict(False)]] = Field(
        default_factory=dict,
        description="Extra prices: model name (or prefix) → [USD per 1M input tokens, USD "
        "per 1M output tokens]; overrides the genai-prices catalogue (reports and budgets).",
    )


class EvoDuetConfig(_Section):
    """Every knob of a run. Unknown keys are an error (typos must not pass silently).

    Raises:
        ConfigError: from `load_config` / `with_overrides` when a key or value is invalid.
    """

    iterations: int = Field(10, ge=0, description="Outer-loop iterations.")
    candidates: int = Field(
        1,
        ge=1,
        le=MAX_CANDIDATES,
        description=f"N: candidates generated per iteration (at most {MAX_CANDIDATES}).",
    )
    candidates_after_retrieval: int | None = Field(
        None,
        ge=1,
        le=MAX_CANDIDATES,
        description="N after a retrieve / look-up decision (parallel mode: 8); None = "
        "`candidates`.",
    )
    max_concurrency: int | None = Field(
        None,
        ge=1,
        description="Most graph nodes run at once (LangGraph's `max_concurrency`: the thread "
        "pool that runs the N `generate` nodes of an iteration); None = enough for every "
        "candidate slot (the largest of `candidates` and `candidates_after_retrieval`, at "
        "least LangGraph's own default of min(32, cores + 4)). Evaluations are limited "
        "separately by `evaluation.workers`.",
    )
    max_iterations_in_flight: int = Field(
        1,
        ge=1,
        le=64,
        description="k: iterations run at once, each with its own parent, gate decision, "
        "inner loop, candidates and evaluation, each recorded when it finishes (for hosted "
        "models, whose calls take seconds while the endpoint serves many at once). 1 = one "
        "iteration after the other. With k > 1 a parent is chosen from a population that does "
        "not yet hold the children of the iterations still in flight, and a gate sees only "
        "the D_search outcomes recorded before its iteration started (as OpenEvolve's "
        "parallel iterations); a kill loses only the iterations in flight.",
    )
    """Iterations in flight (`evoduet_graph.inflight`).

    ``1`` (the default) keeps the loop strictly sequential: select → gate → … → record, then the
    next select; the events and records are exactly those of a run without the key.

    ``k > 1`` mirrors OpenEvolve's process-parallel controller
    (``openevolve/process_parallel.py``, ``ProcessParallelController``): the controller chooses
    each iteration's parent and inspirations itself (``_submit_iteration`` samples them, then
    hands the worker a snapshot of the program database), keeps a fixed number of iterations
    submitted, adds each child to the database with its own iteration number as its future
    completes, submits the next iteration after each completion, and on an early stop stops
    submitting. Here the ``dispatch`` node runs ``select`` for up to k iterations and starts
    each (gate → look-up / inner loop → generate → evaluate) on a snapshot of the population;
    ``collect`` takes the first one that finishes and the unchanged ``record`` node commits it,
    one checkpoint per finished iteration. What changes with k > 1:

    * parents and inspirations come from a population that does not yet hold the children of
      the iterations in flight (up to k − 1 results behind a sequential run);
    * a gate, query and scoring prompt sees the realised Δ of the iterations recorded before
      its own iteration started; the retrieval of an iteration still in flight may already be
      in D_search (queries, documents), without its Δ until that iteration is recorded;
    * iterations finish out of order: ``record`` runs in completion order, so "consecutive"
      failure counts, the knowledge state carried to the next dispatch (the last finished
      iteration's) and the population's island bookkeeping follow completion order;
    * a stop rule (target, failures, budget) stops dispatching; the iterations already in
      flight still finish and are recorded (OpenEvolve drains them the same way), so a budget
      may be overrun by up to k − 1 iterations;
    * resume after a kill re-runs the iterations that were in flight under the same numbers;
      everything recorded before the kill stays recorded once;
    * deliberate deviation: OpenEvolve spreads the iterations in flight over its islands
      (round-robin with a per-island quota); here each iteration samples the island current
      when it starts, which advances at every ``record``, so the first k iterations of a run
      share one island.
    """
    seed: int = Field(42, description="Seed of parent selection and sampling.")
    max_code_length: int | None = Field(
        None,
        ge=1,
        description="A child longer than this many characters is invalid (OpenEvolve's "
        "`max_code_length`, SkyDiscover's `max_solution_length`; a task config's value is "
        "used when this is null).",
    )
    max_consecutive_failures: int = Field(
        10, ge=1, description="Stop after this many iterations without any valid candidate."
    )
    max_consecutive_model_failures: int = Field(
        3,
        ge=1,
        description="Stop after this many iterations in a row in which every `generate` call "
        "failed after its retries (the model endpoint is down or refuses): a failed run (the "
        "CLI exits 1, a bench marks it failed and leaves it out of the NDG means), resumable "
        "once the endpoint answers. A shorter run in which no `generate` call ever answered "
        "stops the same way at its last iteration.",
    )
    scaffold: str = Field(
        "openevolve",
        description="Search scaffold (population + parent selection + what the mutation "
        "prompt asks for; the registry `evoduet_graph.scaffolds.SCAFFOLDS`, which checks the "
        "name when the run starts): `openevolve` (MAP-Elites islands, OpenEvolve sampling); "
        "`top_k` "
        "(parent uniform among the `population.top_k` best, inspirations from the rest of "
        "them); `best_of_n` (always the best program, N = `candidates` children per "
        "iteration, inspirations: the next best); `evox` (a strategy loop: on stagnation the "
        "LLM revises the parent rule and an instruction for the mutation prompt; see `evox`). "
        "Only parent selection changes: the gate, inner loop, generate and evaluate are the "
        "same for every scaffold.",
    )
    llm: LLMConfig = Field(default_factory=LLMConfig)
    gate: GateConfig = Field(default_factory=GateConfig)
    population: PopulationConfig = Field(default_factory=PopulationConfig)
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    evox: EvoXConfig = Field(default_factory=EvoXConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    joint_search: JointSearchConfig = Field(default_factory=JointSearchConfig)
    novelty: NoveltyConfig = Field(default_factory=NoveltyConfig)
    memory: str | None = Field(
        None,
        description="Long-term memory: a SQLite LangGraph store (file path) shared by the runs "
        "of a task. This run starts with the documents and realised outcomes earlier runs "
        "wrote there (as D_search records `mem_…`) and adds its own; null (default): runs "
        "stay independent.",
    )
    stop_at_score: float | None = Field(
        None,
        description="End the run (cleanly, resumably) once the best program's metric reaches "
        "this value on the task's own scale (`metric`, e.g. sum of radii): at least it for "
        "`direction: max`, at most it for `min`; null: run every iteration.",
    )
    allow_invalid_initial: bool = Field(
        False,
        description="Start even when the initial program fails its own evaluation (by "
        "default a new run stops at startup with the evaluator's error).",
    )

    def with_overrides(self, overrides: dict[str, Any], source: str = "overrides") -> EvoDuetConfig:
        """Return a copy with dotted-key overrides applied, e.g. ``{"llm.model": "local"}``.

        ``None`` values are ignored so CLI options left unset keep the file's value.

        Raises:
            ConfigError: an unknown key or an invalid value (the message names ``source``).
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
        return _validate(data, source)

    def to_yaml(self) -> str:
        """The full configuration as YAML (what ``<run_dir>/config.yaml`` holds)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def config_options(section: BaseModel, keys: Mapping[str, str]) -> dict[str, Any]:
    """The arguments of a component built from a config section.

    ``keys`` maps each argument to the section's key that gives it (e.g. a searcher's
    ``timeout_s`` from ``retrieval.search_timeout_s``): one table per component says where
    each setting comes from.
    """
    return {arg: getattr(section, key) for arg, key in keys.items()}


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` laid over it, nested mappings merged key by key (new dicts)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def merge_config(base: EvoDuetConfig, data: dict[str, Any], source: str) -> EvoDuetConfig:
    """``base`` with a partial configuration (nested like a YAML file) laid over it.

    Sections merge key by key.

    Raises:
        ConfigError: an unknown key or an invalid value (the message names ``source``).
    """
    return _validate(deep_merge(base.model_dump(), data), source)


def _validate(data: Any, source: str) -> EvoDuetConfig:
    """Validate a whole configuration."""
    try:
        cfg = EvoDuetConfig.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"  {'.'.join(str(p) for p in err['loc']) or '(config)'}: {err['msg']}"
            for err in exc.errors()
        ]
        raise ConfigError(f"invalid configuration in {source}:\n" + "\n".join(lines)) from None
    return cfg


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
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text ({exc.reason})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping, got {type(data).__name__}")
    return _validate(data, source=str(path))


def graph_concurrency(config: EvoDuetConfig) -> int:
    """LangGraph's ``max_concurrency`` for a run: the most nodes one superstep runs at once.

    The N ``generate`` nodes of an iteration (one ``Send`` each) share one thread pool; without
    ``max_concurrency`` LangGraph sizes it ``min(32, cores + 4)``, which on a 2-core machine
    runs 8 candidates in two waves. ``config.max_concurrency`` when set, else the largest
    candidate count of an iteration (``candidates``, ``candidates_after_retrieval``) and never
    below LangGraph's own default.

    Returns:
        The thread count (≥ 1) passed as ``max_concurrency`` in the graph's run config.
    """
    if config.max_concurrency is not None:
        return config.max_concurrency
    langgraph_default = min(32, (os.cpu_count() or 1) + 4)
    return max(config.candidates, config.candidates_after_retrieval or 0, langgraph_default)

"""``evoduet bench``: every (task, method, seed) run, resumable, into one output folder.

Methods (`METHODS` is the default set):

* ``evoduet`` — our graph with the LLM retrieval gate (``gate.mode: llm``) and the offline
  search backend (``retrieval.backend: offline``);
* ``openevolve-mode`` — our graph with ``gate.mode: never``: the paper's OpenEvolve baseline
  under identical code;
* ``openevolve`` — the real OpenEvolve package (`evoduet_graph.bench.openevolve_method`);
* ``evoduet-topk``, ``evoduet-bestofn``, ``evoduet-evox`` — ``evoduet`` with the ``top_k``,
  ``best_of_n`` (N = 4) or ``evox`` scaffold (`GRAPH_METHODS`);
* the ablation ladder's rows by name (`LADDER_METHODS`): ``oracle``, ``joint-search``,
  ``stagnation``, ``always``, ``heuristic``, ``rerank``, ``no-query-evolution``,
  ``no-search-database``, ``select-relevance-novelty``, ``grounding-offline``,
  ``grounding-online``, ``parallel-8`` — each is its file in ``configs/``;
* any configuration file: a YAML path, or the stem of a file in ``./configs`` (else the
  repository's ``configs/``), e.g. ``always_retrieve`` or ``scaffold_evox``: our graph with
  that file laid over the base configuration (`config_method`). Its ``llm`` section is not
  allowed (the bench's ``--model`` chooses the model of every method); ``iterations`` and
  ``seed`` are the bench's.

All of them talk to the same model. With ``--model local`` the embedded GGUF is served once by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (`LlamaCppServer`) and our methods use
``openai:<alias>`` with that ``base_url`` while OpenEvolve gets it as ``llm.api_base``. With
``--model openai:<m>`` every method calls that endpoint (``llm.base_url`` /
``$OPENAI_BASE_URL``, key from ``$OPENAI_API_KEY``). Sampling settings (temperature,
max_tokens, timeout, retries) come from the ``llm`` section of the base configuration for all
methods, and so does the edit format: every method, OpenEvolve included, asks for the same one.
On the embedded model that is full rewrites (``prompt.diff_based: false``, OpenEvolve's
``diff_based_evolution: false``), as ``evoduet run`` gives it, since a 1.5B model follows the
SEARCH/REPLACE format unreliably; on an endpoint, each task's own ``diff_based_evolution``
(default true). ``prompt.diff_based`` in the base configuration overrides both.

Output folder::

    <out>/manifest.json     versions (evoduet_graph, llama-cpp-python, openevolve), model +
                            sha256, server command, settings of every invocation
    <out>/results.csv       one row per (task, method, seed, iteration)
    <out>/runs.csv          one row per (task, method, seed): status, final figures, versions
    <out>/summary.md        mean ± sd NDG per task and method, and overall
    <out>/plots/*.png       best-so-far vs iteration, tokens and wall time per task; NDG bars
    <out>/server.log        the llama.cpp server's log (``--model local``)
    <out>/runs/<task>/<method>/seed<k>/bench_run.json   status, sessions, outcome, error
    <out>/runs/<task>/<method>/seed<k>/run/             our run directory (evoduet report ...)
    <out>/runs/<task>/<method>/seed<k>/openevolve/      OpenEvolve's config, output, log

Resumption: a run whose ``bench_run.json`` says ``done`` for at least the requested iterations
is skipped; any other run (killed, failed, or asked for more iterations) continues from its
run directory (our checkpoints / OpenEvolve's ``--checkpoint``). A run that raises is recorded
as ``failed`` with its error and the bench goes on; the next invocation retries it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import evoduet_graph
from evoduet_graph import (
    ConfigError,
    EvoDuetConfig,
    Task,
    TaskError,
    UserError,
    check_model,
    checked_config,
    load_task,
    merge_config,
    parse_model_string,
)
from evoduet_graph.bench.common import (
    BenchError,
    Endpoint,
    LogFn,
    MethodOutcome,
    bundled_tasks_dir,
)
from evoduet_graph.bench.endpoint import probe_endpoint
from evoduet_graph.bench.executor import connect_ray, run_on_ray
from evoduet_graph.bench.graph_method import config_method, graph_runner, method_configs_dir
from evoduet_graph.bench.jobs import (
    DEFAULT_SEEDS,
    GRAPH_METHODS,
    LADDER_METHODS,
    METHODS,
    BenchResult,
    BenchSettings,
    BenchShared,
    Job,
    JobContext,
    JobResult,
    LLMFactory,
    MethodRunner,
    OpenEvolveSpec,
    RunState,
    SearcherFactory,
)
from evoduet_graph.bench.openevolve_method import (
    OPENEVOLVE_VERSION,
    ensure_openevolve,
    run_openevolve,
)
from evoduet_graph.bench.output import collect_runs, write_csvs, write_manifest
from evoduet_graph.bench.server import LlamaCppServer, ServerError
from evoduet_graph.bench.tables import write_plots, write_summary
from evoduet_graph.config import deep_merge
from evoduet_graph.evaluation.ray_executor import RAY_EXTRA, RayUnavailableError, import_ray
from evoduet_graph.llm.model_file import (
    EXPECTED_SHA256,
    MODEL_NAME,
    LocalModelError,
    assemble_model,
)
from evoduet_graph.rundir.read import read_json

__all__ = [
    "DEFAULT_SEEDS",
    "GRAPH_METHODS",
    "LADDER_METHODS",
    "METHODS",
    "BenchError",
    "BenchResult",
    "BenchSettings",
    "Job",
    "JobContext",
    "MethodRunner",
    "edit_format",
    "parse_list",
    "check_settings",
    "resolve_methods",
    "resolve_tasks",
    "run_bench",
]

MAX_SEED = 2**32 - 1
"""The largest seed: numpy's legacy generators and the model server take 32-bit seeds."""

EXECUTORS: tuple[str, ...] = ("local", "ray")
"""How a bench runs its jobs: one after another here, or as Ray tasks on a cluster."""
LOCAL_KEY_ENV = "EVODUET_LOCAL_SERVER_KEY"
"""Key variable our methods read for the bench's own server (normally unset: no key is sent)."""


def _openevolve_runner(ctx: JobContext) -> MethodOutcome:
    if ctx.endpoint is None:
        raise BenchError("the openevolve method needs a model endpoint (no injected model)")
    env = ctx.openevolve_env()
    return run_openevolve(
        ctx.job.task,
        ctx.job.dir / "openevolve",
        iterations=ctx.job.iterations,
        seed=ctx.job.seed,
        endpoint=ctx.endpoint,
        env=env,
        evaluator=ctx.evaluator(),
        session=ctx.session,
        sessions=ctx.sessions,
        timeout_s=ctx.openevolve_timeout_s,
    )


def default_runners() -> dict[str, MethodRunner]:
    """The runners of `METHODS`."""
    runners: dict[str, MethodRunner] = {m: graph_runner(m, o) for m, o in GRAPH_METHODS.items()}
    runners["openevolve"] = _openevolve_runner
    return runners


# ------------------------------------------------------------------------------------------
# setup helpers
# ------------------------------------------------------------------------------------------


def parse_list(text: str | None) -> list[str]:
    """``"a,b, c"`` → ``["a", "b", "c"]`` (empty items dropped)."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def resolve_tasks(names: Sequence[str] | None, tasks_dir: Path | None = None) -> list[Path]:
    """Task folders from names or paths.

    A name that is an existing folder is used as is; otherwise it is looked up in
    ``tasks_dir`` (default: ``./tasks`` if it exists, else the repository's ``tasks/``).
    No names: every task folder (one holding ``evaluator.py``) of that directory.

    Raises:
        BenchError: a name matches no folder, or there is no task at all.
    """
    root = tasks_dir or (Path("tasks") if Path("tasks").is_dir() else bundled_tasks_dir())
    if not names:
        found = sorted(p for p in root.glob("*/") if (p / "evaluator.py").is_file())
        if not found:
            raise BenchError(f"no task folders in {root}; pass --tasks")
        return found
    out = []
    for name in names:
        path = Path(name).expanduser()
        if path.is_dir():
            out.append(path)
        elif (root / name).is_dir():
            out.append(root / name)
        else:
            raise BenchError(f"task {name!r} not found (neither a folder nor in {root})")
    return out


def _git_commit() -> str | None:
    root = Path(evoduet_graph.__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass
class _Model:
    """The model side of a bench: endpoint, our config, versions, the server (if any)."""

    endpoint: Endpoint | None
    config: EvoDuetConfig
    info: dict[str, Any]


def edit_format(base: EvoDuetConfig, *, local: bool) -> bool | None:
    """The one edit format of every method of a bench (``prompt.diff_based``'s values).

    The base configuration's ``prompt.diff_based`` when set; else full rewrites (False) on the
    embedded model, as ``evoduet run`` gives it (a 1.5B model follows SEARCH/REPLACE
    unreliably: with diffs most of its children were invalid), and None on an endpoint (each
    task's own ``diff_based_evolution``, for our methods and OpenEvolve alike).
    """
    if base.prompt.diff_based is not None:
        return base.prompt.diff_based
    return False if local else None


def _setup_model(
    settings: BenchSettings,
    base: EvoDuetConfig,
    stack: contextlib.ExitStack,
    needs_endpoint: bool,
    log: LogFn,
) -> _Model:
    """Serve the embedded model, point at ``openai:<m>`` or name a provider's model.

    A native provider's model (``anthropic:<m>``, ...) has no endpoint object: our methods
    build it from ``llm.model`` (its package and key checked here).

    Raises:
        BenchError: bad model string, missing server dependencies, model or server failure.
    """
    llm = base.llm
    try:
        provider, name = parse_model_string(settings.model)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    common: dict[str, Any] = {
        "temperature": llm.temperature,
        "max_tokens": llm.max_tokens,
        "timeout_s": llm.timeout_s,
        "max_retries": llm.max_retries,
    }
    if provider not in ("openai", "local"):  # a native provider: our methods build it
        cfg = base.with_overrides({"llm.model": settings.model})
        try:
            check_model(cfg.llm)
        except UserError as exc:  # a missing package or key, in one line
            raise BenchError(str(exc)) from None
        return _Model(
            None, cfg, {"model": settings.model, "base_url": llm.base_url, "model_sha256": None}
        )
    if provider == "openai":
        assert name is not None
        base_url = llm.base_url or os.environ.get("OPENAI_BASE_URL") or None
        endpoint = Endpoint(
            model=name,
            base_url=base_url,
            api_key_env=llm.api_key_env,
            diff_based=edit_format(base, local=False),
            **common,
        )
        cfg = base.with_overrides({"llm.model": settings.model, "llm.base_url": base_url})
        info: dict[str, Any] = {
            "model": settings.model,
            "base_url": base_url,
            "model_sha256": None,
        }
        if needs_endpoint:
            probe_endpoint(cfg.llm, log)
        return _Model(endpoint, cfg, info)

    info = {
        "model": f"local ({MODEL_NAME}.gguf)",
        "model_sha256": EXPECTED_SHA256,
        "edit_format": "diffs" if edit_format(base, local=True) else "full rewrites",
    }
    if not needs_endpoint:
        return _Model(None, base, info)
    try:
        model_path = assemble_model(llm.local_cache_dir)
    except LocalModelError as exc:
        raise BenchError(str(exc)) from None
    server = LlamaCppServer(
        model_path,
        alias=MODEL_NAME,
        n_ctx=llm.local_n_ctx,
        n_threads=llm.local_n_threads,
        log_path=settings.out / "server.log",
        startup_timeout_s=settings.server_startup_timeout_s,
        prompt_lookup=llm.local_prompt_lookup,
    )
    log(f"starting the model server: {' '.join(server.command())}")
    start = time.monotonic()
    try:
        server.check_dependencies()
        stack.enter_context(server)
    except ServerError as exc:
        raise BenchError(str(exc)) from None
    log(f"model server ready at {server.base_url} in {time.monotonic() - start:.1f} s")
    diff_based = edit_format(base, local=True)
    endpoint = Endpoint(
        model=MODEL_NAME,
        base_url=server.base_url,
        api_key_env=None,
        local=True,
        diff_based=diff_based,
        **common,
    )
    cfg = base.with_overrides(
        {
            "llm.model": f"openai:{MODEL_NAME}",
            "llm.base_url": server.base_url,
            "llm.api_key_env": LOCAL_KEY_ENV,
            "prompt.diff_based": diff_based,
            # one server on this machine's cores writes a full rewrite in minutes, not seconds:
            # the endpoint's 60 s default deadline would fail most mutation calls
            "llm.call_deadline_s": max(llm.call_deadline_s, llm.timeout_s),
        }
    )
    info.update(
        base_url=server.base_url,
        model_path=str(model_path),
        server_command=server.command(),
        server_ready_s=round(time.monotonic() - start, 2),
    )
    return _Model(endpoint, cfg, info)


# ------------------------------------------------------------------------------------------
# the bench
# ------------------------------------------------------------------------------------------


def _check_plotting() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise BenchError(
            "the bench draws its plots with matplotlib, which is not installed: "
            "pip install matplotlib  (or: pip install 'evoduet-graph[bench]')"
        )


def _method_overlay(name: str) -> tuple[str, dict[str, Any], str] | None:
    """``(label, overlay, source)`` of one of our methods by name or config, else None.

    Raises:
        BenchError: a method config that is not usable (`config_method`).
    """
    if name in GRAPH_METHODS:
        return name, GRAPH_METHODS[name], f"method {name!r}"
    found = config_method(LADDER_METHODS.get(name, name))
    if found is None:
        return None
    label, overlay, path = found
    return (name if name in LADDER_METHODS else label), overlay, str(path)


def _with_forced(overlay: dict[str, Any], forced: dict[str, Any]) -> dict[str, Any]:
    """``overlay`` with the bench's forced settings (dotted keys) laid over it.

    A forced ``retrieval.backend`` is not laid over a method that never searches (``backend:
    none``, or a gate that never retrieves without joint-level search: the OpenEvolve
    baseline), so a hosted backend's key is not asked of it.
    """
    never_searches = (overlay.get("retrieval") or {}).get("backend") == "none" or (
        (overlay.get("gate") or {}).get("mode") == "never"
        and not (overlay.get("joint_search") or {}).get("enabled")
    )
    out = overlay
    for key, value in forced.items():
        if key == "retrieval.backend" and never_searches:
            continue
        nested: dict[str, Any] = value
        for part in reversed(key.split(".")):
            nested = {part: nested}
        out = deep_merge(out, nested)
    return out


def _check_variant(
    name: str, variant: tuple[str, dict[str, Any]], table: dict[str, MethodRunner]
) -> None:
    """A variant's name and settings, before it is resolved.

    Raises:
        BenchError: the name is a method's own (its runs would be filed, skipped and summed
            as that method's), the variant is of a method that is not ours (OpenEvolve), or
            its settings have an ``llm`` section (the bench's model is every method's).
    """
    method, overlay = variant
    if name in table or name in LADDER_METHODS or _method_overlay(name) is not None:
        raise BenchError(
            f"method variant {name!r} is named like a method: its runs would be filed as that "
            "method's; give the variant a name of its own"
        )
    if method in table and _method_overlay(method) is None:
        raise BenchError(
            f"method variant {name!r}: {method!r} takes no variants (only our methods do: "
            "a bench method, ladder row or config)"
        )
    if "llm" in overlay:
        raise BenchError(
            f"method variant {name!r} has an llm section; the bench's model (and the base "
            "config's llm settings) are every method's"
        )


def resolve_methods(
    settings: BenchSettings, table: dict[str, MethodRunner], graph_methods: set[str]
) -> list[str]:
    """The bench's method names, config methods and variants resolved.

    Each config method (a ladder row or a YAML file) and each variant is added to ``table`` and
    ``graph_methods`` as a run of our graph under that configuration; with forced settings,
    our built-in methods are rebuilt with them too.

    Raises:
        BenchError: an unknown method, a missing or invalid method config, or a config named
            like a built-in method.
    """
    config_labels: set[str] = set()
    methods: list[str] = []
    unknown = []
    base = settings.config or EvoDuetConfig()
    for name in settings.methods:
        variant = settings.variants.get(name)
        if variant is not None:
            _check_variant(name, variant, table)
        builtin = name in GRAPH_METHODS and name in table and variant is None
        if name in table and not builtin and variant is None:
            methods.append(name)  # OpenEvolve, or a runner given by a test
            continue
        found = _method_overlay(variant[0] if variant else name)
        if found is None and variant is not None:
            raise BenchError(
                f"method variant {name!r}: unknown method {variant[0]!r} (a variant lays "
                "settings over one of our methods: a bench method, ladder row or config)"
            )
        if found is None:
            if name.endswith((".yaml", ".yml")) or "/" in name:
                raise BenchError(f"method config file {name} does not exist")
            unknown.append(name)
            methods.append(name)
            continue
        label, overlay, source = found
        overlay = _with_forced(overlay, settings.forced)  # a variant's own settings win
        if variant is not None:
            label, overlay = name, deep_merge(overlay, variant[1])
            source = f"variant {name!r} of {source}"
        elif not builtin and label in table and label not in config_labels:
            raise BenchError(f"method config {source} is named like the method {label!r}")
        try:
            checked_config(merge_config(base, overlay, source), source)
        except ConfigError as exc:
            raise BenchError(str(exc)) from None
        table[label] = graph_runner(label, overlay, source)
        graph_methods.add(label)
        if not builtin:
            config_labels.add(label)
        methods.append(label)
    if unknown:
        stems = sorted(p.stem for p in method_configs_dir().glob("*.yaml"))
        raise BenchError(
            f"unknown method(s) {unknown}; known: {', '.join(table)}; or a YAML config path, "
            f"or a config in {method_configs_dir()}: {', '.join(stems) or '(none)'}"
        )
    return methods


def check_settings(settings: BenchSettings, tasks: Sequence[Task]) -> None:
    """Settings that cannot run, before anything is written or started.

    Args:
        settings: the bench's settings, methods resolved (`resolve_methods`).
        tasks: its tasks, loaded.

    Raises:
        BenchError: no methods or seeds, a repeated seed or task name, a seed outside 0 to
            `MAX_SEED`, a negative iteration count, an unknown executor (or Ray missing for
            ``ray``), a bad model string or one the OpenEvolve method cannot use, a base
            configuration that names a model of its own, or no plotting library.
    """
    if not settings.methods or not settings.seeds:
        raise BenchError("nothing to run: no methods or no seeds")
    repeated = sorted({s for s in settings.seeds if settings.seeds.count(s) > 1})
    if repeated:
        raise BenchError(f"seed(s) {repeated} listed twice: each seed is one run per method")
    if any(not 0 <= s <= MAX_SEED for s in settings.seeds):
        raise BenchError(
            f"seeds must be from 0 to {MAX_SEED} (numpy's range), got {settings.seeds}"
        )
    if settings.iterations < 0:
        raise BenchError("iterations must be >= 0")
    names = [t.name for t in tasks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BenchError(
            f"two tasks are named {', '.join(twice)}: runs are filed by task name, so give "
            "each task folder a name of its own"
        )
    if settings.executor not in EXECUTORS:
        raise BenchError(f"unknown executor {settings.executor!r}; known: {', '.join(EXECUTORS)}")
    if settings.executor == "ray":
        try:
            import_ray()
        except RayUnavailableError:
            raise BenchError(
                f"--executor ray needs the ray package, which is not installed: pip install "
                f"'{RAY_EXTRA}' (in a checkout: pip install -e '.[ray]')"
            ) from None
    try:
        provider, _ = parse_model_string(settings.model)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    if provider not in ("openai", "local") and "openevolve" in settings.methods:
        raise BenchError(
            f"--model {settings.model}: the openevolve method speaks only the OpenAI API; use "
            "--model openai:<model> with an OpenAI-compatible endpoint of that provider, or "
            "leave openevolve out of --methods"
        )
    llm = (settings.config or EvoDuetConfig()).llm
    own = [
        key
        for key, value in (
            ("llm.model", llm.model != EvoDuetConfig().llm.model),
            ("llm.models", llm.models),
            ("llm.roles", llm.roles),
        )
        if value
    ]
    if own:
        raise BenchError(
            f"the base configuration sets {', '.join(own)}: the bench's model ({settings.model}) "
            "is every method's model, so leave the model to --model (or the protocol's model:)"
        )
    _check_plotting()


def _checked_tasks(settings: BenchSettings) -> list[Task]:
    """The bench's tasks, loaded, once its settings and output folder are known to be usable.

    Raises:
        BenchError: a task that does not load, settings `check_settings` refuses, an output
            path that is a file, or a run record there that cannot be read (named).
    """
    try:
        tasks = [load_task(p) for p in settings.tasks]
    except TaskError as exc:
        raise BenchError(str(exc)) from None
    check_settings(settings, tasks)
    out = settings.out
    if out.exists() and not out.is_dir():
        raise BenchError(f"--out {out} is a file, not a folder: give a folder to write into")
    collect_runs(out)  # every run record already there is readable, or this says which is not
    return tasks


def run_bench(
    settings: BenchSettings,
    *,
    llm_factory: LLMFactory | None = None,
    searcher_factory: SearcherFactory | None = None,
    runners: dict[str, MethodRunner] | None = None,
    log: LogFn | None = None,
) -> BenchResult:
    """Run every pending (task, method, seed) of ``settings``, then write CSVs, table, plots.

    Args:
        settings: tasks, methods, seeds, iterations, model, output folder.
        llm_factory: a chat model per job for OUR methods (tests); when given, our methods
            need no endpoint and no server is started for them.
        searcher_factory: a search backend per job for the ``evoduet`` method (tests).
        runners: extra or replacement method runners by name (tests).
        log: progress messages (default: none).

    Returns:
        A `BenchResult`.

    Raises:
        BenchError: the bench cannot start (see `BenchError`). Failures of single runs are
            recorded, never raised. KeyboardInterrupt propagates (rerun to resume); it waits
            for a model call in flight (LangGraph joins its node threads), which ``evoduet
            bench`` does not (`evoduet_graph.cli.interrupt`).
    """
    say = log or (lambda _msg: None)
    table = {**default_runners(), **(runners or {})}
    graph_methods = set(GRAPH_METHODS)
    methods = resolve_methods(settings, table, graph_methods)
    settings = dataclasses.replace(settings, methods=list(dict.fromkeys(methods)))
    tasks = _checked_tasks(settings)
    out = settings.out
    base = settings.config or EvoDuetConfig()

    jobs = [
        Job(
            task,
            method,
            seed,
            settings.iterations,
            out / "runs" / task.name / method / f"seed{seed}",
        )
        for task in tasks
        for seed in settings.seeds
        for method in settings.methods
    ]
    states = {job.label: RunState(job) for job in jobs}
    pending = [j for j in jobs if not states[j.label].finished(settings.iterations)]
    result = BenchResult(out=out)
    result.skipped = [j.label for j in jobs if j not in pending]
    for label in result.skipped:
        say(f"skip {label}: finished")

    custom = set(runners or {})
    needs_endpoint = any(
        j.method not in custom and (j.method == "openevolve" or llm_factory is None)
        for j in pending
    )
    oe_version = settings.openevolve_version or OPENEVOLVE_VERSION
    oe_cache: dict[str, Any] = {}

    def openevolve_env() -> Any:
        if "env" not in oe_cache:
            try:
                oe_cache["env"] = ensure_openevolve(
                    settings.openevolve_venv, version=oe_version, log=say
                )
            except Exception as exc:  # noqa: BLE001 - recorded by every OpenEvolve job
                oe_cache["env"] = exc
        env = oe_cache["env"]
        if isinstance(env, Exception):
            raise env
        return env

    # an unreachable cluster is refused before the folder or the model server is touched
    ray_session = connect_ray() if settings.executor == "ray" and pending else None
    created = [p for p in (out, *out.parents) if not p.exists()]  # the deepest first
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(f"--out {out}: cannot create the folder: {exc.strerror or exc}") from None
    with contextlib.ExitStack() as stack:
        try:
            model = _setup_model(settings, base, stack, needs_endpoint and bool(pending), say)
        except BenchError:
            for folder in created:  # a refused start leaves no empty folder behind
                if not any(folder.iterdir()):
                    folder.rmdir()
            raise
        versions = {
            "evoduet_graph": evoduet_graph.__version__,
            "evoduet_graph_git": _git_commit(),
            "llama_cpp_python": _version("llama_cpp_python"),
            "openevolve": oe_version if "openevolve" in settings.methods else None,
            "python": platform.python_version(),
        }
        write_manifest(out, settings, model.info, versions)

        def record(job: Job, done: JobResult) -> None:
            if done.status == "done":
                result.ran.append(job.label)
            else:
                result.failed[job.label] = done.message
            write_csvs(out, result)

        shared = BenchShared(
            runners=table,
            graph_methods=frozenset(graph_methods),
            endpoint=model.endpoint,
            config=model.config,
            model_info=model.info,
            versions=versions,
            llm_factory=llm_factory,
            searcher_factory=searcher_factory,
            openevolve=OpenEvolveSpec(
                settings.openevolve_venv, oe_version, settings.openevolve_timeout_s
            ),
        )
        if settings.executor == "ray":
            for job, done in run_on_ray(pending, shared, log=say, session=ray_session):
                record(job, done)
        else:
            for job in pending:
                state = states[job.label]
                record(job, shared.run(job, openevolve=openevolve_env, state=state, log=say))

    write_csvs(out, result)
    records = collect_runs(out)
    result.summary_md = write_summary(out, records, read_json(out / "manifest.json") or {})
    result.plots = write_plots(out, records)
    return result

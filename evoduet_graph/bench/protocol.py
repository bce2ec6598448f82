"""``evoduet bench --protocol FILE``: a whole experiment as one YAML file.

A protocol names what a paper's table is made of: the tasks, the methods (ladder rows, config
files, or named variants of either), the seeds, the iterations and candidates per iteration,
the model, the search backend and the executor. ``benchmarks/protocols/paper.yaml`` is the
paper's setting; ``benchmarks/protocols/local.yaml`` what a 2-core machine finishes on the
embedded model. Running the same protocol into the same output folder resumes it (finished
runs kept, unfinished ones continued from their checkpoints).

Format::

    description: free text
    tasks: [circle_packing_26, labs_27]      # names (./tasks, else the bundled tasks) or folders
    methods:
      - openevolve-mode                      # a bench method, ladder row or config file
      - name: evoduet-n8                     # a variant: a method with settings laid over it
        method: parallel-8
      - name: openevolve-mode-n8
        method: openevolve-mode
        config: {candidates: 8}
    seeds: [0, 1, 2, 3]
    iterations: 100
    candidates: 1                            # children per iteration, every method (optional)
    model: openai:gpt-4.1-mini               # or local
    search_backend: tavily                   # every method that searches (optional)
    executor: ray                            # or local (default)
    config: {llm: {temperature: 0.7}}        # the base configuration (optional)

Every key is checked before anything runs (`validate_protocol`): an unknown key, task or
method, a repeated seed or task, a variant whose name is a method's or not one folder name,
a model set anywhere but ``model:``, or a configuration the package rejects, is one clear error.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from evoduet_graph import (
    EvoDuetConfig,
    TaskError,
    UserError,
    checked_config,
    load_task,
    merge_config,
    parse_model_string,
)
from evoduet_graph.bench.common import BenchError
from evoduet_graph.bench.jobs import GRAPH_METHODS, BenchSettings
from evoduet_graph.bench.runner import (
    MAX_SEED,
    check_settings,
    default_runners,
    resolve_methods,
    resolve_tasks,
)

__all__ = [
    "Protocol",
    "ProtocolError",
    "ProtocolMethod",
    "load_protocol",
    "protocol_settings",
    "validate_protocol",
]


class ProtocolError(BenchError):
    """A protocol file that cannot run (unreadable, unknown key, task or method)."""


VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""A variant's name: it names the variant's folder under ``<out>/runs/<task>/``, so one safe
path component (letters, digits, ``.``, ``_``, ``-``; not starting with a dot or dash)."""

_Name = Annotated[str, Field(min_length=1)]
_Count = Annotated[StrictInt, Field(ge=0)]
_Seed = Annotated[StrictInt, Field(ge=0, le=MAX_SEED)]


class ProtocolMethod(BaseModel):
    """A named variant: ``method`` with ``config`` laid over its own configuration."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    method: str = Field(min_length=1)
    config: dict[str, Any] = Field(default_factory=dict)


class Protocol(BaseModel):
    """A protocol file's contents (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    tasks: list[_Name] = Field(min_length=1)
    methods: list[_Name | ProtocolMethod] = Field(min_length=1)
    seeds: list[_Seed] = Field(min_length=1)
    iterations: _Count
    candidates: Annotated[StrictInt, Field(ge=1)] | None = None
    model: str = "local"
    search_backend: str | None = None
    executor: Literal["local", "ray"] = "local"
    config: dict[str, Any] = Field(default_factory=dict)


def load_protocol(path: str | Path) -> Protocol:
    """Read and check a protocol file's shape.

    Raises:
        ProtocolError: the file is missing, not YAML, or not a protocol (the message names the
            key and what is wrong with it).
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProtocolError(f"protocol {path}: cannot read it: {exc}") from None
    except UnicodeDecodeError:
        raise ProtocolError(f"protocol {path} is not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise ProtocolError(f"protocol {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"protocol {path} must hold a mapping (tasks, methods, seeds, ...)")
    try:
        return Protocol.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ProtocolError(f"protocol {path}: {problems}") from None


def protocol_settings(
    protocol: Protocol, out: Path, *, tasks_dir: Path | None = None, source: str = "protocol"
) -> BenchSettings:
    """The `BenchSettings` of a protocol, writing into ``out``.

    Raises:
        ProtocolError: a task is not found, a variant is named twice or like its method, an
            unknown search backend, or the base configuration is rejected.
    """
    try:
        tasks = resolve_tasks(protocol.tasks, tasks_dir)
        config = merge_config(EvoDuetConfig(), protocol.config, f"{source}: config")
    except UserError as exc:
        raise ProtocolError(f"{source}: {exc}") from None
    if protocol.search_backend is not None:
        try:  # checked for every method, also those that never search
            checked_config(config.with_overrides({"retrieval.backend": protocol.search_backend}))
        except UserError as exc:
            raise ProtocolError(f"{source}: search_backend: {exc}") from None
    names: list[str] = []
    variants: dict[str, tuple[str, dict[str, Any]]] = {}
    for entry in protocol.methods:
        if isinstance(entry, ProtocolMethod):
            if not VARIANT_NAME.fullmatch(entry.name):
                raise ProtocolError(
                    f"{source}: method variant {entry.name!r}: the name is its runs' folder, "
                    "so letters, digits, '.', '_' and '-' only, starting with a letter or digit"
                )
            if entry.name in variants or entry.name == entry.method:
                raise ProtocolError(
                    f"{source}: method variant {entry.name!r} is named twice or like its method"
                )
            variants[entry.name] = (entry.method, entry.config)
            names.append(entry.name)
        else:
            names.append(entry)
    if len(set(names)) != len(names):
        raise ProtocolError(f"{source}: a method is listed twice: {names}")
    forced: dict[str, Any] = {}
    if protocol.candidates is not None:
        forced["candidates"] = protocol.candidates
    if protocol.search_backend is not None:
        forced["retrieval.backend"] = protocol.search_backend
    return BenchSettings(
        tasks=tasks,
        out=out,
        methods=names,
        seeds=list(protocol.seeds),
        iterations=protocol.iterations,
        model=protocol.model,
        config=config,
        executor=protocol.executor,
        variants=variants,
        forced=forced,
    )


def validate_protocol(path: str | Path, *, tasks_dir: Path | None = None) -> list[str]:
    """Check a protocol completely without running it: every task, method and key resolves.

    Returns:
        The resolved method labels, in the protocol's order.

    Raises:
        ProtocolError: anything `run_bench` would refuse before it starts a run (unknown
            method, bad method config, a forced setting or variant the configuration rejects,
            a task that does not load, two tasks of one name, a repeated seed, a model the
            methods cannot use, Ray missing for ``executor: ray``); a missing API key is
            checked when the bench starts.
    """
    protocol = load_protocol(path)
    settings = protocol_settings(protocol, Path("."), tasks_dir=tasks_dir, source=str(path))
    try:
        parse_model_string(protocol.model)
    except ValueError as exc:
        raise ProtocolError(f"protocol {path}: model: {exc}") from None
    try:
        methods = resolve_methods(settings, default_runners(), set(GRAPH_METHODS))
        check_settings(replace(settings, methods=methods), [load_task(t) for t in settings.tasks])
        return methods
    except (TaskError, BenchError) as exc:
        raise ProtocolError(f"protocol {path}: {exc}") from None

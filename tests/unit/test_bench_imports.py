"""The bench depends only on the package's public API and on ``rundir/``.

Every ``evoduet_graph`` import of a module under ``evoduet_graph/bench/`` (top level or inside a
function, parsed with `ast`) must come from ``evoduet_graph`` itself (what ``__init__`` exports),
``evoduet_graph.rundir`` or the bench's own modules; `EXCEPTIONS` names the few others, each
with the reason the public API does not carry it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import evoduet_graph

BENCH = Path(evoduet_graph.__file__).parent / "bench"

ALLOWED_PREFIXES = ("evoduet_graph.rundir", "evoduet_graph.bench")

EXCEPTIONS: dict[tuple[str, str], str] = {
    ("evoduet_graph.llm.model_file", "EXPECTED_SHA256"): "the embedded model's GGUF, served "
    "by the bench's llama.cpp server; a library user runs the model through `run`",
    ("evoduet_graph.llm.model_file", "MODEL_NAME"): "as EXPECTED_SHA256",
    ("evoduet_graph.llm.model_file", "LocalModelError"): "as EXPECTED_SHA256",
    ("evoduet_graph.llm.model_file", "assemble_model"): "as EXPECTED_SHA256",
    ("evoduet_graph.llm.model_file", "REPEAT_PENALTY"): "the embedded model's repeat penalty, "
    "which the bench's llama.cpp server sets as its request default so that a bench samples the "
    "model as `run` does in process",
    ("evoduet_graph.llm.factory", "PLACEHOLDER_API_KEY"): "the key the OpenEvolve driver "
    "writes into OpenEvolve's config for a keyless server, the same one the model factory uses",
    ("evoduet_graph.task", "EVALUATOR"): "OpenEvolve's own file names, for the "
    "`openevolve-run` command line of the OpenEvolve driver",
    ("evoduet_graph.task", "INITIAL_PROGRAM"): "as EVALUATOR",
    ("evoduet_graph.tasks.openevolve_config", "unknown_keys"): "the one shared copy of "
    "OpenEvolve's config schema (the task loader's and the OpenEvolve driver's)",
    ("evoduet_graph.search.base", "normalize_url"): "repeated URLs of a run without D_search "
    "are counted with D_search's own URL normalisation",
    ("evoduet_graph.llm.runtime", "load_cpu_backend"): "the portable runtime's CPU backend, "
    "registered before llama-cpp-python's own server loads the embedded model",
    ("evoduet_graph.evaluation.ray_executor", "connect"): "the one way the package joins or "
    "starts Ray (a local instance in the calling thread), shared with the Ray evaluator",
    ("evoduet_graph.evaluation.ray_executor", "RayUnavailableError"): "as connect",
    ("evoduet_graph.evaluation.ray_executor", "import_ray"): "as connect: the bench checks "
    "that Ray imports before it writes or starts anything",
    ("evoduet_graph.evaluation.ray_executor", "RAY_EXTRA"): "as import_ray: the install "
    "command its error gives",
    ("evoduet_graph.config", "deep_merge"): "a protocol's variants and forced settings are "
    "configuration overlays, merged as a config file's are",
    ("evoduet_graph.report.correlation", "rank_correlation"): "the one Spearman / Fisher-z "
    "computation, shared by the run report and the bench summary",
    ("evoduet_graph.report.plots", "pyplot"): "the one place that loads matplotlib (on the "
    "Agg backend), shared by the run report's plots and the bench's",
}


def _package_imports(path: Path) -> list[tuple[str, str, int]]:
    """(module, imported name, line) of every ``evoduet_graph`` import in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "evoduet_graph":
                out += [(node.module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.Import):
            out += [
                (alias.name, "", node.lineno)
                for alias in node.names
                if alias.name.split(".")[0] == "evoduet_graph"
            ]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            out.append(("." * node.level + (node.module or ""), "", node.lineno))
    return out


def _allowed(module: str, name: str) -> bool:
    if module == "evoduet_graph":
        return name == "" or name in evoduet_graph.__all__ or name == "__version__"
    if module.startswith(ALLOWED_PREFIXES):
        return True
    return (module, name) in EXCEPTIONS


def test_bench_imports_only_the_public_api_and_rundir() -> None:
    modules = sorted(BENCH.glob("*.py"))
    assert len(modules) >= 8
    found = [(p.name, *imp) for p in modules for imp in _package_imports(p)]
    assert any(m == "evoduet_graph" for _, m, _, _ in found)  # the parse sees the imports
    wrong = [
        f"{file}:{line}: from {module} import {name}"
        for file, module, name, line in found
        if not _allowed(module, name)
    ]
    assert wrong == [], "bench/ may import only `evoduet_graph`, rundir/ and EXCEPTIONS"
    # every exception is still needed (a stale one would hide nothing, but says something false)
    used = {(m, n) for _, m, n, _ in found}
    assert set(EXCEPTIONS) <= used, sorted(set(EXCEPTIONS) - used)


def test_the_check_refuses_a_private_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from evoduet_graph.config import EvoDuetConfig\n"
        "from evoduet_graph import EvoDuetConfig as C\n"
        "def f():\n    import evoduet_graph.nodes.gate\n",
        encoding="utf-8",
    )
    verdicts = [(m, _allowed(m, n)) for m, n, _ in _package_imports(probe)]
    assert verdicts == [
        ("evoduet_graph.config", False),
        ("evoduet_graph", True),
        ("evoduet_graph.nodes.gate", False),
    ]

"""Search-side cost of the offline backend: index build, memory, query latency, cache hit.

The corpus is what a run with ``retrieval.backend: offline`` indexes by default: the API
documentation of the installed numpy and scipy (``retrieval.offline_include_pydoc``), one
document per public object (`evoduet_graph.search.offline`). Every measurement runs in a fresh
child process so import state, caches and the peak-RSS figure belong to that step alone:

1. **cold build** into a new, empty cache folder: wall time, split into *extraction* (importing
   the curated numpy/scipy modules and reading their docstrings) and *index* (tokenising, BM25,
   writing the cache); the process's resident set before the build (interpreter with
   ``evoduet_graph`` imported) and its peak (``getrusage(RUSAGE_SELF).ru_maxrss``), and the
   size of the cache on disk;
2. **Python allocations** of the same build under ``tracemalloc`` (peak traced bytes), in its
   own child and cache folder, since tracing slows the build down;
3. **second run** (a new process, the same cache folder): the load must be a cache hit; its
   time against the cold build's; then ``--queries`` realistic queries (default ~200: sentences
   of the bundled tasks' instructions, numpy/scipy names in the forms a query constructor
   writes, and gate-style questions about the bundled tasks) through `OfflineSearcher.search`
   (5 results, as ``retrieval.results_per_query``), p50/p99 latency, against the reference: a
   plain ``bm25s`` top-5 retrieval (``BM25.retrieve``) of the same tokens on the same index.

Run from the repository root::

    .venv/bin/python benchmarks/search_bench.py [--queries 200] [--json OUT.json]

Prints the figures and the ratios (cached load / cold build, our query / plain bm25s query).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("numpy", "scipy")
RESULTS_PER_QUERY = 5

GATE_STYLE_QUERIES = (
    "maximize sum of radii of circles packed in a unit square linear program for radii",
    "scipy.optimize.linprog maximize total radius given fixed circle centers",
    "scipy.optimize.minimize SLSQP inequality constraints non overlapping circles",
    "pairwise distances between points numpy efficient",
    "scipy.spatial.distance.pdist condensed distance matrix squareform",
    "basin hopping global optimization escape local minima",
    "scipy.optimize.basinhopping step size temperature",
    "Lennard-Jones cluster energy gradient minimization",
    "L-BFGS-B bounded minimization with analytic gradient",
    "differential evolution population based global optimizer bounds",
    "determinant of a +-1 matrix maximize Hadamard",
    "numpy.linalg.slogdet sign and log determinant numerically stable",
    "exact integer determinant of matrix without floating point",
    "orthogonal matrix QR decomposition random rotation",
    "low autocorrelation binary sequence merit factor search",
    "fast autocorrelation with FFT numpy",
    "scipy.signal.correlate full mode autocorrelation",
    "convolution of step functions maximum overlap",
    "numpy.convolve versus scipy.signal.fftconvolve speed",
    "sum set and difference set of integers size ratio",
    "numpy.unique count distinct sums of pairs",
    "heilbronn triangle problem smallest triangle area points",
    "convex hull area of points scipy.spatial.ConvexHull volume",
    "area of triangle from three points determinant",
    "points inside equilateral triangle barycentric coordinates sampling",
    "pressure vessel design constrained optimization penalty",
    "mixed integer variables discrete thickness multiples rounding",
    "nonlinear constraint dictionary for scipy minimize",
    "simulated annealing acceptance probability cooling schedule",
    "random restarts with numpy random default_rng seed",
    "vectorized nearest neighbour search KD tree cKDTree query",
    "Voronoi diagram of points scipy.spatial.Voronoi",
    "Delaunay triangulation simplices",
    "least squares with bounds scipy.optimize.least_squares",
    "projected gradient ascent on the simplex",
    "scipy.optimize.minimize trust-constr method constraints",
    "gradient check approx_fprime finite differences",
    "sparse matrix construction coo csr scipy.sparse",
    "eigenvalues of symmetric matrix eigh",
    "regular polygon vertices on the unit circle numpy",
)
"""Questions of the kind the gate and query constructor write for the bundled tasks."""

API_FORMS = (
    "{qualname}",
    "how to use {name} in {module}",
    "{name} example parameters",
    "{module} {name} performance",
)


# --------------------------------------------------------------------------------------------
# Queries
# --------------------------------------------------------------------------------------------


def task_sentences(max_per_task: int = 8, max_chars: int = 300) -> list[str]:
    """Sentences (≥ 4 words) of every bundled task's instruction, up to ``max_per_task`` each."""
    from evoduet_graph.task import TaskError, load_task

    out: list[str] = []
    for folder in sorted((ROOT / "tasks").iterdir()):
        if not (folder / "evaluator.py").is_file():
            continue
        try:
            instruction = load_task(folder).instruction
        except TaskError:
            continue
        pieces = re.split(r"(?<=[.!?:])\s+|\n+", instruction)
        kept = [" ".join(p.split())[:max_chars] for p in pieces if len(p.split()) >= 4]
        out.extend(kept[:max_per_task])
    return out


def api_queries(names: list[str], count: int, seed: int = 0) -> list[str]:
    """``count`` queries naming numpy/scipy objects (a seeded sample of indexed names)."""
    rng = random.Random(seed)
    picked = rng.sample(names, min(count, len(names)))
    out = []
    for i, qualname in enumerate(picked):
        module, _, name = qualname.rpartition(".")
        out.append(
            API_FORMS[i % len(API_FORMS)].format(qualname=qualname, module=module, name=name)
        )
    return out


def build_queries(names: list[str], total: int) -> list[str]:
    """About ``total`` queries: task sentences, gate-style questions, API-name queries."""
    fixed = task_sentences() + list(GATE_STYLE_QUERIES)
    return (fixed + api_queries(names, max(0, total - len(fixed))))[: max(total, 1)]


# --------------------------------------------------------------------------------------------
# Child steps
# --------------------------------------------------------------------------------------------


def _rss_mib() -> float:
    """Peak resident set of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def child_build(cache_dir: Path, trace: bool) -> dict[str, Any]:
    """Build the index from scratch into ``cache_dir`` (must hold no index)."""
    import tracemalloc

    from evoduet_graph.search.offline import OfflineSearcher, OfflineSources, index_progress

    rss_before = _rss_mib()
    stages: dict[str, float] = {}
    searcher = OfflineSearcher(OfflineSources(pydoc_packages=PACKAGES), cache_dir=cache_dir)
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    with index_progress(lambda ev: stages.setdefault(ev["stage"], time.perf_counter() - start)):
        index = searcher.ensure_index()
    total = time.perf_counter() - start
    out: dict[str, Any] = {
        "seconds": total,
        "extract_s": stages.get("bm25", total),
        "index_s": total - stages.get("bm25", total),
        "documents": len(index.entries),
        "counts": searcher.index_info.get("counts"),
        "cache_hit": searcher.index_info.get("cache_hit"),
        "rss_before_mib": rss_before,
        "rss_peak_mib": _rss_mib(),
        "cache_bytes": _dir_bytes(cache_dir),
    }
    if trace:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["tracemalloc_peak_mib"] = peak / 2**20
    return out


def _percentiles(values: list[float]) -> dict[str, float]:
    """p50 / p99 (linear interpolation between order statistics), mean and max, in ms."""
    ms = sorted(v * 1e3 for v in values)
    cuts = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    return {
        "p50_ms": statistics.median(ms),
        "p99_ms": cuts[98],
        "mean_ms": statistics.fmean(ms),
        "max_ms": ms[-1],
    }


def child_load_and_query(cache_dir: Path, n_queries: int) -> dict[str, Any]:
    """Load the cached index (a second run) and time queries, ours and plain bm25s."""
    from evoduet_graph.search.offline import OfflineSearcher, OfflineSources
    from evoduet_graph.search.text import tokenize

    rss_before = _rss_mib()
    searcher = OfflineSearcher(OfflineSources(pydoc_packages=PACKAGES), cache_dir=cache_dir)
    start = time.perf_counter()
    index = searcher.ensure_index()
    load_s = time.perf_counter() - start
    rss_loaded = _rss_mib()
    names = [e.id[len("pydoc:") :] for e in index.entries if e.id.startswith("pydoc:")]
    queries = build_queries(names, n_queries)
    retriever = index.retriever

    ours, plain, empty, hits = [], [], 0, 0
    for q in queries:  # warm-up: first-call costs (numpy paths, lazy imports) are not latency
        searcher.search(q, RESULTS_PER_QUERY)
    for q in queries:
        t0 = time.perf_counter()
        docs = searcher.search(q, RESULTS_PER_QUERY)
        ours.append(time.perf_counter() - t0)
        hits += bool(docs)
        tokens = [t for t in tokenize(q) if t in retriever.vocab_dict]
        if not tokens:
            empty += 1
            continue
        t0 = time.perf_counter()
        retriever.retrieve(
            [tokens], k=RESULTS_PER_QUERY, show_progress=False, n_threads=0, return_as="tuple"
        )
        plain.append(time.perf_counter() - t0)
    return {
        "load_s": load_s,
        "cache_hit": searcher.index_info.get("cache_hit"),
        "documents": len(index.entries),
        "rss_before_mib": rss_before,
        "rss_loaded_mib": rss_loaded,
        "queries": len(queries),
        "queries_with_results": hits,
        "queries_without_known_terms": empty,
        "ours": _percentiles(ours),
        "plain_bm25s": _percentiles(plain) if plain else None,
        "example_queries": queries[:: max(1, len(queries) // 6)][:6],
    }


def _run_child(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200, help="queries to time (about)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        step, cache = args.child[0], Path(args.child[1])
        if step == "build":
            result = child_build(cache, trace=False)
        elif step == "trace":
            result = child_build(cache, trace=True)
        elif step == "query":
            result = child_load_and_query(cache, int(args.child[2]))
        else:
            parser.error(f"unknown child step {step!r}")
        print(json.dumps(result))
        return 0
    if args.queries < 1:
        parser.error("--queries must be >= 1")

    import bm25s
    import numpy
    import scipy

    print(
        f"search_bench: offline index over the API docs of numpy {numpy.__version__} + scipy "
        f"{scipy.__version__}, bm25s {bm25s.__version__}, Python {sys.version.split()[0]}"
    )
    with tempfile.TemporaryDirectory(prefix="evoduet-search-bench-") as tmp:
        cache, trace_cache = Path(tmp) / "index", Path(tmp) / "index-traced"
        build = _run_child("build", str(cache))
        if build["cache_hit"]:
            raise SystemExit("the cold build found a cached index in a fresh folder")
        print(
            f"cold build : {build['seconds']:6.2f} s  ({build['documents']} documents "
            f"{build['counts']}; extraction {build['extract_s']:.2f} s, tokenise + BM25 + "
            f"save {build['index_s']:.2f} s)"
        )
        print(
            f"  memory   : RSS {build['rss_before_mib']:.0f} MiB before (interpreter + "
            f"evoduet_graph), peak {build['rss_peak_mib']:.0f} MiB "
            f"(+{build['rss_peak_mib'] - build['rss_before_mib']:.0f} MiB); cache on disk "
            f"{build['cache_bytes'] / 2**20:.1f} MiB"
        )
        traced = _run_child("trace", str(trace_cache))
        print(
            f"  python   : tracemalloc peak {traced['tracemalloc_peak_mib']:.0f} MiB of "
            f"Python allocations during the build ({traced['seconds']:.1f} s under tracing)"
        )
        query = _run_child("query", str(cache), str(args.queries))
        if not query["cache_hit"]:
            raise SystemExit("the second run did not load the cached index")
        ratio = query["load_s"] / build["seconds"]
        print(
            f"second run : cache hit, load {query['load_s'] * 1e3:.0f} ms = {ratio:.3f}x the "
            f"cold build ({1 / ratio:.0f}x faster); RSS {query['rss_loaded_mib']:.0f} MiB "
            f"after the load"
        )
        ours, plain = query["ours"], query["plain_bm25s"]
        print(
            f"queries    : {query['queries']} ({query['queries_with_results']} with results, "
            f"{query['queries_without_known_terms']} without a known term), top "
            f"{RESULTS_PER_QUERY}"
        )
        print(
            f"  ours     : p50 {ours['p50_ms']:.3f} ms  p99 {ours['p99_ms']:.3f} ms  "
            f"mean {ours['mean_ms']:.3f} ms  max {ours['max_ms']:.3f} ms"
        )
        if plain:
            print(
                f"  bm25s    : p50 {plain['p50_ms']:.3f} ms  p99 {plain['p99_ms']:.3f} ms  "
                f"mean {plain['mean_ms']:.3f} ms  (plain BM25.retrieve, same tokens, same "
                f"index); ours / plain at p50: {ours['p50_ms'] / plain['p50_ms']:.2f}x"
            )
        summary = {
            "build": build,
            "traced_build": traced,
            "second_run": query,
            "load_over_build": ratio,
        }
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

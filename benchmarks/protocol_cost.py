"""What a protocol will cost on a hosted model: calls, tokens, USD and Tavily credits.

Estimated from a local bench's finished runs, their counts per iteration (``bench_run.json``:
LLM calls, tokens, queries and search calls), scaled to the protocol's tasks × seeds ×
iterations. A method at N children per iteration (a variant's ``candidates``, else the
protocol's) multiplies the mutation calls, each child after the first at openevolve-mode's
calls and tokens: the baselines write N every iteration; EvoDuet's parallel mode (parallel-8)
writes 8 after a retrieve or look-up and N after a no-op (share of retrieves: from the local
runs' queries, one query per round, ``retrieval.inner_rounds`` rounds per retrieve). USD:
the price catalogue the report uses (`evoduet_graph.rundir.pricing`), with ``--output-share``
of the tokens priced as output (the local runs' full rewrites: about 0.36; a hosted model
writing diffs writes less). One Tavily credit per basic search call. From the repository root::

    .venv/bin/python benchmarks/protocol_cost.py benchmarks/protocols/paper.yaml \
        [--local benchmarks/results/local/run_records] [--tasks a,b] [--output-share 0.36]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evoduet_graph import EvoDuetConfig
from evoduet_graph.bench.common import BenchError
from evoduet_graph.bench.output import collect_runs
from evoduet_graph.bench.protocol import Protocol, ProtocolMethod, load_protocol
from evoduet_graph.rundir.pricing import price_for


def _local_counts(local: Path, tasks: set[str]) -> dict[str, dict[str, float]]:
    """Per method: calls, tokens, queries and search calls per iteration of the local runs.

    ``local`` is a bench folder (its ``runs/``) or a folder laid out like it, such as the
    committed ``benchmarks/results/local/run_records``; only finished runs count, and only
    those of ``tasks`` when given.

    Raises:
        BenchError: no finished run, or none of a task named in ``tasks``.
    """
    runs = local / "runs" if (local / "runs").is_dir() else local
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    finished: set[str] = set()
    for rec in collect_runs(local, runs):
        task, method, _seed = rec.key
        if rec.outcome is None or not rec.outcome.iterations:
            continue
        finished.add(task)
        if tasks and task not in tasks:
            continue
        knowledge = rec.outcome.details.get("knowledge") or {}
        sums = totals[method]
        sums["iterations"] += rec.outcome.iterations
        sums["calls"] += rec.outcome.llm_calls
        sums["tokens"] += rec.outcome.tokens
        sums["queries"] += knowledge.get("queries") or 0
        sums["search_calls"] += knowledge.get("search_calls") or 0
        sums["runs"] += 1
    if not finished:
        raise BenchError(f"no finished run records under {runs}")
    if missing := sorted(tasks - finished):
        raise BenchError(
            f"no finished local runs of task(s) {', '.join(missing)}; "
            f"tasks with runs: {', '.join(sorted(finished))}"
        )
    return {
        method: {
            k: v / sums["iterations"] for k, v in sums.items() if k not in ("iterations", "runs")
        }
        | {"runs": sums["runs"]}
        for method, sums in totals.items()
    }


def _candidates(entry: str | ProtocolMethod, default: int) -> int:
    """N, a protocol method's children per iteration.

    Its variant's ``candidates``, else ``default`` (the protocol's ``candidates``, else 1).

    Raises:
        BenchError: the variant's ``candidates`` is not a whole number of at least 1.
    """
    if not isinstance(entry, ProtocolMethod) or "candidates" not in entry.config:
        return default
    n = entry.config["candidates"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise BenchError(
            f"method variant {entry.name!r}: config.candidates must be a whole number of at "
            f"least 1, not {n!r}"
        )
    return n


def _methods(protocol: Protocol, counts: dict[str, dict[str, float]]) -> list[tuple[str, str, int]]:
    """Each protocol method's row name, method and N, checked against the local counts.

    Raises:
        BenchError: a method without local runs, or an N > 1 row (parallel-8 is one) without
            openevolve-mode runs, whose calls per iteration price each extra child.
    """
    rows = []
    default = protocol.candidates or 1
    for entry in protocol.methods:
        name = entry.name if isinstance(entry, ProtocolMethod) else entry
        method = entry.method if isinstance(entry, ProtocolMethod) else entry
        n = _candidates(entry, default)
        key = "evoduet" if method == "parallel-8" else method
        runs_of = ", ".join(counts)
        if key not in counts:
            row = "" if key == name else f" {name!r}"
            raise BenchError(
                f"no local runs of method {key!r} to estimate{row} from (local runs of: {runs_of})"
            )
        if (n > 1 or method == "parallel-8") and "openevolve-mode" not in counts:
            raise BenchError(
                "no local runs of method 'openevolve-mode' to estimate the extra children of the "
                f"N > 1 row {name!r} from (local runs of: {runs_of})"
            )
        rows.append((name, method, n))
    return rows


def _share(text: str) -> float:
    """``--output-share``: a share of the tokens, from 0 to 1."""
    try:
        share = float(text)
    except ValueError:
        share = math.nan
    if not 0.0 <= share <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share from 0 to 1")
    return share


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", type=Path)
    parser.add_argument(
        "--local",
        type=Path,
        default=ROOT / "benchmarks/results/local/run_records",
        help="a bench folder or a folder of run records (default: the local bench's records)",
    )
    parser.add_argument("--tasks", default="", help="comma-separated; default: every task")
    parser.add_argument("--output-share", type=_share, default=0.36)
    args = parser.parse_args()
    try:
        protocol = load_protocol(args.protocol)
        counts = _local_counts(args.local, {t for t in args.tasks.split(",") if t})
        rows = _methods(protocol, counts)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    base = counts.get("openevolve-mode", {})  # one mutation call per iteration
    rounds = EvoDuetConfig().retrieval.inner_rounds
    price = price_for(protocol.model)
    iterations = len(protocol.tasks) * len(protocol.seeds) * protocol.iterations
    listed = (
        "unpriced"
        if price is None
        else f"{price.input_per_mtok} in, {price.output_per_mtok} out per 1M tokens"
    )
    print(
        f"{args.protocol}: {len(protocol.tasks)} tasks × {len(protocol.seeds)} seeds × "
        f"{protocol.iterations} iterations = {iterations} iterations per method; model "
        f"{protocol.model} (USD {listed}); local counts per iteration from "
        + ", ".join(f"{m} ({c['runs']:.0f} runs)" for m, c in counts.items())
        + "\n"
    )
    print("| method | calls | tokens | USD | Tavily credits |\n|---|---|---|---|---|")
    total = {"calls": 0.0, "tokens": 0.0, "usd": 0.0, "credits": 0.0}
    for name, method, n in rows:
        local = counts["evoduet" if method == "parallel-8" else method]
        calls, tokens = local["calls"], local["tokens"]
        if method == "parallel-8":  # N = 8 after a retrieve (or look-up), N after a no-op
            retrieve_share = min(1.0, local["queries"] / rounds)
            n_eff = 8 * retrieve_share + n * (1 - retrieve_share)
        else:
            n_eff = n
        if n_eff != 1:
            calls += (n_eff - 1) * base["calls"]
            tokens += (n_eff - 1) * base["tokens"]
        row_calls, row_tokens = calls * iterations, tokens * iterations
        credits = local["search_calls"] * iterations if protocol.search_backend == "tavily" else 0.0
        usd = None
        if price is not None:
            out_t = row_tokens * args.output_share
            usd = (
                (row_tokens - out_t) * price.input_per_mtok + out_t * price.output_per_mtok
            ) / 1e6
        for key, value in (("calls", row_calls), ("tokens", row_tokens), ("credits", credits)):
            total[key] += value
        total["usd"] += usd or 0.0
        print(
            f"| {name} | {row_calls:,.0f} | {row_tokens / 1e6:,.1f} M | "
            f"{'n/a' if usd is None else f'{usd:,.0f}'} | {credits:,.0f} |"
        )
    print(
        f"| **all** | {total['calls']:,.0f} | {total['tokens'] / 1e6:,.1f} M | "
        f"{total['usd']:,.0f} | {total['credits']:,.0f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

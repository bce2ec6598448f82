"""What a protocol will cost on a hosted model: calls, tokens, USD and Tavily credits.

Estimated from a finished local bench's counts per iteration (``runs.csv``: LLM calls, tokens
and, from ``summary.md``'s world-knowledge table, queries per run), scaled to the protocol's
tasks × seeds × iterations. A variant at N children per iteration multiplies the mutation
calls: the baselines write N every iteration; EvoDuet's parallel mode writes N only after a
retrieve or look-up (share of such iterations: from the local runs' queries, one query per
round, ``retrieval.inner_rounds`` rounds per retrieve). USD: the price catalogue the report
uses (`evoduet_graph.rundir.pricing`), with ``--output-share`` of the tokens priced as output
(the local runs' full rewrites: about 0.36; a hosted model writing diffs writes less). One
Tavily credit per basic search. From the repository root::

    .venv/bin/python benchmarks/protocol_cost.py benchmarks/protocols/paper.yaml \
        --local benchmarks/results/ladder-local [--output-share 0.36]
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evoduet_graph import EvoDuetConfig
from evoduet_graph.bench.protocol import ProtocolMethod, load_protocol
from evoduet_graph.rundir.pricing import price_for


def _local_counts(bench: Path) -> dict[str, dict[str, float]]:
    """Per method: calls, tokens and queries per iteration of the local runs."""
    runs: dict[str, list[dict[str, str]]] = defaultdict(list)
    with open(bench / "runs.csv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["status"] == "done" and int(row["iterations"] or 0) > 0:
                runs[row["method"]].append(row)
    queries: dict[str, float] = {}
    for line in (bench / "summary.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 5 and cells[0] in runs and cells[4].replace(".", "").isdigit():
            queries[cells[0]] = float(cells[4])  # the world-knowledge table: queries per run
    out = {}
    for method, rows in runs.items():
        its = sum(int(r["iterations"]) for r in rows)
        out[method] = {
            "calls": sum(int(r["llm_calls"]) for r in rows) / its,
            "tokens": sum(int(r["tokens"]) for r in rows) / its,
            "queries": queries.get(method, 0.0) * len(rows) / its,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", type=Path)
    parser.add_argument("--local", type=Path, default=ROOT / "benchmarks/results/ladder-local")
    parser.add_argument("--output-share", type=float, default=0.36)
    args = parser.parse_args()
    protocol = load_protocol(args.protocol)
    counts = _local_counts(args.local)
    base = counts["openevolve-mode"]  # one mutation call per iteration
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
        f"{protocol.model} (USD {listed}); local counts from {args.local.name}\n"
    )
    print("| method | calls | tokens | USD | Tavily credits |\n|---|---|---|---|---|")
    total = {"calls": 0.0, "tokens": 0.0, "usd": 0.0, "credits": 0.0}
    for entry in protocol.methods:
        name = entry.name if isinstance(entry, ProtocolMethod) else entry
        method = entry.method if isinstance(entry, ProtocolMethod) else entry
        n = int((entry.config if isinstance(entry, ProtocolMethod) else {}).get("candidates", 1))
        local = counts["evoduet" if method == "parallel-8" else method]
        calls, tokens = local["calls"], local["tokens"]
        if method == "parallel-8":  # N = 8 after a retrieve (or look-up), 1 after a no-op
            retrieve_share = min(1.0, local["queries"] / rounds)
            n_eff = 8 * retrieve_share + (1 - retrieve_share)
        else:
            n_eff = n
        calls += (n_eff - 1) * base["calls"]
        tokens += (n_eff - 1) * base["tokens"]
        row_calls, row_tokens = calls * iterations, tokens * iterations
        credits = local["queries"] * iterations if protocol.search_backend == "tavily" else 0.0
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

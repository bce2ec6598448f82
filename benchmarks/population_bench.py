"""Timings of the populations at 100 and 1,000 programs: add, sample, to_dict, from_dict.

Programs are synthetic but shaped like evolved code: each child is its parent with a few
lines edited, inserted or deleted (3-6 kB of Python), so the diversity feature does real edit
distances. The outer loop's pattern is followed: sample → child on ``Sample.island`` → add.

Run (package installed, or with ``PYTHONPATH=.``):
``.venv/bin/python benchmarks/population_bench.py [--sizes 100 1000] [--kind islands]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from evoduet_graph.config import PopulationConfig
from evoduet_graph.population import ProgramEntry, make_population, population_from_dict

BASE = "\n".join(
    [
        "import numpy as np",
        "",
        "def construct_packing(n=26):",
        '    """Place n circles in the unit square."""',
        "    centers = np.zeros((n, 2))",
        "    radii = np.zeros(n)",
    ]
    + [
        f"    centers[{i}] = [{(i % 5) / 5 + 0.1:.3f}, {(i // 5) / 6 + 0.08:.3f}]"
        for i in range(26)
    ]
    + [
        f"    # refine pass {k}: shrink overlapping circles, grow the free ones by {k / 100:.2f}"
        for k in range(20)
    ]
    + [
        "    for _ in range(200):",
        "        d = np.linalg.norm(centers[:, None] - centers[None], axis=-1)",
        "        radii = np.minimum(radii + 0.001, d.min(axis=1) / 2)",
        "    return centers, radii",
        "",
        "def run_packing():",
        "    centers, radii = construct_packing()",
        "    return centers, radii, float(radii.sum())",
    ]
)


def mutate(code: str, rng: random.Random) -> str:
    lines = code.split("\n")
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(lines))
        op = rng.random()
        new = (
            f"    x{rng.randint(0, 99)} = np.clip(radii * {rng.random():.4f}, 0, "
            f"{rng.random():.3f})  # step {rng.randint(0, 999)}"
        )
        if op < 0.5:
            lines[i] = new
        elif op < 0.8 or len(lines) < 30:
            lines.insert(i, new)
        else:
            del lines[i]
    return "\n".join(lines)


def fmt(values: list[float]) -> str:
    """Wall-clock summary; on a shared 2-core machine the tail includes preemptions."""
    ms = sorted(v * 1e3 for v in values)
    p50 = ms[len(ms) // 2]
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    return f"mean {statistics.fmean(ms):6.3f} ms  p50 {p50:6.3f}  p95 {p95:6.3f}  max {ms[-1]:6.3f}"


def bench(kind: str, size: int, seed: int = 0) -> None:
    cfg = PopulationConfig(kind=kind)
    store: dict[str, str] = {}
    pop = make_population(cfg, seed=seed, get_code=store.__getitem__)
    rng = random.Random(seed)
    store["init"] = BASE
    pop.add(ProgramEntry(id="init", score=0.5, code_length=len(BASE)), BASE, iteration=0)

    add_times, sample_times = [], []
    for it in range(1, size):
        t0 = time.perf_counter()
        sample = pop.sample(random.Random(f"{seed}:{it}"), num_inspirations=2)
        sample_times.append(time.perf_counter() - t0)
        parent = pop.get(sample.parent_id)
        code = mutate(store[pop.code_id(sample.parent_id)], rng)
        pid = f"p{it:05d}"
        store[pid] = code
        entry = ProgramEntry(
            id=pid,
            score=max(0.0, parent.score + rng.gauss(0.0, 0.05)),
            metrics={"combined_score": 0.0},
            parent_id=sample.parent_id,
            generation=parent.generation + 1,
            code_length=len(code),
        )
        t0 = time.perf_counter()
        pop.add(entry, code, iteration=it, island=sample.island)
        add_times.append(time.perf_counter() - t0)

    steady: list[float] = []
    for i in range(1000):
        t0 = time.perf_counter()
        pop.sample(random.Random(i), num_inspirations=5)
        steady.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    data = pop.to_dict()
    t_to = time.perf_counter() - t0
    t0 = time.perf_counter()
    text = json.dumps(data)
    t_dump = time.perf_counter() - t0
    t0 = time.perf_counter()
    restored = population_from_dict(json.loads(text), cfg, store.__getitem__)
    t_from = time.perf_counter() - t0
    code = mutate(BASE, rng)
    t0 = time.perf_counter()
    restored.add(ProgramEntry(id="after", score=0.1), code, iteration=size)
    t_first = time.perf_counter() - t0

    stats = pop.stats()
    mean_len = statistics.fmean(len(c) for c in store.values())
    print(
        f"[{kind} | {size} adds, {len(pop)} kept, mean code {mean_len:.0f} chars, "
        f"{stats.get('migrants', 0)} migrant copies, {stats['occupied_cells']} cells]"
    )
    print(f"  add                      {fmt(add_times)}")
    print(f"  add (last 10%)           {fmt(add_times[-max(1, len(add_times) // 10) :])}")
    print(f"  sample, while growing    {fmt(sample_times)}")
    print(f"  sample, final (n=5)      {fmt(steady)}")
    print(
        f"  to_dict                  {t_to * 1e3:7.2f} ms   json.dumps {t_dump * 1e3:6.2f} ms "
        f"({len(text) / 1024:.0f} KiB)"
    )
    print(f"  json.loads + from_dict   {t_from * 1e3:7.2f} ms")
    print(f"  first add after restore  {t_first * 1e3:7.2f} ms (loads the reference set)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--kind", choices=["islands", "top_k", "both"], default="both")
    args = parser.parse_args()
    kinds = ["islands", "top_k"] if args.kind == "both" else [args.kind]
    for kind in kinds:
        for size in args.sizes:
            bench(kind, size)


if __name__ == "__main__":
    main()

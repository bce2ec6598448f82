"""Speed of the method on the embedded model: gate ``never`` vs gate ``llm``, N=1 vs N=4.

The yardstick of the method's speed on the embedded model. In ONE process, on ONE task
(default ``tasks/smoke_polygon_area``), with the embedded model (Qwen2.5-Coder-1.5B Q4_K_M,
llama.cpp in-process) loaded once, it runs the same seed and the same number of iterations
through the public API (`evoduet_graph.run`):

* ``gate``: gate ``never`` (the OpenEvolve baseline) vs gate ``llm`` (the method), N=1;
* ``n``: N=1 vs N=4 candidates per iteration, gate ``never``.

The gate-never N=1 case is shared by both comparisons. Every case starts with an empty llama.cpp
context (its evaluated tokens dropped), so no case profits from the one before it.

Per case it prints and records:

* **s/iteration**: the mean wall time of an iteration, from the end of ``record`` of the
  previous iteration (``initialize`` for the first) to the end of its own ``record``; model
  load, task checks and the initial program's evaluation are start-up and not counted;
* the ratios gate-llm / gate-never and N=4 / N=1 (one process, one machine, same seed);
* **prompt-token reuse**: the share of prompt tokens llama.cpp did not evaluate because the
  context already held them (the longest common prefix with what the previous call left in the
  context, as ``Llama.generate`` computes it), summed over the case's calls;
* prompt-evaluation seconds (llama.cpp's perf counter) and decode seconds (the rest of the
  call: decoding, sampling, the JSON grammar), prompt / output tokens, model calls per
  iteration and per node;
* what a bounded in-memory prompt cache (llama-cpp-python's ``LlamaRAMCache``, 4 entries)
  could add: the reuse share if every call could also start from the best of the last 4 calls'
  states, and the bytes one such entry holds (llama.cpp's state and the logits copy);
* **valid-child rate** (valid candidates / candidates) and **NDG** of the run, and the gate
  decisions;
* with ``--local-prompt-cache-mib M`` (``llm.local_prompt_cache_mib``; the
  package's default otherwise, recorded as ``prompt_cache_mib``): the calls served from a cache
  entry, the entries and MiB the cache held at the end of the case;
* **peak RSS** of the process during the case (``VmHWM``, reset before each case through
  ``/proc/self/clear_refs``; null where the kernel does not offer it) and the RSS after the
  model load.

Where do the per-call figures come from: the run's ``llm_call`` events when the package writes
them (they also cover batched candidates), else a wrapper around
``Llama.create_chat_completion`` of the loaded model that measures the same things at the
llama.cpp boundary (so the bench also runs on code from before those events; ``calls_source``
in the results says which).

Results go to ``benchmarks/results/embedded/<label>-<task>.json`` and ``.md`` together with the
machine's load (1/5/15-minute load average before and after, the busiest other processes) and
the commit of the package that ran.

Run from the repository root, under the machine's model lock where several jobs share it::

    flock <lockfile> nice .venv/bin/python benchmarks/embedded_bench.py --label after
    .venv/bin/python benchmarks/embedded_bench.py --task tasks/circle_packing_26 --only n
    .venv/bin/python benchmarks/embedded_bench.py --only gate --iterations 2

Exit code 0 (it reports; the targets are printed as met / missed).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

from evoduet_graph import EvoDuetConfig, load_task, run

GATE_RATIO_TARGET = 1.5
N_RATIO_TARGET = 1.5
REUSE_TARGET = 0.5
RESULTS = ROOT / "benchmarks" / "results" / "embedded"


# --------------------------------------------------------------------------------------------
# Measuring every model call at the llama.cpp boundary
# --------------------------------------------------------------------------------------------


def _common_prefix(a: Any, b: Any) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class CallMeter:
    """Wraps ``Llama.create_chat_completion`` of the loaded model to measure every call.

    Per call: node (the product's `current_node`, when it has one), prompt and output tokens,
    prompt tokens reused from the context (the longest common prefix of the new prompt with the
    tokens the context held before the call; a fully matching prompt re-evaluates its last
    token, as llama.cpp does), prompt-evaluation and decode seconds from llama.cpp's perf
    counters, wall seconds and the finish reason.
    """

    def __init__(self, llama: Any, cache_entries: int = 4) -> None:
        self.llama = llama
        self.calls: list[dict[str, Any]] = []
        self._original = llama.create_chat_completion
        self._lock = threading.Lock()
        self._recent: list[list[int]] = []  # token sequences of the last calls (what-if cache)
        self.cache_entries = cache_entries
        llama.create_chat_completion = self._call

    def _node(self) -> str | None:
        try:
            from evoduet_graph.llm.usage import current_node
        except ImportError:  # pragma: no cover - a package without per-node usage
            return None
        return current_node()

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        import llama_cpp

        llama = self.llama
        before = list(llama.input_ids)
        cache = getattr(llama, "cache", None)
        entries = list(cache.cache_state.items()) if cache is not None else []
        live = list(llama._input_ids)  # the evaluated tokens (what the cache lookup compares)
        ctx = llama._ctx.ctx
        llama_cpp.llama_perf_context_reset(ctx)
        started = time.perf_counter()
        response = self._original(*args, **kwargs)
        wall = time.perf_counter() - started
        perf = llama_cpp.llama_perf_context(ctx)
        usage = response.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        prompt = list(llama.input_ids[:prompt_tokens])
        reused = _common_prefix(before, prompt)
        if reused >= prompt_tokens > 0:
            reused = prompt_tokens - 1
        # what a bounded prompt cache (llama-cpp-python's LlamaRAMCache, `cache_entries` states
        # of earlier calls besides the live context) could have reused: its best prefix match
        cached = max([reused, *(_common_prefix(t, prompt) for t in self._recent)])
        cached = min(cached, max(prompt_tokens - 1, 0))
        self._recent = [*self._recent[-(self.cache_entries - 1) :], list(llama.input_ids)]
        from_cache = False
        if entries:  # the package's prompt cache: did this call load an entry?
            from evoduet_graph.llm.prompt_cache import reuse_source

            _, from_cache = reuse_source(live, entries, prompt)
        choice = (response.get("choices") or [{}])[0]
        with self._lock:
            self.calls.append(
                {
                    "node": self._node(),
                    "prompt_tokens": prompt_tokens,
                    "reused_tokens": reused,
                    "ram_cache_reusable_tokens": cached,
                    "from_cache": from_cache,
                    "output_tokens": int(usage.get("completion_tokens", 0)),
                    "prompt_eval_s": round(perf.t_p_eval_ms / 1000.0, 3),
                    # what follows the prompt: decoding, sampling, grammar (as the product)
                    "decode_s": round(max(0.0, wall - perf.t_p_eval_ms / 1000.0), 3),
                    "wall_s": round(wall, 3),
                    "finish_reason": choice.get("finish_reason"),
                }
            )
        return response

    def reset_context(self) -> None:
        """Drop the context's evaluated tokens and the prompt cache's entries.

        The next call evaluates its whole prompt.
        """
        self.llama.reset()
        cache = getattr(self.llama, "cache", None)
        if cache is not None:
            cache.cache_state.clear()
        self.calls.clear()
        self._recent.clear()

    def prompt_cache(self) -> dict[str, Any] | None:
        """Entries and MiB the model's prompt cache holds now (None without a cache)."""
        cache = getattr(self.llama, "cache", None)
        if cache is None:
            return None
        return {
            "entries": len(cache.cache_state),
            "mib": round(cache.cache_size / 2**20, 1),
            "capacity_mib": round(cache.capacity_bytes / 2**20, 1),
        }

    def state_bytes(self) -> dict[str, int]:
        """Bytes one `LlamaRAMCache` entry would hold now, and the seconds saving it took.

        llama.cpp's state (KV cache of the evaluated tokens) and the logits array llama-cpp-python's
        ``save_state`` copies (the package's cache keeps one row of it).
        """
        started = time.perf_counter()
        state = self.llama.save_state()
        save_s = time.perf_counter() - started
        return {
            "llama_state": int(state.llama_state_size),
            "logits_copy": int(state.scores.nbytes),
            "n_tokens": int(state.n_tokens),
            # what every sequential call pays when the prompt cache is on (it saves an entry)
            "save_state_s": round(save_s, 3),
        }


def _loaded_llama(llm: Any) -> Any:
    loaded = getattr(llm, "_loaded", None)
    llama = getattr(loaded, "llama", None)
    if llama is None:
        raise SystemExit("embedded_bench: the model is not the embedded llama.cpp model")
    return llama


# --------------------------------------------------------------------------------------------
# Machine load and memory
# --------------------------------------------------------------------------------------------


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def rss_mib() -> float | None:
    """Resident memory of this process now (``VmRSS``), MiB; None off Linux."""
    kib = _status_kib("VmRSS")
    return None if kib is None else round(kib / 1024, 1)


def peak_rss_mib() -> float | None:
    """Peak resident memory since the last `reset_peak_rss` (``VmHWM``), MiB; None off Linux."""
    kib = _status_kib("VmHWM")
    return None if kib is None else round(kib / 1024, 1)


def reset_peak_rss() -> bool:
    """Restart the peak-RSS count at the current RSS (Linux ``clear_refs`` 5); False if refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="utf-8")
    except OSError:
        return False
    return True


def machine_load() -> dict[str, Any]:
    """Load average and the five busiest processes (name, %CPU) other than this one."""
    load = [round(x, 2) for x in os.getloadavg()]
    busiest: list[dict[str, Any]] = []
    try:
        out = subprocess.run(
            ["ps", "-eo", "pid=,pcpu=,comm=", "--sort=-pcpu"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout
        for line in out.splitlines():
            parts = line.split(None, 2)
            if len(parts) == 3 and int(parts[0]) != os.getpid():
                busiest.append({"name": parts[2], "cpu_percent": float(parts[1])})
            if len(busiest) == 5:
                break
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return {"loadavg_1_5_15": load, "busiest_other_processes": busiest}


def package_commit() -> str | None:
    """The git commit of the imported ``evoduet_graph`` package (None outside a checkout)."""
    import evoduet_graph

    where = Path(evoduet_graph.__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return None
    return out.stdout.strip() or None


# --------------------------------------------------------------------------------------------
# One case
# --------------------------------------------------------------------------------------------


def _sum(calls: list[dict[str, Any]], key: str) -> float:
    return sum(float(c.get(key) or 0) for c in calls)


def run_case(
    task_dir: Path,
    run_dir: Path,
    *,
    gate: str,
    candidates: int,
    iterations: int,
    seed: int,
    llm: Any,
    meter: CallMeter,
) -> dict[str, Any]:
    """One run of ``iterations`` iterations; returns its figures (see the module docstring)."""
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": iterations,
            "candidates": candidates,
            "seed": seed,
            "gate": {"mode": gate},
            "max_consecutive_failures": iterations + 1,
            "evaluation": {"workers": max(candidates, 2)},
        }
    )
    meter.reset_context()
    peak_reset = reset_peak_rss()
    # every case starts the model's stream of sampling seeds at the run seed (what the run
    # driver does for the model it builds; a tree from before that change gets it here), so
    # different seeds sample differently and a case does not depend on the cases before it
    meter.llama.set_seed(seed)
    marks: list[float] = []

    def progress(node: str, _update: dict[str, Any]) -> None:
        if node in ("initialize", "record"):
            marks.append(time.perf_counter())

    started = time.perf_counter()
    result = run(load_task(task_dir), cfg, llm=llm, run_dir=run_dir, progress=progress)
    total = time.perf_counter() - started
    walls = [b - a for a, b in itertools.pairwise(marks)]
    events = calls_from_events(run_dir / "events.jsonl")
    calls = events if events is not None else list(meter.calls)
    cands = [c for h in result.history for c in h.get("candidates", [])]
    valid = sum(1 for c in cands if c.get("valid"))
    n_it = len(walls) or 1
    return {
        "gate": gate,
        "candidates": candidates,
        "iterations_done": result.iterations,
        "iteration_walls_s": [round(w, 2) for w in walls],
        "s_per_iteration": round(statistics.fmean(walls), 2) if walls else None,
        "startup_s": round(marks[0] - started, 2) if marks else None,
        "total_s": round(total, 2),
        "calls_source": "llm_call events" if events is not None else "llama.cpp boundary",
        "calls_per_iteration": round(len(calls) / n_it, 2),
        **call_totals(calls),
        "ram_cache_reuse_share": _share(meter.calls, "ram_cache_reusable_tokens"),
        "ram_cache_entry_bytes": meter.state_bytes() if meter.calls else None,
        "prompt_cache": meter.prompt_cache(),
        "prompt_cache_hits": sum(1 for c in meter.calls if c.get("from_cache")),
        # the process's peak over this case (over the whole process if the reset was refused)
        "peak_rss_mib": peak_rss_mib(),
        "peak_rss_scope": "case" if peak_reset else "process",
        "candidates_total": len(cands),
        "valid_children": valid,
        "valid_child_rate": round(valid / len(cands), 3) if cands else None,
        # why the others were not valid (status and the first line of the error), per candidate
        "invalid_reasons": [
            f"{c.get('status')}: {str(c.get('error') or '').strip().splitlines()[:1]}"[:200]
            for c in cands
            if not c.get("valid")
        ],
        "gate_decisions": dict(
            collections.Counter(str(h.get("gate_decision")) for h in result.history)
        ),
        # the decision of each iteration, in the order of iteration_walls_s
        "iteration_decisions": [str(h.get("gate_decision")) for h in result.history],
        "best_score": result.best_score,
        "ndg": None if result.ndg is None else round(result.ndg, 3),
        "stop_reason": result.stop_reason,
        "calls": calls,
    }


def calls_from_events(path: Path) -> list[dict[str, Any]] | None:
    """The run's model calls from its ``llm_call`` events, or None.

    The run's model calls from its ``llm_call`` events (None when the package writes none:
    code from before those events). They include calls that do not go through
    ``create_chat_completion`` (batched candidates), which the meter cannot see.
    """
    try:
        from evoduet_graph.rundir.events import read_events
    except ImportError:  # the flat layout from before the package's subpackages
        from evoduet_graph.events import read_events  # type: ignore[no-redef]

    out = [
        {
            "node": ev.get("from_node"),
            "prompt_tokens": int(ev.get("input_tokens") or 0),
            "reused_tokens": int(ev.get("cached_input_tokens") or 0),
            "output_tokens": int(ev.get("output_tokens") or 0),
            "prompt_eval_s": float(ev.get("prompt_eval_s") or 0.0),
            "decode_s": float(ev.get("decode_s") or 0.0),
            "lock_wait_s": float(ev.get("lock_wait_s") or 0.0),
            "wall_s": float(ev.get("latency_s") or 0.0),
            "finish_reason": ev.get("finish_reason"),
        }
        for ev in read_events(path)
        if ev.get("event") == "llm_call"
    ]
    return out or None


def _share(calls: list[dict[str, Any]], key: str) -> float | None:
    prompt = _sum(calls, "prompt_tokens")
    return round(_sum(calls, key) / prompt, 4) if prompt else None


_NODE_KEYS = (
    "prompt_tokens",
    "reused_tokens",
    "output_tokens",
    "prompt_eval_s",
    "decode_s",
    "wall_s",
)


def call_totals(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Sums over a case's calls: tokens, reuse share, seconds, finish reasons, per node."""
    by_node: dict[str, dict[str, float]] = {}
    for c in calls:
        row = by_node.setdefault(str(c.get("node") or "unknown"), dict.fromkeys(_NODE_KEYS, 0.0))
        row["calls"] = row.get("calls", 0) + 1
        for key in _NODE_KEYS:
            row[key] += c.get(key) or 0
    return {
        "llm_calls": len(calls),
        "prompt_tokens": int(_sum(calls, "prompt_tokens")),
        "reused_tokens": int(_sum(calls, "reused_tokens")),
        "reuse_share": _share(calls, "reused_tokens"),
        "output_tokens": int(_sum(calls, "output_tokens")),
        "prompt_eval_s": round(_sum(calls, "prompt_eval_s"), 2),
        "decode_s": round(_sum(calls, "decode_s"), 2),
        "model_wall_s": round(_sum(calls, "wall_s"), 2),
        "finish_reasons": dict(collections.Counter(str(c.get("finish_reason")) for c in calls)),
        "by_node": {k: {kk: round(vv, 2) for kk, vv in v.items()} for k, v in by_node.items()},
    }


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    if not a or not b or not a.get("s_per_iteration") or not b.get("s_per_iteration"):
        return None
    return round(a["s_per_iteration"] / b["s_per_iteration"], 3)


def _fmt(value: Any, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    if pct:
        return f"{100 * value:.1f}%"
    return f"{value:g}" if isinstance(value, float) else str(value)


def case_line(label: str, case: dict[str, Any]) -> str:
    return (
        f"{label:<16} {_fmt(case['s_per_iteration']):>7} s/it  walls {case['iteration_walls_s']}"
        f"  calls/it {case['calls_per_iteration']}  reuse {_fmt(case['reuse_share'], True)}"
        f" (RAM cache {_fmt(case.get('ram_cache_reuse_share'), True)})"
        f"  prompt-eval {case['prompt_eval_s']} s  decode {case['decode_s']} s"
        f"  out {case['output_tokens']} tok  valid {case['valid_children']}/"
        f"{case['candidates_total']}  NDG {_fmt(case['ndg'])}  gate {case['gate_decisions']}"
        f"  peak RSS {_fmt(case.get('peak_rss_mib'))} MiB  cache {case.get('prompt_cache')}"
        f" hits {case.get('prompt_cache_hits')}"
    )


def markdown(results: dict[str, Any]) -> str:
    """The results as a Markdown page."""
    lines = [
        f"# Embedded-model bench: {results['label']} ({results['task']})",
        "",
        f"Command: `{results['command']}`  ",
        (
            f"Package commit: `{results['package_commit']}`; "
            f"{results['iterations']} iterations per "
            f"case, seed {results['seed']}; model load {results['model_load_s']} s (not counted); "
            f"{results['cores']} cores; {results['started_utc']} → {results['finished_utc']} UTC."
        ),
        "",
        (
            f"Prompt cache (`llm.local_prompt_cache_mib`): {results.get('prompt_cache_mib')} MiB"
            f"; local_parallel {results.get('local_parallel')}; RSS after the model load "
            f"{_fmt(results.get('rss_after_load_mib'))} MiB."
        ),
        "",
        (
            f"Machine load before: loadavg {results['load_before']['loadavg_1_5_15']}, "
            "busiest other "
            f"processes {_procs(results['load_before'])}; after: loadavg "
            f"{results['load_after']['loadavg_1_5_15']}, {_procs(results['load_after'])}."
        ),
        "",
        (
            "| case | s/iteration | iteration walls (s) | calls/it | prompt tok | reused | reuse "
            "| prompt-eval s | decode s | output tok | valid children | NDG | gate decisions "
            "| cache hits | cache at end | peak RSS MiB |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, c in results["cases"].items():
        lines.append(
            f"| {label} | {_fmt(c['s_per_iteration'])} | {c['iteration_walls_s']} | "
            f"{c['calls_per_iteration']} | {c['prompt_tokens']} | {c['reused_tokens']} | "
            f"{_fmt(c['reuse_share'], True)} | {c['prompt_eval_s']} | {c['decode_s']} | "
            f"{c['output_tokens']} | {c['valid_children']}/{c['candidates_total']} | "
            f"{_fmt(c['ndg'])} | {c['gate_decisions']} | {c.get('prompt_cache_hits')} | "
            f"{_cache(c.get('prompt_cache'))} | {_fmt(c.get('peak_rss_mib'))} |"
        )
    lines += [
        "",
        "A bounded prompt cache (LlamaRAMCache, 4 entries) would reuse: "
        + "; ".join(
            f"{label} {_fmt(c.get('ram_cache_reuse_share'), True)}"
            for label, c in results["cases"].items()
        )
        + ". One entry holds: "
        + "; ".join(
            f"{label} {_mib(c.get('ram_cache_entry_bytes'))}"
            for label, c in results["cases"].items()
        )
        + ".",
    ]
    lines += ["", "| ratio | value | target |", "|---|---|---|"]
    for name, (value, target) in results["ratios"].items():
        bound = "≥" if name.startswith("reuse") else "≤"
        lines.append(f"| {name} | {_fmt(value)} | {bound} {target} |")
    lines += by_decision_lines(results["cases"])
    lines += [
        "",
        "Per node (calls, prompt tokens, reused, output tokens, prompt-eval s, decode s):",
        "",
    ]
    for label, c in results["cases"].items():
        lines.append(
            f"- {label}: "
            + "; ".join(
                f"{node} {v['calls']:g} calls, {v['prompt_tokens']:g} / {v['reused_tokens']:g} / "
                f"{v['output_tokens']:g} tok, {v['prompt_eval_s']:g} / {v['decode_s']:g} s"
                for node, v in sorted(c["by_node"].items())
            )
        )
    return "\n".join(lines) + "\n"


def by_decision(cases: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Gate llm's iteration walls grouped by the gate's decision, against gate never's mean.

    The iteration's cost depends on what the gate decided (a retrieve iteration runs the inner
    loop's R rounds), so the one ratio over a few iterations mostly counts retrieves; this
    splits it. Empty when either case is missing or an iteration's decision is unknown.
    """
    llm, never = cases.get("gate llm N=1"), cases.get("gate never N=1")
    if not llm or not never or not never.get("s_per_iteration"):
        return {}
    walls, decisions = llm["iteration_walls_s"], llm.get("iteration_decisions") or []
    if len(walls) != len(decisions):
        return {}
    groups: dict[str, list[float]] = collections.defaultdict(list)
    for wall, decision in zip(walls, decisions, strict=True):
        groups[decision].append(wall)
    return {
        d: {
            "iterations": len(w),
            "mean_s": round(statistics.fmean(w), 2),
            "ratio": round(statistics.fmean(w) / never["s_per_iteration"], 3),
        }
        for d, w in sorted(groups.items())
    }


def by_decision_lines(cases: dict[str, Any]) -> list[str]:
    """`by_decision` as a Markdown table (no lines when it is empty)."""
    groups = by_decision(cases)
    if not groups:
        return []
    lines = [
        "",
        "Gate llm iterations by the gate's decision, against gate never's mean s/iteration:",
        "",
        "| decision | iterations | mean s | ratio |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {d} | {g['iterations']} | {g['mean_s']} | {g['ratio']} |" for d, g in groups.items()
    ]
    return lines


def _mib(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "n/a"
    return (
        f"{entry['llama_state'] / 2**20:.0f} MiB state + {entry['logits_copy'] / 2**20:.0f} MiB "
        f"logits ({entry['n_tokens']} tokens"
        + (f", saved in {entry['save_state_s']:g} s" if "save_state_s" in entry else "")
        + ")"
    )


def _cache(cache: dict[str, Any] | None) -> str:
    if not cache:
        return "off"
    return f"{cache['entries']} entries, {cache['mib']:g} / {cache['capacity_mib']:g} MiB"


def _procs(load: dict[str, Any]) -> str:
    return ", ".join(f"{p['name']} {p['cpu_percent']:g}%" for p in load["busiest_other_processes"])


def _public_args(argv: list[str] | None) -> list[str]:
    """The command line as the results record it: ``--out`` (a local folder) left out."""
    args = list(argv if argv is not None else sys.argv[1:])
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--task", default="tasks/smoke_polygon_area", help="task folder")
    parser.add_argument("--iterations", type=int, default=3, help="iterations per case")
    parser.add_argument("--seed", type=int, default=42, help="run seed (every case)")
    parser.add_argument(
        "--only",
        choices=("gate", "n", "never"),
        help="one comparison only (never: the gate-never N=1 case alone)",
    )
    parser.add_argument("--n", type=int, default=4, help="N of the many-candidates case")
    parser.add_argument(
        "--local-parallel",
        type=int,
        default=None,
        help="llm.local_parallel of the model (default: the package's; 1: no batched decoding)",
    )
    parser.add_argument(
        "--local-prompt-cache-mib",
        type=int,
        default=None,
        help="llm.local_prompt_cache_mib of the model (default: the package's; 0: no cache)",
    )
    parser.add_argument("--label", default="run", help="results file name prefix")
    parser.add_argument("--out", default=str(RESULTS), help="results folder")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.n < 2:
        parser.error("--iterations must be >= 1 and --n >= 2")
    if args.local_prompt_cache_mib is not None and args.local_prompt_cache_mib < 0:
        parser.error("--local-prompt-cache-mib must be >= 0")
    task_dir = Path(args.task)
    if not task_dir.is_dir():
        parser.error(f"no task folder {task_dir}")

    from evoduet_graph.config import LLMConfig
    from evoduet_graph.llm import make_chat_model

    load_before = machine_load()
    started_utc = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    t0 = time.perf_counter()
    # in-process: `CallMeter` reads the loaded Llama's counters (the worker's boundary is
    # measured on its own by benchmarks/runtime_bench.py)
    model_cfg: dict[str, Any] = {"local_isolation": "none"}
    if args.local_parallel is not None:
        model_cfg["local_parallel"] = args.local_parallel
    if args.local_prompt_cache_mib is not None:
        if "local_prompt_cache_mib" not in LLMConfig.model_fields:
            parser.error("--local-prompt-cache-mib: this package has no prompt cache")
        model_cfg["local_prompt_cache_mib"] = args.local_prompt_cache_mib
    llm_cfg = LLMConfig(**model_cfg)
    llm = make_chat_model(llm_cfg)
    load_s = round(time.perf_counter() - t0, 1)
    rss_after_load = rss_mib()
    meter = CallMeter(_loaded_llama(llm))
    plan: list[tuple[str, str, int]] = [("gate never N=1", "never", 1)]
    if args.only in (None, "gate"):
        plan.append(("gate llm N=1", "llm", 1))
    if args.only in (None, "n"):
        plan.append((f"gate never N={args.n}", "never", args.n))
    print(
        f"embedded_bench: task {task_dir.name}, {args.iterations} iterations per case, seed "
        f"{args.seed}, model load {load_s} s, loadavg {load_before['loadavg_1_5_15']}",
        flush=True,
    )
    cases: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="evoduet-embedded-bench-") as tmp:
        for i, (label, gate, n) in enumerate(plan):
            cases[label] = run_case(
                task_dir,
                Path(tmp) / f"run{i}",
                gate=gate,
                candidates=n,
                iterations=args.iterations,
                seed=args.seed,
                llm=llm,
                meter=meter,
            )
            print(case_line(label, cases[label]), flush=True)
    ratios: dict[str, tuple[float | None, float]] = {}
    never = cases["gate never N=1"]
    if "gate llm N=1" in cases:
        ratios["gate llm / gate never"] = (_ratio(cases["gate llm N=1"], never), GATE_RATIO_TARGET)
        ratios["reuse share, gate llm"] = (cases["gate llm N=1"]["reuse_share"], REUSE_TARGET)
    if f"gate never N={args.n}" in cases:
        ratios[f"N={args.n} / N=1"] = (
            _ratio(cases[f"gate never N={args.n}"], never),
            N_RATIO_TARGET,
        )
    for name, (value, target) in ratios.items():
        verdict = (
            "n/a"
            if value is None
            else (
                "met"
                if (value >= target if name.startswith("reuse") else value <= target)
                else "MISSED"
            )
        )
        bound = "≥" if name.startswith("reuse") else "≤"
        print(f"{name}: {_fmt(value)} (target {bound} {target}): {verdict}", flush=True)
    for decision, group in by_decision(cases).items():
        print(
            f"gate llm {decision} iterations: {group['iterations']}, mean {group['mean_s']} s, "
            f"{group['ratio']} x gate never",
            flush=True,
        )
    results = {
        "label": args.label,
        "task": task_dir.name,
        "command": "python benchmarks/embedded_bench.py " + " ".join(_public_args(argv)),
        "package_commit": package_commit(),
        "iterations": args.iterations,
        "seed": args.seed,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "model_load_s": load_s,
        "local_parallel": getattr(llm_cfg, "local_parallel", None),  # absent before batching
        "prompt_cache_mib": getattr(llm_cfg, "local_prompt_cache_mib", None),
        "rss_after_load_mib": rss_after_load,
        "started_utc": started_utc,
        "finished_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load_before": load_before,
        "load_after": machine_load(),
        "cases": cases,
        "ratios": ratios,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{args.label}-{task_dir.name}" + (f"-{args.only}" if args.only else "")
    (out / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (out / f"{stem}.md").write_text(markdown(results), encoding="utf-8")
    print(f"wrote {out / stem}.json and .md", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

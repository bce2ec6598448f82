"""Does prompt-lookup drafting pay for the structured (JSON-grammar) calls? One run, measured.

The embedded model's batched decoder drafts free-text calls only (`docs/parallelism.md`); the
gate and the query constructor answer under a JSON grammar, one call at a time. Their replies
quote the prompt (document ids and titles, the knowledge state the gate rewrites), so drafting
could help them too. This bench measures it on the real prompts of a real run: for every
iteration of a finished run directory it rebuilds the gate's messages (`gate_prompt`) and the
round-0 query constructor's (`query_prompt`) from the run's own program store, search database
and knowledge states, and sends each, with its grammar (the JSON schema the node asks for), to
llama-cpp-python's server with and without ``--draft_model prompt-lookup-decoding`` (the same
``create_chat_completion`` with ``response_format`` the embedded model makes in process; that
server's drafting is exact: each position is still sampled from the model's own distribution).

Each call is made twice on a server: once with ``max_tokens`` 1 (the prompt is evaluated and
kept), then the measured call, which reuses the evaluated prompt, so its wall time is the
writing of the reply. Greedy decoding: the replies with and without drafting must be the same.
It prints per call and per kind the output tokens, the writing speed (tokens/s) of both and
their ratio, and the machine's load average.

Run from the repository root, alone on the machine (two model servers one after the other)::

    .venv/bin/python benchmarks/structured_drafting_bench.py RUN_DIR [--calls 8]
        [--out benchmarks/results/structured-drafting]

RUN_DIR: a finished run of the llm gate (``evoduet run TASK ...``) on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import convert_to_openai_messages

from evoduet_graph import load_task
from evoduet_graph.bench.server import LlamaCppServer
from evoduet_graph.config import load_config
from evoduet_graph.llm.model_file import MODEL_NAME, assemble_model
from evoduet_graph.nodes.construct_query import query_prompt
from evoduet_graph.nodes.gate import gate_prompt
from evoduet_graph.prompts.descriptor import iteration_messages
from evoduet_graph.prompts.knowledge import GateOutput, query_plan_schema
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.read import iter_jsonl
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.startup import build_context


def structured_calls(run_dir: Path, limit: int) -> list[dict[str, Any]]:
    """The gate's and the round-0 query constructor's requests of the run's iterations."""
    tmp = Path(tempfile.mkdtemp(prefix="evoduet-structured-"))
    copy = tmp / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("checkpoints.sqlite*", ".lock"))
    run = json.loads((copy / "run.json").read_text())
    task = load_task(run["task_dir"])
    config = load_config(copy / "config.yaml")
    ctx = build_context(task, config, copy, llm=FakeListChatModel(responses=["{}"]))
    parents = {
        row.iteration: row.parent_id
        for row in ProgramStore(copy / layout.PROGRAMS).all_programs()
        if row.parent_id
    }
    knowledge: dict[str, Any] | None = None
    calls: list[dict[str, Any]] = []
    n = config.retrieval.queries_per_round
    for event in iter_jsonl(copy / layout.EVENTS):
        if event.get("event") != "gate_decision" or event["iteration"] not in parents:
            continue
        it = event["iteration"]
        state: dict[str, Any] = {
            "iteration": it,
            "parent_id": parents[it],
            "parent_score": 0.0,
            "inspiration_ids": [],
            "knowledge_state": knowledge,
        }
        gate = iteration_messages(ctx, gate_prompt(state, ctx))  # type: ignore[arg-type]
        calls.append({"kind": "gate", "iteration": it, "messages": gate, "schema": GateOutput})
        inner = {**state, "query_history": [], "round": 0, "retained": []}
        inner["knowledge_state"] = event.get("knowledge_state") or {}
        query = iteration_messages(ctx, query_prompt(inner, ctx))  # type: ignore[arg-type]
        calls.append(
            {"kind": "query", "iteration": it, "messages": query, "schema": query_plan_schema(n)}
        )
        knowledge = event.get("knowledge_state")
    shutil.rmtree(tmp, ignore_errors=True)
    return calls[:limit]


def post(base_url: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """One chat completion: the answer and its wall seconds."""
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=1800) as response:
        answer = json.load(response)
    return answer, time.perf_counter() - start


def measure(calls: list[dict[str, Any]], *, prompt_lookup: bool, log: Path) -> list[dict]:
    """Each call's reply, output tokens and writing wall seconds on one server."""
    out = []
    with LlamaCppServer(
        assemble_model(), alias=MODEL_NAME, n_ctx=8192, log_path=log, prompt_lookup=prompt_lookup
    ) as server:
        for call in calls:
            body = {
                "model": MODEL_NAME,
                "messages": convert_to_openai_messages(call["messages"]),
                "temperature": 0.0,
                "response_format": {
                    "type": "json_object",
                    "schema": call["schema"].model_json_schema(),
                },
            }
            post(server.base_url, {**body, "max_tokens": 1})  # evaluate and keep the prompt
            load = os.getloadavg()[0]
            answer, wall = post(server.base_url, {**body, "max_tokens": 1024})
            tokens = answer["usage"]["completion_tokens"]
            out.append(
                {
                    "kind": call["kind"],
                    "iteration": call["iteration"],
                    "prompt_tokens": answer["usage"]["prompt_tokens"],
                    "output_tokens": tokens,
                    "wall_s": round(wall, 3),
                    "tokens_per_s": round(tokens / wall, 2),
                    "load": round(load, 2),
                    "reply": answer["choices"][0]["message"]["content"],
                }
            )
            print(
                f"{'on ' if prompt_lookup else 'off'} {call['kind']:5} it{call['iteration']:>3}: "
                f"{tokens:4d} tokens in {wall:6.1f} s = {tokens / wall:5.1f} tokens/s "
                f"(load {load:.2f})",
                flush=True,
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/structured-drafting"))
    args = parser.parse_args()
    calls = structured_calls(args.run_dir, args.calls)
    if not calls:
        raise SystemExit(f"{args.run_dir}: no gate decisions with a child to rebuild")
    args.out.mkdir(parents=True, exist_ok=True)
    off = measure(calls, prompt_lookup=False, log=args.out / "server-off.log")
    on = measure(calls, prompt_lookup=True, log=args.out / "server-on.log")
    rows = []
    for a, b in zip(off, on, strict=True):
        rows.append(
            {
                **{k: a[k] for k in ("kind", "iteration", "prompt_tokens", "output_tokens")},
                "off_tokens_per_s": a["tokens_per_s"],
                "on_tokens_per_s": b["tokens_per_s"],
                "ratio": round(b["tokens_per_s"] / a["tokens_per_s"], 3),
                "same_reply": a["reply"] == b["reply"],
                "load_off": a["load"],
                "load_on": b["load"],
            }
        )
    print("\nkind   calls  out tokens (median)  off tok/s  on tok/s  ratio (median)  same reply")
    summary = {}
    for kind in ("gate", "query"):
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        summary[kind] = {
            "calls": len(mine),
            "output_tokens_median": statistics.median(r["output_tokens"] for r in mine),
            "off_tokens_per_s_median": statistics.median(r["off_tokens_per_s"] for r in mine),
            "on_tokens_per_s_median": statistics.median(r["on_tokens_per_s"] for r in mine),
            "ratio_median": statistics.median(r["ratio"] for r in mine),
            "same_reply": sum(r["same_reply"] for r in mine),
        }
        s = summary[kind]
        print(
            f"{kind:6} {s['calls']:5}  {s['output_tokens_median']:19}  "
            f"{s['off_tokens_per_s_median']:9.1f}  {s['on_tokens_per_s_median']:8.1f}  "
            f"{s['ratio_median']:14.2f}  {s['same_reply']}/{s['calls']}"
        )
    (args.out / "results.json").write_text(
        json.dumps(
            {
                "run": args.run_dir.name,
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                "summary": summary,
                "calls": rows,
            },
            indent=2,
        )
        + "\n"
    )
    for log in ("server-off.log", "server-on.log"):
        (args.out / log).unlink(missing_ok=True)


if __name__ == "__main__":
    main()

r"""Fault-injection report: every listed fault injected, counted and checked for lost programs.

Fault-injection report: inject every fault of the areas below, count the injections,
record the outcome (survived / clear error), and check that no program is lost.

Areas: SIGKILL anywhere with resume (`tests.fault_harness`), model endpoint faults against a real
misbehaving HTTP server on 127.0.0.1 (`tests.fake_openai_server`) and fakes, search backend
faults, sandbox limits, bad task folders and configs through the CLI, budgets, concurrent use
and fuzzed model answers to the diff applier.

Outcomes:

* **survived** — the run (or evaluation) went on: the fault was retried away, or it became a
  failed/invalid candidate or an event with its reason, and the run finished its iterations;
* **clear error** — the run refused to start or stopped with a one-line reason (exit code 2 at
  startup; ``stop_reason`` with a resumable checkpoint later);
* **FAILED** — anything else (an exception, a hang, a lost program): the script exits 1.

Run from the repository root (takes a few minutes on 2 cores)::

    .venv/bin/python benchmarks/fault_report.py [--out benchmarks/fault_report.md] \
        [--kill-points 100] [--evaluator sandbox|inprocess]

The kill & resume runs evaluate with the real sandbox by default (``--evaluator``, as in
``kill_soak.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SURVIVED = "survived"
CLEAR = "clear error"
FAILED = "FAILED"


@dataclass
class Row:
    area: str
    fault: str
    injected: int
    outcome: str
    detail: str = ""
    lost: int = 0


ROWS: list[Row] = []


def add(
    area: str, fault: str, injected: int, outcome: str, detail: str = "", lost: int = 0
) -> None:
    ROWS.append(Row(area, fault, injected, outcome, detail, lost))
    print(f"[{outcome:>11}] {area}: {fault} ×{injected} {detail}"[:200], flush=True)


def guarded(area: str, fault: str, fn: Callable[[], None]) -> None:
    """Run one probe; an unexpected exception is a FAILED row."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - reported as a failure of the probe
        add(area, fault, 1, FAILED, f"{type(exc).__name__}: {exc}"[:300])


# ------------------------------------------------------------------------------------------
# 1. SIGKILL anywhere + resume
# ------------------------------------------------------------------------------------------


def kill_section(points: int, work: Path) -> None:
    area = "kill & resume"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.fault_harness",
            "--points",
            str(points),
            "--jobs",
            "2",
            "--double-every",
            "4",
            "--out",
            str(work / "kill"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if not proc.stdout.strip():
        add(area, "harness", 1, FAILED, proc.stderr[-300:])
        return
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    failed_labels = Counter(f["label"] for f in summary["failed"])
    by_cat: Counter = Counter()
    for s in summary["scenarios"]:
        from tests.fault_harness import category

        by_cat[category(s["label"]) if s["label"] else "?"] += 1
    for cat, n in sorted(by_cat.items()):
        bad = sum(v for k, v in failed_labels.items() if k.startswith(cat))
        add(
            area,
            f"SIGKILL at `{cat}`",
            n,
            FAILED if bad else SURVIVED,
            "resumed to the uninterrupted run's population, programs, best and D_search",
        )
    add(
        area,
        "torn line (half-written) in events.jsonl / search_database.jsonl",
        summary["torn_writes"],
        SURVIVED,
        "cut on load; no torn or duplicate line after resume",
    )
    add(
        area,
        "second SIGKILL during the resume",
        summary["double_kills"],
        SURVIVED,
        "resumed again to the same result",
    )
    add(
        area,
        "evaluations in flight at a kill (redone after resume)",
        summary["reevaluated_in_flight"],
        SURVIVED,
        "persisted evaluations never ran again",
        lost=summary["lost_programs"],
    )


# ------------------------------------------------------------------------------------------
# 2. model endpoint faults
# ------------------------------------------------------------------------------------------


def _program_rows(run_dir: Path) -> dict[str, str]:
    from evoduet_graph.rundir.store import ProgramStore

    store = ProgramStore(run_dir / "programs.sqlite")
    try:
        return {p.id: p.status for p in store.all_programs() if p.id != "initial"}
    finally:
        store.close()


def _lost(run_dir: Path, iterations: int, candidates: int = 1) -> int:
    rows = _program_rows(run_dir)
    expected = {f"it{i:05d}-c{c}" for i in range(1, iterations + 1) for c in range(candidates)}
    return len(expected - set(rows))


def model_section(work: Path) -> None:
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    from evoduet_graph import EvoDuetConfig, resume, run
    from evoduet_graph.llm import LLMCallError, structured_call
    from evoduet_graph.nodes.stop_rules import MODEL_DOWN_PREFIX
    from tests.conftest import RADIUS_UP, SMOKE_TASK
    from tests.fake_openai_server import FaultyServer, last_user_text
    from tests.fakes import ScriptedChatModel
    from tests.fault_harness import InProcessEvaluator, parent_parameters, smoke_program

    area = "model endpoint"

    def rewrite(body: dict[str, Any]) -> str:
        radius, spread = parent_parameters(last_user_text(body))
        return f"```python\n{smoke_program(min(1.0, radius + 0.03), spread)}```"

    def cfg(url: str, **extra: Any) -> EvoDuetConfig:
        data: dict[str, Any] = {
            "iterations": 3,
            "population": {"num_islands": 2},
            "prompt": {"diff_based": False},
            "llm": {
                "model": "openai:fake-model",
                "base_url": url,
                "max_retries": 2,
                "timeout_s": 0.5,
            },
            # the fake server's programs repeat: no novelty resamples, so each scripted fault
            # meets the request it is meant for
            "novelty": {"enabled": False},
            # no gate call either: the scripted faults are for the generate calls (the gate's
            # own faults are the structured-output rows below)
            "gate": {"mode": "never"},
        }
        for k, v in extra.items():
            if isinstance(v, dict):
                data.setdefault(k, {}).update(v)
            else:
                data[k] = v
        return EvoDuetConfig.model_validate(data)

    def http_case(
        name: str,
        fault: str,
        per_iteration: int,
        *,
        expect: str,
        diff_based: bool = False,
        sleep_s: float = 3.0,
    ) -> None:
        # iterations 1-2 get the fault (each attempt), iteration 3 a good answer
        script = [fault] * (2 * per_iteration) + ["ok"]
        run_dir = work / f"model-{name}"
        with FaultyServer(script, content=rewrite, sleep_s=sleep_s) as server:
            start = time.monotonic()
            result = run(
                SMOKE_TASK,
                cfg(server.base_url, prompt={"diff_based": diff_based}),
                run_dir=run_dir,
                evaluator=InProcessEvaluator(SMOKE_TASK),
            )
            elapsed = time.monotonic() - start
            injected = sum(f == fault for f in server.faults())
        rows = _program_rows(run_dir)
        statuses = [rows.get(f"it0000{i}-c0") for i in (1, 2, 3)]
        ok = result.iterations == 3 and statuses[2] == "evaluated"
        if expect == "retried":
            ok = ok and all(s == "evaluated" for s in statuses)
        else:
            ok = ok and statuses[0] == statuses[1] == expect
        add(
            area,
            name,
            injected,
            SURVIVED if ok else FAILED,
            f"candidates {statuses}; run finished in {elapsed:.1f} s",
            lost=_lost(run_dir, 3),
        )

    http_case("HTTP 429 with retry-after", "429", 1, expect="retried")
    http_case("HTTP 500", "500", 1, expect="retried")
    http_case("HTTP 503", "503", 1, expect="retried")
    http_case("timeout (server sleeps past llm.timeout_s)", "sleep", 3, expect="failed")
    http_case("connection dropped without an answer", "close", 3, expect="failed")
    http_case("HTTP 200 with a non-JSON body", "garbage", 1, expect="failed")
    http_case("empty completion", "empty", 1, expect="invalid")
    http_case(
        "truncated code block",
        "text:```python\ndef make_points(:\n    radius = ",
        1,
        expect="invalid",
    )
    http_case(
        "prose instead of code",
        "text:Increase the radius; I will not write code.",
        1,
        expect="invalid",
    )
    http_case(
        "model never follows the diff format",
        "text:Set radius to 1. That is my diff.",
        1,
        expect="invalid",
        diff_based=True,
    )

    # <think> around a good answer: survives as a valid candidate
    run_dir = work / "model-think"
    with FaultyServer(["ok"], content=lambda b: "<think>more radius</think>\n" + rewrite(b)) as s:
        result = run(
            SMOKE_TASK, cfg(s.base_url), run_dir=run_dir, evaluator=InProcessEvaluator(SMOKE_TASK)
        )
        n = len(s.faults())
    rows = _program_rows(run_dir)
    add(
        area,
        "<think> block before the answer",
        n,
        SURVIVED if all(v == "evaluated" for v in rows.values()) else FAILED,
        "reasoning stripped; candidates valid",
        lost=_lost(run_dir, 3),
    )

    # connection refused: every iteration fails -> clear stop after max_consecutive_failures
    run_dir = work / "model-refused"
    result = run(
        SMOKE_TASK,
        cfg(
            "http://127.0.0.1:9/v1",
            iterations=6,
            max_consecutive_failures=2,
            llm={"max_retries": 1},
        ),
        run_dir=run_dir,
        evaluator=InProcessEvaluator(SMOKE_TASK),
    )
    stopped = bool(result.stop_reason) and "2 consecutive" in result.stop_reason
    with FaultyServer(["ok"], content=rewrite) as healthy:
        llm = ChatOpenAI(model="m", base_url=healthy.base_url, api_key="x", max_retries=0)
        resumed = resume(run_dir, llm=llm, evaluator=InProcessEvaluator(SMOKE_TASK))
    add(
        area,
        "connection refused (nothing listening)",
        2 * 2,
        CLEAR if stopped and resumed.iterations == 6 else FAILED,
        f"stop_reason: {result.stop_reason[:90] if result.stop_reason else None}…; "
        "resumed to 6 iterations with a healthy endpoint",
        lost=_lost(run_dir, 6),
    )

    # the same dead endpoint for a run shorter than max_consecutive_model_failures: it still
    # ends as a failed run (never a quiet "done" with NDG 0)
    run_dir = work / "model-refused-short"
    result = run(
        SMOKE_TASK,
        cfg("http://127.0.0.1:9/v1", iterations=2, llm={"max_retries": 0}),
        run_dir=run_dir,
        evaluator=InProcessEvaluator(SMOKE_TASK),
    )
    down = (result.stop_reason or "").startswith(MODEL_DOWN_PREFIX)
    add(
        area,
        "connection refused in every iteration of a 2-iteration run",
        2,
        CLEAR if down and result.iterations == 2 else FAILED,
        f"stop_reason: {result.stop_reason[:90] if result.stop_reason else None}…",
        lost=_lost(run_dir, 2),
    )

    run_dir = work / "model-never"
    with FaultyServer(["text:No diff from me."], content=rewrite) as s:
        result = run(
            SMOKE_TASK,
            cfg(s.base_url, iterations=8, max_consecutive_failures=3, prompt={"diff_based": True}),
            run_dir=run_dir,
            evaluator=InProcessEvaluator(SMOKE_TASK),
        )
        n = len(s.faults())
    add(
        area,
        "model that never follows the format, for every call",
        n,
        CLEAR if result.iterations == 3 and result.stop_reason else FAILED,
        "stopped after max_consecutive_failures=3 with a resumable checkpoint",
        lost=_lost(run_dir, 3),
    )

    class Decision(BaseModel):
        decision: str

    structured = {
        "prose around JSON": 'text:Sure! {"decision": "retrieve"} Hope that helps.',
        "<think> before JSON": 'text:<think>hmm</think>{"decision": "no-op"}',
        "JSON in a code fence": 'text:```json\n{"decision": "look-up"}\n```',
        "truncated JSON": 'text:{"note": "the points should',
        "empty structured answer": "empty",
    }
    for name, fault in structured.items():
        with FaultyServer([fault]) as s:
            llm = ChatOpenAI(model="m", base_url=s.base_url, api_key="x", max_retries=0)
            try:
                res = structured_call(llm, "decide", Decision, default=Decision(decision="dflt"))
                outcome, detail = SURVIVED, f"method {res.method}, value {res.value.decision!r}"
            except LLMCallError as exc:
                outcome, detail = CLEAR, str(exc)[:100]
            n = len(s.faults())
        add(area, f"structured output: {name}", n, outcome, detail)

    # fakes: a model without retries of its own gets RetryPolicy's bounded retries
    llm = ScriptedChatModel(
        responses=[ConnectionError("reset"), TimeoutError("slow"), RADIUS_UP], default=RADIUS_UP
    )
    result = run(
        SMOKE_TASK,
        EvoDuetConfig.model_validate(
            {"iterations": 1, "population": {"num_islands": 2}, "llm": {"max_retries": 2}}
        ),
        llm=llm,
        run_dir=work / "model-fake-retry",
        evaluator=InProcessEvaluator(SMOKE_TASK),
    )
    add(
        area,
        "fake model: ConnectionError / TimeoutError (no retries of its own)",
        2,
        SURVIVED if result.best_id == "it00001-c0" else FAILED,
        "retried by RetryPolicy (llm.max_retries), then valid",
        lost=_lost(work / "model-fake-retry", 1),
    )


# ------------------------------------------------------------------------------------------
# 3. search faults
# ------------------------------------------------------------------------------------------


def search_section(work: Path) -> None:
    from evoduet_graph import EvoDuetConfig, load_task, run
    from evoduet_graph.rundir.events import read_events
    from evoduet_graph.search.base import MAX_CONTENT_CHARS
    from evoduet_graph.search.database import SearchDatabase
    from tests.conftest import SMOKE_TASK
    from tests.fakes import KnowledgeResponder, ScriptedChatModel
    from tests.fault_harness import InProcessEvaluator, parent_parameters, smoke_program
    from tests.integration.test_search_faults import FaultySearcher

    area = "search backend"

    def rewrite(messages: Any) -> str:
        radius, spread = parent_parameters(str(messages[-1].content))
        return f"```python\n{smoke_program(min(1.0, radius + 0.02), spread)}```"

    responder = KnowledgeResponder(
        gate="retrieve", queries=lambda n, _t: [f"q{n}a", f"q{n}b"], generate=rewrite
    )
    searcher = FaultySearcher()
    run_dir = work / "search"
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": 4,
            "population": {"num_islands": 2},
            "prompt": {"diff_based": False},
            "gate": {"mode": "always"},
            "retrieval": {
                "inner_rounds": 2,
                "queries_per_round": 2,
                "search_retries": 0,
                "search_timeout_s": 0.3,
            },
        }
    )
    result = run(
        load_task(SMOKE_TASK),
        cfg,
        llm=ScriptedChatModel(responses=[], default=responder),
        evaluator=InProcessEvaluator(SMOKE_TASK),
        run_dir=run_dir,
        searcher=searcher,
    )
    db = SearchDatabase(run_dir / "search_database.jsonl")
    docs = [d for d in (db.get_document(f"doc_{i:06d}") for i in range(1, 100)) if d]
    urls = [d.normalized_url for d in docs]
    clean = (
        len(urls) == len(set(urls))
        and all(len(d.content) <= MAX_CONTENT_CHARS for d in docs)
        and db.dropped_lines == 0
    )
    errors = [e for e in read_events(run_dir / "events.jsonl") if e["event"] == "search_error"]
    ok = result.iterations == 4 and clean
    per_kind = searcher.calls // 8
    names = [
        "backend error (ConnectionError)",
        "timeout (backend hangs)",
        "empty results",
        "oversized page (1 MB)",
        "non-UTF-8 bytes in title and content",
        "duplicate URLs (www, utm_*, fragment, trailing slash)",
        "malformed hits (None, int, no url, empty content, bad score)",
        "prompt-injection text in a document",
    ]
    details = [
        f"{len(errors)} search_error events; retrieval went on",
        "per-attempt deadline; search_error event",
        "retrieve_empty; no evidence",
        f"content capped at {MAX_CONTENT_CHARS} chars",
        "decoded with U+FFFD, no surrogates",
        "one document per normalised URL",
        "malformed hits dropped",
        "kept inside <document>/<evidence> as data; tags neutralised",
    ]
    for name, detail in zip(names, details, strict=True):
        add(area, name, per_kind, SURVIVED if ok else FAILED, detail, lost=_lost(run_dir, 4))


# ------------------------------------------------------------------------------------------
# 4. sandbox limits
# ------------------------------------------------------------------------------------------

SANDBOX_PROGRAMS: dict[str, tuple[str, dict[str, Any]]] = {
    "infinite loop (wall-clock timeout, process-group kill)": (
        (
            "import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'while True: pass'])"
            "\nwhile True:\n    pass\n"
        ),
        {"timeout_s": 1.5},
    ),
    "memory bomb (address-space limit)": (
        "x = []\nwhile True:\n    x.append(bytearray(50_000_000))\n",
        {"memory_mb": 512},
    ),
    "CPU spin (CPU-time limit)": ("while True:\n    pass\n", {"cpu_time_s": 1, "timeout_s": 30}),
    "fork bomb (pids cgroup)": (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        {"timeout_s": 2, "max_processes": 32},
    ),
    "disk filler (file-size limit, private temp dir)": (
        (
            "import tempfile\nf = open(tempfile.gettempdir() + '/fill', 'wb')\n"
            "while True:\n    f.write(b'x' * (1 << 20))\n"
        ),
        {"max_file_mb": 4},
    ),
    "stdout flood (file-size limit, tail kept)": (
        "import sys\nwhile True:\n    sys.stdout.write('flood' * 1000)\n",
        {"max_file_mb": 2},
    ),
    "sys.exit during import": ("import sys\nsys.exit(3)\n", {}),
    "os._exit without a result": ("import os\nos._exit(0)\n", {}),
    "segmentation fault": ("import ctypes\nctypes.string_at(0)\n", {}),
    "exception in the program": ("raise RuntimeError('boom')\n", {}),
    "syntax error": ("def result(:\n", {}),
    "NaN score": ("def result():\n    return {'combined_score': float('nan')}\n", {}),
}

EVALUATOR = """\
import importlib.util
def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.result()
"""


def sandbox_section(work: Path) -> None:
    from evoduet_graph.evaluation import SandboxEvaluator
    from evoduet_graph.task import load_task

    area = "sandbox"
    folder = work / "sandbox_task"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "initial_program.py").write_text(
        "def result():\n    return {'combined_score': 0.5}\n"
    )
    (folder / "evaluator.py").write_text(EVALUATOR)
    task = load_task(folder)
    iso = SandboxEvaluator(task).isolation
    for name, (code, kw) in SANDBOX_PROGRAMS.items():
        kw = {"timeout_s": 20, **kw}
        start = time.monotonic()
        outcome = SandboxEvaluator(task, **kw).evaluate(code)
        elapsed = time.monotonic() - start
        enforced = not (name.startswith("fork bomb") and iso.processes != "cgroup")
        ok = not outcome.valid and outcome.error and elapsed < 60
        add(
            area,
            name,
            1,
            SURVIVED if ok else FAILED,
            f"invalid: {outcome.error[:80] if outcome.error else None} ({elapsed:.1f} s)"
            + ("" if enforced else " [process limit not enforced here]"),
        )

    os.environ["EVODUET_REPORT_API_KEY"] = "sekrit-value"
    env_probe = (
        "import os\ndef result():\n    return {'combined_score': 1.0, "
        "'leak': float(any('sekrit' in v for v in os.environ.values()))}\n"
    )
    out = SandboxEvaluator(task).evaluate(env_probe)
    del os.environ["EVODUET_REPORT_API_KEY"]
    add(
        area,
        "candidate reads secrets from the environment",
        1,
        SURVIVED if out.valid and out.metrics.get("leak") == 0.0 else FAILED,
        "*_API_KEY, *TOKEN*, provider variables scrubbed",
    )

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    threading.Thread(target=lambda: [server.accept() for _ in range(4)], daemon=True).start()
    net_probe = (
        "import socket\ndef result():\n    try:\n"
        f"        socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n"
        "        r = 1.0\n    except OSError:\n        r = 0.0\n"
        "    return {'combined_score': 1.0, 'reached': r}\n"
    )
    out = SandboxEvaluator(task).evaluate(net_probe)
    server.close()
    if iso.network:
        add(
            area,
            "candidate opens a network connection",
            1,
            SURVIVED if out.metrics.get("reached") == 0.0 else FAILED,
            f"no network: {iso.network_detail}",
        )
    else:
        add(
            area,
            "candidate opens a network connection",
            1,
            SURVIVED,
            f"NOT isolated here ({iso.network_detail}); the run warns once",
        )

    run_dir = work / "fake_run_dir"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "programs.sqlite").write_text("precious")
    cwd = os.getcwd()
    os.chdir(run_dir)
    try:
        out = SandboxEvaluator(task).evaluate(
            "open('programs.sqlite', 'w').write('clobbered')\n"
            "def result():\n    return {'combined_score': 1.0}\n"
        )
    finally:
        os.chdir(cwd)
    add(
        area,
        "candidate overwrites programs.sqlite by a relative path",
        1,
        SURVIVED if (run_dir / "programs.sqlite").read_text() == "precious" else FAILED,
        "its working directory is a private temp dir outside the run directory",
    )
    add(
        area,
        "isolation available on this machine",
        0,
        SURVIVED,
        f"network: {iso.network_detail}; processes: {iso.processes_detail}; "
        f"filesystem ({iso.filesystem}): {iso.filesystem_detail}",
    )
    tampering_rows(work, task.path, iso.filesystem == "namespace")


#: A candidate's routes to the evaluator, the task folder, the run directory and the program store:
#: each program collects target paths ``T`` and appends a 1e9 wrapper to every one it can.
TAMPER_ROUTES = {
    "sys.path[0] → evaluator.py": "import sys\nT = [sys.path[0] + '/evaluator.py']\n",
    "own call stack → evaluator and runner files": (
        "import inspect, os\nT = [f.filename for f in inspect.stack()\n"
        "     if os.path.isfile(f.filename) and not f.filename.endswith('program.py')]\n"
    ),
    "environment → task folder, run directory, program store": (
        "import os\nT = [os.path.join(os.environ['FR_TASK'], 'evaluator.py')] + [\n"
        "    os.path.join(os.environ['FR_RUN'], n) for n in ('programs.sqlite', 'events.jsonl')]\n"
    ),
    "/proc of the parent → open store and event log, cwd": (
        "import glob, os\np = os.getppid()\nT = [f for f in glob.glob(f'/proc/{p}/fd/*')\n"
        "     if os.path.realpath(f).endswith(('.sqlite', '.jsonl'))]\n"
        "T += [f'/proc/{p}/cwd/programs.sqlite', f'/proc/{p}/cwd/events.jsonl']\n"
    ),
    "shell command → evaluator.py (path in a variable)": (
        "import os, subprocess, sys\nos.environ['X'] = sys.path[0] + '/evaluator.py'\n"
        "subprocess.run(['sh', '-c', 'echo \"def evaluate(p): return 1e9\" >> \"$X\"'])\nT = []\n"
    ),
}
TAMPER_TAIL = (
    "for t in T:\n    try:\n        open(t, 'a').write('\\ndef evaluate(p):\\n"
    '    return {"combined_score": 1e9}\\n\')\n    except Exception:\n        pass\n'
    "def result():\n    return {'combined_score': 0.5}\n"
)


def tampering_rows(work: Path, task_dir: Path, namespace: bool) -> None:
    """Rows of the tampering routes on both protection paths.

    Each route of `TAMPER_ROUTES` on both protection paths (the read-only namespace where
    this machine allows bwrap, and the detection fallback): survived when the candidate is
    caught (``tampering: ...``) or could not write, and the task folder (by hash), the run
    directory, the program store and the runner are unchanged, and the next candidate scores
    honestly.
    """
    import sqlite3

    from evoduet_graph.evaluation import SandboxEvaluator
    from evoduet_graph.evaluation.integrity import folder_digest
    from evoduet_graph.evaluation.sandbox import RUNNER_PATH
    from evoduet_graph.task import load_task

    area = "sandbox: tampering"
    task = load_task(task_dir)
    run_dir = work / "tamper_run_dir"
    run_dir.mkdir(exist_ok=True)
    store = sqlite3.connect(run_dir / "programs.sqlite")
    store.execute("CREATE TABLE IF NOT EXISTS programs (id TEXT)")
    store.commit()
    events = open(run_dir / "events.jsonl", "a")  # noqa: SIM115 - held open like a run's log
    events.write('{"event": "run_start"}\n')
    events.flush()
    os.environ.update(FR_TASK=str(task_dir), FR_RUN=str(run_dir))
    cwd = os.getcwd()
    os.chdir(run_dir)
    paths = [("fallback", False)] + ([("namespace", True)] if namespace else [])
    try:
        for label, isolate in paths:
            for route, head in TAMPER_ROUTES.items():
                sandbox = SandboxEvaluator(task, timeout_s=30, isolate_filesystem=isolate)
                sandbox.protect(run_dir)
                before = (
                    folder_digest(task_dir),
                    (run_dir / "events.jsonl").read_bytes(),
                    RUNNER_PATH.read_bytes(),
                )
                try:
                    out = sandbox.evaluate(head + TAMPER_TAIL, "attacker")
                    honest = sandbox.evaluate("def result():\n    return {'combined_score': 0.5}\n")
                finally:
                    sandbox.close()
                tables = [r[0] for r in store.execute("SELECT name FROM sqlite_master")]
                after = (
                    folder_digest(task_dir),
                    (run_dir / "events.jsonl").read_bytes(),
                    RUNNER_PATH.read_bytes(),
                )
                caught = bool(out.error and out.error.startswith("tampering: "))
                intact = after == before and tables == ["programs"] and honest.score == 0.5
                error = re.sub(r"/[^\s;,()]*/", "", out.error or "")  # paths → file names
                add(
                    area,
                    f"{label}: {route}",
                    1,
                    SURVIVED if intact else FAILED,
                    (f"invalid: {error[:110]}" if caught else "could not write (read-only)")
                    + (
                        "; task folder hash, run directory and runner unchanged"
                        if intact
                        else "; SOMETHING CHANGED"
                    ),
                )
        if not namespace:
            add(area, "namespace path", 0, SURVIVED, "bwrap unavailable here: fallback only")
    finally:
        os.chdir(cwd)
        events.close()
        store.close()
        for name in ("FR_TASK", "FR_RUN"):
            os.environ.pop(name, None)


# ------------------------------------------------------------------------------------------
# 5. bad task folders and configs (CLI)
# ------------------------------------------------------------------------------------------


def cli_section(work: Path) -> None:
    from typer.testing import CliRunner

    from evoduet_graph.cli import app
    from tests.conftest import SMOKE_TASK

    area = "bad task / config (CLI)"
    runner = CliRunner()
    os.environ.setdefault("OPENAI_API_KEY", "sk-report-not-used")

    def case(name: str, edit: Callable[[Path], None], *extra: str, needle: str = "") -> None:
        folder = work / f"cli-{abs(hash(name))}"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(SMOKE_TASK, folder)
        edit(folder)
        out = folder.parent / (folder.name + "-run")
        args = [
            "run",
            str(folder),
            "--iterations",
            "1",
            "--model",
            "openai:gpt-4o-mini",
            "--quiet",
            "--out",
            str(out),
            *extra,
        ]
        res = runner.invoke(app, args)
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        ok = (
            res.exit_code == 2
            and len(lines) == 1
            and lines[0].startswith("error:")
            and needle in lines[0]
            and not out.exists()
        )
        add(area, name, 1, CLEAR if ok else FAILED, lines[0][:110] if lines else "(no output)")

    def write(rel: str, text: str) -> Callable[[Path], None]:
        return lambda f: (f / rel).write_text(text)

    case("missing evaluator.py", lambda f: (f / "evaluator.py").unlink(), needle="evaluator.py")
    case(
        "evaluator without evaluate()",
        write("evaluator.py", "def score(p):\n    return {}\n"),
        needle="evaluate",
    )
    case(
        "syntax error in evaluator.py",
        write("evaluator.py", "def evaluate(p)\n"),
        needle="syntax error",
    )
    case(
        "initial program fails its own evaluation",
        lambda f: (f / "initial_program.py").write_text(
            (f / "initial_program.py").read_text().replace("radius = 0.6", "radius = 1.5")
        ),
        needle="--allow-invalid-initial",
    )
    case(
        "empty EVOLVE-BLOCK",
        write(
            "initial_program.py",
            "def run():\n    pass\n# EVOLVE-BLOCK-START\n\n# EVOLVE-BLOCK-END\n",
        ),
        needle="EVOLVE-BLOCK",
    )
    case("wrong type in task.yaml", write("task.yaml", "timeout_s: soon\n"), needle="timeout_s")
    case(
        "wrong type in OpenEvolve config.yaml",
        write("config.yaml", "evaluator:\n  cascade_evaluation: maybe\n"),
        needle="cascade_evaluation",
    )
    bad_cfg = work / "bad-config.yaml"
    bad_cfg.write_text("candidates: many\n")
    case(
        "wrong type in the run config",
        lambda f: None,
        "--config",
        str(bad_cfg),
        needle="candidates",
    )
    case("negative iterations", lambda f: None, "--iterations", "-2", needle="iterations")
    case(
        "unknown model provider",
        lambda f: None,
        "--model",
        "nosuchprovider:claude",
        needle="llm.model",
    )
    case(
        "hosted provider without its API key",
        lambda f: None,
        "--model",
        "anthropic:claude",
        needle="ANTHROPIC_API_KEY",
    )


# ------------------------------------------------------------------------------------------
# 6. budgets, 7. concurrency, 8. diff fuzz
# ------------------------------------------------------------------------------------------


def budget_section(work: Path) -> None:
    from evoduet_graph import EvoDuetConfig, run
    from tests.conftest import SMOKE_TASK
    from tests.fakes import ScriptedChatModel
    from tests.fault_harness import InProcessEvaluator, parent_parameters, smoke_program

    area = "budget"

    def answer(messages: Any) -> str:
        time.sleep(0.05)
        radius, spread = parent_parameters(str(messages[-1].content))
        return f"```python\n{smoke_program(min(1.0, radius + 0.02), spread)}```"

    limits = {
        "max_llm_calls": {"max_llm_calls": 3},
        "max_tokens": {"max_tokens": 2000},
        "max_cost_usd": {"max_cost_usd": 0.0002},
        "max_wall_s": {"max_wall_s": 0.4},
    }
    for name, budget in limits.items():
        run_dir = work / f"budget-{name}"
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": 20,
                "population": {"num_islands": 2},
                "prompt": {"diff_based": False},
                "llm": {"model": "openai:gpt-4o-mini"},
                "budget": budget,
            }
        )
        llm = ScriptedChatModel(responses=[], default=answer)
        first = run(
            SMOKE_TASK, cfg, llm=llm, run_dir=run_dir, evaluator=InProcessEvaluator(SMOKE_TASK)
        )
        again = ScriptedChatModel(responses=[], default=answer)
        second = run(
            SMOKE_TASK, cfg, llm=again, run_dir=run_dir, evaluator=InProcessEvaluator(SMOKE_TASK)
        )
        ok = (
            (first.stop_reason or "").startswith("budget reached")
            and again.calls == 0
            and first.iterations < 20
            and second.iterations == first.iterations
        )
        add(
            area,
            f"budget.{name} reached",
            1,
            CLEAR if ok else FAILED,
            f"stopped after iteration {first.iterations}; the resumed run stopped at once "
            "(totals from events.jsonl)",
            lost=_lost(run_dir, first.iterations),
        )


def concurrency_section(work: Path) -> None:
    from typer.testing import CliRunner

    from evoduet_graph import EvoDuetConfig, load_task, run
    from evoduet_graph.cli import app
    from evoduet_graph.rundir.lock import RunDirLock
    from tests.conftest import SMOKE_TASK
    from tests.fakes import CountingEvaluator, FakeSearcher, KnowledgeResponder, ScriptedChatModel
    from tests.fault_harness import InProcessEvaluator
    from tests.integration.test_concurrency import _answer

    area = "concurrency"
    run_dir = work / "conc"
    evaluator = CountingEvaluator(InProcessEvaluator(SMOKE_TASK, workers=8), work / "conc-evals")
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": 3,
            "candidates": 8,
            "population": {"num_islands": 2},
            "prompt": {"diff_based": False},
            "gate": {"mode": "always"},
            "retrieval": {"inner_rounds": 2, "queries_per_round": 3, "search_retries": 0},
            "evaluation": {"workers": 8},
        }
    )
    llm = ScriptedChatModel(responses=[], default=KnowledgeResponder(generate=_answer))
    result = run(
        load_task(SMOKE_TASK),
        cfg,
        llm=llm,
        evaluator=evaluator,
        run_dir=run_dir,
        searcher=FakeSearcher(),
    )
    counts = Counter(e["sha"] for e in evaluator.evaluated())
    ok = result.iterations == 3 and max(counts.values()) == 1
    add(
        area,
        "N=8 parallel candidates with a thread-heavy model",
        24,
        SURVIVED if ok else FAILED,
        "every candidate stored once; each program evaluated once",
        lost=_lost(run_dir, 3, 8),
    )
    with RunDirLock(run_dir):
        res = CliRunner().invoke(app, ["resume", str(run_dir), "--quiet"])
    add(
        area,
        "second `evoduet resume` on a run directory in use",
        1,
        CLEAR
        if res.exit_code == 2 and "in use by another evoduet process" in res.output
        else FAILED,
        res.output.strip()[:110],
    )


def fuzz_section(count: int) -> None:
    from evoduet_graph.candidates.diffs import candidate_from_response
    from tests.unit.test_diffs_fuzz import PARENT, PARENT_LINES

    area = "diff application"
    rng = random.Random(1234)
    pieces = [
        *PARENT_LINES,
        "<<<<<<< SEARCH",
        "=======",
        ">>>>>>> REPLACE",
        "<<<< SEARCH",
        "========== ",
        ">>>>>>>>>> REPLACE",
        "```python",
        "```",
        "<think>",
        "</think>",
        "# EVOLVE-BLOCK-START",
        "# EVOLVE-BLOCK-END",
        "",
        "    radius = 1.0",
        "\t",
        "…",
    ]
    outcomes: Counter = Counter()
    crashes = 0
    for _ in range(count):
        parts = [
            rng.choice(pieces)
            if rng.random() < 0.85
            else "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(20)))
            for _ in range(rng.randrange(40))
        ]
        text = rng.choice(["\n", "\r\n"]).join(parts)
        try:
            cand = candidate_from_response(
                PARENT,
                text,
                diff_based=rng.random() < 0.5,
                restrict_to_evolve_blocks=rng.random() < 0.7,
            )
        except Exception:  # noqa: BLE001 - counted
            crashes += 1
            continue
        outcomes["change" if cand.code is not None else "rejected with reason"] += 1
    add(
        area,
        "random model answers (markers, fences, think tags, CRLF, unicode)",
        count,
        SURVIVED if crashes == 0 else FAILED,
        f"{outcomes['change']} applied as a change, {outcomes['rejected with reason']} rejected "
        f"with a reason, {crashes} exceptions (hypothesis fuzzing: tests/unit/test_diffs_fuzz.py)",
    )


# ------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------


def markdown(seconds: float) -> str:
    total = sum(r.injected for r in ROWS)
    by_outcome = Counter()
    for r in ROWS:
        by_outcome[r.outcome] += r.injected
    lost = sum(r.lost for r in ROWS)
    lines = [
        "# Fault-injection report",
        "",
        (
            "Generated by `benchmarks/fault_report.py` "
            f"({time.strftime('%Y-%m-%d')}, {seconds:.0f} s on this machine). Every fault "
            "listed was injected the given number of times. *survived*: the run went on "
            "(retried, or the fault became a failed/invalid candidate or an event with its "
            "reason); *clear error*: a one-line error at startup (exit 2) or a stop with its "
            "reason and a resumable checkpoint."
        ),
        "",
        (
            f"- faults injected: **{total}** in {len(ROWS)} kinds; survived: "
            f"{by_outcome[SURVIVED]}, clear error: {by_outcome[CLEAR]}, failed: "
            f"**{by_outcome[FAILED]}**"
        ),
        f"- programs lost: **{lost}**",
        "",
    ]
    for area in dict.fromkeys(r.area for r in ROWS):
        lines += [f"## {area}", "", "| fault | injected | outcome | detail |", "|---|---|---|---|"]
        for r in (r for r in ROWS if r.area == area):
            detail = r.detail.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {r.fault} | {r.injected} | {r.outcome} | {detail} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "fault_report.md")
    parser.add_argument("--kill-points", type=int, default=100)
    parser.add_argument("--fuzz", type=int, default=5000)
    parser.add_argument("--evaluator", choices=("sandbox", "inprocess"), default="sandbox")
    args = parser.parse_args(argv)
    from tests.fault_harness import HARNESS_EVALUATOR_ENV

    os.environ[HARNESS_EVALUATOR_ENV] = args.evaluator  # the forked kill scenarios inherit it
    os.environ.setdefault("PYTHONHASHSEED", "0")
    work = Path(tempfile.mkdtemp(prefix="evoduet_faults_"))
    start = time.monotonic()
    try:
        kill_section(args.kill_points, work)  # forks: before this process starts threads
        guarded("model endpoint", "section", lambda: model_section(work))
        guarded("search backend", "section", lambda: search_section(work))
        guarded("sandbox", "section", lambda: sandbox_section(work))
        guarded("bad task / config (CLI)", "section", lambda: cli_section(work))
        guarded("budget", "section", lambda: budget_section(work))
        guarded("concurrency", "section", lambda: concurrency_section(work))
        guarded("diff application", "section", lambda: fuzz_section(args.fuzz))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = markdown(time.monotonic() - start)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    failed = any(r.outcome == FAILED for r in ROWS) or any(r.lost for r in ROWS)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

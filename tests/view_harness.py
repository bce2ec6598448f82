"""Run directories and ``evoduet view`` servers for the view's tests and screenshot script.

* `scripted_run` — a real ``evoduet run`` process of the smoke task against the scripted
  OpenAI-compatible server (`tests.fake_openai_server.FaultyServer` answering as
  `tests.fakes.KnowledgeResponder`): the LLM gate retrieves, looks up and goes on alone in
  turn, the children's radius grows, so the run has a tree, a timeline and curves;
* `synthetic_run` — a large run directory written through the package's own writers (program
  store, event log, prompt log) without a model (the 1,000-program page);
* `ViewProcess` — ``evoduet view`` in a subprocess, its address read from its stdout.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Self

from evoduet_graph.rundir import layout
from evoduet_graph.rundir.events import EventLog
from evoduet_graph.rundir.prompts import PromptLog
from evoduet_graph.rundir.store import ProgramRow, ProgramStore
from tests.conftest import ROOT, SMOKE_TASK
from tests.fake_openai_server import FaultyServer
from tests.fakes import KnowledgeResponder
from tests.studio_fakes import responder_content

GATE_PATTERN = ("retrieve", "no-op", "look-up")


def responder() -> KnowledgeResponder:
    """Gate decisions in turn; every generation a rewrite with a slightly larger radius."""
    initial = (SMOKE_TASK / "initial_program.py").read_text(encoding="utf-8")
    lock = threading.Lock()
    count = {"k": 0}

    def rewrite(_messages: Any) -> str:
        with lock:
            count["k"] += 1
            k = count["k"]
        code = initial.replace("radius = 0.6", f"radius = {min(1.0, 0.6 + 0.02 * k):.4f}")
        return f"A larger radius.\n```python\n{code}\n```"

    return KnowledgeResponder(
        gate=lambda i, _t: GATE_PATTERN[i % len(GATE_PATTERN)], generate=rewrite
    )


def scripted_server(delay_s: float = 0.0) -> FaultyServer:
    """The scripted model's server (use as a context manager)."""
    return FaultyServer(["ok"], content=responder_content(responder()), delay_s=delay_s)


def start_run(
    server: FaultyServer, run_dir: Path, iterations: int, *extra: str, quiet: bool = True
) -> subprocess.Popen[str]:
    """``evoduet run`` of the smoke task against ``server`` (LLM gate, offline search).

    Output goes to pipes (not a terminal); ``quiet=False`` keeps the live display on.
    """
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evoduet_graph.cli",
            "run",
            str(SMOKE_TASK),
            "--iterations",
            str(iterations),
            "--model",
            "openai:scripted",
            "--gate",
            "llm",
            "--out",
            str(run_dir),
            *(["--quiet"] if quiet else []),
            *extra,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def scripted_run(run_dir: Path, iterations: int = 4, *extra: str) -> Path:
    """A finished run of the scripted model (see the module docstring)."""
    with scripted_server() as server:
        proc = start_run(server, run_dir, iterations, *extra)
        out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return run_dir


def synthetic_run(run_dir: Path, programs: int = 1000, seed: int = 0) -> Path:
    """A finished run of ``programs`` programs written with the package's own writers.

    Each iteration's child has a random earlier parent (biased to good ones), a score, a gate
    decision and a logged prompt; every tenth child is invalid. No model and no evaluator: the
    directory has the files and shapes a real run writes (store, events, prompts).
    """
    rng = random.Random(seed)
    initial = (SMOKE_TASK / "initial_program.py").read_text(encoding="utf-8")
    run_dir.mkdir(parents=True)
    (run_dir / layout.RUN_META).write_text(
        json.dumps({"task_dir": str(SMOKE_TASK), "task": "smoke_polygon_area"}), encoding="utf-8"
    )
    store = ProgramStore(run_dir / layout.PROGRAMS)
    events = EventLog(run_dir / layout.EVENTS)
    prompts = PromptLog(run_dir / layout.PROMPTS)
    events.emit("run_start", task="smoke_polygon_area", iterations=programs - 1, model="synthetic")
    store.put_program(
        ProgramRow(
            id="initial",
            code=initial,
            parent_id=None,
            iteration=0,
            kind="initial",
            status="evaluated",
            score=0.155,
            valid=True,
            metrics={"combined_score": 0.155},
        )
    )
    valid: list[tuple[str, float, int]] = [("initial", 0.155, 0)]
    best = 0.155
    for it in range(1, programs):
        valid.sort(key=lambda v: -v[1])
        parent_id, parent_score, generation = valid[min(len(valid) - 1, int(rng.expovariate(0.1)))]
        gate = GATE_PATTERN[it % 3]
        events.emit("node", node="select", iteration=it, parent_id=parent_id, island=it % 4)
        events.emit(
            "gate_decision",
            iteration=it,
            decision=gate,
            reasoning=f"iteration {it}",
            knowledge_state={"known": "k", "established": "e", "unresolved": "u"},
        )
        events.emit(
            "node",
            node="gate",
            iteration=it,
            gate_decision=gate,
            llm_calls=1,
            input_tokens=500,
            output_tokens=60,
        )
        radius = 0.6 + 0.4 * rng.random()
        code = initial.replace("radius = 0.6", f"radius = {radius:.4f}")
        cid = f"it{it:05d}-c0"
        ok = it % 10 != 0
        score = min(1.0, parent_score + rng.uniform(-0.05, 0.06)) if ok else None
        store.put_program(
            ProgramRow(
                id=cid,
                code=code,
                parent_id=parent_id,
                iteration=it,
                generation=generation + 1,
                kind="rewrite",
                status="evaluated" if ok else "invalid",
                score=score,
                valid=ok,
                metrics={"combined_score": score} if ok else {},
                error=None if ok else "the program does not compile",
            )
        )
        prompts.write(
            iteration=it,
            candidate=cid,
            parent=parent_id,
            attempt=0,
            messages=[("system", "You evolve programs."), ("human", f"improve {parent_id}")],
            reply=f"```python\n{code}```",
        )
        cand = {"id": cid, "status": "evaluated" if ok else "invalid", "score": score, "valid": ok}
        events.emit(
            "node",
            node="generate",
            iteration=it,
            llm_calls=1,
            input_tokens=1500,
            output_tokens=300,
            candidates=[cand],
        )
        events.emit("node", node="evaluate", iteration=it, candidates=[cand])
        if ok and score is not None:
            valid.append((cid, score, generation + 1))
            best = max(best, score)
        events.emit("node", node="record", iteration=it, best_score=best)
    events.emit("run_end", iterations=programs - 1, best_score=best)
    events.close()
    store.close()
    return run_dir


class ViewProcess:
    """``evoduet view PATH... --port 0`` in a subprocess; ``url`` is the page's address."""

    def __init__(self, *paths: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evoduet_graph.cli", "view", *map(str, paths), "--port", "0"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url = ""

    def __enter__(self) -> Self:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "serving on http://127.0.0.1:PORT/"
        match = re.search(r"http://\S+", line)
        if match is None:
            self.proc.kill()
            raise AssertionError(f"evoduet view did not start: {line!r} {self.proc.stderr.read()}")  # type: ignore[union-attr]
        self.url = match.group(0)
        deadline = time.time() + 30
        while True:
            try:
                self.get("api/runs")
                return self
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    @classmethod
    def attach(cls, url: str) -> ViewProcess:
        """A client of a page served elsewhere (``evoduet run --view``): `get` and `text`."""
        view = cls.__new__(cls)
        view.url = url
        return view

    def text(self, path: str) -> str:
        """The body of ``GET <url><path>`` as text."""
        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            return str(resp.read().decode("utf-8"))

    def get(self, path: str) -> Any:
        """The JSON of ``GET <url><path>``."""
        return json.loads(self.text(path))

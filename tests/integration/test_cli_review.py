"""``evoduet run`` with ``retrieval.review_queries`` in a pseudo-terminal.

The CLI shows the proposed queries, the person types replacements, and those are the queries
searched. Without a terminal, or with ``--json``, the option is refused before anything runs.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import convert_to_messages

from evoduet_graph.rundir.events import read_events
from evoduet_graph.search import SearchDatabase
from tests.conftest import RADIUS_UP, ROOT
from tests.fake_openai_server import FaultyServer
from tests.fakes import KnowledgeResponder


def _config(tmp_path: Path, base_url: str) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "circle.md").write_text(
        "# Unit circle\n\nPut every point on the unit circle with radius 1.0 and spread the "
        "points over the full turn.\n",
        encoding="utf-8",
    )
    cfg = {
        "iterations": 1,
        "population": {"num_islands": 2},
        "novelty": {"enabled": False},
        "gate": {"mode": "always"},
        "llm": {"model": "openai:fake", "base_url": base_url, "max_retries": 0},
        "retrieval": {
            "backend": "offline",
            "corpus": [str(corpus)],
            "offline_include_pydoc": [],
            "index_cache_dir": str(tmp_path / "index"),
            "inner_rounds": 1,
            "review_queries": True,
        },
    }
    path = tmp_path / "review.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LANGSMITH_"))}
    env.update(COLUMNS="200", LANGGRAPH_STRICT_MSGPACK="true", PYTHONUNBUFFERED="1")
    return env


def _read_until(fd: int, needle: str, timeout: float) -> str:
    out = b""
    deadline = time.monotonic() + timeout
    while needle.encode() not in out:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {needle!r} within {timeout} s; output:\n{out.decode()}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


def _drain(fd: int, timeout: float) -> str:
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out.decode(errors="replace")


def test_cli_asks_for_the_queries_on_the_terminal(smoke_task_dir, tmp_path):
    responder = KnowledgeResponder(generate=RADIUS_UP)

    def answer(body: dict[str, Any]) -> str:
        return responder(convert_to_messages(body["messages"]))

    with FaultyServer(["ok"], content=answer) as server:
        config = _config(tmp_path, server.base_url)
        rdir = tmp_path / "run"
        argv = [
            sys.executable,
            "-m",
            "evoduet_graph.cli",
            "run",
            str(smoke_task_dir),
            "--config",
            str(config),
            "--out",
            str(rdir),
        ]
        pid, fd = _spawn(argv)
        try:
            shown = _read_until(fd, "queries (Enter", timeout=180)
            assert "review the queries" in shown and "1. query 0" in shown
            os.write(fd, b"unit circle radius; full turn points\r")
            rest = _drain(fd, timeout=180)
        finally:
            _, status = os.waitpid(pid, 0)
            os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, rest
    searches = [e for e in read_events(rdir / "events.jsonl") if e["event"] == "search"]
    assert [s["query"] for s in searches] == ["unit circle radius", "full turn points"]
    [review] = [e for e in read_events(rdir / "events.jsonl") if e["event"] == "review"]
    assert review["edited"] is True and review["answer"] == [
        "unit circle radius",
        "full turn points",
    ]
    [record] = SearchDatabase(rdir / "search_database.jsonl").records()
    assert "full turn points" in str(record.model_dump())


def _spawn(argv: list[str]) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on the pseudo-terminal
        os.chdir(ROOT)
        os.execve(sys.executable, argv, _env())
    return pid, fd


def test_a_run_killed_while_waiting_for_review_resumes_waiting(smoke_task_dir, tmp_path):
    responder = KnowledgeResponder(generate=RADIUS_UP)

    def answer(body: dict[str, Any]) -> str:
        return responder(convert_to_messages(body["messages"]))

    with FaultyServer(["ok"], content=answer) as server:
        config = _config(tmp_path, server.base_url)
        rdir = tmp_path / "run"
        cli = [sys.executable, "-m", "evoduet_graph.cli"]
        pid, fd = _spawn(
            [*cli, "run", str(smoke_task_dir), "--config", str(config), "--out", str(rdir)]
        )
        try:
            _read_until(fd, "queries (Enter", timeout=180)
            os.kill(pid, signal.SIGKILL)  # killed while the person reads the queries
        finally:
            os.waitpid(pid, 0)
            os.close(fd)
        asked = len(responder.prompts("construct_query"))
        pid, fd = _spawn([*cli, "resume", str(rdir)])
        try:
            shown = _read_until(fd, "queries (Enter", timeout=180)
            assert "1. query 0" in shown  # the same proposal, still waiting
            os.write(fd, b"\r")  # keep it
            rest = _drain(fd, timeout=180)
        finally:
            _, status = os.waitpid(pid, 0)
            os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, rest
    assert len(responder.prompts("construct_query")) == asked == 1  # not asked again
    searches = [e for e in read_events(rdir / "events.jsonl") if e["event"] == "search"]
    assert [s["query"] for s in searches] == ["query 0"]


def test_cli_refuses_review_without_a_terminal_or_with_json(smoke_task_dir, tmp_path):
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    base = [
        sys.executable,
        "-m",
        "evoduet_graph.cli",
        "run",
        str(smoke_task_dir),
        "--config",
        str(config),
    ]
    for extra, message in (
        (["--out", str(tmp_path / "a"), "--json"], "which --json cannot do"),
        (["--out", str(tmp_path / "b")], "stdin/stderr is not one"),
    ):
        proc = subprocess.run(
            base + extra,
            check=False,
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=_env(),
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert message in " ".join(proc.stderr.split())
        assert not (tmp_path / extra[1]).exists()

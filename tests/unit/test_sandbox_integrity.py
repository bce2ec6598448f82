"""A candidate cannot rewrite the evaluator, the task folder or the run directory.

A candidate cannot rewrite the evaluator, the task folder, the run directory or the program
store: by any route it either cannot write, or it is caught as ``tampering`` and
restored — and the task folder's hash is unchanged afterwards.

Both protection paths run here: the read-only mount namespace (bubblewrap; taken wherever this
machine allows it, asserted below) and the detection fallback (``isolate_filesystem=False``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import textwrap
from pathlib import Path

import pytest

from evoduet_graph.evaluation import SandboxEvaluator
from evoduet_graph.evaluation.integrity import TaskSnapshot, folder_digest
from evoduet_graph.evaluation.isolation import probe_bwrap
from evoduet_graph.evaluation.sandbox import RUNNER_PATH, TAMPERING_PREFIX
from evoduet_graph.rundir.events import EventLog
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.task import Task, load_task

EVALUATOR = """\
import importlib.util

import helper


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"combined_score": helper.clip(module.value())}
"""
HELPER = "def clip(v):\n    return float(min(max(v, 0.0), 1.0))\n"
HONEST = "def value():\n    return 0.5\n"

# Every route a candidate could take to the evaluator, the task folder, the run directory or the
# program store, each against every target it can reach. The candidate records what it managed to
# write (it never stops at the first refusal), and still returns a normal value.
ATTACKER = r"""
import glob, inspect, os, sqlite3, subprocess, sys

WRITTEN = []
WRAPPER = "\n_real = evaluate\ndef evaluate(p):\n    return {'combined_score': 1e9}\n"


def _write(route, path):
    try:
        with open(path, "a") as handle:
            handle.write(WRAPPER)
        WRITTEN.append((route, path))
    except Exception:
        pass


def _delete(route, path):
    try:
        os.remove(path)
        WRITTEN.append((route, "deleted " + path))
    except Exception:
        pass


def _sql(route, path):
    try:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE pwned (x)")
        conn.commit()
        WRITTEN.append((route, path))
    except Exception:
        pass


def _shell(route, path, sneaky=True):
    # native code / a subprocess: out of reach of any Python-level guard
    try:
        subprocess.run(["sh", "-c", f"printf '\\n# pwned\\n' >> '{path}'"], capture_output=True)
    except Exception:
        pass
    if not sneaky:
        return
    # the same with the path built at run time: no command-line check can see it (the
    # fallback catches it by hashing the task folder and the snapshot; the run directory is
    # not hashable while the run writes it, the one gap of the fallback, see the README)
    os.environ["SNEAKY"] = path
    subprocess.run(["sh", "-c", 'printf "\\n# pwned\\n" >> "$SNEAKY"'], capture_output=True)


def _folder(route, folder):
    for name in ("evaluator.py", "helper.py"):
        _write(route, os.path.join(folder, name))
    _delete(route, os.path.join(folder, "helper.py"))
    for name in ("events.jsonl",):
        _write(route, os.path.join(folder, name))
    _sql(route, os.path.join(folder, "programs.sqlite"))


# 1. sys.path: the first entry is the folder the evaluator was imported from
_folder("sys.path", sys.path[0])
_shell("sys.path", os.path.join(sys.path[0], "evaluator.py"))
# 2. its own call stack: the evaluator's and the runner's files
for frame in inspect.stack():
    name = frame.filename
    if os.path.isfile(name) and not name.endswith("program.py"):
        _write("stack", name)
        _shell("stack", name)
# 3. the environment: paths a user's shell may carry
for key, value in list(os.environ.items()):
    if key.startswith("ATTACK_") and os.path.isdir(value):
        _folder("env", value)
        _shell("env", os.path.join(value, "evaluator.py"), sneaky=key == "ATTACK_TASK")
# 4. /proc of the parent: its working directory and its open files
ppid = os.getppid()
_folder("proc-cwd", f"/proc/{ppid}/cwd")
for fd in glob.glob(f"/proc/{ppid}/fd/*"):
    target = os.path.realpath(fd)
    if target.endswith((".jsonl", ".sqlite")):
        _write("proc-fd", fd)
        _sql("proc-fd", fd)


def value():
    return 0.5 + 0.0 * len(WRITTEN)


print("WRITTEN", WRITTEN)
"""


def _tree_hashes(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock" and not p.name.endswith(("-shm", "-wal"))
    }


def _tables(path: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return sorted((n, conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]) for n in names)
    finally:
        conn.close()


@pytest.fixture
def task(tmp_path: Path) -> Task:
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "initial_program.py").write_text(HONEST)
    (folder / "evaluator.py").write_text(EVALUATOR)
    (folder / "helper.py").write_text(HELPER)
    return load_task(folder)


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run directory held open by this process, also its working directory.

    A run directory whose store and event log this (parent) process holds open, as a run
    does, and which is also the parent's working directory (the /proc route).
    """
    rdir = tmp_path / "run"
    rdir.mkdir()
    monkeypatch.chdir(rdir)
    return rdir


@pytest.mark.parametrize("isolate_filesystem", [True, False], ids=["namespace", "fallback"])
def test_no_route_lets_a_candidate_change_evaluator_task_run_dir_or_store(
    task: Task, run_dir: Path, isolate_filesystem: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ProgramStore(run_dir / "programs.sqlite")
    events = EventLog(run_dir / "events.jsonl")
    events.emit("run_start", task="t")
    monkeypatch.setenv("ATTACK_TASK", str(task.path))
    monkeypatch.setenv("ATTACK_RUN", str(run_dir))
    sandbox = SandboxEvaluator(task, timeout_s=60, isolate_filesystem=isolate_filesystem)
    sandbox.protect(run_dir)
    expected = "namespace" if isolate_filesystem and probe_bwrap(True)[0] else "copy"
    assert sandbox.isolation.filesystem == expected
    task_sha = folder_digest(task.path)
    run_before = _tree_hashes(run_dir)
    run_events = (run_dir / "events.jsonl").read_bytes()
    tables_before = _tables(run_dir / "programs.sqlite")
    runner_before = hashlib.sha256(RUNNER_PATH.read_bytes()).hexdigest()
    try:
        outcome = sandbox.evaluate(ATTACKER, "attacker")
        # Python-level attempts are refused and reported on both paths
        assert not outcome.valid and "tampering" in outcome.artifacts
        assert outcome.error and outcome.error.startswith(TAMPERING_PREFIX)
        assert "refused write(s) (open " in outcome.error
        assert "refused sqlite3.connect" in outcome.artifacts["tampering"]
        written = outcome.artifacts.get("stdout", "")
        if expected == "namespace":
            # prevented: the only writes that succeeded went through the sandbox's own /proc/1
            # (bwrap's init, whose cwd is the candidate's private temp dir); the shell route
            # hit a read-only filesystem, so no folder changed
            assert "WRITTEN [" in written and all(
                "/proc/1/cwd/" in item for item in written.split("('")[1:]
            ), written
            assert "task folder changed" not in outcome.error
        else:  # detected: the `sh` route (no Python guard sees it) is caught by the hash check
            assert "task folder changed" in outcome.error
        # nothing persisted: the next, honest candidate gets its honest score
        honest = sandbox.evaluate(HONEST, "honest")
        assert honest.valid and honest.score == 0.5, honest
    finally:
        store.close()
        sandbox.close()
    assert folder_digest(task.path) == task_sha == sandbox.task_sha256
    # the store's own close checkpoints its WAL into the file: compare what it holds
    assert (run_dir / "events.jsonl").read_bytes() == run_events
    assert _tables(run_dir / "programs.sqlite") == tables_before
    assert set(_tree_hashes(run_dir)) == set(run_before)
    assert hashlib.sha256(RUNNER_PATH.read_bytes()).hexdigest() == runner_before


def test_the_evaluator_runs_from_the_run_start_snapshot(task: Task) -> None:
    """Edits of the task folder after the sandbox was built change nothing.

    Edits (or deletions) of the task folder after the sandbox was built do not change what
    the evaluator is: it is imported from the snapshot.
    """
    sandbox = SandboxEvaluator(task, timeout_s=30)
    try:
        (task.path / "helper.py").write_text("def clip(v):\n    return 1e9\n")
        outcome = sandbox.evaluate(HONEST)
        assert outcome.valid and outcome.score == 0.5
    finally:
        sandbox.close()


def test_fallback_restores_a_task_folder_changed_during_an_evaluation(task: Task) -> None:
    before = folder_digest(task.path)
    code = textwrap.dedent(
        f"""\
        import os, subprocess
        os.environ["T"] = "{task.path}"  # a command naming the folder would be refused
        subprocess.run(["sh", "-c", 'rm "$T/helper.py"; echo x > "$T/new.py"'])
        def value():
            return 0.5
        """
    )
    sandbox = SandboxEvaluator(task, timeout_s=30, isolate_filesystem=False)
    try:
        outcome = sandbox.evaluate(code, "deleter")
    finally:
        sandbox.close()
    assert outcome.error and outcome.error.startswith("tampering: ")
    assert "deleted helper.py" in outcome.error and "added new.py" in outcome.error
    assert folder_digest(task.path) == before
    assert not (task.path / "new.py").exists()


def test_snapshot_reports_and_restores_every_kind_of_change(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.py").write_text("a")
    (folder / "sub" / "b.txt").write_text("b")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    snap = TaskSnapshot.take(folder)
    assert set(snap.files) == {"a.py", "sub/b.txt"}
    assert snap.changes(folder) == []
    (folder / "a.py").write_text("A")
    (folder / "sub" / "b.txt").unlink()
    (folder / "sub" / "c.txt").write_text("c")
    assert snap.changes(folder) == ["modified a.py", "deleted sub/b.txt", "added sub/c.txt"]
    assert snap.restore(folder)
    assert snap.changes(folder) == [] and folder_digest(folder) == snap.digest


def test_run_records_the_task_hash_and_a_tampering_candidate_never_enters_the_population(
    tmp_path: Path,
) -> None:
    """End to end: the evaluator-rewriting exploit is reported and kept out of the population.

    End to end: a model proposes the exploit (append a 1e9 wrapper to evaluator.py
    through sys.path[0]); the run reports it, keeps it out of the population and leaves the
    task folder exactly as it was.
    """
    from evoduet_graph import EvoDuetConfig, run
    from evoduet_graph.rundir.events import read_events
    from tests.conftest import SMOKE_TASK, diff
    from tests.fakes import ScriptedChatModel

    folder = tmp_path / "smoke"
    shutil.copytree(SMOKE_TASK, folder)
    before = folder_digest(folder)
    exploit = diff(
        "    radius = 0.6  # distance of every point from the origin (at most 1.0 is allowed)",
        "    radius = 0.6  # distance of every point from the origin (at most 1.0 is allowed)\n"
        "    import os, sys\n"
        "    try:\n"
        "        with open(os.path.join(sys.path[0], 'evaluator.py'), 'a') as f:\n"
        "            f.write('\\ndef evaluate(p):\\n    return {\"combined_score\": 1e9}\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "    os.system('echo >> ' + os.path.join(sys.path[0], 'evaluator.py'))",
    )
    llm = ScriptedChatModel(responses=[exploit], default="no change")
    for isolate in (True, False):
        rdir = tmp_path / f"run-{isolate}"
        cfg = EvoDuetConfig.model_validate(
            {
                "iterations": 2,
                "gate": {"mode": "never"},
                "evaluation": {"isolate_filesystem": isolate},
            }
        )
        llm = ScriptedChatModel(responses=[exploit], default="no change")
        result = run(folder, cfg, llm=llm, run_dir=rdir)
        meta = json.loads((rdir / "run.json").read_text())
        assert meta["task_sha256"] == before
        assert result.best_score is not None and result.best_score < 1e6
        events = list(read_events(rdir / "events.jsonl"))
        [sandbox_event] = [e for e in events if e["event"] == "sandbox"]
        assert sandbox_event["filesystem"] and sandbox_event["filesystem_protection"] in (
            "namespace",
            "copy",
        )
        store = ProgramStore(rdir / "programs.sqlite")
        try:
            cid = "it00001-c0"
            row = store.get_program(cid) if store.has_program(cid) else None
        finally:
            store.close()
        if sandbox_event["filesystem_protection"] == "copy":
            tampering = [e for e in events if e["event"] == "tampering"]
            assert tampering and "evaluator.py" in tampering[0]["what"]
            assert row is not None and not row.valid
        assert folder_digest(folder) == before


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("isolate_filesystem", [True, False], ids=["namespace", "fallback"])
def test_no_process_of_a_timed_out_candidate_survives(task: Task, isolate_filesystem: bool) -> None:
    """Every process of a timed-out candidate is gone after the timeout.

    Background children, one that left the group with setsid, and the busy candidate itself
    are all gone after a timeout (seen from the host's /proc: inside bwrap's PID namespace the
    candidate cannot report host pids).
    """
    import time
    import uuid

    marker = f"evoduet-stray-{uuid.uuid4().hex}"
    code = textwrap.dedent(
        f"""\
        import os, subprocess, sys
        SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)", {marker!r}]
        subprocess.Popen(SLEEPER)
        if os.fork() == 0:
            os.setsid()
            os.execv(sys.executable, SLEEPER)
        while True:
            pass
        """
    )
    sandbox = SandboxEvaluator(task, timeout_s=2, isolate_filesystem=isolate_filesystem)
    try:
        outcome = sandbox.evaluate(code, "stray")
    finally:
        sandbox.close()
    assert not outcome.valid and "timeout" in (outcome.error or "")
    deadline = time.monotonic() + 5
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == []

"""Hard sandbox limits hold against hostile candidates.

Hard sandbox limits: fork bombs, network, CPU time, disk fillers, output floods, working
directory and temp files. Wall-clock timeout with a process-group kill,
the address-space limit and secret scrubbing are pinned in ``test_sandbox.py``.

Process-count and network limits depend on what the machine allows; tests of the mechanism skip
where it is unavailable, and the detection/report is tested everywhere.
"""

from __future__ import annotations

import os
import socket
import textwrap
import threading
import time
from pathlib import Path

import pytest

from evoduet_graph.config import EvaluationConfig
from evoduet_graph.evaluation import SandboxEvaluator
from evoduet_graph.evaluation.isolation import Isolation, probe_isolation
from evoduet_graph.task import Task
from tests.unit.test_sandbox import OK_PROGRAM, _wait_dead, make_task


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path)


def _isolation() -> Isolation:
    return probe_isolation(network=True, max_processes=16)


def _cgroup_or_reported() -> bool:
    """True when a pids cgroup limits candidates here.

    Otherwise the sandbox must say why, and say it as a run warning (when it cannot limit
    processes, the run says so once); the calling test then checks only that report — it is not
    skipped.
    """
    iso = _isolation()
    if iso.processes == "cgroup":
        return True
    assert iso.processes_detail
    assert iso.processes == "rlimit" or any("processes" in w for w in iso.warnings())
    return False


def _netns_or_reported() -> bool:
    """True when candidates can run in a fresh network namespace here.

    Otherwise the missing isolation must be reported as a run warning (checked here).
    """
    iso = _isolation()
    if iso.network:
        return True
    assert iso.network_detail
    assert any("network" in w for w in iso.warnings())
    return False


# ------------------------------------------------------------------ detection and report


def test_isolation_report_is_complete_and_warns_about_missing_limits() -> None:
    iso = _isolation()
    assert iso.processes in ("cgroup", "rlimit", "none")
    assert iso.network_detail and iso.processes_detail
    data = iso.as_dict()
    assert set(data) == {
        "network_isolated", "network", "process_limit", "processes", "filesystem_protection",
        "filesystem",
    }  # fmt: skip
    missing = Isolation(False, "unshare not installed", "none", "RLIMIT_NPROC not enforced")
    assert len(missing.warnings()) == 3  # network, filesystem (detection only), processes
    assert "network" in missing.warnings()[0] and "detected, not prevented" in missing.warnings()[1]
    disabled = probe_isolation(network=False, max_processes=None, filesystem=False)
    assert not disabled.network and disabled.processes == "none"
    assert disabled.warnings() == []  # switched off on purpose: nothing to warn about


def test_config_limits_reach_the_sandbox(task: Task) -> None:
    cfg = EvaluationConfig(max_processes=9, max_file_mb=3, cpu_time_s=4, isolate_network=False)
    sandbox = SandboxEvaluator.from_config(task, cfg)
    assert (sandbox.max_processes, sandbox.max_file_mb, sandbox.cpu_time_s) == (9, 3, 4.0)
    assert sandbox.isolate_network is False
    with pytest.raises(ValueError, match="positive"):
        SandboxEvaluator(task, max_file_mb=0)


# ------------------------------------------------------------------ processes


def test_fork_bomb_is_bounded_and_everything_is_killed(task: Task, tmp_path: Path) -> None:
    if not _cgroup_or_reported():
        return
    pid_file = tmp_path / "pids.txt"
    code = textwrap.dedent(
        f"""\
        import os, time
        def result():
            made = 0
            for _ in range(500):
                try:
                    pid = os.fork()
                except OSError:
                    break
                if pid == 0:
                    time.sleep(120)
                    os._exit(0)
                made += 1
                with open({str(pid_file)!r}, "a") as fh:
                    fh.write(f"{{pid}}\\n")
            return {{"combined_score": 1.0, "forked": made}}
        """
    )
    sandbox = SandboxEvaluator(  # host pids written outside the temp dir: the fallback
        task, timeout_s=20, max_processes=16, isolate_network=False, isolate_filesystem=False
    )
    outcome = sandbox.evaluate(code)
    assert outcome.valid, outcome.error
    assert 1 <= outcome.metrics["forked"] < 16
    for pid in map(int, pid_file.read_text().split()):
        assert _wait_dead(pid, within_s=3.0), f"forked child {pid} survived"


def test_unbounded_fork_bomb_times_out_and_leaves_nothing(task: Task) -> None:
    if not _cgroup_or_reported():
        return
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    sandbox = SandboxEvaluator(task, timeout_s=2, max_processes=32, isolate_network=False)
    start = time.monotonic()
    outcome = sandbox.evaluate(code)
    assert not outcome.valid
    assert time.monotonic() - start < 15
    from evoduet_graph.evaluation.isolation import probe_pids_cgroup

    cgroup, _ = probe_pids_cgroup()
    assert cgroup is not None
    leftovers = [p for p in cgroup.base.iterdir() if p.is_dir() and p.name.startswith("e")]
    mine = [p for p in leftovers if p.name.startswith(f"e{os.getpid()}-")]
    assert mine == [], f"candidate cgroups left behind: {mine}"


def test_process_that_leaves_the_group_with_setsid_is_killed(task: Task, tmp_path: Path) -> None:
    if not _cgroup_or_reported():
        return
    pid_file = tmp_path / "escaped.pid"
    code = textwrap.dedent(
        f"""\
        import os, time
        def result():
            pid = os.fork()
            if pid == 0:
                os.setsid()
                time.sleep(120)
                os._exit(0)
            open({str(pid_file)!r}, "w").write(str(pid))
            return {{"combined_score": 1.0}}
        """
    )
    outcome = SandboxEvaluator(
        task, timeout_s=20, isolate_network=False, isolate_filesystem=False
    ).evaluate(code)
    assert outcome.valid, outcome.error
    assert _wait_dead(int(pid_file.read_text()), within_s=3.0)


def test_threads_within_the_limit_are_fine(task: Task) -> None:
    code = textwrap.dedent(
        """\
        import threading
        def result():
            out = []
            threads = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return {"combined_score": float(len(out))}
        """
    )
    outcome = SandboxEvaluator(task, timeout_s=20, max_processes=32).evaluate(code)
    assert outcome.valid and outcome.score == 8.0


# ------------------------------------------------------------------ network


def _listener() -> tuple[socket.socket, int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(10)

    def accept() -> None:
        try:
            while True:
                conn, _ = server.accept()
                conn.close()
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    return server, server.getsockname()[1]


CONNECT = """\
import socket
def result():
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
        reached = 1.0
    except OSError as exc:
        reached = 0.0
    return {{"combined_score": 1.0, "reached": reached}}
"""


def test_candidates_run_without_network(task: Task) -> None:
    if not _netns_or_reported():
        return
    server, port = _listener()
    try:
        isolated = SandboxEvaluator(task, timeout_s=20).evaluate(CONNECT.format(port=port))
        assert isolated.valid, isolated.error
        assert isolated.metrics["reached"] == 0.0
        # The control: without isolation the same candidate reaches the listener.
        open_ = SandboxEvaluator(task, timeout_s=20, isolate_network=False)
        assert open_.evaluate(CONNECT.format(port=port)).metrics["reached"] == 1.0
    finally:
        server.close()


# ------------------------------------------------------------------ CPU, disk, output


def test_cpu_time_limit_kills_a_busy_loop(task: Task) -> None:
    sandbox = SandboxEvaluator(task, timeout_s=60, cpu_time_s=1, isolate_network=False)
    start = time.monotonic()
    outcome = sandbox.evaluate("while True:\n    pass\n")
    assert time.monotonic() - start < 30
    assert not outcome.valid
    assert "SIGXCPU" in (outcome.error or "") or "SIGKILL" in (outcome.error or "")


def test_disk_filler_hits_the_file_size_limit_and_temp_files_are_removed(task: Task) -> None:
    code = textwrap.dedent(
        """\
        import os, tempfile
        def result():
            path = os.path.join(tempfile.gettempdir(), "filler.bin")
            with open(path, "wb") as fh:
                for _ in range(64):
                    fh.write(b"x" * (1 << 20))
            return {"combined_score": 1.0}
        """
    )
    probe = textwrap.dedent(
        """\
        import os, tempfile
        def result():
            return {"combined_score": 1.0, "tmp": tempfile.gettempdir(), "cwd": os.getcwd()}
        """
    )
    sandbox = SandboxEvaluator(task, timeout_s=20, max_file_mb=4, isolate_network=False)
    outcome = sandbox.evaluate(code)
    assert not outcome.valid
    assert "SIGXFSZ" in (outcome.error or "") or "File too large" in (outcome.error or "")
    seen = sandbox.evaluate(probe)
    tmp, cwd = Path(seen.artifacts["tmp"]), Path(seen.artifacts["cwd"])
    assert cwd in tmp.parents  # the candidate's temp dir is inside its private dir
    assert not cwd.exists()  # ... which is removed afterwards


def test_output_flood_beyond_the_file_limit_is_stopped_and_capped(task: Task) -> None:
    code = "import sys\nwhile True:\n    sys.stdout.write('flood' * 1000)\n"
    sandbox = SandboxEvaluator(task, timeout_s=30, max_file_mb=2, isolate_network=False)
    start = time.monotonic()
    outcome = sandbox.evaluate(code)
    assert time.monotonic() - start < 25
    assert not outcome.valid
    # Python ignores SIGXFSZ, so the write fails with EFBIG instead of killing the child
    assert "File too large" in (outcome.error or "") or "SIGXFSZ" in (outcome.error or "")
    assert len(outcome.artifacts.get("stdout", "")) <= 20_100


# ------------------------------------------------------------------ working directory


def test_candidate_cannot_reach_the_run_directory_by_relative_paths(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in ("programs.sqlite", "checkpoints.sqlite", "events.jsonl"):
        (run_dir / name).write_text("precious")
    monkeypatch.chdir(run_dir)  # the parent runs from inside the run directory
    code = textwrap.dedent(
        """\
        import os
        for name in ("programs.sqlite", "checkpoints.sqlite", "events.jsonl"):
            with open(name, "w") as fh:
                fh.write("clobbered")
        def result():
            return {"combined_score": 1.0, "cwd": os.getcwd(), "pwd": os.environ.get("PWD", "")}
        """
    )
    outcome = SandboxEvaluator(task, timeout_s=20, isolate_network=False).evaluate(code)
    assert outcome.valid, outcome.error
    cwd = Path(outcome.artifacts["cwd"])
    assert run_dir not in cwd.parents and cwd != run_dir
    assert outcome.artifacts["pwd"] == str(cwd)
    for name in ("programs.sqlite", "checkpoints.sqlite", "events.jsonl"):
        assert (run_dir / name).read_text() == "precious"


def test_defaults_still_evaluate_normally(task: Task) -> None:
    outcome = SandboxEvaluator(task, timeout_s=20).evaluate(OK_PROGRAM)
    assert outcome.valid and outcome.score == 0.5


def test_run_reports_the_sandbox_once_and_warns_about_missing_isolation(
    tmp_path: Path,
) -> None:
    from evoduet_graph import EvoDuetConfig, run
    from evoduet_graph.rundir.events import read_events
    from evoduet_graph.task import load_task as load
    from tests.conftest import SMOKE_TASK
    from tests.fakes import ScriptedChatModel

    smoke = load(SMOKE_TASK)
    sandbox = SandboxEvaluator(smoke, timeout_s=20)
    sandbox._isolation = Isolation(
        False,
        "the `unshare` program is not installed",
        "none",
        "RLIMIT_NPROC is not enforced for root",
    )
    llm = ScriptedChatModel(responses=[], default="no change")
    run(smoke, EvoDuetConfig(iterations=0), llm=llm, evaluator=sandbox, run_dir=tmp_path / "r")
    events = list(read_events(tmp_path / "r" / "events.jsonl"))
    [report] = [e for e in events if e["event"] == "sandbox"]
    assert report["network_isolated"] is False and report["process_limit"] == "none"
    warnings = [e["message"] for e in events if e["event"] == "warning"]
    assert any("can use the network" in w for w in warnings)
    assert any("not limited" in w for w in warnings)

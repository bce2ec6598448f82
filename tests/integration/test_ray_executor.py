"""Distributed evaluation on Ray (``evaluation.executor: ray``), against a local Ray instance.

A local instance with 2 CPUs (no dashboard, no usage report, worker logs not forwarded) is
started once for the tests that need one and shut down at the end of the module; the tests of
the start-up errors shut it down first, because an initialised Ray is reused as it is.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray  # the [ray] extra is part of `make test`'s install
import yaml
from typer.testing import CliRunner

from evoduet_graph import ConfigError, EvoDuetConfig, load_task, run
from evoduet_graph.cli import app
from evoduet_graph.config import load_config
from evoduet_graph.evaluation import make_evaluator
from evoduet_graph.evaluation.ray_executor import RayEvaluator, RayUnavailableError
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from tests.conftest import RADIUS_UP, ROOT, SMOKE_TASK, SPREAD_UP, diff
from tests.fakes import ScriptedChatModel

ANGLES = "    angles = np.linspace(0.0, spread, N_POINTS, endpoint=False)"
#: A child that sleeps past the 6 s timeout the tests configure.
SLEEPER = diff(ANGLES, f"    import time\n    time.sleep(60)\n{ANGLES}")
#: A child that kills the process that started it: the Ray worker running its task.
WORKER_KILLER = diff(
    ANGLES, f"    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n{ANGLES}"
)


@pytest.fixture(scope="module")
def _ray_module():
    yield
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def local_ray(_ray_module, monkeypatch):
    """A local Ray instance with 2 CPUs (started once, kept for the module)."""
    if not ray.is_initialized():
        monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    return ray


@pytest.fixture
def no_ray():
    """No Ray in this process (the executor would reuse an initialised one)."""
    if ray.is_initialized():
        ray.shutdown()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(**evaluation) -> EvoDuetConfig:
    return EvoDuetConfig.model_validate(
        {
            "iterations": 3,
            "gate": {"mode": "never"},  # the executors are compared on the baseline loop
            "population": {"num_islands": 2},
            "evaluation": {"workers": 2, "timeout_s": 6, **evaluation},
        }
    )


def _rows(run_dir: Path) -> dict[str, tuple]:
    store = ProgramStore(run_dir / "programs.sqlite")
    try:
        return {
            r.id: (r.status, r.valid, r.score, r.error, r.metrics) for r in store.all_programs()
        }
    finally:
        store.close()


# ------------------------------------------------------------------ configuration


def test_config_validation(tmp_path):
    cfg = EvoDuetConfig()
    assert cfg.evaluation.executor == "local" and cfg.evaluation.ray_address is None
    ok = EvoDuetConfig.model_validate(
        {"evaluation": {"executor": "ray", "ray_address": "ray://head:10001"}}
    ).evaluation
    assert (ok.ray_num_cpus_per_candidate, ok.ray_max_retries) == (1.0, 0)
    for address in ("auto", "head:6379", "ray://10.0.0.5:10001", "[::1]:6379"):
        cfg.with_overrides({"evaluation.executor": "ray", "evaluation.ray_address": address})

    bad = [
        ("evaluation:\n  executor: dask\n", "evaluation.executor"),
        ("evaluation:\n  executor: ray\n  ray_address: http://head\n", "ray://HOST:PORT"),
        ("evaluation:\n  executor: ray\n  ray_address: head:99999\n", "head:99999"),
        ("evaluation:\n  ray_address: auto\n", "set evaluation.executor: ray"),
        (
            "evaluation:\n  executor: ray\n  ray_num_cpus_per_candidate: 0\n",
            "ray_num_cpus_per_candidate",
        ),
    ]
    for text, needle in bad:
        path = tmp_path / "c.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError, match="c.yaml") as info:
            load_config(path)
        assert needle in str(info.value), (text, str(info.value))


def test_local_executor_never_imports_ray():
    code = (
        "import sys\n"
        "from evoduet_graph import EvoDuetConfig, load_task\n"
        "from evoduet_graph.evaluation import SandboxEvaluator, make_evaluator\n"
        f"ev = make_evaluator(load_task({str(SMOKE_TASK)!r}), EvoDuetConfig().evaluation)\n"
        "assert isinstance(ev, SandboxEvaluator), type(ev)\n"
        "assert ev.evaluate(ev.task.initial_program).valid\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_missing_ray_package_says_which_extra(monkeypatch, no_ray):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(RayUnavailableError, match=r"pip install 'evoduet-graph\[ray\]'"):
        make_evaluator(load_task(SMOKE_TASK), _config(executor="ray").evaluation)


# ------------------------------------------------------------------ unreachable cluster


@pytest.mark.parametrize("scheme", ["ray://", ""])
def test_unreachable_cluster_fails_fast_naming_the_address(tmp_path, no_ray, scheme):
    address = f"{scheme}127.0.0.1:{_free_port()}"
    start = time.monotonic()
    with pytest.raises(RayUnavailableError) as info:
        run(
            SMOKE_TASK,
            _config(executor="ray", ray_address=address),
            llm=ScriptedChatModel(responses=[RADIUS_UP]),
            run_dir=tmp_path / "run",
        )
    assert time.monotonic() - start < 15
    assert address in str(info.value) and "unreachable" in str(info.value)
    assert isinstance(info.value, ConfigError)
    assert not (tmp_path / "run").exists(), "a failed start must not create the run directory"
    assert not ray.is_initialized()


def test_unreachable_cluster_cli_exit_code_2(tmp_path, no_ray, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never called
    address = f"ray://127.0.0.1:{_free_port()}"
    cfg = tmp_path / "ray.yaml"
    cfg.write_text(yaml.safe_dump({"evaluation": {"executor": "ray", "ray_address": address}}))
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(SMOKE_TASK),
            "--iterations",
            "1",
            "--model",
            "openai:gpt-4o-mini",
            "--quiet",
            "--config",
            str(cfg),
            "--out",
            str(out),
        ],
    )
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error:") and address in lines[0], lines
    assert not out.exists()


# ------------------------------------------------------------------ runs on a local instance


def test_three_iterations_on_ray_match_the_local_executor(local_ray, tmp_path):
    script = [RADIUS_UP, SLEEPER, SPREAD_UP]
    results, rows = {}, {}
    for executor in ("local", "ray"):
        rdir = tmp_path / executor
        results[executor] = run(
            SMOKE_TASK,
            _config(executor=executor),
            llm=ScriptedChatModel(responses=list(script)),
            run_dir=rdir,
        )
        rows[executor] = _rows(rdir)

    assert rows["ray"] == rows["local"]
    assert results["ray"].best_score == results["local"].best_score
    assert results["ray"].best_id == results["local"].best_id
    assert results["ray"].iterations == 3
    # the sandbox's timeout was enforced inside the Ray task: killed and reported
    _status, valid, score, error, _ = rows["ray"]["it00002-c0"]
    assert (valid, score) == (False, 0.0) and error == "timeout after 6 s"
    assert sum(1 for r in rows["ray"].values() if r[1]) >= 3  # initial + 2 valid children

    sandbox = [e for e in read_events(tmp_path / "ray" / "events.jsonl") if e["event"] == "sandbox"]
    assert sandbox and "on Ray worker" in sandbox[0]["network"]
    local_sandbox = [
        e for e in read_events(tmp_path / "local" / "events.jsonl") if e["event"] == "sandbox"
    ]
    assert "on Ray worker" not in local_sandbox[0]["network"]
    saved = yaml.safe_load((tmp_path / "ray" / "config.yaml").read_text())
    assert saved["evaluation"]["executor"] == "ray"  # what `evoduet resume` rebuilds


def test_lost_ray_task_is_a_failed_candidate_and_the_run_goes_on(local_ray, tmp_path):
    # two candidates per iteration, evaluated concurrently (2 tasks in flight): one kills its
    # Ray worker, the other must be unaffected; the next iteration evaluates on Ray again
    # the detection fallback: under bwrap's PID namespace the candidate's parent is the
    # sandbox's own init, so it cannot reach (and kill) its Ray worker at all
    llm = ScriptedChatModel(responses=[WORKER_KILLER, RADIUS_UP], default=SPREAD_UP)
    cfg = _config(executor="ray").with_overrides(
        {"iterations": 2, "candidates": 2, "evaluation.isolate_filesystem": False}
    )
    result = run(SMOKE_TASK, cfg, llm=llm, run_dir=tmp_path / "r")
    assert result.iterations == 2
    rows = _rows(tmp_path / "r")
    first = [rows["it00001-c0"], rows["it00001-c1"]]
    lost = [r for r in first if not r[1]]
    assert len(lost) == 1, first
    _status, _valid, score, error, metrics = lost[0]
    assert score == 0.0 and metrics == {}
    assert error.startswith("Ray task lost (WorkerCrashedError"), error
    valid = next(r for r in first if r[1])
    initial_score = rows["initial"][2]
    assert valid[2] == pytest.approx(initial_score / 0.36, rel=1e-9)  # radius 0.6 -> 1.0
    assert rows["it00002-c0"][1] and rows["it00002-c1"][1]  # Ray still evaluates


def test_runtime_env_reaches_the_candidate_and_ray_variables_do_not(local_ray):
    task = load_task(SMOKE_TASK)
    probe = "import os\n" + task.initial_program.replace(
        "    radius = 0.6 ",
        "    radius = 1.0 if os.environ.get('EVODUET_RAY_PROBE') == 'on' and not "
        "[k for k in os.environ if k.startswith('RAY_')] else 0.6 ",
    )
    assert probe != "import os\n" + task.initial_program
    with RayEvaluator(
        task, workers=1, runtime_env={"env_vars": {"EVODUET_RAY_PROBE": "on"}}
    ) as evaluator:
        initial, child = evaluator.evaluate_many([task.initial_program, probe], ["i", "p"])
    assert initial.valid and child.valid
    # radius 0.6 -> 1.0 scales the hull area by 1 / 0.36
    assert child.score == pytest.approx(initial.score / 0.36, rel=1e-9)
    assert ray.is_initialized(), "an evaluator that attached to Ray must not shut it down"


def test_an_address_that_answers_but_is_not_ray_fails_after_the_deadline(monkeypatch):
    """A port that is no Ray GCS gives a clear error instead of endless retries.

    A TCP port that accepts connections but is no Ray GCS (e.g. the dashboard port typed
    by mistake): ``ray.init`` would retry without end; `connect` gives up with a clear error.
    """
    import socket
    import subprocess
    import sys

    from tests.conftest import ROOT

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    code = (
        "import sys; from evoduet_graph.evaluation import ray_executor as r\n"
        "r.INIT_TIMEOUT_S = 5\n"
        "try:\n    r.connect(sys.argv[1])\n"
        "except r.RayUnavailableError as e:\n    print('ERR', e); sys.exit(2)\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, f"127.0.0.1:{port}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    finally:
        listener.close()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "no Ray cluster answered" in proc.stdout and "within 5 s" in proc.stdout


def test_under_the_namespace_a_candidate_cannot_kill_its_ray_worker(local_ray, tmp_path):
    """The worker-killing candidate under bwrap's read-only namespace.

    The same worker-killing candidate, with the read-only namespace where this machine has
    bwrap: its parent is the sandbox's own init (which ignores the signal), so the worker
    survives and the candidate evaluates like any other (not a lost Ray task).
    """
    task = load_task(SMOKE_TASK)
    with RayEvaluator(task, workers=1) as evaluator:
        if evaluator.isolation.filesystem != "namespace":
            assert "detected, not prevented" in " ".join(evaluator.isolation.warnings())
            return
        killer = task.initial_program.replace(
            "    radius = 0.6 ",
            "    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    radius = 0.6 ",
        )
        assert killer != task.initial_program
        outcome, after = evaluator.evaluate_many([killer, task.initial_program], ["k", "i"])
    # SIGKILL to a PID namespace's init from inside it is ignored: the kill does nothing
    assert outcome.valid and after.valid, (outcome.error, after.error)


def test_the_tcp_check_and_the_init_wait_have_their_own_timeouts():
    """The documented 5 s TCP reachability check is not overridden by the ``ray.init`` wait."""
    from evoduet_graph.evaluation import ray_executor as r

    assert r.CONNECT_TIMEOUT_S == 5.0 and r.INIT_TIMEOUT_S == 60.0
    assert r.check_reachable.__defaults__ == (5.0,)


def test_a_local_instance_started_by_connect_outlives_the_call(tmp_path):
    """``connect(None)`` starts a local instance that still answers afterwards.

    Ray ties its GCS and raylet to the thread that starts them: started in the deadline
    thread, they died with it and the first task failed after a minute (no test noticed:
    the others start Ray themselves).
    """
    script = (
        "import os\n"
        "from evoduet_graph.evaluation.ray_executor import connect\n"
        "ray, started = connect(None)\n"
        "task = ray.remote(num_cpus=0.5)(lambda: os.getpid())\n"
        "print(started, ray.get(task.remote(), timeout=60) > 0)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180
    )
    assert proc.stdout.strip().splitlines()[-1:] == ["True True"], proc.stderr[-2000:]


def test_a_folder_program_is_shipped_to_the_ray_worker(local_ray):
    """The task folder and each candidate's bundle reach the worker.

    The task folder ships with its ``initial_program/`` (a binary file included); the evaluator
    on the worker gets the unpacked candidate folder.
    """
    from evoduet_graph.candidates.bundle import pack, unpack

    task = load_task(ROOT / "tests" / "data" / "folder_mixed_c")
    files = unpack(task.initial_program)
    files["kernel.c"] = files["kernel.c"].replace("return 1.0;", "return 3.0;")
    with RayEvaluator(task, workers=1) as evaluator:
        initial, child = evaluator.evaluate_many([task.initial_program, pack(files)], ["i", "c"])
    assert initial.valid and child.valid, (initial.error, child.error)
    assert (initial.metrics["value"], child.metrics["value"]) == (1.0, 3.0)

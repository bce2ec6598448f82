"""Model endpoint faults, against a real misbehaving HTTP server and fakes.

Model endpoint faults, against a real misbehaving HTTP server on 127.0.0.1
(``openai:<model>`` with ``llm.base_url``) and against fakes.

Retries: ChatOpenAI retries connection errors, timeouts, 429 (honouring ``retry-after``) and
5xx itself (``llm.max_retries``, the openai SDK); models without their own retries (the local
model, fakes) get the same bound from `RetryPolicy`. After the retries a failed call fails its
candidate (the iteration is recorded as failed) and the run goes on; ``max_consecutive_failures``
failed iterations stop the run with a clear reason and a resumable checkpoint, never a hang.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel
from typer.testing import CliRunner

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.cli import app
from evoduet_graph.config import load_config
from evoduet_graph.llm import LLMCallError, RetryPolicy, invoke_text, structured_call
from evoduet_graph.nodes.stop_rules import MODEL_DOWN_PREFIX
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from tests.conftest import RADIUS_UP, SMOKE_TASK
from tests.fake_openai_server import FaultyServer, all_text, last_user_text
from tests.fakes import CountingEvaluator, ScriptedChatModel
from tests.fault_harness import InProcessEvaluator, parent_parameters, smoke_program


def rewrite(body: dict[str, Any]) -> str:
    """A valid answer to a generation prompt: the parent with a larger radius."""
    radius, spread = parent_parameters(last_user_text(body))
    return f"```python\n{smoke_program(min(1.0, radius + 0.05), spread)}```"


def _config(server_url: str, **extra: Any) -> EvoDuetConfig:
    base: dict[str, Any] = {
        "iterations": 2,
        "gate": {"mode": "never"},  # each scripted fault meets a mutation request
        "population": {"num_islands": 2},
        "prompt": {"diff_based": False},
        "llm": {
            "model": "openai:fake-model",
            "base_url": server_url,
            "max_retries": 2,
            "timeout_s": 5,
        },
        # the fake server's programs repeat: no novelty resamples, so each scripted fault
        # meets the request it is meant for
        "novelty": {"enabled": False},
    }
    for key, value in extra.items():
        if isinstance(value, dict):
            base.setdefault(key, {}).update(value)
        else:
            base[key] = value
    return EvoDuetConfig.model_validate(base)


def _statuses(run_dir: Path) -> dict[str, tuple[str, str | None]]:
    store = ProgramStore(run_dir / "programs.sqlite")
    try:
        return {p.id: (p.status, p.error) for p in store.all_programs() if p.id != "initial"}
    finally:
        store.close()


def _evaluator(run_dir: Path) -> CountingEvaluator:
    return CountingEvaluator(InProcessEvaluator(SMOKE_TASK), run_dir.parent / "evals.log")


# ------------------------------------------------------------------ HTTP: transient faults


def test_429_with_retry_after_and_500s_are_retried_and_the_run_succeeds(tmp_path: Path) -> None:
    script = ["429", "500", "ok", "503", "ok"]
    with FaultyServer(script, content=rewrite, retry_after_s=1) as server:
        start = time.monotonic()
        result = run(
            SMOKE_TASK,
            _config(server.base_url),
            run_dir=tmp_path / "run",
            evaluator=_evaluator(tmp_path / "run"),
        )
        elapsed = time.monotonic() - start
    assert server.faults() == script
    # `retry-after: 1` is honoured: the SDK's own first backoff is at most 0.5 s
    answered_429 = server.answered_at[0]
    assert answered_429 is not None
    assert 0.9 <= server.arrived_at[1] - answered_429 < 5
    assert result.iterations == 2 and result.stop_reason is None
    assert all(status == "evaluated" for status, _ in _statuses(tmp_path / "run").values())
    assert elapsed < 30


def test_timeouts_connection_drops_and_garbage_bodies_fail_candidates_not_the_run(
    tmp_path: Path,
) -> None:
    # iteration 1: every attempt times out; 2: the connection is dropped; 3: a non-JSON body;
    # 4: fine. Timeouts and drops are retried once (max_retries=1) by the SDK; a body that is
    # not JSON is not retried (the SDK raises a decode error at once). Three model failures in
    # a row are the default `max_consecutive_model_failures`: raised here to see the fourth.
    script = ["sleep", "sleep", "close", "close", "garbage", "ok"]
    with FaultyServer(script, content=rewrite, sleep_s=3) as server:
        cfg = _config(
            server.base_url,
            iterations=4,
            llm={"max_retries": 1, "timeout_s": 0.5},
            max_consecutive_model_failures=4,
        )
        start = time.monotonic()
        result = run(SMOKE_TASK, cfg, run_dir=tmp_path / "run", evaluator=_evaluator(tmp_path))
        elapsed = time.monotonic() - start
    assert server.faults() == script
    statuses = _statuses(tmp_path / "run")
    assert [statuses[f"it0000{i}-c0"][0] for i in (1, 2, 3, 4)] == [
        "failed",
        "failed",
        "failed",
        "evaluated",
    ]
    assert "Timeout" in (statuses["it00001-c0"][1] or "")
    assert "Connection" in (statuses["it00002-c0"][1] or "")
    assert result.iterations == 4 and result.stop_reason is None
    assert elapsed < 60  # bounded: no hang on a sleeping server


# ------------------------------------------------------------------ HTTP: bad completions


BAD_COMPLETIONS = {
    "empty": "empty",
    "prose": "text:I cannot write code today, but the idea is to spread the points.",
    "truncated": "text:```python\nimport numpy as np\ndef make_points(:\n    radius = ",
    "never_diff": "text:Change `radius = 0.6` to something larger. That is my diff.",
}


def test_empty_prose_truncated_and_non_diff_answers_are_invalid_with_reasons(
    tmp_path: Path,
) -> None:
    faults = [*BAD_COMPLETIONS.values(), "ok"]
    with FaultyServer(
        faults, content=lambda body: "<think>radius up</think>\n" + rewrite(body)
    ) as s:
        cfg = _config(s.base_url, iterations=5, prompt={"diff_based": True})
        result = run(SMOKE_TASK, cfg, run_dir=tmp_path / "run", evaluator=_evaluator(tmp_path))
    statuses = _statuses(tmp_path / "run")
    for i in range(1, 5):
        status, error = statuses[f"it0000{i}-c0"]
        assert status == "invalid" and error, (i, status, error)
    assert statuses["it00005-c0"][0] == "evaluated"  # <think> + a full program still works
    assert result.best_id == "it00005-c0"


def test_a_model_that_never_follows_the_format_stops_the_run_resumably(tmp_path: Path) -> None:
    never = BAD_COMPLETIONS["never_diff"]
    with FaultyServer([never], content=rewrite) as server:
        cfg = _config(
            server.base_url, iterations=10, max_consecutive_failures=3, prompt={"diff_based": True}
        )
        result = run(SMOKE_TASK, cfg, run_dir=tmp_path / "run", evaluator=_evaluator(tmp_path))
    assert result.iterations == 3
    assert result.stop_reason and "3 consecutive iterations" in result.stop_reason
    # the checkpoint resumes: a healthy endpoint (injected) finishes the run
    with FaultyServer(["ok"], content=rewrite) as healthy:
        llm = ChatOpenAI(model="fake-model", base_url=healthy.base_url, api_key="x", max_retries=0)
        resumed = run(
            SMOKE_TASK, cfg, llm=llm, run_dir=tmp_path / "run", evaluator=_evaluator(tmp_path)
        )
    assert resumed.iterations == 10 and resumed.stop_reason is None
    assert resumed.best_id is not None and resumed.best_id.startswith("it000")


def test_connection_refused_cli_exits_1_with_a_clear_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "max_consecutive_failures: 2\n"
        "llm: {model: 'openai:m', base_url: 'http://127.0.0.1:9/v1', max_retries: 1}\n"
    )
    start = time.monotonic()
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(SMOKE_TASK),
            "--iterations",
            "5",
            "--quiet",
            "--config",
            str(cfg),
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert time.monotonic() - start < 60
    assert result.exit_code == 1, result.output
    assert "2 consecutive iterations without a valid candidate" in result.output
    errors = [
        e for e in read_events(tmp_path / "run" / "events.jsonl") if e.get("node") == "generate"
    ]
    assert errors and all("Connection" in str(e["candidates"][0]["error"]) for e in errors)


# ------------------------------------------------------------------ HTTP: structured output


class Decision(BaseModel):
    decision: str
    reason: str = ""


@pytest.mark.parametrize(
    ("fault", "decision"),
    [
        (
            'text:Sure! Here is the answer: {"decision": "retrieve", "reason": "r"} Hope it helps.',
            "retrieve",
        ),
        ('text:<think>the user wants JSON</think>{"decision": "no-op"}', "no-op"),
        ('text:```json\n{"decision": "look-up"}\n```', "look-up"),
        # truncated: the required field never arrives (langchain's JSON-mode parser completes
        # partial JSON, so a value cut mid-string would be accepted as the shorter string)
        ('text:{"reason": "the points should be', "default"),
        ("empty", "default"),
    ],
)
def test_structured_calls_over_http_tolerate_bad_json(fault: str, decision: str) -> None:
    with FaultyServer([fault]) as server:
        llm = ChatOpenAI(model="m", base_url=server.base_url, api_key="x", max_retries=0)
        result = structured_call(llm, "decide", Decision, default=Decision(decision="default"))
    assert result.value.decision == decision, result.fallbacks
    assert (result.method == "default") == (decision == "default")


def test_structured_call_over_http_with_garbage_bodies_raises_a_call_error() -> None:
    with FaultyServer(["garbage"]) as server:
        llm = ChatOpenAI(model="m", base_url=server.base_url, api_key="x", max_retries=0)
        with pytest.raises(LLMCallError):
            structured_call(llm, "decide", Decision, default=Decision(decision="d"))


def test_gate_and_inner_loop_over_a_flaky_endpoint_keep_the_run_going(tmp_path: Path) -> None:
    """LLM gate + retrieval against an endpoint that answers garbage or 500 half the time."""
    from tests.fakes import FakeSearcher, prompt_kind  # noqa: F401 - prompt markers

    counter = {"n": 0}

    def script(body: dict[str, Any]) -> str:
        counter["n"] += 1
        return ("500", "garbage", "ok", "text:no json here", "ok")[counter["n"] % 5]

    def content(body: dict[str, Any]) -> str:
        text = all_text(body)
        if "You decide whether an evolutionary program search" in text:
            return '{"decision": "retrieve", "known": "", "established": "", "unresolved": "x"}'
        if "You write web-search queries" in text:
            return '{"queries": ["convex hull area"]}'
        if "You predict how useful each document is" in text:
            return '{"scores": [], "known": "", "established": "", "unresolved": ""}'
        return rewrite(body)

    with FaultyServer(script, content=content) as server:
        cfg = _config(
            server.base_url,
            iterations=3,
            gate={"mode": "llm"},
            retrieval={"inner_rounds": 1, "search_retries": 0},
            llm={"max_retries": 1},
        )
        result = run(
            SMOKE_TASK,
            cfg,
            run_dir=tmp_path / "run",
            evaluator=_evaluator(tmp_path),
            searcher=FakeSearcher(),
        )
    assert result.iterations == 3
    events = list(read_events(tmp_path / "run" / "events.jsonl"))
    assert [e["iteration"] for e in events if e.get("node") == "record"] == [1, 2, 3]


# ------------------------------------------------------------------ fakes: RetryPolicy


def test_fake_model_transient_errors_are_retried_with_backoff(tmp_path: Path) -> None:
    llm = ScriptedChatModel(
        responses=[ConnectionError("reset"), TimeoutError("slow"), RADIUS_UP], default=RADIUS_UP
    )
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": 1,
            "gate": {"mode": "never"},
            "population": {"num_islands": 2},
            "llm": {"max_retries": 2},
        }
    )
    result = run(
        load_task(SMOKE_TASK),
        cfg,
        llm=llm,
        run_dir=tmp_path / "run",
        evaluator=_evaluator(tmp_path / "run"),
    )
    assert llm.calls == 3
    assert result.best_id == "it00001-c0"


def test_fake_model_errors_beyond_the_retries_fail_the_candidate(tmp_path: Path) -> None:
    llm = ScriptedChatModel(responses=[ConnectionError("down")] * 3, default=RADIUS_UP)
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": 1,
            "gate": {"mode": "never"},
            "population": {"num_islands": 2},
            "llm": {"max_retries": 1},
        }
    )
    run(
        load_task(SMOKE_TASK),
        cfg,
        llm=llm,
        run_dir=tmp_path / "run",
        evaluator=_evaluator(tmp_path / "run"),
    )
    assert llm.calls == 2
    status, error = _statuses(tmp_path / "run")["it00001-c0"]
    assert status == "failed" and "down" in (error or "")


def test_retry_policy_rules() -> None:
    assert RetryPolicy.for_model(ChatOpenAI(model="m", api_key="x", max_retries=3), 5).retries == 0
    assert RetryPolicy.for_model(ScriptedChatModel(responses=[]), 5).retries == 5
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError("again")
        return "ok"

    assert RetryPolicy(retries=2, initial_s=0.0).call(flaky) == "ok"
    with pytest.raises(ValueError):  # not retryable: raised at once
        RetryPolicy(retries=5, initial_s=0.0).call(lambda: (_ for _ in ()).throw(ValueError("x")))
    llm = ScriptedChatModel(responses=[ValueError("bad request")] * 5)
    with pytest.raises(LLMCallError) as info:
        invoke_text(llm, "hi", retry=RetryPolicy(retries=3, initial_s=0.0))
    assert llm.calls == 1 and not info.value.retryable


# ------------------------------------------------------------------ an endpoint that is down


def _down_config(**extra: Any) -> EvoDuetConfig:
    return _config("http://unused.invalid/v1", llm={"max_retries": 0}, **extra)


def test_a_short_run_whose_model_never_answers_ends_failed(tmp_path: Path) -> None:
    """Fewer iterations than ``max_consecutive_model_failures``, every generate call raising.

    The run still ends with the model-down reason (not a quiet "done" with NDG 0).
    """
    llm = ScriptedChatModel(responses=[], default=ConnectionError("connection refused"))
    result = run(
        SMOKE_TASK,
        _down_config(iterations=2),
        llm=llm,
        run_dir=tmp_path / "run",
        evaluator=_evaluator(tmp_path),
    )
    assert result.iterations == 2
    assert result.stop_reason and result.stop_reason.startswith(MODEL_DOWN_PREFIX)
    assert "connection refused" in result.stop_reason
    assert "max_consecutive_model_failures=3" in result.stop_reason


def test_a_dead_endpoint_stops_after_the_model_failure_limit_and_resumes(tmp_path: Path) -> None:
    llm = ScriptedChatModel(responses=[], default=ConnectionError("connection refused"))
    cfg = _down_config(iterations=10)
    result = run(SMOKE_TASK, cfg, llm=llm, run_dir=tmp_path / "run", evaluator=_evaluator(tmp_path))
    assert result.iterations == 3 and result.stop_reason
    assert result.stop_reason.startswith(MODEL_DOWN_PREFIX)
    assert "3 iteration(s) in a row" in result.stop_reason
    healthy = ScriptedChatModel(responses=[], default=RADIUS_UP)
    resumed = run(
        SMOKE_TASK, cfg, llm=healthy, run_dir=tmp_path / "run", evaluator=_evaluator(tmp_path)
    )
    assert resumed.iterations == 10 and resumed.stop_reason is None


def test_model_failures_that_do_not_last_do_not_stop_the_run(tmp_path: Path) -> None:
    down = ConnectionError("connection refused")
    script = [down, down, RADIUS_UP, down, down, RADIUS_UP]
    llm = ScriptedChatModel(responses=script, default=RADIUS_UP)
    result = run(
        SMOKE_TASK,
        _down_config(iterations=6),
        llm=llm,
        run_dir=tmp_path / "run",
        evaluator=_evaluator(tmp_path),
    )
    assert result.iterations == 6 and result.stop_reason is None


def test_a_dead_endpoint_short_cli_run_exits_1_naming_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint comes from $OPENAI_BASE_URL.

    The message names it (once), and the run's config.yaml records it, so a resume in a shell
    without the variable uses the same one.
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # refused
    cfg = tmp_path / "c.yaml"
    cfg.write_text("llm: {model: 'openai:m', max_retries: 0}\n")
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(SMOKE_TASK),
            "--iterations",
            "2",
            "--quiet",
            "--config",
            str(cfg),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 1, result.output
    assert result.output.count("the model did not answer") == 1, result.output
    assert "done" not in result.output  # no green "done" line before the error
    assert "stopped in" in result.output
    assert "(openai:m at http://127.0.0.1:9/v1)" in result.output
    assert f"evoduet resume {out.resolve()}" in " ".join(result.output.split())
    stored = load_config(out / "config.yaml")
    assert stored.llm.base_url == "http://127.0.0.1:9/v1"


def test_a_connected_but_silent_endpoint_stops_the_run_within_its_call_deadlines(
    tmp_path: Path,
) -> None:
    """An endpoint that accepts connections and never answers.

    Each call gives up at ``llm.call_deadline_s`` (one request: no retry starts after the deadline,
    whatever ``timeout_s`` × ``max_retries`` says), so the run stops after
    ``max_consecutive_model_failures`` iterations, not after an hour.
    """
    with FaultyServer(["sleep"], content=rewrite, sleep_s=30) as server:
        cfg = _config(
            server.base_url,
            iterations=10,
            llm={"max_retries": 3, "timeout_s": 300, "call_deadline_s": 1.0},
        )
        start = time.monotonic()
        result = run(SMOKE_TASK, cfg, run_dir=tmp_path / "run", evaluator=_evaluator(tmp_path))
        elapsed = time.monotonic() - start
    assert result.stop_reason and result.stop_reason.startswith(MODEL_DOWN_PREFIX)
    assert result.iterations == 3
    calls = len(server.requests)
    assert calls <= 6  # generate (and gate) calls: one request each, never a retry
    assert elapsed < calls * 1.0 + 20, elapsed


def test_the_default_call_deadline_bounds_a_request_and_leaves_retries_to_the_policy() -> None:
    from evoduet_graph.llm import make_chat_model

    cfg = EvoDuetConfig.model_validate(
        {"llm": {"model": "openai:m", "base_url": "http://127.0.0.1:9/v1"}}
    )
    llm = make_chat_model(cfg.llm)
    assert cfg.llm.call_deadline_s == 60.0 and llm.request_timeout == 60.0
    assert llm.max_retries == 0
    policy = RetryPolicy.for_model(llm, cfg.llm.max_retries, deadline_s=cfg.llm.call_deadline_s)
    assert policy.retries == 3 and policy.deadline_s == 60.0

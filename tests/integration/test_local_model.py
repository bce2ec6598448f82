"""The real embedded model (docs/design.md §4): assemble, load, generate, structured output.

Marked ``local_model`` but NOT skipped: CI installs the ``[local]`` extra and must run it. The
assembled GGUF is cached in ``$EVODUET_CACHE_DIR`` (or ``~/.cache/evoduet_graph/models``) so
later runs reuse it (~5 s to assemble, <1 ms when the marker is valid). About 30 s on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import (
    UsageTracker,
    assemble_model,
    invoke_text,
    make_local_chat_model,
    model_file,
    structured_call,
    track_node,
)
from evoduet_graph.llm.worker import ModelWorkerCrashed

pytestmark = pytest.mark.local_model


class Release(BaseModel):
    language: str = Field(description="name of the programming language")
    year: int = Field(description="year of its first public release")


@pytest.fixture(scope="module")
def model_path():
    return assemble_model()  # default cache dir: reused across CI runs


@pytest.fixture(scope="module")
def llm(model_path):
    cfg = LLMConfig(model="local", local_n_ctx=2048, max_tokens=32, temperature=0.0)
    return make_local_chat_model(cfg)


def test_assembled_model_is_verified(model_path):
    assert model_path.name == model_file.MODEL_FILENAME
    assert model_path.stat().st_size == model_file.EXPECTED_SIZE
    assert model_file._marker_matches(model_path)
    with model_path.open("rb") as fh:
        assert fh.read(4) == b"GGUF"
    assert assemble_model() == model_path  # second call trusts the marker


def test_short_generation_reports_usage(llm):
    tracker = UsageTracker()
    with track_node("smoke") as usage:
        text, msg = invoke_text(
            llm,
            [HumanMessage("Name one built-in Python data type. Answer in a few words.")],
            config={"callbacks": [tracker]},
        )
    assert text.strip()
    assert msg.usage_metadata["input_tokens"] > 0
    assert 0 < msg.usage_metadata["output_tokens"] <= 32
    assert msg.response_metadata["model_name"] == model_file.MODEL_NAME
    assert usage.calls == 1 and usage.output_tokens == msg.usage_metadata["output_tokens"]
    assert tracker.by_node()["smoke"].input_tokens == msg.usage_metadata["input_tokens"]


def test_structured_call_returns_valid_object(llm):
    res = structured_call(
        llm.bind(max_tokens=64),
        [
            SystemMessage("You answer questions about programming languages."),
            HumanMessage(
                "Which language is Guido van Rossum known for, and in which year was it first "
                "released? Give the language name and the year."
            ),
        ],
        Release,
        default=Release(language="unknown", year=0),
    )
    assert not res.used_default, res.fallbacks
    assert isinstance(res.value, Release)
    assert res.method == "json_schema", res.fallbacks  # grammar-constrained on the local model


def test_parallel_callers_are_serialised(llm):
    results: list[str] = []
    errors: list[BaseException] = []

    def call(i: int) -> None:
        try:
            text, _ = invoke_text(llm.bind(max_tokens=8), f"Count from {i} to {i + 3}.")
            results.append(text)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 3 and all(results)


def test_the_real_model_worker_survives_a_sigsegv_in_the_middle_of_a_decode(llm):
    """A real SIGSEGV to the worker while llama.cpp decodes: that call fails, the next answers."""
    worker = llm._loaded.worker
    pid, starts = worker.pid, worker.starts
    errors: list[BaseException] = []

    def long_call() -> None:
        try:
            llm.bind(max_tokens=400).invoke("Write a Python module with ten small functions.")
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    caller = threading.Thread(target=long_call)
    caller.start()
    time.sleep(3.0)  # well into the decode (a few tokens per second on 2 cores)
    os.kill(pid, signal.SIGSEGV)
    caller.join(timeout=120)
    assert len(errors) == 1 and isinstance(errors[0], ModelWorkerCrashed), errors
    assert "killed by SIGSEGV" in str(errors[0])
    text, _ = invoke_text(llm, "Name one built-in Python data type. Answer in a few words.")
    assert text.strip() and worker.starts == starts + 1 and worker.pid != pid


def test_greedy_replies_are_the_same_in_process_and_in_the_worker(model_path):
    """The process boundary changes nothing: one greedy prompt, token for token."""
    settings = {"model": "local", "local_n_ctx": 1024, "max_tokens": 24, "temperature": 0.0}
    settings["local_parallel"] = 1  # fresh contexts on both sides: same kernels, same rounding
    in_process = make_local_chat_model(LLMConfig(**settings, local_isolation="none"))
    in_worker = make_local_chat_model(LLMConfig(**settings))
    prompt = "Write a Python function that returns the square of x."
    try:
        assert in_process.invoke(prompt).content == in_worker.invoke(prompt).content
    finally:
        in_worker._loaded.worker.close()


def test_the_bench_server_answers_on_the_portable_runtime(model_path, tmp_path):
    """``bench --model local`` serves the model with llama-cpp-python's server: it must load."""
    from evoduet_graph.bench.server import LlamaCppServer

    with LlamaCppServer(model_path, alias="qwen", n_ctx=1024, log_path=tmp_path / "s.log") as srv:
        request = urllib.request.Request(
            f"{srv.base_url}/chat/completions",
            data=json.dumps(
                {"model": "qwen", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            reply = json.load(response)
    assert reply["choices"][0]["message"]["content"]


def _bench_server_reply(model_path, log_path, prompt, *, prompt_lookup):
    from evoduet_graph.bench.server import LlamaCppServer

    server = LlamaCppServer(
        model_path, alias="qwen", n_ctx=1024, log_path=log_path, prompt_lookup=prompt_lookup
    )
    assert ("--draft_model" in server.command()) is prompt_lookup
    with server as srv:
        body = {
            "model": "qwen",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 48,
            "temperature": 0.0,
        }
        request = urllib.request.Request(
            f"{srv.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.load(response)["choices"][0]["message"]["content"]


def test_the_bench_server_drafts_from_the_prompt_without_changing_a_greedy_reply(
    model_path, tmp_path
):
    """The bench's server with prompt-lookup drafting writes the same greedy tokens."""
    code = "def area(w, h):\n    # the area of a w x h rectangle\n    return w * h\n"
    prompt = f"Copy this Python code exactly, then stop:\n\n{code}"
    plain = _bench_server_reply(model_path, tmp_path / "a.log", prompt, prompt_lookup=False)
    drafted = _bench_server_reply(model_path, tmp_path / "b.log", prompt, prompt_lookup=True)
    assert "return w * h" in plain
    assert drafted == plain

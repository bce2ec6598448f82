"""Scripted servers on 127.0.0.1 that speak three providers' own wire formats (tests only).

The counterpart of `tests.fake_openai_server.FaultyServer` for the native integrations: each
server answers its provider's chat endpoint in a thread, turns the request into LangChain
messages, asks ``answer(messages) -> str`` (e.g. a `tests.fakes.KnowledgeResponder`) for the
reply text and wraps it in the provider's response format, usage included:

* `AnthropicServer` — the Messages API, ``POST /v1/messages``; a request with a forced tool
  (``tool_choice: {"type": "tool"}``, langchain-anthropic's structured output) gets a
  ``tool_use`` block whose input is the JSON of the reply text. Prompt caching is simulated as
  Anthropic documents it: the prefix up to the last block marked ``cache_control`` is written
  to the cache on first sight (``cache_creation_input_tokens``) and read afterwards
  (``cache_read_input_tokens``); ``input_tokens`` counts the rest.
* `GeminiServer` — the Gemini API's ``POST /<version>/models/<model>:generateContent`` (REST,
  as the google-genai SDK sends it); implicit caching is simulated by reporting a system
  instruction seen before as ``cachedContentTokenCount`` (part of ``promptTokenCount``).
* `OllamaServer` — Ollama's ``POST /api/chat``, streamed as NDJSON when ``stream`` is true.

Tokens are counted as one per four characters (at least one). Requests are recorded as
``(path, body, headers)`` in ``requests``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

Answer = Callable[[list[BaseMessage]], str]


def tokens(text: str) -> int:
    """The scripted token count of ``text``: one per four characters, at least one."""
    return max(1, len(text) // 4)


def _blocks_text(content: Any) -> str:
    """The text of a string or of a list of text blocks (Anthropic / Gemini parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


class _Server:
    """The HTTP plumbing the three servers share; subclasses implement `respond`."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:  # http.server's naming
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                with server._lock:
                    server.requests.append((self.path, body, dict(self.headers.items())))
                status, payload, content_type = server.respond(self.path, body)
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (the integrations add their own paths)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def bodies(self) -> list[dict[str, Any]]:
        """The recorded request bodies, in order."""
        with self._lock:
            return [body for _path, body, _headers in self.requests]

    def respond(self, path: str, body: dict[str, Any]) -> tuple[int, bytes, str]:
        raise NotImplementedError

    @staticmethod
    def _json(status: int, payload: Any) -> tuple[int, bytes, str]:
        return status, json.dumps(payload).encode(), "application/json"


class AnthropicServer(_Server):
    """Anthropic's Messages API (see the module docstring)."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer)
        self._cached: set[str] = set()

    def respond(self, path: str, body: dict[str, Any]) -> tuple[int, bytes, str]:
        if not path.startswith("/v1/messages"):
            return self._json(404, {"type": "error", "error": {"type": "not_found_error"}})
        if "temperature" in body and "top_p" in body:  # what Claude 4.5 models answer
            error = {
                "type": "invalid_request_error",
                "message": "`temperature` and `top_p` cannot both be specified for this model.",
            }
            return self._json(400, {"type": "error", "error": error})
        system = body.get("system")
        messages: list[BaseMessage] = []
        if system:
            messages.append(SystemMessage(content=_blocks_text(system)))
        kinds = {"user": HumanMessage, "assistant": AIMessage}
        for m in body.get("messages") or []:
            messages.append(
                kinds.get(m.get("role"), HumanMessage)(content=_blocks_text(m["content"]))
            )
        text = self.answer(messages)
        cached_prefix = self._cache_prefix(system, body.get("messages") or [])
        total_in = sum(tokens(str(m.content)) for m in messages)
        read = write = 0
        if cached_prefix:
            with self._lock:
                seen = cached_prefix in self._cached
                self._cached.add(cached_prefix)
            read, write = (tokens(cached_prefix), 0) if seen else (0, tokens(cached_prefix))
        choice = body.get("tool_choice") or {}
        if choice.get("type") == "tool":
            try:
                args = json.loads(text)
            except ValueError:
                args = None
        else:
            args = None
        if isinstance(args, dict):
            content = [
                {"type": "tool_use", "id": "toolu_01", "name": choice["name"], "input": args}
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": text}]
            stop = "end_turn"
        return self._json(
            200,
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": body.get("model"),
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": max(0, total_in - read - write),
                    "cache_read_input_tokens": read,
                    "cache_creation_input_tokens": write,
                    "output_tokens": tokens(text),
                },
            },
        )

    @staticmethod
    def _cache_prefix(system: Any, messages: list[dict[str, Any]]) -> str:
        """The text up to the last block marked ``cache_control`` ("" when none is marked)."""
        parts: list[str] = []
        prefix = ""
        blocks: list[Any] = list(system) if isinstance(system, list) else [system or ""]
        for m in messages:
            content = m.get("content")
            blocks.extend(content if isinstance(content, list) else [content or ""])
        for block in blocks:
            parts.append(_blocks_text([block]) if isinstance(block, dict) else str(block))
            if isinstance(block, dict) and block.get("cache_control"):
                prefix = "".join(parts)
        return prefix


class GeminiServer(_Server):
    """The Gemini API's ``generateContent`` (see the module docstring)."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer)
        self._seen: set[str] = set()

    def respond(self, path: str, body: dict[str, Any]) -> tuple[int, bytes, str]:
        if ":generateContent" not in path:
            return self._json(404, {"error": {"code": 404, "message": f"no route {path}"}})
        model = path.split("/models/", 1)[-1].split(":", 1)[0]
        system = _blocks_text((body.get("systemInstruction") or {}).get("parts"))
        messages: list[BaseMessage] = [SystemMessage(content=system)] if system else []
        for c in body.get("contents") or []:
            kind = AIMessage if c.get("role") == "model" else HumanMessage
            messages.append(kind(content=_blocks_text(c.get("parts"))))
        text = self.answer(messages)
        prompt = sum(tokens(str(m.content)) for m in messages)
        with self._lock:
            cached = tokens(system) if system and system in self._seen else 0
            if system:
                self._seen.add(system)
        usage = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": tokens(text),
            "totalTokenCount": prompt + tokens(text),
        }
        if cached:
            usage["cachedContentTokenCount"] = cached
        return self._json(
            200,
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": usage,
                "modelVersion": model,
            },
        )


class OllamaServer(_Server):
    """Ollama's ``/api/chat`` (see the module docstring)."""

    def respond(self, path: str, body: dict[str, Any]) -> tuple[int, bytes, str]:
        if path != "/api/chat":
            return self._json(404, {"error": f"no route {path}"})
        kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        messages = [
            kinds.get(m.get("role"), HumanMessage)(content=str(m.get("content", "")))
            for m in body.get("messages") or []
        ]
        text = self.answer(messages)
        model = body.get("model")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        final = {
            "model": model,
            "created_at": stamp,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": sum(tokens(str(m.content)) for m in messages),
            "eval_count": tokens(text),
            "total_duration": 1000,
        }
        if body.get("stream", True):
            chunk = {
                "model": model,
                "created_at": stamp,
                "message": {"role": "assistant", "content": text},
                "done": False,
            }
            lines = json.dumps(chunk) + "\n" + json.dumps(final) + "\n"
            return 200, lines.encode(), "application/x-ndjson"
        final["message"] = {"role": "assistant", "content": text}
        return self._json(200, final)

"""A misbehaving OpenAI-compatible chat-completions server on 127.0.0.1 (tests only).

`FaultyServer` answers ``POST /v1/chat/completions`` in a thread. Each request takes the next
*fault* from its script (a list; the last entry repeats) or from a callable of the request
body, so a test decides exactly what the client sees:

* ``"ok"`` — a normal completion whose text comes from ``content(body)``;
* ``"429"`` / ``"500"`` / ``"503"`` — that HTTP status with an OpenAI error body
  (``429`` carries ``retry-after``);
* ``"sleep"`` — wait ``sleep_s`` seconds, then answer normally (the client times out first);
* ``"garbage"`` — HTTP 200 with a body that is not JSON;
* ``"close"`` — close the connection without an answer;
* ``"empty"`` — a completion whose text is empty;
* any other string starting with ``"text:"`` — a completion with exactly that text.

``delay_s`` (default 0) delays every answer by that many seconds, each request on its own
thread, so concurrent requests overlap as they do on a hosted endpoint (a slow model for
timing benchmarks and in-flight tests).

Requests are recorded (``requests``: the parsed JSON bodies) with the fault they got, and so
are their times: ``arrived_at`` / ``answered_at``, `time.monotonic` seconds when the request's
headers were read and when its answer was written, in the order of ``requests``
(``answered_at`` is None while a request is still being answered).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

Fault = str
Script = list[Fault] | Callable[[dict[str, Any]], Fault]


def completion(text: str, model: str = "fake-model") -> dict[str, Any]:
    """An OpenAI ``chat.completion`` object with one choice."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": max(1, len(text) // 4),
            "total_tokens": 10 + max(1, len(text) // 4),
        },
    }


class FaultyServer:
    """See the module docstring. Use as a context manager; ``base_url`` ends in ``/v1``."""

    def __init__(
        self,
        script: Script,
        content: Callable[[dict[str, Any]], str] = lambda body: "hello",
        *,
        sleep_s: float = 5.0,
        retry_after_s: float = 0.05,
        delay_s: float = 0.0,
    ) -> None:
        self.script = script
        self.content = content
        self.sleep_s = sleep_s
        self.delay_s = delay_s
        self.retry_after_s = retry_after_s
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.arrived_at: list[float] = []
        self.answered_at: list[float | None] = []
        self._lock = threading.Lock()
        self._index = 0
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:  # http.server's naming
                arrived = time.monotonic()  # the request line and headers are read
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                fault = server._next(body)
                with server._lock:
                    index = len(server.requests)
                    server.requests.append((fault, body))
                    server.arrived_at.append(arrived)
                    server.answered_at.append(None)
                server._answer(self, fault, body)
                with server._lock:
                    server.answered_at[index] = time.monotonic()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # wakes sleeping handlers
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- behaviour ---------------------------------------------------------------------------

    def faults(self) -> list[str]:
        with self._lock:
            return [f for f, _ in self.requests]

    def _next(self, body: dict[str, Any]) -> Fault:
        if callable(self.script):
            return self.script(body)
        with self._lock:
            i = self._index
            self._index += 1
        return self.script[min(i, len(self.script) - 1)]

    def _send(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        payload: bytes,
        headers: dict[str, str] | None = None,
    ) -> None:
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(payload)))
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            handler.wfile.write(payload)

    def _answer(self, handler: BaseHTTPRequestHandler, fault: Fault, body: dict[str, Any]) -> None:
        model = str(body.get("model") or "fake-model")
        if self.delay_s > 0 and self._stop.wait(self.delay_s):
            return
        if fault in ("429", "500", "503"):
            error = {
                "error": {"message": f"injected {fault}", "type": "server_error", "code": fault}
            }
            headers = {"retry-after": f"{self.retry_after_s:g}"} if fault == "429" else {}
            self._send(handler, int(fault), json.dumps(error).encode(), headers)
            return
        if fault == "garbage":
            self._send(handler, 200, b"<html>upstream proxy error \xff\xfe not json")
            return
        if fault == "close":
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(2)
            return
        if fault == "sleep":
            if self._stop.wait(self.sleep_s):
                return
            fault = "ok"
        if fault == "empty":
            text = ""
        elif fault.startswith("text:"):
            text = fault[len("text:") :]
        else:
            text = self.content(body)
        self._send(handler, 200, json.dumps(completion(text, model)).encode())


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last message of a chat-completions request."""
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content", "")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def message_text(message: dict[str, Any]) -> str:
    """The text of one chat-completions message (a string, or a list of text parts)."""
    content = message.get("content", "")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def all_text(body: dict[str, Any]) -> str:
    """All message texts of a request joined by newlines."""
    return "\n".join(message_text(m) for m in body.get("messages") or [])

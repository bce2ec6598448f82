"""An instant OpenAI-compatible chat server for the overhead benchmark (loopback only).

``python -m benchmarks.overhead.canned_server`` prints ``PORT <n>`` and serves until killed:

* ``POST /v1/chat/completions`` answers at once with a valid reply for whichever prompt it is:
  a SEARCH/REPLACE diff that gives the current program's ``SALT`` line a new value (read from
  the prompt after its "current program" heading, so it applies to OpenEvolve's prompt and
  ours alike), a JSON query plan for ``construct_query``, JSON predicted scores for every
  document of a ``hypothetical_score`` prompt, and a JSON gate answer;
* ``GET /stats`` returns ``{"requests": n, "log": [[arrival_unix_s, handling_s], ...]}`` so the
  benchmark can subtract the time the "model" took from a framework's wall time;
* ``POST /reset`` clears the log.

Replies carry token usage, as a real server's do. The server is a separate process so its
work never competes with a framework's threads for the GIL.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.fake_openai_server import completion
from tests.fakes import PROMPT_MARKERS

SALT_LINE = re.compile(r'^SALT = "([^"]*)"$', re.MULTILINE)
DOCUMENT = re.compile(r'<document id="([^"]+)">')


def reply_for(messages: list[dict[str, Any]], serial: int) -> str:
    """The canned reply to one chat request (``serial`` makes every new SALT unique)."""
    first = str(messages[0].get("content", "")) if messages else ""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    kind = next((k for k, marker in PROMPT_MARKERS.items() if marker in first), "")
    if kind == "construct_query":
        return json.dumps({"queries": [f"salt value search {serial}"]})
    if kind == "hypothetical_score":
        scores = [
            {"doc_id": doc_id, "predicted_score": 0.5}
            for doc_id in dict.fromkeys(DOCUMENT.findall(text))
        ]
        return json.dumps({"scores": scores, "known": "k", "established": "e", "unresolved": "u"})
    if kind == "gate":
        return json.dumps(
            {
                "known": "k",
                "established": "e",
                "unresolved": "u",
                "decision": "no-op",
                "reasoning": "canned",
                "document_ids": [],
            }
        )
    start = text.lower().find("current program")
    match = SALT_LINE.search(text, max(start, 0))
    if match is None:
        return "no SALT line in the prompt"
    return (
        "The salt changes.\n<<<<<<< SEARCH\n"
        f'SALT = "{match.group(1)}"\n=======\nSALT = "s{serial}"\n>>>>>>> REPLACE\n'
    )


class CannedServer:
    """The server object (also usable in-process: ``with CannedServer() as s: s.base_url``)."""

    def __init__(self, port: int = 0) -> None:
        self.log: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._serial = itertools.count(1)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints do
            # headers and body go out as separate writes: without TCP_NODELAY the client's
            # delayed ACK would add ~40 ms to every reply (Nagle), hiding what we measure
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # http.server's naming
                if self.path.rstrip("/").endswith("/stats"):
                    with server._lock:
                        body = {"requests": len(server.log), "log": list(server.log)}
                    self._send(200, json.dumps(body).encode())
                else:
                    self._send(404, b"{}")

            def do_POST(self) -> None:
                arrival = time.time()
                start = time.perf_counter()
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/").endswith("/reset"):
                    with server._lock:
                        server.log.clear()
                    self._send(200, b"{}")
                    return
                try:
                    body = json.loads(raw)
                    text = reply_for(body.get("messages") or [], next(server._serial))
                    payload = json.dumps(completion(text, str(body.get("model", "canned"))))
                except (ValueError, TypeError, AttributeError) as exc:
                    self._send(400, json.dumps({"error": {"message": str(exc)}}).encode())
                    return
                self._send(200, payload.encode())
                with server._lock:
                    server.log.append((arrival, time.perf_counter() - start))

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with CannedServer(args.port) as server:
        print(f"PORT {server.port}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()

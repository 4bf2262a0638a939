"""A minimal OpenAI-compatible server on loopback for CLI tests that must not need the
engine: it answers the load generator's probe and streamed completions, and counts
every request, so a test can assert that nothing was sent."""

from __future__ import annotations

import json
import threading


class FakeOpenAI:
    """A minimal OpenAI-compatible server (GET /v1/models, streamed POST /v1/completions)
    that counts what it was sent; ``on_request`` runs before each completion is answered."""

    def __init__(self, on_request=lambda: None) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        fake = self
        self.num_requests = 0
        self.on_request = on_request

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, body: bytes, content_type: str) -> None:
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.num_requests += 1
                self._send(json.dumps({"data": [{"id": "fake"}]}).encode(), "application/json")

            def do_POST(self) -> None:
                fake.num_requests += 1
                self.rfile.read(int(self.headers["content-length"]))
                fake.on_request()
                chunks = [
                    {"id": "c1", "choices": [{"index": 0, "text": "a", "finish_reason": None}]},
                    {"id": "c1", "choices": [{"index": 0, "text": "b", "finish_reason": "length"}]},
                    {
                        "id": "c1",
                        "choices": [],
                        "usage": {"prompt_tokens": 4, "completion_tokens": 2},
                    },
                ]
                body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                self._send(body.encode(), "text/event-stream")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

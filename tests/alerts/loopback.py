"""A scripted HTTP receiver on loopback for notifier tests.

Each POST is recorded and answered by the next scripted response: a status code (with an
optional body), or ``"hang"`` (hold the request until the test ends, so the client times out).
When the script runs out, the receiver answers 200. The server runs in a daemon thread and is
shut down when the ``with`` block ends; every wait in it is bounded.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANG_LIMIT_SECONDS = 30.0


@dataclass
class Received:
    path: str
    content_type: str
    body: object


@dataclass
class Receiver:
    url: str
    script: list[int | tuple[int, str] | str]
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextlib.contextmanager
def receiver(script: Sequence[int | tuple[int, str] | str] = ()) -> Iterator[Receiver]:
    state = Receiver(url="", script=list(script))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            with state.lock:
                state.received.append(
                    Received(self.path, self.headers.get("Content-Type", ""), json.loads(raw))
                )
                action = state.script.pop(0) if state.script else 200
            if action == "hang":
                state.release.wait(HANG_LIMIT_SECONDS)
                return
            status, text = action if isinstance(action, tuple) else (action, "")
            payload = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

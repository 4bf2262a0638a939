"""A real server for the tests: uvicorn in a thread, on a free loopback port.

Each test module starts its own (module-scoped) with the tiny preset and a small
context, wired exactly as ``tailwatch engine serve`` wires it (``build_engine_server``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import httpx
import openai
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from engine.config import EngineConfig
from engine.outputs import RequestOutput
from engine.server.launch import EngineServer, ServeOptions, build_engine_server
from engine.server.uvicorn_server import listen_socket

MAX_MODEL_LEN = 256
ADMIN_TOKEN = "test-admin-token"


def tiny_config(**knobs) -> EngineConfig:
    return EngineConfig(model="tiny", max_model_len=MAX_MODEL_LEN, num_gpu_blocks=64, **knobs)


@dataclass
class LiveServer:
    parts: EngineServer
    base_url: str
    # one httpx client per thread: making one costs an SSL context (tens of ms)
    _local: threading.local = field(default_factory=threading.local)

    def _shared(self) -> httpx.Client:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = httpx.Client(base_url=self.base_url, timeout=30)
        return client

    def client(self, **kwargs) -> openai.OpenAI:
        # max_retries=0: the client would otherwise retry 429s and hide them.
        return openai.OpenAI(
            base_url=f"{self.base_url}/v1", api_key="x", max_retries=0, timeout=60, **kwargs
        )

    def http(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=60, **kwargs)

    def samples(self) -> dict[tuple[str, frozenset], float]:
        """Every sample of GET /metrics: (sample name, labels) → value."""
        text = self._shared().get("/metrics").text
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def value(self, name: str, **labels: str) -> float:
        """The one sample named ``name`` whose labels include ``labels`` (0 if absent)."""
        want = set(labels.items())
        found = [v for (n, ls), v in self.samples().items() if n == name and want <= ls]
        assert len(found) <= 1, (name, labels, found)
        return found[0] if found else 0.0

    def admin(self, method: str, path: str, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        return httpx.request(
            method, f"{self.base_url}{path}", headers=headers, timeout=30, **kwargs
        )


@dataclass
class OutputRecorder:
    """An extra engine observer: every output the engine delivered, with the time."""

    outputs: list[tuple[float, RequestOutput]] = field(default_factory=list)

    def on_step(self, engine, outputs: Sequence[RequestOutput], handles: Mapping) -> None:
        now = time.monotonic()
        self.outputs.extend((now, out) for out in outputs)

    def on_knob_changes(self, changes) -> None:
        return

    def on_rejected(self, reason: str, tenant: str | None) -> None:
        return

    def of(self, request_id: str) -> list[tuple[float, RequestOutput]]:
        return [(t, out) for t, out in list(self.outputs) if out.request_id == request_id]


@contextlib.contextmanager
def live_server(config: EngineConfig, options: ServeOptions, **kwargs) -> Iterator[LiveServer]:
    parts = build_engine_server(config, options, **kwargs)
    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(parts.app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    live = LiveServer(parts, f"http://127.0.0.1:{port}")
    try:
        wait_until(lambda: _is_ready(live.base_url), timeout_seconds=60, what="server ready")
        yield live
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the test server did not stop"


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    """The default server (tiny preset, default options), one per test module; a module that
    needs other settings defines its own ``server``."""
    with live_server(tiny_config(), ServeOptions()) as live:
        yield live


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[openai.OpenAI]:
    """An ``openai`` client for the module's ``server``."""
    with server.client() as client:
        yield client


def _is_ready(base_url: str) -> bool:
    try:
        return httpx.get(f"{base_url}/ready", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def wait_until(condition, *, timeout_seconds: float, what: str, interval: float = 0.02):
    """Poll ``condition`` until it returns something truthy; fail after the timeout."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_seconds} s waiting for {what}")
        time.sleep(interval)

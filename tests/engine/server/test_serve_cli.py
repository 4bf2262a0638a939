"""``tailwatch engine serve`` as a process: SIGTERM drains and exits 0; bad flags exit 2."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest
from typer.testing import CliRunner

from engine.server.uvicorn_server import listen_socket
from tailwatch.cli import app
from tests.engine.server.conftest import ADMIN_TOKEN, wait_until

SERVING_LINE = re.compile(r"serving 'tiny' on (http://127\.0\.0\.1:\d+)")


class ServeProcess:
    """``tailwatch engine serve --port 0`` in a subprocess, its stderr collected."""

    def __init__(self, *flags: str) -> None:
        command = [sys.executable, "-m", "tailwatch.cli", "engine", "serve", "--port", "0"]
        command += ["--max-model-len", "256", "--num-gpu-blocks", "64", "--no-access-log"]
        env = {**os.environ, "TAILWATCH_ADMIN_TOKEN": ADMIN_TOKEN, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [*command, *flags], stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        match = wait_until(self._serving_url, timeout_seconds=60, what="the serving line")
        self.base_url = match.group(1)
        wait_until(self._ready, timeout_seconds=60, what="/ready")

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def _serving_url(self):
        if self.process.poll() is not None:
            raise AssertionError(f"serve exited early: {''.join(self.lines)}")
        return next((m for line in self.lines if (m := SERVING_LINE.search(line))), None)

    def _ready(self) -> bool:
        return httpx.get(f"{self.base_url}/ready", timeout=5).status_code == 200

    def admin_patch(self, changes: dict) -> None:
        response = httpx.patch(
            f"{self.base_url}/admin/config",
            json=changes,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert response.status_code == 200, response.text

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._reader.join(timeout=10)


@pytest.fixture
def serve_process() -> Iterator[Callable[..., ServeProcess]]:
    started: list[ServeProcess] = []

    def start(*flags: str) -> ServeProcess:
        started.append(ServeProcess(*flags))
        return started[-1]

    yield start
    for process in started:
        process.stop()


class StreamReader(threading.Thread):
    """Streams one completion in the background, keeping every SSE event."""

    def __init__(self, base_url: str, max_tokens: int) -> None:
        super().__init__(daemon=True)
        self.url = f"{base_url}/v1/completions"
        self.body = {
            "model": "tiny",
            "prompt": "drain me",
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }
        self.events: list[str] = []
        self.first_chunk = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.stream("POST", self.url, json=self.body, timeout=60) as response:
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(line.removeprefix("data: "))
                        self.first_chunk.set()
        except BaseException as error:
            self.error = error
            self.first_chunk.set()

    def chunks(self) -> list[dict]:
        assert self.events[-1] == "[DONE]", self.events[-3:]
        return [json.loads(e) for e in self.events[:-1]]


def test_sigterm_drains_in_flight_requests_then_exits_0(serve_process):
    server = serve_process("--drain-timeout", "30")
    server.admin_patch({"step_delay_seconds": 0.02})  # the stream lasts about a second
    stream = StreamReader(server.base_url, max_tokens=40)
    stream.start()
    assert stream.first_chunk.wait(timeout=30) and stream.error is None
    server.process.send_signal(signal.SIGTERM)
    # while draining: not ready, new work refused with 503, the process still alive
    wait_until(
        lambda: httpx.get(f"{server.base_url}/ready").status_code == 503,
        timeout_seconds=10,
        what="/ready to turn 503",
    )
    refused = httpx.post(
        f"{server.base_url}/v1/completions", json={"prompt": "late", "max_tokens": 1}
    )
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "draining"
    assert httpx.get(f"{server.base_url}/live").status_code == 200
    stream.join(timeout=60)
    assert not stream.is_alive() and stream.error is None
    chunks = stream.chunks()
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 40
    assert server.process.wait(timeout=30) == 0
    log = "".join(server.lines)
    assert "SIGTERM: draining" in log and "every in-flight request finished" in log


def test_drain_timeout_aborts_what_is_left_and_still_exits_0(serve_process):
    server = serve_process("--drain-timeout", "0.3")
    server.admin_patch({"step_delay_seconds": 0.02})
    stream = StreamReader(server.base_url, max_tokens=200)  # several seconds
    stream.start()
    assert stream.first_chunk.wait(timeout=30) and stream.error is None
    server.process.send_signal(signal.SIGTERM)
    stream.join(timeout=60)
    assert not stream.is_alive() and stream.error is None
    chunks = stream.chunks()
    assert chunks[-2]["choices"][0]["finish_reason"] == "abort"
    assert chunks[-1]["usage"]["completion_tokens"] < 200
    assert server.process.wait(timeout=30) == 0
    assert "aborted 1 requests" in "".join(server.lines)


@pytest.fixture
def busy_port() -> Iterator[int]:
    sock = listen_socket("127.0.0.1", 0)
    yield sock.getsockname()[1]
    sock.close()


_BUSY = "{busy}"  # replaced by the busy_port fixture's port


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "70000"], "port=70000"),
        (["--port", _BUSY], f"cannot listen on 127.0.0.1:{_BUSY}"),
        (["--host", "no such host.invalid"], "cannot listen on no such host.invalid"),
        (["--max-waiting-requests", "0"], "max_waiting_requests=0"),
        (["--max-concurrency-per-tenant", "-2"], "max_concurrency_per_tenant=-2"),
        (["--drain-timeout", "-1"], "drain_timeout_seconds=-1"),
        (["--trace-sampling-ratio", "2"], "sampling_ratio=2"),
        (["--otlp-endpoint", "localhost:4318"], "otlp_endpoint='localhost:4318'"),
        (["--served-model-name", " "], "served_model_name"),
        (["--max-model-len", "100000"], "max_model_len=100000"),
        (["--scheduling-policy", "lifo"], "scheduling_policy='lifo'"),
        (["--model", "nope"], "neither a model preset"),
        (["--lora-modules", "a=random:rank=8"], "needs enable_lora"),
        (["--enable-lora", "--lora-modules", "a"], "write name=path"),
        (["--enable-lora", "--lora-modules", "a=/no/such/dir"], "no such directory"),
        (["--enable-lora", "--max-loras", "2", "--max-cpu-loras", "1"], "max_cpu_loras=1"),
        (["--max-lora-rank", "7"], "max_lora_rank=7"),
        (["--lora-load-seconds", "-1"], "lora_load_seconds=-1"),
        (["--quantization", "awq"], "quantization='awq'"),
    ],
    ids=lambda case: " ".join(case) if isinstance(case, list) else None,
)
def test_bad_flags_are_one_clear_line_and_exit_2(busy_port, flags, message):
    flags = [flag.replace(_BUSY, str(busy_port)) for flag in flags]
    message = message.replace(_BUSY, str(busy_port))
    port = [] if "--port" in flags else ["--port", "0"]
    result = CliRunner().invoke(app, ["engine", "serve", *port, *flags], env={"COLUMNS": "500"})
    assert result.exit_code == 2, (flags, result.output)
    assert message in result.output, (flags, result.output)
    assert result.output.strip().count("\n") == 0, (flags, result.output)
    assert "Traceback" not in result.output


def test_listen_socket_keeps_nagle_off_for_streams():
    # NOTE: asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP.
    sock = listen_socket("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        client = socket.create_connection(sock.getsockname())
        accepted, _ = sock.accept()
        assert accepted.proto == socket.IPPROTO_TCP
        accepted.close()
        client.close()
    finally:
        sock.close()

"""A real Alertmanager of the test's own, on loopback, with clustering off.

The binary comes from :func:`tests.services.alertmanager_binary` (Debian's
``prometheus-alertmanager``; skipped locally, failed under ``TAILWATCH_REQUIRE_SERVICES=1``
when missing). Its configuration and storage live in the test's temporary directory; the
process is always terminated. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

from tests.services import alertmanager_binary, free_port, stop_process

READY_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.2

T = TypeVar("T")


@dataclass(frozen=True)
class AlertmanagerServer:
    url: str
    log: Path

    def alerts(self, **params: object) -> list[dict]:
        """``GET /api/v2/alerts`` (default filters: active, silenced, inhibited shown)."""
        response = httpx.get(f"{self.url}/api/v2/alerts", params=params, timeout=30)
        response.raise_for_status()
        return response.json()

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


def wait_for(what: str, probe: Callable[[], T | None], timeout_seconds: float = 30.0) -> T:
    """Poll ``probe`` until it returns something other than None; fail after the timeout."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        result = probe()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_seconds:g} s waiting for {what}")
        time.sleep(POLL_SECONDS)


@contextlib.contextmanager
def alertmanager(directory: Path, config_yaml: str) -> Iterator[AlertmanagerServer]:
    binary = alertmanager_binary()
    config = directory / "alertmanager.yml"
    config.write_text(config_yaml)
    storage = directory / "storage"
    storage.mkdir()
    log = directory / "alertmanager.log"
    port = free_port()
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.path={storage}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",  # no gossip: a single, private instance
                "--log.level=debug",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        server = AlertmanagerServer(f"http://127.0.0.1:{port}", log)
        try:
            _wait_ready(server, process)
            yield server
        finally:
            stop_process(process)


def _wait_ready(server: AlertmanagerServer, process: subprocess.Popen) -> None:
    def ready() -> bool | None:
        if process.poll() is not None:
            raise AssertionError(
                f"Alertmanager exited with {process.returncode}:\n{server.log_tail()}"
            )
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{server.url}/-/ready", timeout=5).status_code == 200:
                return True
        return None

    wait_for("Alertmanager to become ready", ready, READY_TIMEOUT_SECONDS)

"""A real Prometheus server of the test's own, on loopback, scraping the given targets.

The binary comes from :func:`tests.services.prometheus_binary` (Debian's package; skipped
locally, failed under ``TAILWATCH_REQUIRE_SERVICES=1`` when missing). The server keeps its
TSDB in the test's temporary directory and is always terminated.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.services import free_port, prometheus_binary, stop_process

READY_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class PrometheusServer:
    url: str
    log: Path

    def api(self, path: str, **params: object) -> object:
        """``GET /api/v1/<path>``; the ``data`` of a successful answer."""
        response = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=30)
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    def raw_samples(self, selector: str, start: float, end: float) -> list[dict]:
        """Every stored sample of ``selector`` with ``start <= t <= end`` (a range-vector
        instant query; Prometheus 2.x includes both ends), as the API returns them."""
        range_ms = round((end - start) * 1000)
        data = self.api("query", query=f"{selector}[{range_ms}ms]", time=f"{end:.3f}")
        assert data["resultType"] == "matrix", data
        return data["result"]

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


def prometheus_config(targets: Sequence[str], interval_seconds: float, job: str) -> str:
    """A minimal ``prometheus.yml``: one job scraping ``targets`` (host:port)."""
    listed = ", ".join(f'"{t}"' for t in targets)
    return (
        "global:\n"
        f"  scrape_interval: {interval_seconds:g}s\n"
        f"  scrape_timeout: {interval_seconds:g}s\n"
        f"  evaluation_interval: {interval_seconds:g}s\n"
        "scrape_configs:\n"
        f"  - job_name: {job}\n"
        f"    static_configs:\n"
        f"      - targets: [{listed}]\n"
    )


@contextlib.contextmanager
def running_prometheus(
    directory: Path, targets: Sequence[str], *, interval_seconds: float = 1.0, job: str = "engine"
) -> Iterator[PrometheusServer]:
    """Start Prometheus scraping ``targets`` (``host:port``, path ``/metrics``) every
    ``interval_seconds``; yields once ``/-/ready`` answers 200; terminates it afterwards."""
    binary = prometheus_binary()
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "prometheus.yml"
    config.write_text(prometheus_config(targets, interval_seconds, job))
    port = free_port()
    log = directory / "prometheus.log"
    command = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    server = PrometheusServer(f"http://127.0.0.1:{port}", log)
    with log.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            _wait_ready(server, process)
            yield server
        finally:
            stop_process(process)


def _wait_ready(server: PrometheusServer, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"prometheus exited with {process.returncode}:\n{server.log_tail()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/-/ready", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(
        f"prometheus not ready in {READY_TIMEOUT_SECONDS:g} s:\n{server.log_tail()}"
    )

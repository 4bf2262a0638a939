"""The collector side of an alert drill (``tailwatch.alert_drill``): its config, the
``tailwatch collect`` process that scrapes the replicas and evaluates the rules, and
waiting for it to see every replica."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from loadgen.drill_report import DrillTiming

#: How long the collector may take to start and to scrape every replica once.
START_TIMEOUT_SECONDS = 120.0
_LISTENING = re.compile(r"OTLP traces at (http://[^\s/]+)/v1/traces")
_EVALUATIONS = re.compile(r"alert evaluator stopped after (\d+) evaluations")


class DrillError(RuntimeError):
    """The drill could not run: the collector did not start or did not scrape in time."""


def evaluations(log: Path) -> int:
    found = _EVALUATIONS.findall(log.read_text(encoding="utf-8"))
    return int(found[-1]) if found else 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def collector_config(db_url: str, targets: Path, timing: DrillTiming) -> dict:
    return {
        "database_url": db_url,
        "collector": {
            "scrape_interval_seconds": timing.scrape_interval_seconds,
            "scrape_timeout_seconds": timing.scrape_interval_seconds,
            "targets_file": str(targets),
            "gpu": "off",
        },
        "alerts": {
            "window_scale": timing.window_scale,
            "evaluation_interval": timing.evaluation_interval_seconds,
            "in_collector": True,
            # NOTE: given unscaled; the collector scales every rule by window_scale
            "rules": {"target-down": {"for": timing.target_down_for_seconds / timing.window_scale}},
        },
    }


@contextlib.contextmanager
def collector(config: Path, workdir: Path, port: int) -> Iterator[str]:
    """``tailwatch collect --config config --listen 127.0.0.1:port`` in its own process;
    yields its base URL once it listens, and stops it with SIGTERM (it writes what it holds
    first)."""
    log = (workdir / "collector.log").open("w", encoding="utf-8")
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "tailwatch.cli", "collect", "--config", str(config.resolve())),
            *("--listen", f"127.0.0.1:{port}"),
        ],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            log.write(line)
            log.flush()
            match = _LISTENING.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        ready.wait(START_TIMEOUT_SECONDS)
        if not found:
            raise DrillError(f"the collector did not start; see {workdir / 'collector.log'}")
        yield found[0]
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=10)
        log.close()


def wait_scraped(base: str, count: int) -> None:
    """Until the collector has scraped each of ``count`` targets successfully."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            body = httpx.get(f"{base}/targets", timeout=5).json()
            healthy = [t for t in body["targets"] if t["health"] == "up"]
            if len(healthy) >= count:
                return
        time.sleep(0.1)
    raise DrillError(f"the collector did not scrape {count} targets in time")

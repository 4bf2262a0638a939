"""The demo's two child processes: the collector daemon and the engine server.

Each runs in a process group of its own, logging to a file under ``.tailwatch/``.
NOTE: not in the demo's group, because a terminal sends Ctrl-C to its whole foreground
group: the collector would stop at once while the engine was still flushing its last
spans to it, and the demo's own stop would be the engine's second signal (a forced exit,
no drain, no flush). Only the demo gets the signal; it stops the children in order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import httpx

STATE_DIR = ".tailwatch"
COLLECTOR_LOG = os.path.join(STATE_DIR, "demo-collector.log")
ENGINE_LOG = os.path.join(STATE_DIR, "demo-engine.log")


def _spawn(command: list[str], log_path: str) -> subprocess.Popen:
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(log_path, "w") as log:  # the child keeps its own copy of the handle
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            process_group=0,
        )


def start_server(port: int, otlp_endpoint: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "tailwatch.cli", "engine", "serve", "--model", "tiny"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024"]
    command += ["--max-waiting-requests", "256", "--no-access-log"]
    command += ["--otlp-endpoint", otlp_endpoint]
    return _spawn(command, ENGINE_LOG)


def start_collector(
    engine_port: int, collector_port: int, db_url: str, interval_seconds: float
) -> subprocess.Popen:
    os.makedirs(STATE_DIR, exist_ok=True)
    # NOTE: a config of its own, so that a tailwatch.yaml in the working folder (with the
    # user's real targets) is not picked up by the demo.
    config = os.path.join(STATE_DIR, "demo-collector.yaml")
    with open(config, "w") as file:
        file.write("# written by `tailwatch demo`\ncollector: {}\n")
    command = [sys.executable, "-m", "tailwatch.cli", "collect", "--config", config]
    command += ["--target", f"http://127.0.0.1:{engine_port}/metrics"]
    command += ["--interval", f"{interval_seconds:g}", "--db-url", db_url]
    command += ["--listen", f"127.0.0.1:{collector_port}"]
    return _spawn(command, COLLECTOR_LOG)


def wait_ready(
    process: subprocess.Popen, url: str, what: str, log_path: str, timeout_seconds: float = 180
) -> None:
    """Return once ``url`` answers 200; raise RuntimeError with the child's ``error:`` line
    (read back from its log) if it exits, or after the timeout."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with open(log_path) as log:
                message = log.read()
            errors = [line for line in message.splitlines() if line.startswith("error:")]
            message = errors[-1] if errors else message
            raise RuntimeError(message.strip().removeprefix("error:").strip() or "it exited")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not become ready within {timeout_seconds:.0f} s")


def stop(process: subprocess.Popen, what: str, timeout_seconds: float = 60) -> str:
    """SIGTERM (the child drains and flushes, then exits), wait, else kill; a Ctrl-C while
    waiting kills it at once. Returns a sentence for the demo's output."""
    if process.poll() is not None:
        return f"the {what} had exited (code {process.returncode})"
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return f"the {what} did not stop in {timeout_seconds:.0f} s: killed"
    except KeyboardInterrupt:
        process.kill()
        process.wait()
        return f"the {what} was killed (a second Ctrl-C)"
    if code != 0:
        return f"the {what} exited with code {code}"
    return f"the {what} has drained and exited"

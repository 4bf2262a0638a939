"""`tailwatch demo` (make run): a real engine server with demo traffic, read from /metrics."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _demo(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120", "OMP_NUM_THREADS": "1"}
    env.pop("TAILWATCH_DB_URL", None)
    command = [sys.executable, "-m", "tailwatch.cli", "demo", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=cwd)


@pytest.mark.slow
def test_demo_serves_traffic_reports_metrics_and_drains(tmp_path):
    port, collector_port = _free_port(), _free_port()
    result = _demo(
        "--port", str(port), "--collector-port", str(collector_port),
        "--duration", "7", "--interval", "2", "--rate", "4",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"http://127.0.0.1:{port}/metrics" in out
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+\d+\s", line)]
    assert len(rows) >= 2, out
    requests = [int(r[1]) for r in rows]
    assert requests == sorted(requests) and requests[-1] > 1  # requests were served
    assert all(r[3] != "-" for r in rows)  # TTFT p50 read from the histogram
    assert "drained and exited" in out
    # The collector stored the run: scrapes, one request record per traced request, and
    # TTFT percentiles from the stored histograms (default store under ./.tailwatch).
    summary = re.search(
        r"The store holds (\d+) scrapes of \S+ \((\d+) up\) and (\d+) request records.*"
        r"from (\d+) stored observations",
        out.replace("\n", " "),
    )
    assert summary, out
    scrapes, up, records, observations = map(int, summary.groups())
    assert up >= 2 and scrapes >= up
    assert records >= requests[-1] and observations >= requests[-1]
    assert (tmp_path / ".tailwatch" / "tailwatch.db").exists()
    for gone in (port, collector_port):  # both processes are gone: their ports are free
        with socket.socket() as s:
            # NOTE: SO_REUSEADDR, because the server closing keep-alive connections leaves
            # them in TIME_WAIT; only a listening socket would still refuse the bind.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", gone))


def test_demo_reports_a_busy_port_in_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = _demo("--port", str(busy.getsockname()[1]), "--duration", "5")
    assert result.returncode == 2
    assert "error:" in result.stdout and "Traceback" not in result.stdout + result.stderr


def test_demo_refuses_a_non_positive_duration():
    result = _demo("--duration", "0")
    assert result.returncode == 2 and "must be > 0" in result.stdout + result.stderr

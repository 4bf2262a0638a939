"""External services the integration tests use: PostgreSQL and Prometheus from Debian's
packages.

Locally a missing service skips its tests with the reason; under
``TAILWATCH_REQUIRE_SERVICES=1`` (set by ``.ci/run``) it fails them instead, so CI can never
go green by skipping.

- ``TAILWATCH_TEST_PG_URL``: a PostgreSQL URL whose role may ``CREATE DATABASE``
  (``.ci/run`` starts Debian's cluster and exports it). :func:`postgres_database` makes a
  fresh database per use and drops it afterwards.
- ``TAILWATCH_PROMETHEUS_BIN`` or ``prometheus`` on ``PATH``: tests start their own server on
  loopback with :func:`prometheus_binary`.
- ``TAILWATCH_ALERTMANAGER_BIN`` or ``prometheus-alertmanager`` (Debian's name) or
  ``alertmanager`` on ``PATH``: tests start their own server with :func:`alertmanager_binary`.
- ``TAILWATCH_VICTORIAMETRICS_BIN`` or ``victoria-metrics`` (Debian's name) on ``PATH``: tests
  start their own single-node VictoriaMetrics with :func:`victoriametrics_binary`.
- :class:`PrivatePostgres`: a throwaway cluster of the test's own (``initdb`` + ``pg_ctl``
  from the same package), for tests that stop and restart the database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REQUIRE_ENV = "TAILWATCH_REQUIRE_SERVICES"
PG_URL_ENV = "TAILWATCH_TEST_PG_URL"
PROMETHEUS_ENV = "TAILWATCH_PROMETHEUS_BIN"
ALERTMANAGER_ENV = "TAILWATCH_ALERTMANAGER_BIN"
PROMTOOL_ENV = "TAILWATCH_PROMTOOL_BIN"
VICTORIAMETRICS_ENV = "TAILWATCH_VICTORIAMETRICS_BIN"
PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def services_required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


def missing_service(reason: str) -> None:
    """Skip with ``reason``, or fail when services are required."""
    if services_required():
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 requires it)", pytrace=False)
    pytest.skip(reason)


def postgres_admin_url() -> str:
    """The configured PostgreSQL URL, or skip/fail."""
    url = os.environ.get(PG_URL_ENV)
    if not url:
        missing_service(f"no PostgreSQL: set {PG_URL_ENV} (as .ci/run does)")
    with contextlib.suppress(ImportError):
        import psycopg  # noqa: F401

        return url  # type: ignore[return-value]
    missing_service("psycopg is not installed (pip install 'psycopg[binary]')")
    raise AssertionError("unreachable")


@contextlib.contextmanager
def postgres_database(admin_url: str | None = None) -> Iterator[str]:
    """A fresh, empty database on the configured server; dropped afterwards. Yields its URL."""
    from collectors.store.connection import scratch_postgres_database

    with scratch_postgres_database(admin_url or postgres_admin_url(), "tw_test") as url:
        yield url


def prometheus_binary() -> str:
    """Path of the Prometheus server binary, or skip/fail."""
    path = os.environ.get(PROMETHEUS_ENV) or shutil.which("prometheus")
    if not path or not os.access(path, os.X_OK):
        missing_service(
            f"no Prometheus server binary: install Debian's prometheus or set {PROMETHEUS_ENV}"
        )
    return path  # type: ignore[return-value]


def alertmanager_binary() -> str:
    """Path of the Alertmanager binary, or skip/fail."""
    path = (
        os.environ.get(ALERTMANAGER_ENV)
        or shutil.which("prometheus-alertmanager")
        or shutil.which("alertmanager")
    )
    if not path or not os.access(path, os.X_OK):
        missing_service(
            "no Alertmanager binary: install Debian's prometheus-alertmanager or set "
            f"{ALERTMANAGER_ENV}"
        )
    return path  # type: ignore[return-value]


def promtool_binary() -> str:
    """Path of promtool (Debian's prometheus package), or skip/fail."""
    path = os.environ.get(PROMTOOL_ENV) or shutil.which("promtool")
    if not path or not os.access(path, os.X_OK):
        missing_service(f"no promtool: install Debian's prometheus or set {PROMTOOL_ENV}")
    return path  # type: ignore[return-value]


def victoriametrics_binary() -> str:
    """Path of the single-node VictoriaMetrics binary (Debian's victoria-metrics), or
    skip/fail."""
    path = (
        os.environ.get(VICTORIAMETRICS_ENV)
        or shutil.which("victoria-metrics")
        or shutil.which("victoria-metrics-prod")
    )
    if not path or not os.access(path, os.X_OK):
        missing_service(
            "no VictoriaMetrics binary: install Debian's victoria-metrics or set "
            f"{VICTORIAMETRICS_ENV}"
        )
    return path  # type: ignore[return-value]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own in ``directory``, on a loopback port, that the
    test may stop and start (to make the database unavailable for a while). Runs as the
    ``postgres`` user when the tests run as root (PostgreSQL refuses root)."""

    def __init__(self) -> None:
        bins = [d for d in PG_BIN_DIRS if (d / "initdb").exists()]
        if not bins:
            missing_service("no PostgreSQL server binaries (Debian package postgresql)")
        self.bin = bins[0]
        # NOTE: not under pytest's tmp_path: its 0700 parents keep the postgres user out.
        self.directory = Path(tempfile.mkdtemp(prefix="tailwatch-pg-"))
        self.data = self.directory / "data"
        self.port = free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.directory, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "tailwatch", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://tailwatch@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.directory / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        """Stop the server if it runs, and delete the cluster."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)


def stop_process(process: subprocess.Popen, timeout_seconds: float = 20.0) -> None:
    """Stop a service the test started: SIGTERM, then SIGKILL if it has not exited in time."""
    process.terminate()
    try:
        process.wait(timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout_seconds)

"""Servers of the test's own holding an exact history: Prometheus backfilled with ``promtool
tsdb create-blocks-from openmetrics``, VictoriaMetrics loaded through its
``/api/v1/import/prometheus``. Both on a free loopback port, in the test's directory, always
stopped afterwards; binaries from :mod:`tests.services` (skipped locally when missing, failed
under ``TAILWATCH_REQUIRE_SERVICES=1``).

History is given as :class:`Point`\\ s (metric name, labels, value, Unix seconds) plus each
family's type, so one list loads both servers and the test's fake alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.services import (
    free_port,
    prometheus_binary,
    promtool_binary,
    stop_process,
    victoriametrics_binary,
)

READY_TIMEOUT_SECONDS = 60.0
BACKFILL_TIMEOUT_SECONDS = 900.0


@dataclass(frozen=True)
class Point:
    """One stored sample: ``name`` is the sample name (``…_bucket``, ``…_total``)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    t: float


@dataclass(frozen=True)
class Server:
    url: str
    log: Path
    pid: int = 0

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


def openmetrics(points: Sequence[Point], types: Mapping[str, str]) -> str:
    """``points`` as one OpenMetrics text with timestamps, each family's samples together and
    each series' samples in time order (what the backfill requires). ``types``: family name
    (a counter's without ``_total``) → type."""
    by_family: dict[str, list[Point]] = {}
    for p in points:
        by_family.setdefault(_family(p.name, types), []).append(p)
    lines = []
    for family, items in by_family.items():
        lines.append(f"# TYPE {family} {types.get(family, 'unknown')}")
        items.sort(key=lambda p: (p.name, p.labels, p.t))
        lines += [f"{_sample(p)} {p.t:.3f}" for p in items]
    return "\n".join([*lines, "# EOF", ""])


def exposition(points: Sequence[Point], types: Mapping[str, str]) -> str:
    """One scrape's ``points`` as OpenMetrics text without timestamps."""
    by_family: dict[str, list[Point]] = {}
    for p in points:
        by_family.setdefault(_family(p.name, types), []).append(p)
    lines = []
    for family, items in by_family.items():
        lines.append(f"# TYPE {family} {types.get(family, 'unknown')}")
        lines += [f"{_sample(p)}" for p in items]
    return "\n".join([*lines, "# EOF", ""])


@contextlib.contextmanager
def backfilled_prometheus(directory: Path, points: Sequence[Point], types) -> Iterator[Server]:
    """Prometheus (no scrape jobs) over blocks made from ``points``."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "history.om"
    data.write_text(openmetrics(points, types))
    tsdb = directory / "tsdb"
    backfill(data, tsdb)
    with prometheus_over(tsdb, directory) as server:
        yield server


def backfill(openmetrics_file: Path, tsdb: Path) -> None:
    """``promtool tsdb create-blocks-from openmetrics``: blocks of the file's samples in
    ``tsdb`` (added beside the blocks already there)."""
    made = subprocess.run(
        [promtool_binary(), "tsdb", "create-blocks-from", "openmetrics", str(openmetrics_file), str(tsdb)],
        capture_output=True,
        text=True,
        timeout=BACKFILL_TIMEOUT_SECONDS,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr


@contextlib.contextmanager
def prometheus_over(tsdb: Path, directory: Path) -> Iterator[Server]:
    """Prometheus (no scrape jobs) serving the blocks in ``tsdb`` on a free loopback port;
    its config and log in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\n")
    port = free_port()
    command = [
        prometheus_binary(),
        f"--config.file={config}",
        f"--storage.tsdb.path={tsdb}",
        "--storage.tsdb.retention.time=100y",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    with _running(
        command, Server(f"http://127.0.0.1:{port}", directory / "server.log"), "/-/ready"
    ) as server:
        yield server


@contextlib.contextmanager
def imported_victoriametrics(directory: Path, points: Sequence[Point]) -> Iterator[Server]:
    """A single-node VictoriaMetrics holding ``points`` (imported, flushed, searchable)."""
    with victoriametrics_over(directory / "data", directory) as server:
        body = "\n".join(f"{_sample(p)} {round(p.t * 1000)}" for p in points) + "\n"
        answer = httpx.post(f"{server.url}/api/v1/import/prometheus", content=body, timeout=60)
        assert answer.status_code == 204, answer.text
        httpx.get(f"{server.url}/internal/force_flush", timeout=60)
        yield server


@contextlib.contextmanager
def victoriametrics_over(data: Path, directory: Path) -> Iterator[Server]:
    """A single-node VictoriaMetrics on ``data`` (created when missing) on a free loopback
    port; its log in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [
        victoriametrics_binary(),
        f"-storageDataPath={data}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y",
        "-search.latencyOffset=0s",
        "-loggerLevel=WARN",
    ]
    with _running(
        command, Server(f"http://127.0.0.1:{port}", directory / "server.log"), "/health"
    ) as server:
        yield server


@contextlib.contextmanager
def _running(command: list[str], server: Server, ready: str) -> Iterator[Server]:
    with server.log.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + READY_TIMEOUT_SECONDS
            while True:
                if process.poll() is not None:
                    raise AssertionError(f"{command[0]} exited: {server.log_tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(server.url + ready, timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise AssertionError(f"{command[0]} not ready: {server.log_tail()}")
                time.sleep(0.1)
            yield dataclasses.replace(server, pid=process.pid)
        finally:
            stop_process(process)


def _family(name: str, types: Mapping[str, str]) -> str:
    for suffix in ("_bucket", "_sum", "_count", "_total"):
        stem = name.removesuffix(suffix)
        if stem != name and stem in types:
            return stem
    return name


def _sample(p: Point) -> str:
    labels = ",".join(f'{k}="{v}"' for k, v in p.labels)
    return f"{p.name}{{{labels}}} {p.value!r}" if labels else f"{p.name} {p.value!r}"


def scraped_fake(points: Sequence[Point], types: Mapping[str, str]):  # type: ignore[no-untyped-def]
    """A ``FakeMetricsReader`` fed ``points`` scrape by scrape (per ``instance`` and time)
    through the collector's parser and dialect table: what a collector scraping the same
    series would hold (``up`` left out)."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from collectors.dialects import normalise
    from collectors.store import ScrapeRecord
    from collectors.store.fake import FakeMetricsReader

    scrapes: dict[tuple[str, float], list[Point]] = {}
    for p in points:
        labels = dict(p.labels)
        target = labels.pop("instance")
        if p.name != "up":
            scrapes.setdefault((target, p.t), []).append(
                Point(p.name, tuple(labels.items()), p.value, p.t)
            )
    records = []
    for (target, t), items in sorted(scrapes.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        families = list(text_string_to_metric_families(exposition(items, types)))
        records.append(ScrapeRecord.from_normalised(target, t, normalise(families, target)))
    return FakeMetricsReader(records)

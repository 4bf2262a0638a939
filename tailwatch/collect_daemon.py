"""The running ``tailwatch collect`` daemon, once ``tailwatch.collect_cli`` has checked its
options: the collection, the trace writer, the Prometheus sources and store maintenance as
tasks, the alert evaluator in a thread when ``alerts.in_collector`` is set
(``tailwatch.collect_evaluation``: from the first round of scrapes on) or else the change
detector after each interval's scrapes (``change_watch``), one server for
``/metrics``, ``/targets`` and the OTLP receiver, and a stop on SIGINT or SIGTERM that writes
(or saves) what is buffered."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import typer
import uvicorn
from fastapi import FastAPI, Response
from prometheus_client import make_asgi_app

from collectors.collector import Collector
from collectors.collector_metrics import MaintenanceMetrics
from collectors.event_wait import wait_for_event
from collectors.gpu import GpuTelemetry
from collectors.otlp import otlp_router
from collectors.promql import PrometheusSource
from collectors.scrape import Scraper, accept_header
from collectors.store import Store
from collectors.store.retention import RetentionPolicy
from collectors.targets_file import TargetsFileWatcher
from collectors.trace_writer import TraceWriter
from tailwatch.collect_evaluation import change_watch, collector_evaluation
from tailwatch.config import TailwatchConfig


async def run_daemon(
    settings: TailwatchConfig,
    store: Store,
    sock: socket.socket,
    gpu: GpuTelemetry,
    sources: list[tuple[PrometheusSource, float]],
) -> None:
    config = settings.collector
    stop = asyncio.Event()
    accept = accept_header(config.scrape_protocols)
    async with Scraper(
        config.scrape_timeout_seconds, config.max_body_bytes, accept=accept
    ) as scraper:
        watcher = TargetsFileWatcher(config.targets_file) if config.targets_file else None
        collector = Collector(
            [t.to_target() for t in config.targets],
            store,
            scraper,
            interval_seconds=config.scrape_interval_seconds,
            targets_source=watcher,
            gpu=gpu,
        )
        traces = TraceWriter(store, collector.registry, spill_path=TRACE_BUFFER_FILE)
        app = daemon_app(collector.registry, traces.on_spans, collector.target_statuses)
        server = _quiet_server(uvicorn.Config(app, log_level="warning"))
        typer.echo(_start_line(config, sock), err=True)
        evaluation = collector_evaluation(settings, store, collector.registry)
        if evaluation is None:  # NOTE: the evaluator runs the detector where it runs here
            collector.watchers = (change_watch(settings, store).detect,)
        with _stop_on_signals(stop, server):
            traces.start()
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            background = [
                asyncio.create_task(
                    _every(interval, stop, source.poll, store, what=f"Prometheus {source.url}")
                )
                for source, interval in sources
            ]
            background.append(
                asyncio.create_task(
                    _every(
                        MAINTENANCE_INTERVAL_SECONDS,
                        stop,
                        _maintain,
                        store,
                        settings.store.retention_policy(),
                        MaintenanceMetrics(collector.registry),
                        what="store maintenance",
                    )
                )
            )
            if evaluation is not None:
                background.append(asyncio.create_task(evaluation.run(stop, collector.first_round)))
            collector.load_buffer(BUFFER_FILE)
            try:
                await collector.run(stop)  # with no targets, empty cycles: traces only
            finally:
                stop.set()
                await asyncio.gather(*background)
                collector.save_buffer(BUFFER_FILE)
                server.should_exit = True
                try:
                    await serving  # in-flight exports finish (and are queued) first
                finally:
                    await traces.close()  # then every queued span is written
    typer.echo("collector stopped", err=True)


#: Scrapes still buffered at exit (the database was unavailable) wait here for the next start.
BUFFER_FILE = Path(".tailwatch") / "collector-buffer.pickle"
#: Spans the database did not take before the shutdown deadline, likewise.
TRACE_BUFFER_FILE = Path(".tailwatch") / "trace-buffer.pickle"

#: How often the daemon rolls up complete minutes and applies retention (``Store.maintain``);
#: a call that hits its batch limit is repeated at once.
MAINTENANCE_INTERVAL_SECONDS = 15.0


def _maintain(store: Store, policy: RetentionPolicy, metrics: MaintenanceMetrics) -> None:
    """``Store.maintain`` until nothing due is left, counted in ``metrics``."""
    while True:
        metrics.runs.inc()
        try:
            report = store.maintain(time.time(), policy)
        except Exception:
            metrics.errors.inc()
            raise
        metrics.last_success.set(time.time())
        metrics.rolled_up.inc(report.scrapes_rolled_up)
        for kind, count in (
            ("raw_scrapes", report.raw_scrapes_deleted),
            ("rollups", report.rollup_rows_deleted),
            ("spans", report.spans_deleted),
            ("request_records", report.request_records_deleted),
            ("alert_transitions", report.alert_transitions_deleted),
            ("incidents", report.incidents_deleted),
            ("rule_failures", report.rule_failures_deleted),
            ("notified", report.notified_deleted),
            ("silences", report.silences_deleted),
            ("change_events", report.change_events_deleted),
        ):
            metrics.deleted.labels(kind).inc(count)
        if not report.more_to_do:
            return


async def _every(
    interval: float, stop: asyncio.Event, work: Callable[..., object], *args: object, what: str
) -> None:
    """Run ``work(*args)`` in a thread every ``interval`` seconds until ``stop``; a failure
    is logged when its message changes (and once when it recovers), never raised."""
    logger = logging.getLogger("tailwatch.collect")
    last_error = ""
    while not stop.is_set():
        try:
            await asyncio.to_thread(work, *args)
        except Exception as error:  # NOTE: a failing source must not stop the daemon
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            if message != last_error:
                logger.warning("%s failed: %s", what, message)
            last_error = message
        else:
            if last_error:
                logger.info("%s recovered", what)
            last_error = ""
        await wait_for_event(stop, interval)


def daemon_app(registry, on_spans, target_statuses=None):
    """The daemon's ASGI app: ``GET /metrics`` (``registry``), the OTLP receiver, and, given
    ``target_statuses`` (``Collector.target_statuses``), ``GET /targets``: each target's
    health, last scrape and error, skipped scrapes and last bucket-layout change, as JSON.

    ``/metrics`` is dispatched by exact path rather than mounted, so it answers without
    the redirect to ``/metrics/`` that a mounted sub-app gets."""
    receiver = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    receiver.include_router(otlp_router(on_spans))
    if target_statuses is not None:

        @receiver.get("/targets")
        def targets() -> Response:
            # NOTE: ensure_ascii: a name from the configuration may hold a lone surrogate,
            # which UTF-8 cannot encode; escaped, the answer is still valid JSON.
            body = {"targets": [status.to_json() for status in target_statuses()]}
            return Response(json.dumps(body, ensure_ascii=True), media_type="application/json")

    metrics = make_asgi_app(registry)

    async def app(scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] == "/metrics":
            await metrics(scope, receive, send)
        else:
            await receiver(scope, receive, send)

    return app


def _start_line(config, sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    served = f"OTLP traces at {base}/v1/traces; own metrics on {base}/metrics"
    reads = []
    if config.targets:
        reads.append(f"{len(config.targets)} target(s)")
    if config.targets_file is not None:
        reads.append(f"the targets in {config.targets_file} (re-read on change)")
    reads += [f"Prometheus at {s.url}" for s in config.prometheus_sources]
    if not reads:
        return f"no scrape targets: receiving traces only; {served}"
    return f"collecting {', '.join(reads)} every {config.scrape_interval_seconds:g} s; {served}"


def _quiet_server(config):
    """uvicorn without its own signal handling: the daemon's handler stops both the
    collection loop and the server, and the process exits 0 rather than by the signal."""

    class QuietServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return QuietServer(config)


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event, server) -> Iterator[None]:
    loop = asyncio.get_running_loop()

    def handle() -> None:
        stop.set()
        server.should_exit = True

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, handle)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)

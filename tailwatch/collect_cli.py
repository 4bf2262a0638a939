"""``tailwatch collect``: the collector daemon. One server on the listen address serves the
collector's own ``/metrics`` and the OTLP/HTTP trace receiver (``POST /v1/traces``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tailwatch.cli_options import check_url

if TYPE_CHECKING:
    from collectors.collector_metrics import MaintenanceMetrics
    from collectors.config import CollectorConfig, TailwatchConfig
    from collectors.gpu import GpuTelemetry
    from collectors.promql import PrometheusSource
    from collectors.store import Store
    from collectors.store.rollups import RetentionPolicy

DEFAULT_CONFIG = Path("tailwatch.yaml")


def collect(
    config: Annotated[
        Path | None,
        typer.Option(help="Configuration file; default: ./tailwatch.yaml when it exists."),
    ] = None,
    target: Annotated[
        list[str] | None,
        typer.Option("--target", help="A /metrics URL to scrape; repeat; adds to the config."),
    ] = None,
    interval: Annotated[
        float | None,
        typer.Option(
            help="Seconds between scrapes of each target (default 5); a longer configured "
            "timeout drops to 0.8 x this."
        ),
    ] = None,
    db_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL of the store (overrides the config).")
    ] = None,
    listen: Annotated[
        str | None,
        typer.Option(
            help="host:port of the collector's /metrics and OTLP /v1/traces "
            "(default 127.0.0.1:4318)."
        ),
    ] = None,
) -> None:
    """Scrape every target each interval into the store (static targets, a file_sd targets
    file re-read on change, NVML GPU telemetry), read configured Prometheus sources, receive
    OTLP traces (POST /v1/traces), roll up and expire stored data, and serve the collector's
    own /metrics and each target's status (GET /targets). With no targets it receives traces
    only. SIGINT or SIGTERM stops it once the scrapes in flight and the received spans are
    written; what the database could not take
    is saved for the next start (exit 0)."""
    from collectors.config import (
        ConfigError,
        check_unique_names,
        load_config,
        parse_listen,
        target_from_url,
        with_interval,
    )

    try:
        path = (
            config if config is not None else (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
        )
        settings = load_config(path)
        collector = settings.collector
        if target:
            try:  # NOTE: a port past 65535 would only fail at the first scrape, every cycle
                [check_url(url, "--target") for url in target]
            except ValueError as error:
                raise ConfigError(str(error)) from None
            extra = [target_from_url(url, "--target", url_key="--target") for url in target]
            targets = [*collector.targets, *extra]
            check_unique_names(targets, "targets")
            collector = replace(collector, targets=tuple(targets))
        if interval is not None:
            collector = with_interval(collector, interval)
        if listen is not None:
            host, port = parse_listen(listen, "--listen")
            collector = replace(collector, listen_host=host, listen_port=port)
        if collector.targets_file is not None:
            from collectors.targets_file import merged_targets, read_targets_file

            # NOTE: a broken file at start is a configuration mistake (exit 2); once running,
            # a broken edit is logged and the last good targets keep being scraped.
            merged_targets(
                collector.targets,
                read_targets_file(collector.targets_file),
                str(collector.targets_file),
            )
        settings = replace(
            settings, collector=collector, database_url=db_url or settings.database_url
        )
        sources = _prometheus_sources(collector)
    except ConfigError as error:
        raise _fail(str(error)) from None
    try:
        sock = _listen_socket(collector.listen_host, collector.listen_port)
    except OSError as error:
        where = f"{collector.listen_host}:{collector.listen_port}"
        raise _fail(f"cannot listen on {where}: {error.strerror or error}") from None
    try:
        from collectors.store import Store

        store = Store(settings.database_url)
    except Exception as error:
        sock.close()
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        where = _display_url(settings.database_url) if settings.database_url else "the store"
        raise _fail(f"cannot open {where}: {message}") from None

    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    from collectors.gpu import GpuTelemetry, GpuTelemetryUnavailableError

    gpu = GpuTelemetry(collector.gpu)
    try:
        gpu.start()
    except GpuTelemetryUnavailableError as error:
        sock.close()
        store.close()
        raise _fail(str(error)) from None
    try:
        asyncio.run(_run(settings, store, sock, gpu, sources))
    finally:
        gpu.close()
        for source, _ in sources:
            source.close()
        store.close()


def _prometheus_sources(config: CollectorConfig) -> list[tuple[PrometheusSource, float]]:
    """One ``PrometheusSource`` per ``collector.prometheus_sources`` entry, with its poll
    interval; a constructor error becomes a :class:`ConfigError`."""
    from collectors.config import ConfigError
    from collectors.promql import DEFAULT_MATCH, PrometheusSource, PrometheusSourceError

    sources = []
    for index, entry in enumerate(config.prometheus_sources):
        try:
            source = PrometheusSource(
                entry.url,
                match=entry.match or DEFAULT_MATCH,
                headers=dict(entry.headers),
                timeout=entry.timeout_seconds,
                default_labels=dict(entry.labels),
                delay_seconds=entry.delay_seconds,
            )
        except PrometheusSourceError as error:
            raise ConfigError(f"collector.prometheus_sources[{index}]: {error}") from None
        sources.append((source, entry.interval_seconds or config.scrape_interval_seconds))
    return sources


async def _run(
    settings: TailwatchConfig,
    store: Store,
    sock: socket.socket,
    gpu: GpuTelemetry,
    sources: list[tuple[PrometheusSource, float]],
) -> None:
    import uvicorn

    from collectors.collector import Collector
    from collectors.collector_metrics import MaintenanceMetrics
    from collectors.scrape import Scraper, accept_header
    from collectors.targets_file import TargetsFileWatcher
    from collectors.trace_writer import TraceWriter

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
        ):
            metrics.deleted.labels(kind).inc(count)
        if not report.more_to_do:
            return


async def _every(
    interval: float, stop: asyncio.Event, work: Callable[..., object], *args: object, what: str
) -> None:
    """Run ``work(*args)`` in a thread every ``interval`` seconds until ``stop``; a failure
    is logged when its message changes (and once when it recovers), never raised."""
    from collectors.event_wait import wait_for_event

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
    from fastapi import FastAPI
    from prometheus_client import make_asgi_app

    from collectors.otlp import otlp_router

    receiver = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    receiver.include_router(otlp_router(on_spans))
    if target_statuses is not None:
        import json

        from fastapi import Response

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
    import uvicorn

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


def _listen_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


def _display_url(url: str) -> str:
    """``url`` with any password masked, for error messages."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)

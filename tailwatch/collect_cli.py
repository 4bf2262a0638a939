"""``tailwatch collect``: the collector daemon's options and configuration, checked before
anything starts; the daemon itself runs in ``tailwatch.collect_daemon``. One server on the
listen address serves the collector's own ``/metrics``, each target's status (``GET
/targets``) and the OTLP/HTTP trace receiver (``POST /v1/traces``)."""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from collectors.config import (
    CollectorConfig,
    ConfigError,
    check_unique_names,
    parse_listen,
    target_from_url,
    with_interval,
)
from collectors.gpu import GpuTelemetry, GpuTelemetryUnavailableError
from collectors.promql import DEFAULT_MATCH, PrometheusSource, PrometheusSourceError
from collectors.store import Store
from collectors.targets_file import merged_targets, read_targets_file
from tailwatch.cli_options import config_path
from tailwatch.collect_daemon import run_daemon
from tailwatch.config import load_config


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
    alerts: Annotated[
        bool | None,
        typer.Option(
            "--alerts/--no-alerts",
            help="Evaluate the alert rules here too, every alerts.evaluation_interval "
            "(overrides alerts.in_collector).",
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
    try:
        path = config_path(config)
        settings = load_config(path)
        collector = settings.collector
        if target:
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
        if alerts is not None:
            settings = replace(settings, alerts=replace(settings.alerts, in_collector=alerts))
        sources = _prometheus_sources(collector)
    except ConfigError as error:
        raise _fail(str(error)) from None
    try:
        sock = _listen_socket(collector.listen_host, collector.listen_port)
    except OSError as error:
        where = f"{collector.listen_host}:{collector.listen_port}"
        raise _fail(f"cannot listen on {where}: {error.strerror or error}") from None
    try:
        store = Store(settings.database_url)
    except Exception as error:
        sock.close()
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        where = _display_url(settings.database_url) if settings.database_url else "the store"
        raise _fail(f"cannot open {where}: {message}") from None

    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")

    gpu = GpuTelemetry(collector.gpu)
    try:
        gpu.start()
    except GpuTelemetryUnavailableError as error:
        sock.close()
        store.close()
        raise _fail(str(error)) from None
    try:
        asyncio.run(run_daemon(settings, store, sock, gpu, sources))
    finally:
        gpu.close()
        for source, _ in sources:
            source.close()
        store.close()


def _prometheus_sources(config: CollectorConfig) -> list[tuple[PrometheusSource, float]]:
    """One ``PrometheusSource`` per ``collector.prometheus_sources`` entry, with its poll
    interval; a constructor error becomes a :class:`ConfigError`."""
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
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)

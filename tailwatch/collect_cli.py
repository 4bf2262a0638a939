"""``tailwatch collect``: the collector daemon, with its own ``/metrics``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from collectors.config import TailwatchConfig
    from collectors.store import Store

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
        float | None, typer.Option(help="Seconds between scrapes (default 5).")
    ] = None,
    db_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL of the store (overrides the config).")
    ] = None,
    listen: Annotated[
        str | None,
        typer.Option(help="host:port of the collector's own /metrics (default 127.0.0.1:4318)."),
    ] = None,
) -> None:
    """Scrape every target each interval into the store, and serve the collector's own
    /metrics. SIGINT or SIGTERM stops it after the current cycle (exit 0)."""
    from collectors.config import (
        ConfigError,
        check_unique_names,
        load_config,
        parse_listen,
        target_from_url,
    )

    try:
        path = (
            config if config is not None else (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
        )
        settings = load_config(path)
        collector = settings.collector
        if target:
            extra = [target_from_url(url, "--target", url_key="--target") for url in target]
            targets = [*collector.targets, *extra]
            check_unique_names(targets, "targets")
            collector = replace(collector, targets=tuple(targets))
        if interval is not None:
            if not interval > 0:
                raise ConfigError(f"--interval: expected a number > 0, got {interval:g}")
            timeout = min(collector.scrape_timeout_seconds, interval)
            collector = replace(
                collector, scrape_interval_seconds=interval, scrape_timeout_seconds=timeout
            )
        if listen is not None:
            host, port = parse_listen(listen, "--listen")
            collector = replace(collector, listen_host=host, listen_port=port)
        if not collector.targets:
            raise ConfigError("no targets: list collector.targets in the config or pass --target")
        settings = replace(
            settings, collector=collector, database_url=db_url or settings.database_url
        )
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
    asyncio.run(_run(settings, store, sock))


async def _run(settings: TailwatchConfig, store: Store, sock: socket.socket) -> None:
    import uvicorn
    from prometheus_client import make_asgi_app

    from collectors.collector import Collector
    from collectors.scrape import Scraper

    config = settings.collector
    stop = asyncio.Event()
    async with Scraper(config.scrape_timeout_seconds, config.max_body_bytes) as scraper:
        collector = Collector(
            [t.to_target() for t in config.targets],
            store,
            scraper,
            interval_seconds=config.scrape_interval_seconds,
        )
        server = _quiet_server(
            uvicorn.Config(make_asgi_app(collector.registry), log_level="warning")
        )
        host, port = sock.getsockname()[:2]
        typer.echo(
            f"collecting {len(config.targets)} target(s) every "
            f"{config.scrape_interval_seconds:g} s; own metrics on "
            f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics",
            err=True,
        )
        with _stop_on_signals(stop, server):
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            try:
                await collector.run(stop)
            finally:
                server.should_exit = True
                await serving
    typer.echo("collector stopped", err=True)


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

"""Bundled-engine replicas on free loopback ports, in this process (uvicorn threads).

For ``tailwatch scenario run`` without ``--url`` and for tests. The engine is imported
only here and only when replicas are started: the rest of ``loadgen`` speaks HTTP alone.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from loadgen.errors import TargetError

READY_TIMEOUT_SECONDS = 120


@contextlib.contextmanager
def bundled_replicas(
    count: int,
    engine_knobs: Mapping[str, Any],
    *,
    admin_token: str | None = None,
    tracers: list | None = None,
) -> Iterator[list[str]]:
    """Start ``count`` servers of the bundled engine (``EngineConfig(**engine_knobs)``)
    and yield their base URLs; they stop (drain skipped) when the block exits.
    ``tracers``, when given, holds one ``RequestTracer`` per replica."""
    import uvicorn

    from engine.config import EngineConfig
    from engine.server.launch import ServeOptions, build_engine_server
    from engine.server.uvicorn_server import listen_socket

    servers, threads, urls = [], [], []
    try:
        for i in range(count):
            tracer = tracers[i] if tracers else None
            parts = build_engine_server(
                EngineConfig(**engine_knobs),
                ServeOptions(admin_token=admin_token, drain_timeout_seconds=0),
                registry=_fresh_registry(),
                tracer=tracer,
            )
            sock = listen_socket("127.0.0.1", 0)
            config = uvicorn.Config(parts.app, log_level="warning", access_log=False)
            server = uvicorn.Server(config)
            thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
            thread.start()
            servers.append(server)
            threads.append(thread)
            urls.append(f"http://127.0.0.1:{sock.getsockname()[1]}")
        for url in urls:
            _wait_ready(url)
        yield urls
    finally:
        for server in servers:
            server.should_exit = True
        for thread in threads:
            thread.join(timeout=30)


def _fresh_registry():
    # NOTE: one registry per replica; the default global one would merge their series.
    from prometheus_client import CollectorRegistry

    return CollectorRegistry()


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                return
        time.sleep(0.05)
    raise TargetError(f"the bundled replica at {url} was not ready in {READY_TIMEOUT_SECONDS} s")

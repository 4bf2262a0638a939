"""Bundled-engine replicas on free loopback ports, in this process (uvicorn threads).

For ``tailwatch scenario run`` without ``--url`` and for tests. The engine is imported
only here and only when replicas are started: the rest of ``loadgen`` speaks HTTP alone.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from loadgen.errors import TargetError, WorkloadError

READY_TIMEOUT_SECONDS = 120
#: Scenario ``engine:`` keys that are the server's, not ``EngineConfig``'s: admission
#: control in front of the engine (``engine.server.launch.ServeOptions``).
SERVE_KNOBS = ("max_waiting_requests", "max_concurrency_per_tenant")


@contextlib.contextmanager
def bundled_replicas(
    count: int,
    engine_knobs: Mapping[str, Any],
    *,
    admin_token: str | None = None,
    tracers: list | None = None,
    otlp_endpoint: str | None = None,
    engine_servers: list | None = None,
) -> Iterator[list[str]]:
    """Start ``count`` servers of the bundled engine and yield their base URLs; they stop
    (drain skipped) when the block exits. ``engine_knobs`` are ``EngineConfig`` fields
    plus :data:`SERVE_KNOBS`; an unknown or bad one is a ``WorkloadError`` naming it.
    ``tracers``, when given, holds one ``RequestTracer`` per replica; otherwise
    ``otlp_endpoint`` (an OTLP/HTTP ``.../v1/traces`` URL) turns each replica's tracing on.
    ``engine_servers``, when given, receives each replica's ``EngineServer`` (engine, metrics,
    tracer), e.g. to flush its spans before a collector stops."""
    import uvicorn

    from engine.errors import ConfigError
    from engine.server.launch import build_engine_server
    from engine.server.uvicorn_server import listen_socket

    engine_config, options = _engine_settings(engine_knobs, admin_token, otlp_endpoint)
    servers, threads, urls = [], [], []
    try:
        for i in range(count):
            tracer = tracers[i] if tracers else None
            try:
                parts = build_engine_server(
                    engine_config, options, registry=_fresh_registry(), tracer=tracer
                )
            except ConfigError as error:  # e.g. max_waiting_requests: 0
                raise WorkloadError("engine", str(error)) from None
            if engine_servers is not None:
                engine_servers.append(parts)
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


def _engine_settings(knobs: Mapping[str, Any], admin_token, otlp_endpoint):
    """(``EngineConfig``, ``ServeOptions``) from a scenario's ``engine:`` mapping."""
    from dataclasses import fields

    from engine.config import EngineConfig
    from engine.errors import ConfigError
    from engine.server.launch import ServeOptions

    served = (*SERVE_KNOBS, "lora_modules")  # NOTE: ServeOptions' fields
    allowed = sorted({f.name for f in fields(EngineConfig)} | set(served))
    for key in knobs:
        if key not in allowed:
            raise WorkloadError(f"engine.{key}", f"is not an engine knob; known: {allowed}")
    serve = {k: v for k, v in knobs.items() if k in served}
    if "lora_modules" in serve:
        serve["lora_modules"] = tuple(serve["lora_modules"])
    try:
        config = EngineConfig(**{k: v for k, v in knobs.items() if k not in served})
        options = ServeOptions(
            admin_token=admin_token,
            drain_timeout_seconds=0,
            otlp_endpoint=otlp_endpoint,
            **serve,
        )
    except ConfigError as error:
        raise WorkloadError("engine", str(error)) from None
    return config, options


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


def write_targets_file(path: Path, urls: list[str], scenario: str) -> None:
    """``urls`` as a Prometheus file_sd targets file at ``path`` (target names ``host:port``,
    labels ``scenario`` and ``scenario_replica``), written whole and renamed into place so a
    watcher never reads half a file. ``OSError`` when it cannot be written."""
    groups = []
    for i, replica_url in enumerate(urls):
        parts = urlsplit(replica_url)
        labels = {"__scheme__": parts.scheme, "scenario": scenario, "scenario_replica": str(i)}
        groups.append({"targets": [parts.netloc], "labels": labels})
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(groups, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)

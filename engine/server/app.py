"""The app factory: routes, error handlers, the response counter and the lifespan.

The lifespan starts the engine's step loop and runs the warm-up request in the
background (so ``/live`` answers while it runs and ``/ready`` turns 200 after it);
at shutdown it drains what is still in flight, stops the loop and flushes traces.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from fastapi import FastAPI

from engine.server import admin, lora_routes, openai_routes, probes
from engine.server.context import ServerContext
from engine.server.errors import install_error_handlers
from engine.server.http_metrics import HTTPResponseCounter

if TYPE_CHECKING:
    from engine.async_engine import AsyncEngine
    from engine.metrics import EngineMetrics
    from engine.startup import StartupPhases
    from engine.tracing import RequestTracer

logger = logging.getLogger("tailwatch.server")
DEFAULT_DRAIN_TIMEOUT_SECONDS = 30.0


def build_app(
    async_engine: AsyncEngine,
    *,
    served_model_name: str,
    metrics: EngineMetrics,
    tracer: RequestTracer,
    admin_token: str | None,
    drain_timeout_seconds: float = DEFAULT_DRAIN_TIMEOUT_SECONDS,
    startup: StartupPhases | None = None,
) -> FastAPI:
    """An OpenAI-compatible app over ``async_engine``; the admin API (and with LoRA on,
    the runtime LoRA API) only with a token.

    ``metrics`` and ``tracer`` must already be observers of ``async_engine``. At
    shutdown, requests still in flight get ``drain_timeout_seconds`` to finish before
    they are aborted. ``startup`` is told when the warm-up ends (the start-up phases).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async_engine.start()
        warm_up = asyncio.create_task(_warm_up(async_engine, startup), name="warm-up")
        try:
            yield
        finally:
            warm_up.cancel()
            await asyncio.wait([warm_up])
            num_aborted = await async_engine.drain(drain_timeout_seconds)
            if num_aborted:
                logger.warning("shutdown: aborted %d requests still in flight", num_aborted)
            await asyncio.to_thread(async_engine.shutdown)
            await asyncio.to_thread(tracer.shutdown)

    app = FastAPI(
        title="Tailwatch engine",
        summary="OpenAI-compatible API of Tailwatch's bundled inference engine",
        lifespan=lifespan,
    )
    app.state.context = ServerContext(
        async_engine=async_engine,
        served_model_name=served_model_name,
        metrics=metrics,
        tracer=tracer,
        admin_token=admin_token,
        created=int(time.time()),
    )
    install_error_handlers(app)
    app.include_router(openai_routes.router)
    app.include_router(probes.router)
    if admin_token:
        app.include_router(admin.router)
        if async_engine.engine.lora is not None:
            app.include_router(lora_routes.router)
    app.add_middleware(HTTPResponseCounter, observe=metrics.observe_http_response)
    return app


async def _warm_up(async_engine: AsyncEngine, startup: StartupPhases | None) -> None:
    started = time.perf_counter()
    try:
        await async_engine.warm_up()
    except asyncio.CancelledError:
        raise
    except Exception:
        # NOTE: /ready stays 503; the log says why.
        logger.exception("warm-up failed; the server will not report ready")
        return
    seconds = time.perf_counter() - started
    if startup is not None:
        startup.warmed_up(seconds)
    logger.info("warm-up served in %.2f s; ready", seconds)

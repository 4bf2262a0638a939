"""Probes and the scrape endpoint: ``/live``, ``/ready``, ``/health``, ``/metrics``.

- ``/live``: 200 while the process can serve (for a liveness probe); 503 once the engine
  is dead (a failure it could not contain), so the probe restarts the replica.
- ``/ready``: 200 once the model is loaded and a warm-up request was served, 503 before
  that, while draining (SIGTERM) and once the engine is dead (for a readiness probe or
  a load balancer).
- ``/health``: vLLM's: 200 with an empty body while the engine is alive, else 503.
- ``/metrics``: GET, and HEAD (the same headers, no body) for tools that probe it so.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from engine.server.context import server_context
from engine.server.errors import error_body, logger

router = APIRouter()


@router.get("/live")
async def live(request: Request) -> JSONResponse:
    if server_context(request).async_engine.loop_error is not None:
        return JSONResponse({"status": "dead"}, status_code=503)
    return JSONResponse({"status": "alive"})


@router.get("/ready")
async def ready(request: Request) -> JSONResponse:
    engine = server_context(request).async_engine
    if engine.loop_error is not None:
        status = "failed"
    elif engine.is_draining:
        status = "draining"
    elif not engine.is_ready:
        status = "warming_up"
    else:
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": status}, status_code=503)


@router.get("/health")
async def health(request: Request) -> Response:
    engine = server_context(request).async_engine
    if engine.loop_error is not None:
        return JSONResponse(
            error_body(503, "the engine is dead (see the server log)", code="engine_dead"),
            status_code=503,
        )
    return Response(status_code=200)


@router.api_route("/metrics", methods=["GET", "HEAD"], include_in_schema=False)
async def metrics(request: Request) -> Response:
    # NOTE: HEAD gets GET's headers (Content-Length too); the server sends no body.
    try:
        body, content_type = server_context(request).metrics.render(request.headers.get("accept"))
    except Exception:  # the render already retried with safe labels: not a caller's fault
        logger.exception("GET /metrics failed")
        message = "the metrics could not be rendered (see the server log)"
        return JSONResponse(error_body(503, message, code="metrics_unavailable"), status_code=503)
    return Response(body, media_type=content_type)

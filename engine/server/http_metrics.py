"""Counts every HTTP response by status code and route (``metrics.observe_http_response``).

The route is its template (``/v1/chat/completions``, never a path with its parameters), as
vLLM's prometheus-fastapi-instrumentator labels ``handler``; ``none`` when no route matched,
so an unknown path cannot add a series. Probes and scrapes are counted too, under their own
handler: the collector counts only the ``/v1/`` routes as the API's responses.

A pure ASGI middleware rather than ``@app.middleware("http")``: Starlette's
``BaseHTTPMiddleware`` runs the app in a separate task and buffers through a stream,
which would sit between a streaming response and the client's disconnect.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.metric_names import UNMATCHED_HANDLER


def route_template(scope: Scope) -> str:
    """The template of the route that matched (FastAPI puts the route in the scope once it
    has routed), or ``none``."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED_HANDLER


class HTTPResponseCounter:
    def __init__(self, app: ASGIApp, observe: Callable[[int, str], None]) -> None:
        self.app = app
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def counting_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self.observe(message["status"], route_template(scope))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:
            # NOTE: Starlette's outermost middleware turns this into the 500 response,
            # outside this one; count it here.
            if not started:
                self.observe(500, route_template(scope))
            raise

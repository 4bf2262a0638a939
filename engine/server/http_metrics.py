"""Counts every HTTP response by status code (``metrics.observe_http_response``).

A pure ASGI middleware rather than ``@app.middleware("http")``: Starlette's
``BaseHTTPMiddleware`` runs the app in a separate task and buffers through a stream,
which would sit between a streaming response and the client's disconnect.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HTTPResponseCounter:
    def __init__(self, app: ASGIApp, observe: Callable[[int], None]) -> None:
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
                self.observe(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:
            # NOTE: Starlette's outermost middleware turns this into the 500 response,
            # outside this one; count it here.
            if not started:
                self.observe(500)
            raise

"""Server-sent events: ``data: {json}\\n\\n`` per chunk, then ``data: [DONE]\\n\\n``.

Cancellation on disconnect: Starlette's ``StreamingResponse`` (under uvicorn's ASGI 2.3
HTTP spec) listens for ``http.disconnect`` while it streams and cancels the streaming
task when it arrives. ``EngineStreamingResponse`` closes the request's
``RequestStream`` once the response ends, however it ended (finished, a disconnect, a
failed ``send``), and closing an unfinished stream aborts the request before the next
engine step.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from engine.async_engine import RequestStream
from engine.errors import EngineError
from engine.server.errors import error_body, from_engine_error, logger

DONE = b"data: [DONE]\n\n"


def encode_event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


async def sse_body(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    """The chunks as events. A failure after the headers went out can only be told in
    the stream: an ``{"error": ...}`` event (as vLLM sends), then ``[DONE]``."""
    try:
        async for chunk in chunks:
            yield encode_event(chunk)
    except EngineError as error:
        failure = from_engine_error(error)
        body = error_body(failure.status_code, failure.message, failure.param, failure.code)
        yield encode_event(body)
    except Exception:
        logger.exception("unexpected error while streaming a response")
        yield encode_event(error_body(500, "internal server error", code="internal_error"))
    yield DONE


class EngineStreamingResponse(StreamingResponse):
    media_type = "text/event-stream"

    def __init__(self, body: AsyncIterator[bytes], stream: RequestStream) -> None:
        # NOTE: no-cache and no proxy buffering, or chunks arrive in bursts (TTFT lies).
        super().__init__(body, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            body = self.body_iterator
            if hasattr(body, "aclose"):
                await body.aclose()
            self._stream.close()

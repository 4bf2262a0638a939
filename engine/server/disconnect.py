"""Waiting out a non-streaming request while watching for the client to go away.

Admission is ``AsyncEngine.submit``: it admits the request or raises the refusal at
once, so a route knows the outcome before it sends response headers. Whoever stops
reading early — a client that went away, a cancelled task — closes the
``RequestStream``, and the engine aborts the request (freeing its KV blocks) before its
next step.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.requests import Request

from engine.async_engine import RequestStream
from engine.outputs import RequestOutput


async def collect_unless_disconnected(
    request: Request, stream: RequestStream, outputs: AsyncIterator[RequestOutput]
) -> list[RequestOutput] | None:
    """All of ``outputs`` (the stream's, perhaps wrapped) for a non-streaming request;
    None, with the request aborted, if the client disconnected first."""

    async def collect() -> list[RequestOutput]:
        return [output async for output in outputs]

    collecting = asyncio.ensure_future(collect())
    watching = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait([collecting, watching], return_when=asyncio.FIRST_COMPLETED)
    finally:
        watching.cancel()
        if not collecting.done():
            collecting.cancel()
            await asyncio.wait([collecting])
        stream.close()
    if collecting.cancelled():
        return None
    return collecting.result()


async def _disconnected(request: Request) -> None:
    # NOTE: the body has been read by now, so the next ASGI message is the disconnect.
    while (await request.receive())["type"] != "http.disconnect":
        pass

"""One request's outputs, from admission to the last token or to an abort.

``AsyncEngine.generate`` admits a request on its first iteration and raises there if
it refuses (bad input, full queue, draining). A route must know that before it sends
response headers, so ``open_request`` starts the first iteration and returns as soon as
the engine has admitted the request (or raises what the engine raised); it does not
wait for the first token.

Whoever stops reading early — a client that went away, a cancelled task — ends the
request: ``outputs()`` holds the engine's generator under ``contextlib.aclosing`` and
``aclose()`` cancels a first step still pending, so the engine aborts the request
(freeing its KV blocks) before its next step.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable

from starlette.requests import Request

from engine.async_engine import AsyncEngine, RequestHandle
from engine.outputs import RequestOutput
from engine.sampling_params import SamplingParams


class RequestStream:
    def __init__(
        self,
        generator: AsyncGenerator[RequestOutput, None],
        first: asyncio.Future[RequestOutput],
    ) -> None:
        self._generator = generator
        self._first = first

    async def outputs(self) -> AsyncIterator[RequestOutput]:
        """Every output of the request, the finished one last."""
        async with contextlib.aclosing(self._generator):
            # NOTE: a cancellation here is passed on to ``_first``, and this task resumes
            # only once that step has finished, so the generator is never closed while
            # it is still running.
            output = await self._first
            yield output
            if output.finished:
                return
            async for output in self._generator:
                yield output

    async def aclose(self) -> None:
        """Abort the request unless it has finished; safe to call more than once."""
        if not self._first.done():
            self._first.cancel()
            await asyncio.wait([self._first])
        elif not self._first.cancelled():
            self._first.exception()  # retrieved, so asyncio does not warn about it
        await self._generator.aclose()


async def open_request(
    async_engine: AsyncEngine,
    prompt: str | list[int],
    params: SamplingParams,
    *,
    request_id: str,
    tenant: str | None,
    priority: int,
    on_admitted: Callable[[RequestHandle], None],
) -> RequestStream:
    """Admit a request; raises the engine's refusal (``RequestError``, ``QueueFullError``,
    ``EngineDrainingError``) before returning."""
    admitted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def admit(handle: RequestHandle) -> None:
        admitted.set_result(None)
        on_admitted(handle)

    generator = async_engine.generate(
        prompt,
        params,
        request_id=request_id,
        tenant=tenant,
        priority=priority,
        on_admitted=admit,
    )
    first = asyncio.ensure_future(anext(generator))
    stream = RequestStream(generator, first)
    try:
        await asyncio.wait([first, admitted], return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        await stream.aclose()
        raise
    if first.done() and (first.cancelled() or first.exception() is not None):
        await stream.aclose()
        first.result()  # raises the refusal
    return stream


async def collect_unless_disconnected(
    request: Request, stream: RequestStream, outputs: AsyncIterator[RequestOutput]
) -> list[RequestOutput] | None:
    """All of ``outputs`` (``stream.outputs()``, perhaps wrapped) for a non-streaming
    request; None, with the request aborted, if the client disconnected first."""

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
        await stream.aclose()
    if collecting.cancelled():
        return None
    return collecting.result()


async def _disconnected(request: Request) -> None:
    # NOTE: the body has been read by now, so the next ASGI message is the disconnect.
    while (await request.receive())["type"] != "http.disconnect":
        pass

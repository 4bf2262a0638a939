"""One in-flight request as the async front end sees it: its handle and its output stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from engine.lora.request import LoRARequest
from engine.outputs import RequestOutput
from engine.sampling_params import SamplingParams


@dataclass(eq=False)
class RequestHandle:
    """One in-flight request as the front end sees it."""

    request_id: str
    params: SamplingParams
    tenant: str | None
    priority: int
    num_prompt_tokens: int
    loop: asyncio.AbstractEventLoop
    # when the request reached the front end: engine clock, and epoch seconds
    arrival_time: float = 0.0
    arrival_wall_time: float = 0.0
    outputs: asyncio.Queue = field(default_factory=asyncio.Queue)
    # Set by whoever traces the request (see engine/tracing.py).
    span: Any = None
    trace_id: str | None = None
    is_finished: bool = False
    # The server's start-up warm-up (AsyncEngine.warm_up): no client sent it, so the
    # client-facing metrics leave it out.
    is_warm_up: bool = False
    # The LoRA adapter the request selected by its model name (None: the base model).
    lora_request: LoRARequest | None = None


class RequestStream:
    """An admitted request's outputs, the finished one last (iterate once).

    ``close()`` — or leaving ``with stream:`` — aborts the request unless it has
    finished, before the engine's next step; it is idempotent. ``release`` is what
    closing does, given by the front end that admitted the request (``AsyncEngine``
    frees the tenant's slot and aborts an unfinished request), called once.
    """

    def __init__(self, handle: RequestHandle, *, release: Callable[[RequestHandle], None]) -> None:
        self._release = release
        self.handle = handle
        self._is_closed = False

    async def __aiter__(self) -> AsyncIterator[RequestOutput]:
        handle = self.handle
        while not handle.is_finished:
            item = await handle.outputs.get()
            if isinstance(item, BaseException):
                raise item
            if item.finished:
                handle.is_finished = True
            yield item

    def close(self) -> None:
        if not self._is_closed:
            self._is_closed = True
            self._release(self.handle)

    def __enter__(self) -> RequestStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

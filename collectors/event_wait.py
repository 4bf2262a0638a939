"""A bounded wait on an ``asyncio.Event``: the collector's loops sleep this way, so that
setting the event (a stop, a close) wakes them at once instead of after the sleep."""

from __future__ import annotations

import asyncio
import contextlib


async def wait_for_event(event: asyncio.Event, timeout_seconds: float) -> bool:
    """Wait until ``event`` is set or ``timeout_seconds`` have passed; whether it is set.
    The timeout is the ordinary way out, not an error; a ``timeout_seconds`` <= 0 only looks."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout=timeout_seconds)
    return event.is_set()

"""A bounded wait for a condition inside a running event loop, for tests of the collector's
tasks: the task under test runs between polls, and a hang fails naming what never came."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: Bound on every wait for the collector to get somewhere (a hang becomes a failure).
WAIT_SECONDS = 60
#: NOTE: coarse enough that a condition reading the store does not crowd the loop under test.
POLL_SECONDS = 0.05


async def wait_until(condition: Callable[[], object], what: str) -> None:
    """Poll ``condition`` every ``POLL_SECONDS`` until it is truthy; fail after
    ``WAIT_SECONDS`` worth of polls."""
    for _ in range(int(WAIT_SECONDS / POLL_SECONDS)):
        if condition():
            return
        await asyncio.sleep(POLL_SECONDS)
    raise AssertionError(f"gave up waiting for {what}")

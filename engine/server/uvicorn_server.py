"""A uvicorn server that drains on SIGTERM/SIGINT instead of stopping at once.

uvicorn's own handler stops accepting connections at the first signal, waits for the
open ones, and then re-raises the signal so the process dies by it (exit status 143).
A serving replica should instead leave the load balancer gracefully and exit 0:

1. the signal marks the engine draining: new requests get 503, ``/ready`` turns 503,
   the listener stays open so probes and clients get an answer, not a refused connection;
2. in-flight requests run to completion, up to the drain timeout, after which the rest
   are aborted (their streams end with ``finish_reason: "abort"``);
3. then uvicorn shuts down normally (lifespan shutdown stops the engine loop) and the
   process exits 0.

A second signal while draining forces the exit (uvicorn's behaviour, signal re-raised).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from types import FrameType

import uvicorn

from engine.async_engine import AsyncEngine

logger = logging.getLogger("tailwatch.server")


def listen_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket for ``uvicorn.Server.run(sockets=[...])``; port 0 picks one.

    NOTE: the protocol must be IPPROTO_TCP explicitly. asyncio turns Nagle's algorithm
    off (TCP_NODELAY) only on connections whose socket says so, and a socket made with
    protocol 0 (``socket.create_server``) does not: every small SSE chunk would then
    wait ~40 ms for the client's delayed ACK.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class DrainingServer(uvicorn.Server):
    def __init__(
        self, config: uvicorn.Config, async_engine: AsyncEngine, drain_timeout_seconds: float
    ) -> None:
        super().__init__(config)
        self.async_engine = async_engine
        self.drain_timeout_seconds = drain_timeout_seconds
        self.num_aborted_at_drain: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_task: asyncio.Task[None] | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._loop is None or self.async_engine.is_draining:
            self.force_exit = True
            super().handle_exit(sig, frame)
            return
        # NOTE: this runs in a signal handler: flip the flags (plain attribute writes)
        # and hand the rest to the event loop, which is safe to wake from here.
        self.async_engine.begin_drain()
        self._loop.call_soon_threadsafe(self._start_drain, signal.Signals(sig).name)

    def _start_drain(self, signal_name: str) -> None:
        logger.info(
            "%s: draining; no new requests, %d in flight get up to %.0f s to finish",
            signal_name,
            self.async_engine.num_in_flight,
            self.drain_timeout_seconds,
        )
        self._drain_task = asyncio.ensure_future(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        try:
            self.num_aborted_at_drain = await self.async_engine.drain(self.drain_timeout_seconds)
            if self.num_aborted_at_drain:
                logger.warning(
                    "drain timeout: aborted %d requests still in flight", self.num_aborted_at_drain
                )
            else:
                logger.info("drained: every in-flight request finished")
        finally:
            self.should_exit = True

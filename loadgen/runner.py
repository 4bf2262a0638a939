"""The open-loop runner: every request goes out at its scheduled time, however slow the
server is, so a slow server shows up as a growing queue and not as a politely slowed
client. Only the in-flight cap can hold a request back, and then it is dropped and
counted, never delayed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx

from loadgen.client import CHAT, COMPLETIONS, request_body, request_headers, send
from loadgen.client_metrics import ClientMetrics
from loadgen.errors import TargetError
from loadgen.record import RequestResult
from loadgen.routing import Router
from loadgen.workload import ScheduledRequest

CANCEL_GRACE_SECONDS = 5.0
# (offset from the start in seconds, what to do then): scenario perturbations.
TimedAction = tuple[float, Callable[[], Awaitable[None]]]


@dataclass
class RunState:
    """What a run has measured so far; complete even when the run was interrupted."""

    results: list[RequestResult] = field(default_factory=list)
    started_at: float = 0.0  # time.time() at the start, for lining up with server events
    duration_seconds: float = 0.0
    interrupted: bool = False
    num_finished: int = 0  # completed, failed or dropped: what a progress bar counts


async def probe(client: httpx.AsyncClient, base_url: str) -> str:
    """The model a server serves, from ``GET /v1/models``; ``TargetError`` when the URL
    cannot be reached or the answer is not an OpenAI model list."""
    url = f"{base_url}/v1/models"
    try:
        reply = await client.get(url, timeout=10)
    except httpx.HTTPError as error:
        raise TargetError(
            f"cannot reach {base_url} ({type(error).__name__}: {error}); is the server "
            "running, and is the URL its root (http://host:port, without /v1)?"
        ) from None
    try:
        models = reply.json()["data"]
        return str(models[0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise TargetError(
            f"{url} answered {reply.status_code} without an OpenAI model list "
            f"({reply.text[:80]!r}); is this an OpenAI-compatible server?"
        ) from None


async def run_schedule(
    urls: Sequence[str],
    schedule: Sequence[ScheduledRequest],
    *,
    router: Router | None = None,
    route: str = COMPLETIONS,
    max_in_flight: int = 256,
    request_timeout_seconds: float = 300.0,
    actions: Sequence[TimedAction] = (),
    state: RunState | None = None,
    on_progress: Callable[[RunState], None] | None = None,
    client_metrics: ClientMetrics | None = None,
) -> RunState:
    """Send ``schedule`` open-loop to ``urls``; returns (and fills ``state``) with one
    result per scheduled request, in schedule order, dropped ones included. With
    ``client_metrics``, each first token the client received is counted there as it comes
    (``loadgen.client_metrics``: a ``/metrics`` a collector scrapes beside the engines')."""
    if route not in (COMPLETIONS, CHAT):
        raise TargetError(f"route must be {COMPLETIONS} or {CHAT}, got {route!r}")
    state = state if state is not None else RunState()
    router = router or Router(urls)
    urls = [u.rstrip("/") for u in urls]
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=max_in_flight)
    timeout = httpx.Timeout(request_timeout_seconds, connect=10)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        models = [await probe(client, url) for url in urls]
        tasks: set[asyncio.Task] = set()
        in_flight = 0

        async def one(request: ScheduledRequest, result: RequestResult, replica: int) -> None:
            nonlocal in_flight
            try:
                body = request_body(request, models[replica], route)
                await send(client, urls[replica], route, body, request_headers(request), result)
            except asyncio.CancelledError:
                result.error = result.error or "interrupted"
                raise
            finally:
                if client_metrics is not None and result.ttft_seconds is not None:
                    client_metrics.observe_ttft(models[replica], result.ttft_seconds)
                in_flight -= 1
                state.num_finished += 1
                router.finished(replica)
                if on_progress:
                    on_progress(state)

        pending = sorted(actions, key=lambda a: a[0])
        start = time.perf_counter()
        state.started_at = time.time()
        try:
            for request in schedule:
                while pending and pending[0][0] <= request.at_seconds:
                    await _sleep_until(start, pending[0][0])
                    await pending.pop(0)[1]()
                await _sleep_until(start, request.at_seconds)
                result = RequestResult(
                    request.index,
                    request.at_seconds,
                    tenant=request.tenant,
                    priority=request.priority,
                    stream=request.stream,
                )
                state.results.append(result)
                if in_flight >= max_in_flight:
                    result.dropped = True
                    result.error = "dropped"
                    state.num_finished += 1
                    continue
                replica = router.pick(request)
                router.started(replica)
                in_flight += 1
                result.replica = urls[replica]
                result.sent_seconds = time.perf_counter() - start
                task = asyncio.create_task(one(request, result, replica))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            for at, action in pending:
                await _sleep_until(start, at)
                await action()
            if tasks:
                await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            state.interrupted = True
            for task in tasks:
                task.cancel()
            if tasks:
                # NOTE: bounded: an interrupted run must still get to write its results.
                await asyncio.wait(tasks, timeout=CANCEL_GRACE_SECONDS)
            raise
        finally:
            state.duration_seconds = time.perf_counter() - start
    return state


async def _sleep_until(start: float, offset_seconds: float) -> None:
    delay = start + offset_seconds - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)

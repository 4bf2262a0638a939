"""An asyncio front end over ``LLMEngine``: a background thread runs the step loop.

Everything that touches the engine — adding and aborting requests, knob changes —
runs in that thread between steps, posted as commands; outputs travel back to each
request's asyncio queue. So an abort (a client that went away) takes effect before
the next step, and a knob change never lands in the middle of one.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import logging
import math
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

from engine.errors import ConfigError, EngineError
from engine.llm_engine import KnobChange, LLMEngine
from engine.outputs import RequestOutput
from engine.request_stream import RequestHandle, RequestStream
from engine.sampling_params import SamplingParams
from engine.step_failures import (
    EngineDeadError,
    FailureStreak,
    StepFailedError,
    fail_batch,
    fail_in_flight,
)

__all__ = [
    "AsyncEngine",
    "EngineDeadError",
    "EngineDrainingError",
    "EngineObserver",
    "QueueFullError",
    "RequestHandle",
    "RequestStream",
    "StepFailedError",
]

logger = logging.getLogger("tailwatch.engine")

# Faults for incident drills; set with the knobs but kept out of EngineConfig.
# ``fail_next_steps``: that many of the next steps (with a batch) raise after the model ran.
FAULTS: tuple[str, ...] = ("step_delay_seconds", "fail_next_steps")
MAX_STEP_DELAY_SECONDS = 10.0
MAX_FAIL_NEXT_STEPS = 1000


class EngineDrainingError(EngineError):
    """The engine is shutting down and admits nothing new."""


class QueueFullError(EngineError):
    """Admission refused: the waiting queue (or the tenant's share) is full."""

    def __init__(self, message: str, reason: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after_seconds = retry_after_seconds


class EngineObserver(Protocol):
    """Hooks called from the engine thread (metrics, tracing)."""

    def on_step(
        self,
        engine: LLMEngine,
        outputs: Sequence[RequestOutput],
        handles: Mapping[str, RequestHandle],
    ) -> None: ...

    def on_knob_changes(self, changes: Sequence[KnobChange]) -> None: ...

    def on_rejected(self, reason: str, tenant: str | None) -> None: ...


class AsyncEngine:
    def __init__(
        self,
        engine: LLMEngine,
        *,
        max_waiting_requests: int | None = None,
        max_concurrency_per_tenant: int | None = None,
        observers: Sequence[EngineObserver] = (),
        max_events: int = 1000,
    ) -> None:
        for name, value in (
            ("max_waiting_requests", max_waiting_requests),
            ("max_concurrency_per_tenant", max_concurrency_per_tenant),
        ):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name}={value!r}: must be a positive integer or unset")
        self.engine = engine
        self.max_waiting_requests = max_waiting_requests
        self.max_concurrency_per_tenant = max_concurrency_per_tenant
        self.observers = list(observers)
        self.step_delay_seconds = 0.0
        self.events: collections.deque[KnobChange] = collections.deque(maxlen=max_events)
        self.is_ready = False
        self.is_draining = False
        self._handles: dict[str, RequestHandle] = {}
        self._tenant_in_flight: collections.Counter[str] = collections.Counter()
        self._commands: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._num_pending_adds = 0
        self._lock = threading.Lock()
        self._num_waiting = 0
        self._ids = itertools.count()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        # Set once the engine is dead (a failure it could not contain); never cleared.
        self.loop_error: BaseException | None = None
        self.warm_up_error: BaseException | None = None
        self.failures = FailureStreak()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)
            self._thread.start()

    async def warm_up(self) -> None:
        """Serve one request end to end, then report ready; a failure is kept in
        ``warm_up_error`` and re-raised. The request is marked ``is_warm_up``, so it counts
        in no client-facing metric and opens no span (as vLLM's warm-up)."""

        def mark(handle: RequestHandle) -> None:
            handle.is_warm_up = True

        try:
            params = SamplingParams(max_tokens=2, temperature=0.0)
            async for _ in self.generate("warm up", params, on_admitted=mark):
                pass
        except Exception as error:
            self.warm_up_error = error
            raise
        self.is_ready = True

    def begin_drain(self) -> None:
        self.is_draining = True
        self.is_ready = False

    async def drain(self, timeout_seconds: float) -> int:
        """Stop admitting; wait for in-flight requests up to a timeout; abort the rest."""
        self.begin_drain()
        deadline = time.monotonic() + timeout_seconds
        while (self._handles or self._num_pending_adds) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if self._thread is None or not self._thread.is_alive():
            return len(self._handles)  # no engine thread to run the abort (not started, or died)
        # NOTE: the abort runs in the engine thread after any add still queued there, so
        # a request admitted just before the drain began is aborted too.
        done: concurrent.futures.Future[int] = concurrent.futures.Future()

        def abort_all() -> None:
            remaining = list(self._handles)
            self._abort(remaining)
            done.set_result(len(remaining))

        self._post(abort_all)
        return await asyncio.wrap_future(done)

    def shutdown(self) -> None:
        self._stopped.set()
        self._commands.put(lambda: None)
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def num_in_flight(self) -> int:
        return len(self._handles)

    # -- requests --------------------------------------------------------------------------

    def submit(
        self,
        prompt: str | list[int],
        params: SamplingParams,
        *,
        request_id: str | None = None,
        tenant: str | None = None,
        priority: int = 0,
        on_admitted: Callable[[RequestHandle], None] | None = None,
    ) -> RequestStream:
        """Admit a request now, or raise: ``RequestError`` for bad input,
        ``QueueFullError`` for a full queue, ``EngineDrainingError`` while draining.

        ``on_admitted`` runs before the engine sees the request (to open its span).
        Iterate the returned stream for outputs; close it (or leave ``with stream:``)
        when done — closing an unfinished stream aborts the request.
        """
        handle, token_ids = self._admit(prompt, params, request_id, tenant, priority)
        stream = RequestStream(self, handle)
        try:
            if on_admitted is not None:
                on_admitted(handle)
            self._post(lambda: self._add(handle, token_ids))
        except BaseException:
            stream.close()
            raise
        return stream

    async def generate(
        self,
        prompt: str | list[int],
        params: SamplingParams,
        **kwargs: Any,
    ) -> AsyncIterator[RequestOutput]:
        """``submit`` and stream the outputs; leaving the loop early aborts the request."""
        with self.submit(prompt, params, **kwargs) as stream:
            async for output in stream:
                yield output

    def _release(self, handle: RequestHandle) -> None:
        """A stream was closed: free the tenant's slot, abort the request if unfinished."""
        tenant = handle.tenant
        if tenant is not None:
            self._tenant_in_flight[tenant] -= 1
            if self._tenant_in_flight[tenant] <= 0:
                del self._tenant_in_flight[tenant]  # tenants come from clients: no growth
        if not handle.is_finished:
            self._post(lambda: self._abort([handle.request_id]))

    def _admit(
        self,
        prompt: str | list[int],
        params: SamplingParams,
        request_id: str | None,
        tenant: str | None,
        priority: int,
    ) -> tuple[RequestHandle, list[int]]:
        if self.is_draining:
            raise EngineDrainingError("the server is draining and admits no new requests")
        if self.loop_error is not None:
            raise EngineDeadError()
        token_ids = self.engine.validate_request(prompt, params)
        queued = self._num_waiting + self._num_pending_adds
        if self.max_waiting_requests is not None and queued >= self.max_waiting_requests:
            self._reject("max_num_queued_reqs", tenant)
            raise QueueFullError(
                f"the waiting queue is full ({queued} requests, max_waiting_requests="
                f"{self.max_waiting_requests}); retry later",
                "max_num_queued_reqs",
                self._retry_after_seconds(),
            )
        cap = self.max_concurrency_per_tenant
        if tenant is not None and cap is not None and self._tenant_in_flight[tenant] >= cap:
            self._reject("tenant_concurrency", tenant)
            raise QueueFullError(
                f"tenant {tenant!r} already has {self._tenant_in_flight[tenant]} requests in "
                f"flight (max_concurrency_per_tenant={cap}); retry later",
                "tenant_concurrency",
                self._retry_after_seconds(),
            )
        if tenant is not None:
            self._tenant_in_flight[tenant] += 1
        with self._lock:
            self._num_pending_adds += 1
        handle = RequestHandle(
            request_id=request_id or f"req-{next(self._ids)}",
            params=params,
            tenant=tenant,
            priority=priority,
            num_prompt_tokens=len(token_ids),
            loop=asyncio.get_running_loop(),
            arrival_time=self.engine.clock(),
            arrival_wall_time=self.engine.wall_clock(),
        )
        return handle, token_ids

    def _reject(self, reason: str, tenant: str | None) -> None:
        for observer in self.observers:
            observer.on_rejected(reason, tenant)

    def _retry_after_seconds(self) -> int:
        # NOTE: a coarse hint: one mean step time per queued request over the batch size,
        # at least a second, as clients only act on whole seconds.
        step = self.engine.last_step.step_seconds or 0.05
        per_request = step * 32 / max(1, self.engine.live_config.max_num_seqs)
        return max(1, math.ceil(per_request * (self._num_waiting + 1)))

    # -- knobs -----------------------------------------------------------------------------

    def knobs(self) -> dict[str, Any]:
        return {
            **self.engine.knobs(),
            "step_delay_seconds": self.step_delay_seconds,
            "fail_next_steps": self.engine.num_steps_to_fail,
        }

    async def update_knobs(self, changes: Mapping[str, Any]) -> list[KnobChange]:
        """Validate and apply knob and fault changes between two steps; all or nothing."""
        future: concurrent.futures.Future[list[KnobChange]] = concurrent.futures.Future()

        def apply() -> None:
            try:
                future.set_result(self._apply_knobs(changes))
            except BaseException as error:
                future.set_exception(error)

        self._post(apply)
        return await asyncio.wrap_future(future)

    def _apply_knobs(self, changes: Mapping[str, Any]) -> list[KnobChange]:
        faults = {k: v for k, v in changes.items() if k in FAULTS}
        delay = faults.get("step_delay_seconds", self.step_delay_seconds)
        if isinstance(delay, bool) or not isinstance(delay, int | float):
            raise ConfigError(f"step_delay_seconds={delay!r}: must be a number of seconds")
        if not 0 <= delay <= MAX_STEP_DELAY_SECONDS:
            raise ConfigError(
                f"step_delay_seconds={delay}: must be between 0 and {MAX_STEP_DELAY_SECONDS}"
            )
        fail_steps = faults.get("fail_next_steps", self.engine.num_steps_to_fail)
        if isinstance(fail_steps, bool) or not isinstance(fail_steps, int):
            raise ConfigError(f"fail_next_steps={fail_steps!r}: must be a whole number of steps")
        if not 0 <= fail_steps <= MAX_FAIL_NEXT_STEPS:
            raise ConfigError(
                f"fail_next_steps={fail_steps}: must be between 0 and {MAX_FAIL_NEXT_STEPS}"
            )
        knob_changes = {k: v for k, v in changes.items() if k not in FAULTS}
        applied = self.engine.update_knobs(knob_changes) if knob_changes else []
        if fail_steps != self.engine.num_steps_to_fail:
            applied.append(
                KnobChange(
                    "fail_next_steps",
                    self.engine.num_steps_to_fail,
                    fail_steps,
                    self.engine.clock(),
                    self.engine.wall_clock(),
                )
            )
            self.engine.num_steps_to_fail = fail_steps
        if float(delay) != self.step_delay_seconds:
            applied.append(
                KnobChange(
                    "step_delay_seconds",
                    self.step_delay_seconds,
                    float(delay),
                    self.engine.clock(),
                    self.engine.wall_clock(),
                )
            )
            self.step_delay_seconds = float(delay)
        self.events.extend(applied)
        for observer in self.observers:
            observer.on_knob_changes(applied)
        return applied

    # -- the engine thread -----------------------------------------------------------------

    def _post(self, command: Callable[[], None]) -> None:
        self._commands.put(command)

    def _add(self, handle: RequestHandle, token_ids: list[int]) -> None:
        with self._lock:
            self._num_pending_adds -= 1
        try:
            self.engine.add_request(
                token_ids,
                handle.params,
                request_id=handle.request_id,
                priority=handle.priority,
                cache_salt=handle.tenant,
                arrival_time=handle.arrival_time,
                arrival_wall_time=handle.arrival_wall_time,
            )
        except EngineError as error:
            handle.loop.call_soon_threadsafe(handle.outputs.put_nowait, error)
            return
        if self.loop_error is not None:  # admitted just before the engine died
            self.engine.abort([handle.request_id])
            handle.loop.call_soon_threadsafe(handle.outputs.put_nowait, EngineDeadError())
            return
        self._handles[handle.request_id] = handle
        self._num_waiting = self.engine.scheduler.stats().num_waiting

    def _abort(self, request_ids: Sequence[str]) -> None:
        live = [r for r in request_ids if r in self._handles]
        if live:
            self._deliver(self.engine.abort(live))

    def _run_commands(self, block: bool) -> None:
        try:
            command = self._commands.get(timeout=0.1) if block else self._commands.get_nowait()
        except queue.Empty:
            return
        while True:
            command()
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return

    def _deliver(self, outputs: Sequence[RequestOutput]) -> None:
        handles = self._handles
        for observer in self.observers:
            observer.on_step(self.engine, outputs, handles)
        for out in outputs:
            handle = handles.get(out.request_id)
            if handle is None:
                continue
            handle.loop.call_soon_threadsafe(handle.outputs.put_nowait, out)
            if out.finished:
                del handles[out.request_id]

    def _run(self) -> None:
        engine = self.engine
        try:
            while not self._stopped.is_set():
                # NOTE: a dead engine still runs commands (drain's abort, late adds), so
                # a drain finishes and every caller gets an answer; it only stops stepping.
                is_idle = self.loop_error is not None or not engine.has_unfinished_requests()
                self._run_commands(block=is_idle)
                if self.loop_error is not None or not engine.has_unfinished_requests():
                    continue
                try:
                    outputs = engine.step()
                    self._num_waiting = engine.scheduler.stats().num_waiting
                    self._deliver(outputs)
                except Exception as error:
                    self._contain(error)
                    continue
                self.failures.record_success()
                if self.step_delay_seconds:
                    time.sleep(self.step_delay_seconds)
        except BaseException as error:  # the loop must never die silently
            self._die(error)
            raise

    def _contain(self, error: Exception) -> None:
        """A step raised: fail the requests of its batch, or the engine if that can't help."""
        is_containable = self.failures.record_failure()
        scheduled = self.engine.scheduled_request_ids
        logger.error(
            "engine step failed (%d in a row); failing its %d requests",
            self.failures.num_failed,
            len(scheduled),
            exc_info=error,
        )
        if not is_containable:
            self._die(error)
            return
        try:
            fail_batch(self.engine, scheduled, self._handles, self.observers)
        except Exception as abort_error:
            logger.error("failing the step's requests raised too", exc_info=abort_error)
            self._die(abort_error)

    def _die(self, error: BaseException) -> None:
        """Mark the engine dead: not live, not ready, admits nothing; fail what is in flight."""
        self.loop_error = error
        self.is_ready = False
        logger.critical("the engine is dead and serves nothing more: %r", error)
        fail_in_flight(self._handles)

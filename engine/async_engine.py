"""An asyncio front end over ``LLMEngine``: a background thread runs the step loop.

Everything that touches the engine — adding and aborting requests, knob changes —
runs in that thread between steps, posted as commands; outputs travel back to each
request's asyncio queue. So an abort (a client that went away) takes effect before
the next step, and a knob change never lands in the middle of one.

The front end composes two parts: ``Admission`` (``engine/admission.py``: the queue
bound and per-tenant caps, with a Retry-After hint) and ``EngineLoop``
(``engine/engine_loop.py``: the engine thread, delivery, failure containment).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from engine.admission import Admission, EngineDrainingError, QueueFullError
from engine.engine_loop import EngineLoop
from engine.live_knobs import (
    apply_knob_changes,
    knobs_in_force,
)
from engine.llm_engine import KnobChange, LLMEngine
from engine.lora.request import LoRARequest
from engine.lora.source import LoRASource
from engine.observer import EngineObserver
from engine.outputs import RequestOutput
from engine.request_stream import RequestHandle, RequestStream
from engine.sampling_params import SamplingParams
from engine.step_failures import EngineDeadError, FailureStreak, StepFailedError

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
        self.engine = engine
        self.observers = list(observers)
        self._admission = Admission(
            engine,
            self.observers,
            max_waiting_requests=max_waiting_requests,
            max_concurrency_per_tenant=max_concurrency_per_tenant,
        )
        self._loop = EngineLoop(engine, self.observers, on_death=self._on_engine_death)
        self.events: collections.deque[KnobChange] = collections.deque(maxlen=max_events)
        self.is_ready = False
        self.is_draining = False
        self._ids = itertools.count()
        self.warm_up_error: BaseException | None = None

    @property
    def max_waiting_requests(self) -> int | None:
        return self._admission.max_waiting_requests

    @property
    def max_concurrency_per_tenant(self) -> int | None:
        return self._admission.max_concurrency_per_tenant

    @property
    def loop_error(self) -> BaseException | None:
        """Set once the engine is dead (a failure it could not contain); never cleared."""
        return self._loop.loop_error

    @loop_error.setter
    def loop_error(self, error: BaseException | None) -> None:
        self._loop.loop_error = error  # for tests that play a dead engine

    @property
    def failures(self) -> FailureStreak:
        return self._loop.failures

    @property
    def step_delay_seconds(self) -> float:
        return self._loop.step_delay_seconds

    def _on_engine_death(self) -> None:  # called in the engine thread
        self.is_ready = False

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._loop.start()

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
        loop = self._loop
        deadline = time.monotonic() + timeout_seconds
        while (loop.handles or loop.num_pending_adds) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if not loop.is_running:
            return len(loop.handles)  # no engine thread to run the abort (not started, or died)
        # NOTE: the abort runs in the engine thread after any add still queued there, so
        # a request admitted just before the drain began is aborted too.
        done: concurrent.futures.Future[int] = concurrent.futures.Future()

        def abort_all() -> None:
            remaining = list(loop.handles)
            loop.abort(remaining)
            done.set_result(len(remaining))

        loop.post(abort_all)
        return await asyncio.wrap_future(done)

    def shutdown(self) -> None:
        self._loop.stop()

    @property
    def num_in_flight(self) -> int:
        return len(self._loop.handles)

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
        lora_request: LoRARequest | None = None,
    ) -> RequestStream:
        """Admit a request now, or raise: ``RequestError`` for bad input,
        ``QueueFullError`` for a full queue, ``EngineDrainingError`` while draining.
        ``lora_request`` (``engine.resolve_lora``) runs it with that adapter.

        ``on_admitted`` runs before the engine sees the request (to open its span).
        Iterate the returned stream for outputs; close it (or leave ``with stream:``)
        when done — closing an unfinished stream aborts the request.
        """
        handle, token_ids = self._admit(prompt, params, request_id, tenant, priority)
        handle.lora_request = lora_request
        stream = RequestStream(handle, release=self._release)
        try:
            if on_admitted is not None:
                on_admitted(handle)
            self._loop.post(lambda: self._loop.add(handle, token_ids))
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
        self._admission.release(handle.tenant)
        if not handle.is_finished:
            self._loop.post(lambda: self._loop.abort([handle.request_id]))

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
        self._admission.admit(
            tenant,
            num_waiting=self._loop.num_waiting,
            num_pending_adds=self._loop.num_pending_adds,
        )
        self._loop.reserve_add()
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

    # -- LoRA adapters ---------------------------------------------------------------------

    async def add_lora(
        self, name: str, source: LoRASource, *, replace: bool = False
    ) -> LoRARequest:
        """Load and serve an adapter, in the engine thread between two steps (its load time
        is spent there, as a cold load inside a step would be); ``ConfigError`` naming what
        is wrong. ``replace`` swaps a served adapter of that name for this one."""

        def add() -> LoRARequest:
            return self.engine.add_lora(name, source, replace=replace)

        return await self._run_in_loop(add)

    async def remove_lora(self, name: str) -> bool:
        """Stop serving an adapter (between steps); False if it is not served."""
        return await self._run_in_loop(lambda: self.engine.remove_lora(name))

    async def _run_in_loop(self, command: Callable[[], Any]) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                result = command()
            except BaseException as error:
                future.set_exception(error)
                return
            self._loop.publish_state()  # NOTE: the metrics see the load now, not next step
            future.set_result(result)

        if not self._loop.is_running:
            run()  # NOTE: before start (or after the loop stopped) nothing else touches it
        else:
            self._loop.post(run)
        return await asyncio.wrap_future(future)

    # -- knobs -----------------------------------------------------------------------------

    def knobs(self) -> dict[str, Any]:
        return knobs_in_force(self.engine, self._loop, self._admission)

    async def update_knobs(self, changes: Mapping[str, Any]) -> list[KnobChange]:
        """Validate and apply knob and fault changes between two steps; all or nothing."""
        future: concurrent.futures.Future[list[KnobChange]] = concurrent.futures.Future()

        def apply() -> None:
            try:
                future.set_result(self._apply_knobs(changes))
            except BaseException as error:
                future.set_exception(error)

        self._loop.post(apply)
        return await asyncio.wrap_future(future)

    def _apply_knobs(self, changes: Mapping[str, Any]) -> list[KnobChange]:
        applied = apply_knob_changes(self.engine, self._loop, self._admission, changes)
        self.events.extend(applied)
        for observer in self.observers:
            observer.on_knob_changes(applied)
        return applied

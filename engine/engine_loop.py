"""The engine thread behind ``AsyncEngine``: posted commands between steps, then a step.

Every change to the engine (an add, an abort, a knob change) is a command posted from
the event loop and run here before the next step, so none lands in the middle of one.
Each step's outputs go to the observers (metrics, tracing), then to the asyncio queue
of the request they belong to. A step that raises is contained by failing its batch
(``engine/step_failures.py``); one that cannot be contained kills the engine.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence

from engine.errors import EngineError
from engine.llm_engine import LLMEngine
from engine.observer import EngineObserver
from engine.outputs import RequestOutput
from engine.request_stream import RequestHandle
from engine.step_failures import EngineDeadError, FailureStreak, fail_batch, fail_in_flight

__all__ = ["EngineLoop", "EngineObserver"]

logger = logging.getLogger("tailwatch.engine")


class EngineLoop:
    """The step loop and the requests it serves; only ``post``, ``reserve_add`` and the
    read-only counts are for the event loop, the rest runs in the engine thread."""

    def __init__(
        self,
        engine: LLMEngine,
        observers: Sequence[EngineObserver],
        on_death: Callable[[], None],
    ) -> None:
        self.engine = engine
        # NOTE: the front end's own list, not a copy: the server adds its observers
        # after the front end is built.
        self.observers = observers
        self._on_death = on_death
        self.step_delay_seconds = 0.0
        self.prefill_seconds_per_token = 0.0
        self.handles: dict[str, RequestHandle] = {}
        # the engine's waiting queue after the last step or add (admission reads it)
        self.num_waiting = 0
        self._num_pending_adds = 0
        self._lock = threading.Lock()
        self._commands: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        # Set once the engine is dead (a failure it could not contain); never cleared.
        self.loop_error: BaseException | None = None
        self.failures = FailureStreak()

    # -- from the event loop ---------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._commands.put(lambda: None)
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def is_running(self) -> bool:
        """Whether the engine thread runs (started, and not died of an uncaught error)."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def num_pending_adds(self) -> int:
        """Admitted requests whose add the engine thread has not run yet."""
        return self._num_pending_adds

    def post(self, command: Callable[[], None]) -> None:
        """Run ``command`` in the engine thread before its next step."""
        self._commands.put(command)

    def reserve_add(self) -> None:
        """Count an admitted request as queued until its posted ``add`` runs."""
        with self._lock:
            self._num_pending_adds += 1

    # -- in the engine thread --------------------------------------------------------------

    def add(self, handle: RequestHandle, token_ids: list[int]) -> None:
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
                lora_request=handle.lora_request,
            )
        except EngineError as error:
            handle.loop.call_soon_threadsafe(handle.outputs.put_nowait, error)
            return
        if self.loop_error is not None:  # admitted just before the engine died
            self.engine.abort([handle.request_id])
            handle.loop.call_soon_threadsafe(handle.outputs.put_nowait, EngineDeadError())
            return
        self.handles[handle.request_id] = handle
        self.num_waiting = self.engine.scheduler.stats().num_waiting

    def abort(self, request_ids: Sequence[str]) -> None:
        live = [r for r in request_ids if r in self.handles]
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

    def publish_state(self) -> None:
        """Let the observers read the engine's state now, with no outputs (after a change
        made between steps, such as an adapter loaded through the API)."""
        self._deliver(())

    def _deliver(self, outputs: Sequence[RequestOutput]) -> None:
        handles = self.handles
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
                    self.num_waiting = engine.scheduler.stats().num_waiting
                    if self.prefill_seconds_per_token and engine.last_step.num_prompt_tokens:
                        # NOTE: before delivery, as a slower prefill would be: the step's
                        # first tokens come this much later too
                        time.sleep(
                            self.prefill_seconds_per_token * engine.last_step.num_prompt_tokens
                        )
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
            fail_batch(self.engine, scheduled, self.handles, self.observers)
        except Exception as abort_error:
            logger.error("failing the step's requests raised too", exc_info=abort_error)
            self._die(abort_error)

    def _die(self, error: BaseException) -> None:
        """Mark the engine dead: not live, not ready, admits nothing; fail what is in flight."""
        self.loop_error = error
        self._on_death()
        logger.critical("the engine is dead and serves nothing more: %r", error)
        fail_in_flight(self.handles)

"""Failure containment for the step loop: fail a failed step's batch, or the engine.

A step that raises (a sampler, kernel or bookkeeping bug) may leave the requests of its
batch half updated, and only those: the front end fails them through the engine's own
abort path (``LLMEngine.fail`` frees their KV blocks and scheduler state), tells each
client, and serves on. When that does not help — ``MAX_CONSECUTIVE_FAILED_STEPS`` failed
steps with none served between them, or failing the batch raising too — the engine is
dead: it admits nothing and its liveness probe fails, so the replica gets restarted.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping, Sequence
from typing import TYPE_CHECKING

from engine.errors import EngineError

if TYPE_CHECKING:
    from engine.llm_engine import LLMEngine
    from engine.observer import EngineObserver
    from engine.request_stream import RequestHandle

__all__ = [
    "MAX_CONSECUTIVE_FAILED_STEPS",
    "EngineDeadError",
    "FailureStreak",
    "StepFailedError",
    "fail_batch",
    "fail_in_flight",
]

# NOTE: a device fault fails every step, so it is caught within a few; not 1 or 2, as
# on an idle replica a few bad requests in a row must not be enough to kill it.
MAX_CONSECUTIVE_FAILED_STEPS = 5
_STEP_FAILED_MESSAGE = (
    "the engine failed while running this request and aborted it; the server log has "
    "the cause; other requests are served, so a retry may succeed"
)
_DEAD_MESSAGE = (
    "the engine failed and stopped serving (see the server log); this replica must be restarted"
)


class StepFailedError(EngineError):
    """A step raised while running this request; the engine aborted it and goes on."""

    def __init__(self, message: str = _STEP_FAILED_MESSAGE) -> None:
        super().__init__(message)


class EngineDeadError(EngineError):
    """The engine failed in a way it could not contain and serves nothing more."""

    def __init__(self, message: str = _DEAD_MESSAGE) -> None:
        super().__init__(message)


class FailureStreak:
    """Failed steps in a row; a served step ends the streak."""

    def __init__(self, limit: int = MAX_CONSECUTIVE_FAILED_STEPS) -> None:
        self.limit = limit
        self.num_failed = 0

    def record_success(self) -> None:
        self.num_failed = 0

    def record_failure(self) -> bool:
        """Count one failed step; True while failing its batch may still contain it."""
        self.num_failed += 1
        return self.num_failed < self.limit


def fail_batch(
    engine: LLMEngine,
    request_ids: Sequence[str],
    handles: MutableMapping[str, RequestHandle],
    observers: Iterable[EngineObserver],
) -> None:
    """Abort a failed step's requests (observers see them finish with no reason: an
    engine error) and hand each client a ``StepFailedError``; raises what the abort or
    an observer raises, which the caller takes as uncontainable."""
    outputs = engine.fail(request_ids)
    for observer in observers:
        observer.on_step(engine, outputs, handles)
    failure = StepFailedError()
    for request_id in request_ids:
        handle = handles.pop(request_id, None)
        if handle is not None:
            handle.loop.call_soon_threadsafe(handle.outputs.put_nowait, failure)


def fail_in_flight(handles: MutableMapping[str, RequestHandle]) -> None:
    """The engine is dead: hand every request in flight an ``EngineDeadError``."""
    failure = EngineDeadError()
    for handle in handles.values():
        handle.loop.call_soon_threadsafe(handle.outputs.put_nowait, failure)
    handles.clear()

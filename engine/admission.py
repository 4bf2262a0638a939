"""Admission control for the async front end: the waiting-queue bound, per-tenant caps.

A request is refused at once, with a ``QueueFullError`` that carries the reason (the
``vllm:admission_rejections_total`` label) and a Retry-After hint in whole seconds,
when the engine's queue — waiting requests plus adds not yet run by the engine
thread — is full, or when its tenant already has its share in flight. The tenant
count is taken here and given back when the request's stream is closed.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.errors import ConfigError, EngineError

if TYPE_CHECKING:
    from engine.llm_engine import LLMEngine
    from engine.observer import EngineObserver

__all__ = ["Admission", "EngineDrainingError", "QueueFullError"]


class EngineDrainingError(EngineError):
    """The engine is shutting down and admits nothing new."""


class QueueFullError(EngineError):
    """Admission refused: the waiting queue (or the tenant's share) is full."""

    def __init__(self, message: str, reason: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after_seconds = retry_after_seconds


class Admission:
    """The admission limits (``None``: unbounded) and the requests each tenant has in flight.

    Runs on the event loop only, so the tenant counts need no lock.
    """

    def __init__(
        self,
        engine: LLMEngine,
        observers: Sequence[EngineObserver],
        *,
        max_waiting_requests: int | None,
        max_concurrency_per_tenant: int | None,
    ) -> None:
        for name, value in (
            ("max_waiting_requests", max_waiting_requests),
            ("max_concurrency_per_tenant", max_concurrency_per_tenant),
        ):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name}={value!r}: must be a positive integer or unset")
        self.engine = engine
        # NOTE: the front end's own list, not a copy: observers added after construction
        # (the server adds its metrics and tracer) must see rejections too.
        self.observers = observers
        self.max_waiting_requests = max_waiting_requests
        self.max_concurrency_per_tenant = max_concurrency_per_tenant
        self._tenant_in_flight: collections.Counter[str] = collections.Counter()

    def admit(self, tenant: str | None, *, num_waiting: int, num_pending_adds: int) -> None:
        """Take a slot for one request or raise ``QueueFullError``; ``num_waiting`` is the
        engine's waiting queue after its last step, ``num_pending_adds`` the admitted
        requests the engine thread has not added yet."""
        queued = num_waiting + num_pending_adds
        if self.max_waiting_requests is not None and queued >= self.max_waiting_requests:
            self._reject("max_num_queued_reqs", tenant)
            raise QueueFullError(
                f"the waiting queue is full ({queued} requests, max_waiting_requests="
                f"{self.max_waiting_requests}); retry later",
                "max_num_queued_reqs",
                self._retry_after_seconds(num_waiting),
            )
        cap = self.max_concurrency_per_tenant
        if tenant is not None and cap is not None and self._tenant_in_flight[tenant] >= cap:
            self._reject("tenant_concurrency", tenant)
            raise QueueFullError(
                f"tenant {tenant!r} already has {self._tenant_in_flight[tenant]} requests in "
                f"flight (max_concurrency_per_tenant={cap}); retry later",
                "tenant_concurrency",
                self._retry_after_seconds(num_waiting),
            )
        if tenant is not None:
            self._tenant_in_flight[tenant] += 1

    def release(self, tenant: str | None) -> None:
        """Give back the slot ``admit`` took for a request of ``tenant``."""
        if tenant is not None:
            self._tenant_in_flight[tenant] -= 1
            if self._tenant_in_flight[tenant] <= 0:
                del self._tenant_in_flight[tenant]  # tenants come from clients: no growth

    def _reject(self, reason: str, tenant: str | None) -> None:
        for observer in self.observers:
            observer.on_rejected(reason, tenant)

    def _retry_after_seconds(self, num_waiting: int) -> int:
        # NOTE: a coarse hint: one mean step time per queued request over the batch size,
        # at least a second, as clients only act on whole seconds.
        step = self.engine.last_step.step_seconds or 0.05
        per_request = step * 32 / max(1, self.engine.live_config.max_num_seqs)
        return max(1, math.ceil(per_request * (num_waiting + 1)))

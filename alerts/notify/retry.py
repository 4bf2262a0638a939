"""The retry policy of the notifiers: capped exponential backoff with full jitter.

After failed attempt ``n`` (0-based) the sender waits ``uniform(0, min(cap, base × 2ⁿ))``
seconds ("full jitter", AWS Architecture Blog, "Exponential Backoff And Jitter"): spreading
retries uniformly keeps many senders that failed together from retrying together. At most
``max_attempts`` requests are made in all, so a notification gives up after a bounded time
(at most ``(max_attempts - 1) × max_delay_seconds`` of waiting plus the requests' timeouts).

NOTE: hand-written rather than a retry library because none is a dependency, and the loop is
ten lines whose sleep and random source the tests inject.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from alerts.errors import NotifierConfigError

#: What an HTTP status means for a retry: retried are 5xx and 429 (the receiver is overloaded
#: or broken, and may recover); any other non-2xx is a refusal that retrying cannot fix.
RETRYABLE_STATUS_CODES = frozenset({429})


def is_retryable_status(status_code: int) -> bool:
    return status_code in RETRYABLE_STATUS_CODES or 500 <= status_code <= 599


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` requests at most (1 = no retry); backoff doubling from
    ``base_delay_seconds``, each wait capped at ``max_delay_seconds``."""

    max_attempts: int = 5
    base_delay_seconds: float = 0.5
    max_delay_seconds: float = 30.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise NotifierConfigError(f"max_attempts must be an integer, not {self.max_attempts!r}")
        if not 1 <= self.max_attempts <= 100:
            raise NotifierConfigError(
                f"max_attempts must be between 1 and 100, not {self.max_attempts!r}"
            )
        for name in ("base_delay_seconds", "max_delay_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise NotifierConfigError(f"{name} must be a number of seconds, not {value!r}")
            if not math.isfinite(value) or value < 0:
                raise NotifierConfigError(f"{name} must be finite and >= 0, not {value!r}")
        if self.max_delay_seconds < self.base_delay_seconds:
            raise NotifierConfigError(
                f"max_delay_seconds ({self.max_delay_seconds!r}) must be >= base_delay_seconds "
                f"({self.base_delay_seconds!r})"
            )

    def ceiling_seconds(self, retry_number: int) -> float:
        """The most a wait after failed attempt ``retry_number`` (0-based) can last."""
        # NOTE: the exponent is clamped so 2**n stays a float far below overflow.
        return min(self.max_delay_seconds, self.base_delay_seconds * 2.0 ** min(retry_number, 64))

    def delay_seconds(self, retry_number: int, random: Callable[[], float]) -> float:
        """The wait after failed attempt ``retry_number``: ``random()`` (in [0, 1)) scales the
        ceiling; a draw outside [0, 1] is clamped (NaN reads as 1) so the cap holds whatever
        the source returns."""
        draw = random()
        fraction = 1.0 if math.isnan(draw) else min(max(draw, 0.0), 1.0)
        return fraction * self.ceiling_seconds(retry_number)

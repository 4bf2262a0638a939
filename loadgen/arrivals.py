"""Arrival processes: when each request is due, fixed before the run starts (open loop).

Gamma arrivals follow ``vllm bench serve --burstiness``: the inter-arrival times are
gamma-distributed with shape ``burstiness`` and mean ``1 / rate``; burstiness 1 is
Poisson, below 1 burstier, above 1 more regular.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

from loadgen.errors import WorkloadError

ArrivalKind = Literal["poisson", "gamma", "constant"]


@dataclass(frozen=True)
class Arrivals:
    kind: ArrivalKind = "poisson"
    rate_per_second: float = 1.0
    burstiness: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("poisson", "gamma", "constant"):
            raise WorkloadError(
                "arrivals.kind", f"must be poisson, gamma or constant, got {self.kind!r}"
            )
        rate = self.rate_per_second
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
            raise WorkloadError("arrivals.rate", f"must be > 0 requests/s, got {rate!r}")
        if not math.isfinite(rate):
            raise WorkloadError("arrivals.rate", f"must be finite, got {rate!r}")
        b = self.burstiness
        if isinstance(b, bool) or not isinstance(b, int | float) or not 0 < b < math.inf:
            raise WorkloadError("arrivals.burstiness", f"must be a finite number > 0, got {b!r}")

    def times(self, duration_seconds: float, rng: random.Random) -> list[float]:
        """Offsets in seconds from the start, ascending, all below ``duration_seconds``.
        The first arrival is at 0 for ``constant`` and after one random gap otherwise."""
        mean_gap = 1.0 / self.rate_per_second
        if self.kind == "constant":
            # by index, not by summing gaps: no rounding drift at the end of the window
            count = math.ceil(duration_seconds * self.rate_per_second - 1e-9)
            return [i * mean_gap for i in range(count)]
        times: list[float] = []
        t = self._gap(mean_gap, rng)
        while t < duration_seconds:
            times.append(t)
            t += self._gap(mean_gap, rng)
        return times

    def _gap(self, mean_gap: float, rng: random.Random) -> float:
        shape = 1.0 if self.kind == "poisson" else self.burstiness
        return rng.gammavariate(shape, mean_gap / shape)

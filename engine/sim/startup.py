"""``StartupTimes``: how long a simulated replica takes to become ready after it starts.

A real replica loads its model (weights from storage, the KV cache allocated) and serves a
warm-up request before its readiness probe passes; its router sends it nothing until then.
The virtual fleet starts a replica cold with these phase times on its virtual clock, so a
scale-out with slow readiness, or a scale from zero, can be drilled: for ``model_load_seconds
+ warm_up_seconds`` the replica is not ready, and requests that reach it wait. Both default
to 0 (ready at once, as every replica was before this existed).

A replica whose warm-up does not cover what its first requests pay for (graphs captured, kernels
compiled or weights paged in on first use) steps slowly once ready: for ``cold_seconds`` after
it is ready each step takes ``cold_step_factor`` times as long. By default it is warm when
ready (0 seconds, a factor of 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

#: NOTE: a start-up longer than an hour is a typo, not a drill.
MAX_STARTUP_SECONDS = 3600.0
#: NOTE: a cold step a hundred times a warm one is a hung replica, not a cold one.
MAX_COLD_STEP_FACTOR = 100.0
STARTUP_KNOBS = ("model_load_seconds", "warm_up_seconds", "cold_seconds", "cold_step_factor")


@dataclass(frozen=True)
class StartupTimes:
    model_load_seconds: float = 0.0
    warm_up_seconds: float = 0.0
    cold_seconds: float = 0.0
    cold_step_factor: float = 1.0

    def __post_init__(self) -> None:
        for knob in STARTUP_KNOBS:
            value = getattr(self, knob)
            low, high, unit = (
                (1.0, MAX_COLD_STEP_FACTOR, "")
                if knob == "cold_step_factor"
                else (0.0, MAX_STARTUP_SECONDS, " seconds")
            )
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not low <= value <= high
            ):
                raise ConfigError(f"{knob}={value!r}: must be between {low:g} and {high:g}{unit}")

    @property
    def ready_seconds(self) -> float:
        """From the process's start to ready."""
        return self.model_load_seconds + self.warm_up_seconds

    @classmethod
    def of(cls, knobs: dict[str, Any]) -> StartupTimes:
        """From a mapping with (some of) ``STARTUP_KNOBS``; other keys are ignored."""
        return cls(**{k: knobs[k] for k in STARTUP_KNOBS if k in knobs})

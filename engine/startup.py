"""How long this engine process took to start, phase by phase, for ``/metrics``.

A replica that scales out serves nothing until it is ready, so the time to ready is part of
every scale-out's latency: ``StartupPhases`` records the process's start (the kernel's
record of it, read as ``prometheus_client``'s ``process_start_time_seconds`` is, or the
moment this module was imported where there is none), then ``model_load`` (process start to
the model loaded and the KV cache allocated: imports, weights, profiling), ``warm_up`` (the
warm-up request, a real forward pass) and ``ready`` (process start to ready), into
``tailwatch:startup_phase_seconds{phase}`` and ``tailwatch:engine_start_time_seconds``.
The wall clock is injectable; the simulator sets configured phases on its virtual clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from prometheus_client.process_collector import ProcessCollector

_IMPORTED_AT = time.time()


class StartupSink(Protocol):
    """Where the phases go (``EngineMetrics``)."""

    def set_start_time(self, unix_seconds: float) -> None: ...

    def set_startup_phase(self, phase: str, seconds: float) -> None: ...


def process_start_time() -> float:
    """Unix time this process started: the kernel's record (Linux ``/proc``), else the time
    the engine's start-up module was imported (imports before it are then not counted)."""
    for family in ProcessCollector(registry=None).collect():
        if family.name == "process_start_time_seconds" and family.samples:
            return min(family.samples[0].value, time.time())
    return _IMPORTED_AT


class StartupPhases:
    """The phases of one process's start, reported to ``sink`` as each ends."""

    def __init__(
        self,
        sink: StartupSink,
        started: float | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.sink = sink
        self.wall_clock = wall_clock
        self.started = process_start_time() if started is None else started
        sink.set_start_time(self.started)

    def model_loaded(self) -> None:
        """The model is loaded and the engine built: ``model_load`` ends now."""
        self.sink.set_startup_phase("model_load", self.wall_clock() - self.started)

    def warmed_up(self, warm_up_seconds: float) -> None:
        """The warm-up request took ``warm_up_seconds``; the engine is ready now."""
        self.sink.set_startup_phase("warm_up", warm_up_seconds)
        self.sink.set_startup_phase("ready", self.wall_clock() - self.started)

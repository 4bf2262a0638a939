"""What ``tailwatch sweep`` runs (:class:`SweepPlan`), validated by the CLI before anything
runs; ``loadgen.lab_sweep`` runs it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loadgen.workload import Workload
from slo import Objectives

#: Per-request figures kept per point, of each of ttft_ms, e2e_ms and itl_ms.
MAX_SAMPLES = 5000


@dataclass(frozen=True)
class SweepPlan:
    """What to sweep, validated by the CLI. ``engine`` (a model: ``sim:...`` or ``tiny``) or
    ``url``; ``engine_knobs``: what every point shares (engine targets only);
    ``workload_options``: the traffic as the CLI took it (stored with the run)."""

    knob: str
    values: tuple[Any, ...]
    rates: tuple[float, ...]
    workload: Workload
    objectives: Objectives
    engine: str | None = None
    url: str | None = None
    repeats: int = 1
    engine_knobs: Mapping[str, Any] = field(default_factory=dict)
    workload_options: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    target_attainment: float = 0.9
    route: str = "/v1/completions"
    max_in_flight: int = 256
    admin_token: str | None = None
    max_samples: int = MAX_SAMPLES

    @property
    def num_planned_points(self) -> int:
        return len(self.values) * len(self.rates) * self.repeats

    @property
    def is_simulated_offline(self) -> bool:
        from engine.sim.target import is_simulated

        return self.engine is not None and is_simulated(self.engine)

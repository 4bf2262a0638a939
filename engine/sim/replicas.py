"""Data parallelism offline: one arrival schedule split round-robin over N independent
simulated engines, each on its own virtual clock (the other side of the seed's Q30,
"TP=2 vs two replicas")."""

from __future__ import annotations

from collections.abc import Sequence

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.sim.offline import Arrival, OfflineRun, RequestResult, run_open_loop


def run_round_robin(
    config: EngineConfig, arrivals: Sequence[Arrival], num_replicas: int
) -> tuple[OfflineRun, ...]:
    """Run ``arrivals`` over ``num_replicas`` engines of ``config``: the i-th arrival (in
    time order) goes to replica ``i % num_replicas``, as a round-robin load balancer
    sends it. The replicas share nothing, so each is one ``run_open_loop``."""
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise ConfigError(f"num_replicas={num_replicas!r}: must be a positive integer")
    schedule = sorted(arrivals, key=lambda a: a.time_seconds)
    return tuple(run_open_loop(config, schedule[i::num_replicas]) for i in range(num_replicas))


def merged_results(runs: Sequence[OfflineRun]) -> tuple[RequestResult, ...]:
    """Every replica's request results, in arrival order."""
    return tuple(sorted((r for run in runs for r in run.results), key=lambda r: r.arrival_time))

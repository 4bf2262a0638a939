"""Data parallelism offline: one arrival schedule over N independent simulated engines,
each on its own virtual clock — split round-robin (the other side of the seed's Q30, "TP=2
vs two replicas") or as an assignment says (``tailwatch replay``'s as-recorded routing:
each request to the replica production sent it to)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.sim.offline import Arrival, OfflineRun, RequestResult, run_open_loop


def _check_count(num_replicas: int) -> None:
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise ConfigError(f"num_replicas={num_replicas!r}: must be a positive integer")


def run_round_robin(
    config: EngineConfig, arrivals: Sequence[Arrival], num_replicas: int
) -> tuple[OfflineRun, ...]:
    """Run ``arrivals`` over ``num_replicas`` engines of ``config``: the i-th arrival (in
    time order) goes to replica ``i % num_replicas``, as a round-robin load balancer
    sends it. The replicas share nothing, so each is one ``run_open_loop``."""
    _check_count(num_replicas)
    schedule = sorted(arrivals, key=lambda a: a.time_seconds)
    replicas = [i % num_replicas for i in range(len(schedule))]
    return run_assigned(config, schedule, replicas, num_replicas)


def run_assigned(
    config: EngineConfig,
    arrivals: Sequence[Arrival],
    replicas: Sequence[int],
    num_replicas: int,
    observers: Sequence[Sequence[object]] = (),
) -> tuple[OfflineRun, ...]:
    """Run ``arrivals`` over ``num_replicas`` engines of ``config``, ``arrivals[i]`` on
    replica ``replicas[i]``; ``observers``, when given, holds each replica's observers (as
    ``run_open_loop`` takes them). A replica given no arrival runs nothing (an empty run)."""
    _check_count(num_replicas)
    if len(replicas) != len(arrivals):
        raise ConfigError(f"replicas: {len(replicas)} for {len(arrivals)} arrivals")
    if observers and len(observers) != num_replicas:
        raise ConfigError(f"observers: {len(observers)} sequences for {num_replicas} replicas")
    groups: list[list[Arrival]] = [[] for _ in range(num_replicas)]
    for arrival, replica in zip(arrivals, replicas, strict=True):
        if isinstance(replica, bool) or not isinstance(replica, int):
            raise ConfigError(f"replica={replica!r}: must be a replica index")
        if not 0 <= replica < num_replicas:
            raise ConfigError(f"replica={replica}: not one of 0..{num_replicas - 1}")
        groups[replica].append(arrival)
    return tuple(
        run_open_loop(config, group, observers=observers[i] if observers else ())
        if group
        else OfflineRun(results=(), num_steps=0, simulated_seconds=0.0)
        for i, group in enumerate(groups)
    )


def merged_results(runs: Sequence[OfflineRun]) -> tuple[RequestResult, ...]:
    """Every replica's request results, in arrival order."""
    return tuple(sorted((r for run in runs for r in run.results), key=lambda r: r.arrival_time))

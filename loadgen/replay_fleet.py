"""How many replicas a replay runs on, and which replica each request goes to.

Production served the window on a fleet: every record names the ``replica`` (the engine
instance, ``service.instance.id`` or ``server.address[:port]``) that served it. Replayed on
one engine, a fleet's window is N times one replica's load; so a replay runs on N replicas:

- ``as-recorded`` (the default): replica ``i`` replays the ``i``-th of the recorded replica
  names (sorted), and each request goes to the replica its record went to, so per-replica
  load and prefix affinity are production's. N is the number of names (1 when no record
  names one). A different N is refused rather than mapped: folding 4 recorded replicas
  onto 3 puts two replicas' load on one, which is no fleet production ran nor one a load
  balancer would make; ``round-robin`` is the way to try another fleet size. A window where
  only some records name a replica is refused too (where the others went is unknown).
- ``round-robin``: the ``i``-th request in arrival order goes to replica ``i % N``, as a
  plain load balancer sends it (groups of a shared prefix scatter over the replicas); N
  defaults to the recorded count.

The assignment is made once, before the run, so every target (simulated, bundled, running
servers) sends each request to the same replica.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from loadgen.errors import WorkloadError
from loadgen.replay_trace import ReplayTrace
from loadgen.workload import ScheduledRequest

AS_RECORDED, ROUND_ROBIN = "as-recorded", "round-robin"
ROUTES = (AS_RECORDED, ROUND_ROBIN)
#: The most replicas a replay runs on: simulated ones (each an engine on its own clock).
MAX_REPLICAS = 1024
#: The most bundled replicas started in this process (each a model and a server thread).
MAX_BUNDLED_REPLICAS = 16
_NAMES_SHOWN = 3


def check_route(route: object, replicas: object, *, url: bool, simulated: bool) -> None:
    """Refuse a route or replica count no window could replay on (``WorkloadError`` on
    ``route`` or ``replicas``); ``replicas`` None: as many as the records name."""
    if route not in ROUTES:
        raise WorkloadError("route", f"must be one of {', '.join(ROUTES)}, got {route!r}")
    if replicas is None:
        return
    if url:
        raise WorkloadError(
            "replicas",
            "a running server is one replica: give --url once per server of the fleet "
            "(repeat it) instead of --replicas",
        )
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise WorkloadError("replicas", f"must be a whole number ≥ 1, got {replicas!r}")
    _check_count("replicas", replicas, simulated=simulated)


def _check_count(field: str, count: int, *, simulated: bool) -> None:
    most = MAX_REPLICAS if simulated else MAX_BUNDLED_REPLICAS
    if count > most:
        where = "simulated" if simulated else "bundled (in this process)"
        raise WorkloadError(field, f"{count} replicas: at most {most} {where} replicas run")


@dataclass(frozen=True)
class Fleet:
    """``num_replicas`` replicas and ``route``; ``assignment[i]`` is the replica of the
    trace's ``i``-th request; ``recorded[j]`` the production replica that replica ``j``
    replays (as-recorded; None where no record named one), empty for round-robin."""

    num_replicas: int
    route: str
    assignment: tuple[int, ...]
    recorded: tuple[str | None, ...]
    recorded_counts: dict[str, int]  # production: requests per named replica
    num_unnamed: int  # replayed records that name no replica

    def schedule(self, schedule: Sequence[ScheduledRequest]) -> list[ScheduledRequest]:
        """``schedule`` (the trace's, in its order) with each request's replica set."""
        return [replace(r, replica=self.assignment[i]) for i, r in enumerate(schedule)]

    def describe(self) -> dict[str, Any]:
        """The fleet for a lab run's ``workload`` (JSON)."""
        return {
            "replicas": self.num_replicas,
            "route": self.route,
            "recorded_replicas": dict(self.recorded_counts),
            "num_records_without_replica": self.num_unnamed,
        }

    def per_replica(
        self, trace: ReplayTrace, cached: Sequence[int | None] | None
    ) -> list[dict[str, Any]]:
        """Each replica's share of the replay (requests, prefix-cache hit tokens where the
        target says) and, as-recorded, of production (the same requests, as recorded)."""
        counts = Counter(self.assignment)
        out = []
        for j in range(self.num_replicas):
            entry: dict[str, Any] = {
                "replica": j,
                "recorded": self.recorded[j] if self.recorded else None,
                "num_requests": counts.get(j, 0),
                "cached_tokens": cached[j] if cached is not None else None,
                "production": None,
            }
            if self.route == AS_RECORDED:
                mine = [r.record for i, r in enumerate(trace.requests) if self.assignment[i] == j]
                known = [r.cached_tokens for r in mine if r.cached_tokens is not None]
                entry["production"] = {
                    "num_requests": len(mine),
                    "cached_tokens": sum(known) if known else None,
                }
            out.append(entry)
        return out


def plan_fleet(
    trace: ReplayTrace,
    route: str,
    replicas: int | None,
    *,
    num_urls: int | None = None,
    simulated: bool = True,
) -> Fleet:
    """The fleet the trace replays on (see the module docstring); ``num_urls``: the running
    servers given (then they are the replicas). A ``WorkloadError`` naming the option when
    the route cannot place the window's requests on that many replicas."""
    names = [r.record.replica for r in trace.requests]
    counts = Counter(name for name in names if name is not None)
    recorded = tuple(sorted(counts))
    unnamed = sum(name is None for name in names)
    default = max(1, len(recorded))
    count = num_urls if num_urls is not None else (replicas or default)
    if route == AS_RECORDED:
        if recorded and unnamed:
            raise WorkloadError(
                "route",
                f"as-recorded: {unnamed} of {len(names)} replayed records name no replica, "
                "so where they went is unknown; use --route round-robin",
            )
        if count != default:
            raise _mismatch(count, recorded, num_urls is not None)
        index = {name: j for j, name in enumerate(recorded)}
        assignment = tuple(index[name] if name is not None else 0 for name in names)
        placed: tuple[str | None, ...] = recorded or (None,)
    else:
        assignment = tuple(i % count for i in range(len(names)))
        placed = ()
    if num_urls is None:
        _check_count("replicas", count, simulated=simulated)
    return Fleet(count, route, assignment, placed, dict(counts), unnamed)


def _mismatch(count: int, recorded: tuple[str, ...], urls: bool) -> WorkloadError:
    shown = ", ".join(recorded[:_NAMES_SHOWN]) + (", …" if len(recorded) > _NAMES_SHOWN else "")
    named = (
        f"the window's records name {len(recorded)} replica{'s' * (len(recorded) != 1)} ({shown})"
        if recorded
        else "the window's records name no replica (one)"
    )
    if urls:
        return WorkloadError(
            "url",
            f"{count} given, but {named}, and --route as-recorded sends each request to the "
            "replica it went to: give --url once per replica, or use --route round-robin",
        )
    return WorkloadError(
        "replicas",
        f"{count} given, but {named}, and --route as-recorded sends each request to the "
        "replica it went to: leave --replicas out, or use --route round-robin",
    )

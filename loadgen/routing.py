"""Which replica gets a request: round-robin, least-outstanding or prefix-affinity, or
(``assigned``, for ``tailwatch replay``) the replica the schedule names for it.

O(replicas) per pick at most; the runner calls ``started``/``finished`` around each
request so least-outstanding sees what is in flight.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Literal

from loadgen.errors import WorkloadError
from loadgen.workload import ScheduledRequest

RoutingPolicy = Literal["round-robin", "least-outstanding", "prefix-affinity"]
POLICIES: tuple[str, ...] = ("round-robin", "least-outstanding", "prefix-affinity")
#: Each request to its ``ScheduledRequest.replica`` (a replay's assignment, made before the
#: run); not one of the user-facing ``POLICIES``, whose schedules name no replica.
ASSIGNED = "assigned"


class Router:
    def __init__(self, urls: Sequence[str], policy: str = "round-robin") -> None:
        if not urls:
            raise WorkloadError("url", "give at least one server URL")
        if policy not in (*POLICIES, ASSIGNED):
            raise WorkloadError("routing", f"must be one of {list(POLICIES)}, got {policy!r}")
        self.urls = tuple(urls)
        self.policy = policy
        self.outstanding = [0] * len(self.urls)
        self._next = 0
        self.active: tuple[int, ...] = tuple(range(len(self.urls)))

    def set_active(self, replicas: Sequence[int]) -> None:
        """Route only to these replica indexes from now on (scale-out / scale-in)."""
        self.active = tuple(replicas)

    def pick(self, request: ScheduledRequest) -> int:
        active = self.active
        if self.policy == ASSIGNED:
            if request.replica is None or request.replica not in active:
                raise WorkloadError(
                    "routing",
                    f"request {request.index} is assigned replica {request.replica!r}, "
                    f"not one of {list(active)}",
                )
            return request.replica
        if self.policy == "round-robin":
            choice = active[self._next % len(active)]
            self._next += 1
            return choice
        if self.policy == "least-outstanding":
            return min(active, key=lambda i: self.outstanding[i])
        # prefix-affinity: requests of one shared-prefix group stick to one replica; the
        # rest go to the least busy one.
        if request.prefix_group is None:
            return min(active, key=lambda i: self.outstanding[i])
        key = f"{request.stream}/{request.prefix_group}".encode()
        return active[zlib.crc32(key) % len(active)]

    def started(self, replica: int) -> None:
        self.outstanding[replica] += 1

    def finished(self, replica: int) -> None:
        self.outstanding[replica] -= 1

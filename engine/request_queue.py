"""Waiting queues: FCFS and priority, both with O(1) or O(log n) add, pop, prepend and remove."""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Iterator
from typing import Protocol

from engine.config import SchedulingPolicy
from engine.request import Request


class RequestQueue(Protocol):
    def add(self, request: Request) -> None: ...
    def prepend(self, request: Request) -> None: ...
    def peek(self) -> Request: ...
    def pop(self) -> Request: ...
    def remove(self, request: Request) -> None: ...
    def __len__(self) -> int: ...
    def __bool__(self) -> bool: ...
    def __iter__(self) -> Iterator[Request]: ...


class FCFSQueue:
    """Arrival order; preempted requests go back to the front."""

    def __init__(self) -> None:
        self._requests: OrderedDict[str, Request] = OrderedDict()

    def add(self, request: Request) -> None:
        self._requests[request.request_id] = request

    def prepend(self, request: Request) -> None:
        self._requests[request.request_id] = request
        self._requests.move_to_end(request.request_id, last=False)

    def peek(self) -> Request:
        return next(iter(self._requests.values()))

    def pop(self) -> Request:
        return self._requests.popitem(last=False)[1]

    def remove(self, request: Request) -> None:
        self._requests.pop(request.request_id, None)

    def __len__(self) -> int:
        return len(self._requests)

    def __bool__(self) -> bool:
        return bool(self._requests)

    def __iter__(self) -> Iterator[Request]:
        return iter(self._requests.values())


class PriorityQueue:
    """Lowest ``priority`` value first (vLLM's convention), then earliest arrival.

    A preempted request re-enters by its own priority and arrival time, which already
    puts it ahead of later arrivals of the same priority. Removal is lazy: removed
    entries are skipped when they reach the top.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, float, int, Request]] = []
        self._live: dict[str, int] = {}
        self._counter = itertools.count()

    def add(self, request: Request) -> None:
        entry = next(self._counter)
        self._live[request.request_id] = entry
        heapq.heappush(self._heap, (request.priority, request.arrival_time, entry, request))

    prepend = add

    def _prune(self) -> None:
        while self._heap:
            _, _, entry, request = self._heap[0]
            if self._live.get(request.request_id) == entry:
                return
            heapq.heappop(self._heap)

    def peek(self) -> Request:
        self._prune()
        if not self._heap:
            raise IndexError("peek from an empty queue")
        return self._heap[0][3]

    def pop(self) -> Request:
        request = self.peek()
        heapq.heappop(self._heap)
        del self._live[request.request_id]
        return request

    def remove(self, request: Request) -> None:
        self._live.pop(request.request_id, None)

    def __len__(self) -> int:
        return len(self._live)

    def __bool__(self) -> bool:
        return bool(self._live)

    def __iter__(self) -> Iterator[Request]:
        live = [e for e in self._heap if self._live.get(e[3].request_id) == e[2]]
        return iter(e[3] for e in sorted(live))


_QUEUES: dict[SchedulingPolicy, type[FCFSQueue] | type[PriorityQueue]] = {
    SchedulingPolicy.FCFS: FCFSQueue,
    SchedulingPolicy.PRIORITY: PriorityQueue,
}


def make_queue(policy: SchedulingPolicy | str) -> FCFSQueue | PriorityQueue:
    """The waiting queue of ``policy``; ``ConfigError`` naming an unknown one (never a
    silent fallback to FCFS)."""
    return _QUEUES[SchedulingPolicy.parse(policy)]()

"""The answers the reader keeps: each step of a query whose data can no longer change.

An evaluation cycle reads the same windows the last one read, shifted by the evaluation
interval: a relative rule's baseline is an hour of one-minute steps, of which one is new each
minute. Answered again, every step costs the server a pass over every bucket series of the
fleet it covers (at 500 replicas, 7,500 series a histogram). A step's answer is kept once its
end is :data:`FINAL_AFTER_SECONDS` in the past, and the next read of the same expression sends
only the steps it does not hold. VictoriaMetrics's own response cache leaves out the last five
minutes the same way (``-search.cacheTimestampOffset``): samples that arrive later than that
(a remote-write backlog, a backfill) are not seen by a step already kept.

The steps must fall on the same times for the answers to be reused: the baseline reads align
their steps to the step grid (``alerts.rules.baseline``), as PromQL's subqueries do.

What is kept is each step's answer as the read uses it (a merged histogram, a value per
target), made once: at 500 replicas a cycle's baselines hold ~200,000 rows, and turning them
over again each cycle (or leaving them for the garbage collector to walk) cost more than a
third of the cycle's CPU.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

#: How old a step's end must be before its answer is kept.
FINAL_AFTER_SECONDS = 300.0
#: The most rows the kept answers were made from, all expressions together (the least
#: recently read expression's steps go first).
ROWS_KEPT = 400_000

Rows = list[tuple[dict[str, str], float]]
Fetch = Callable[[Sequence[float]], dict[int, Rows]]
T = TypeVar("T")


def _key(t: float) -> int:
    """A step's end in milliseconds (Prometheus's resolution), so that times computed by
    different arithmetic meet."""
    return round(t * 1000)


class KeptAnswers:
    """Per expression and use, each final step's answer as used (``None``: no rows)."""

    def __init__(
        self, clock: Callable[[], float], final_after_seconds: float = FINAL_AFTER_SECONDS
    ) -> None:
        self.clock = clock
        self.final_after_seconds = final_after_seconds
        self.rows_kept = ROWS_KEPT
        self._steps: OrderedDict[tuple[str, str], dict[int, tuple[Any, int]]] = OrderedDict()
        self._rows = 0
        self._lock = threading.Lock()  # NOTE: the evaluator reads several rules at once

    def evaluate(
        self,
        expr: str,
        bounds: Sequence[float],
        fetch: Fetch,
        use: Callable[[Rows], T],
        use_name: str,
    ) -> dict[int, T]:
        """``use`` of ``expr``'s rows at each ``bounds[k + 1]`` (steps without rows left
        out), from the steps kept and ``fetch`` of the span of steps that are not: one request,
        from the first step missing to the last. ``use_name`` names ``use`` (what is kept is
        kept per expression and use)."""
        ends = [_key(t) for t in bounds[1:]]
        key = (expr, use_name)
        with self._lock:
            kept = dict(self._steps.get(key, {}))
            if key in self._steps:
                self._steps.move_to_end(key)
        missing = [k for k, t in enumerate(ends) if t not in kept]
        made: dict[int, tuple[Any, int]] = {}
        if missing:
            low, high = missing[0], missing[-1]
            for k, rows in fetch(bounds[low : high + 2]).items():
                made[low + k] = (use(rows) if rows else None, len(rows))
            final = _key(self.clock() - self.final_after_seconds)
            with self._lock:
                steps = self._steps.setdefault(key, {})
                for k in range(low, high + 1):
                    if ends[k] <= final and ends[k] not in steps:
                        steps[ends[k]] = made.get(k, (None, 0))
                        self._rows += max(1, steps[ends[k]][1])
                if not steps:
                    del self._steps[key]
                self._trim()
        out = {}
        for k, t in enumerate(ends):
            answer = made[k][0] if k in made else kept[t][0] if t in kept else None
            if answer is not None:
                out[k] = answer
        return out

    def clear(self) -> None:
        with self._lock:
            self._steps.clear()
            self._rows = 0

    def _trim(self) -> None:
        while self._rows > self.rows_kept and len(self._steps) > 1:
            _, dropped = self._steps.popitem(last=False)
            self._rows -= sum(max(1, n) for _, n in dropped.values())
        if self._rows > self.rows_kept and self._steps:
            (steps,) = self._steps.values()  # NOTE: one expression left: its oldest steps go
            for t in sorted(steps):
                if self._rows <= self.rows_kept:
                    break
                self._rows -= max(1, steps.pop(t)[1])

"""The evaluator's step-series reads, each final step's answer kept across cycles.

A cycle reads the same step series the last one read, on the same step grid: a relative
rule's baseline is an hour of one-minute steps (``alerts.rules.baseline``), a burn-rate rule
the steps of its longest window, up to 3 days of 5-minute steps (``alerts.rules.evaluate``).
On the embedded store every one of those steps is a pass over each selected series' roll-up
rows, a day of them for 64 replicas, every 15 s, although only the newest step can have
changed. :class:`KeptSteps` wraps the evaluator's reader: a step whose end is
:data:`FINAL_AFTER_SECONDS` before the cycle's time is kept once read, and the next read of the
same series asks the reader only for the span of steps it does not hold.

"Final" is judged on the evaluation's own time, not the wall clock, so a drill on a virtual
clock keeps only what its fleet has written. Data written later for a kept step (a backfill of
the past, a scrape more than five minutes late) is not seen by it, as with the Prometheus
reader's own kept answers (``collectors.prometheus.kept``), which keeps them itself: that
reader is not wrapped.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from collectors.store.protocols import MetricsReader
from collectors.store.records import CounterStep, HistogramStep
from collectors.store.step_reads import DEFAULT_STEP_SECONDS
from collectors.store.window_semantics import step_bounds

#: How old a step's end must be, before the cycle's time, for its answer to be kept.
FINAL_AFTER_SECONDS = 300.0
#: The most step answers kept, all series together (a per-target step counts its targets);
#: the least recently read series go first.
ANSWERS_KEPT = 200_000


def _ms(t: float) -> int:
    return round(t * 1000)


class KeptSteps:
    """``reader`` with its ``histogram_series``, ``counter_series`` and
    ``counter_series_by_target`` answered from the kept final steps where it can; every other
    read goes to ``reader`` as it is. :meth:`at` sets the cycle's time."""

    def __init__(
        self,
        reader: MetricsReader,
        final_after_seconds: float = FINAL_AFTER_SECONDS,
        answers_kept: int = ANSWERS_KEPT,
    ) -> None:
        self.reader = reader
        self.final_after_seconds = final_after_seconds
        self.answers_kept = answers_kept
        self.now = -math.inf
        self._kept: OrderedDict[tuple, dict[int, tuple[Any, int]]] = OrderedDict()
        self._count = 0
        self._lock = threading.Lock()  # NOTE: the evaluator may read several rules at once

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)

    def at(self, now: float) -> None:
        """The cycle's time: steps ending :attr:`final_after_seconds` before it are final."""
        self.now = now

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._count = 0

    def histogram_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        **options: Any,
    ) -> list[HistogramStep]:
        answers = self._steps("histogram_series", family, labels, start, end, step_seconds, options)
        return [HistogramStep(t, h) for t, h in answers]

    def counter_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        **options: Any,
    ) -> list[CounterStep]:
        answers = self._steps("counter_series", family, labels, start, end, step_seconds, options)
        return [CounterStep(t, v) for t, v in answers]

    def counter_series_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        **options: Any,
    ) -> dict[str, list[CounterStep]]:
        method = "counter_series_by_target"
        answers = self._steps(method, family, labels, start, end, step_seconds, options)
        targets = sorted({t for _, by_target in answers for t in by_target})
        return {
            target: [CounterStep(t, by_target.get(target)) for t, by_target in answers]
            for target in targets
        }

    def _steps(
        self,
        method: str,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step: float,
        options: dict[str, Any],
    ) -> list[tuple[float, Any]]:
        """``(t, answer)`` per step of ``method``'s read (a by-target step's answer: a dict
        of the targets' values); the kept steps reused, the span of the others read."""
        read = getattr(self.reader, method)
        try:
            bounds = step_bounds(start, end, step)
        except ValueError:
            return _answers(method, read(family, labels, start, end, step, **options))
        ends = [_ms(t) for t in bounds[1:]]
        key = (
            method,
            family,
            tuple(sorted((labels or {}).items())),
            _ms(step),
            tuple(sorted((k, str(v)) for k, v in options.items())),
        )
        with self._lock:
            kept = dict(self._kept.get(key, {}))
            if key in self._kept:
                self._kept.move_to_end(key)
        missing = [k for k, t in enumerate(ends) if t not in kept]
        made: dict[int, tuple[Any, int]] = {}
        if missing:
            low, high = missing[0], missing[-1]
            fetched = _answers(method, read(family, labels, bounds[low], bounds[high + 1], step, **options))  # fmt: skip
            if [_ms(t) for t, _ in fetched] != ends[low : high + 1]:
                # NOTE: a span read on other step times (float arithmetic off the grid): the
                # whole read, nothing kept
                return _answers(method, read(family, labels, start, end, step, **options))
            for k, (_, answer) in enumerate(fetched, start=low):
                made[k] = (answer, len(answer) if isinstance(answer, dict) else 1)
            self._keep(key, ends, low, high, made)
        return [
            (t, made[k][0] if k in made else kept[ends[k]][0]) for k, t in enumerate(bounds[1:])
        ]

    def _keep(
        self, key: tuple, ends: list[int], low: int, high: int, made: dict[int, tuple[Any, int]]
    ) -> None:
        if not math.isfinite(self.now):
            return  # NOTE: no cycle's time yet: nothing is known to be final
        final = _ms(self.now - self.final_after_seconds)
        with self._lock:
            steps = self._kept.setdefault(key, {})
            for k in range(low, high + 1):
                if ends[k] <= final and ends[k] not in steps:
                    steps[ends[k]] = made[k]
                    self._count += max(1, made[k][1])
            if not steps:
                del self._kept[key]
            while self._count > self.answers_kept and self._kept:
                _, dropped = self._kept.popitem(last=False)
                self._count -= sum(max(1, n) for _, n in dropped.values())


def _answers(method: str, result: Any) -> list[tuple[float, Any]]:
    """A step-series read's steps as ``(t, answer)``; by target, each step's answer is the
    dict of the targets' values at it."""
    if method != "counter_series_by_target":
        return [(s.t, s.histogram if isinstance(s, HistogramStep) else s.increase) for s in result]
    times: dict[int, float] = {}
    by_step: dict[int, dict[str, float | None]] = {}
    for target, steps in result.items():
        for s in steps:
            times.setdefault(_ms(s.t), s.t)
            by_step.setdefault(_ms(s.t), {})[target] = s.increase
    return [(times[t], by_step[t]) for t in sorted(times)]


def kept_steps(reader: MetricsReader) -> MetricsReader:
    """``reader`` wrapped in :class:`KeptSteps`, unless it keeps its final answers itself (a
    Prometheus-compatible server's reader) or is wrapped already."""
    if isinstance(reader, KeptSteps) or getattr(reader, "keeps_final_answers", False):
        return reader
    return KeptSteps(reader)  # type: ignore[return-value]

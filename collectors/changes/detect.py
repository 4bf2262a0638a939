"""Changes found in readings over a range ``(start, end]``: pure functions of plain data.

Each function is given the readings from a while before ``start`` (the state before the
range) to ``end`` and returns the changes whose time lies in the range, so a detector that
reads overlapping ranges, or one restarted, finds each change again at the same time (and the
store keeps it once). A change's time is the first reading that showed the new state.

- :func:`label_changes`: an ``*_info`` gauge's series on a target replaced by one whose labels
  differ: one change per label that took another value.
- :func:`counter_increases`: a counter's increase between two readings (a knob changed); a
  series first read inside the range counts its first value when its target was scraped
  before it (a labelled counter appears at its first increment).
- :func:`value_changes` and :func:`counter_resets`: a start time that moved, a counter that
  went down: a target restarted.
- :func:`target_set_changes`: a target whose scrapes began, or stopped, while the other
  targets were scraped ``absent_rounds`` times without it: added or removed.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from collectors import canonical as c
from collectors.canonical import Labels
from slo import Sample

#: Labels that name where a series was read, not what it says.
_WHERE = (c.LABEL_TARGET,)


@dataclass(frozen=True)
class LabelChange:
    """On ``target`` at ``at_seconds``, ``label`` went from ``before`` to ``after`` (``""``:
    the label was absent)."""

    target: str
    at_seconds: float
    label: str
    before: str
    after: str


@dataclass(frozen=True)
class Increase:
    """A counter series of ``target`` rose by ``amount`` at ``at_seconds``."""

    target: str
    at_seconds: float
    labels: Labels
    amount: float


@dataclass(frozen=True)
class ValueChange:
    """A reading of ``target`` that differs from the one before it (a start time, a counter
    that went down)."""

    target: str
    at_seconds: float
    before: float
    after: float


def _target(labels: Labels) -> str:
    return dict(labels).get(c.LABEL_TARGET, "")


def _inside(t: float, start: float, end: float) -> bool:
    return start < t <= end


def _without_where(labels: Labels) -> Labels:
    return tuple((k, v) for k, v in labels if k not in _WHERE)


def _closest(new: Labels, old: Sequence[Labels]) -> Labels:
    """The old label set sharing most (name, value) pairs with ``new`` (ties: the first)."""
    mine = set(new)
    return max(old, key=lambda o: len(mine & set(o)))


def _diff(target: str, t: float, before: Labels, after: Labels) -> list[LabelChange]:
    was, now = dict(before), dict(after)
    return [
        LabelChange(target, t, name, was.get(name, ""), now.get(name, ""))
        for name in sorted(was.keys() | now.keys())
        if was.get(name, "") != now.get(name, "")
    ]


def label_changes(
    readings: Mapping[Labels, Sequence[Sample]], start: float, end: float
) -> list[LabelChange]:
    """The label changes of an info gauge's series (see the module docstring). At each time a
    target's set of series differs from its set at the reading before, each new series is
    paired with the old one that shares most labels, and each label that differs is a change.
    A series that appears or goes with no counterpart (a scrape that missed it, a second
    engine) changes nothing; the gauge's value is not read (vLLM sets some to a time)."""
    present: dict[str, dict[float, set[Labels]]] = {}
    for labels, samples in readings.items():
        by_time = present.setdefault(_target(labels), {})
        for sample in samples:
            by_time.setdefault(float(sample.timestamp_seconds), set()).add(_without_where(labels))
    out: list[LabelChange] = []
    for target, by_time in sorted(present.items()):
        times = sorted(by_time)
        for previous, t in itertools.pairwise(times):
            if not _inside(t, start, end):
                continue
            gone = sorted(by_time[previous] - by_time[t])
            came = sorted(by_time[t] - by_time[previous])
            for new in came:
                if not gone:
                    break
                old = _closest(new, gone)
                gone.remove(old)
                out.extend(_diff(target, t, old, new))
    return out


def _ordered(samples: Sequence[Sample]) -> list[tuple[float, float]]:
    points = sorted((float(t), float(v)) for t, v in samples)
    return [(t, v) for t, v in points if v == v]  # NOTE: a NaN reading is no reading


def counter_increases(
    readings: Mapping[Labels, Sequence[Sample]],
    start: float,
    end: float,
    scraped_before: Callable[[str, float], bool],
) -> list[Increase]:
    """Each counter series' increases at readings in ``(start, end]`` (a reset restarts from
    zero); a series whose first reading is in the range counts it in full when
    ``scraped_before(target, t)`` (its target was scraped before it without it)."""
    out: list[Increase] = []
    for labels, samples in sorted(readings.items()):
        target = _target(labels)
        points = _ordered(samples)
        if points:
            t, first = points[0]
            if first > 0 and _inside(t, start, end) and scraped_before(target, t):
                out.append(Increase(target, t, labels, first))
        for (_, before), (t, value) in itertools.pairwise(points):
            step = value - before if value >= before else value
            if step > 0 and _inside(t, start, end):
                out.append(Increase(target, t, labels, step))
    return out


def value_changes(
    readings: Mapping[Labels, Sequence[Sample]], start: float, end: float
) -> list[ValueChange]:
    """Readings in ``(start, end]`` that differ from the series' reading before (a gauge
    that holds a process's start time moved: a new process)."""
    out = []
    for labels, samples in sorted(readings.items()):
        for (_, before), (t, value) in itertools.pairwise(_ordered(samples)):
            if value != before and _inside(t, start, end):
                out.append(ValueChange(_target(labels), t, before, value))
    return out


def counter_resets(
    readings: Mapping[Labels, Sequence[Sample]], start: float, end: float
) -> list[ValueChange]:
    """Readings in ``(start, end]`` below the series' reading before: its counter restarted
    from zero, so its process did."""
    out = []
    for labels, samples in sorted(readings.items()):
        for (_, before), (t, value) in itertools.pairwise(_ordered(samples)):
            if value < before and _inside(t, start, end):
                out.append(ValueChange(_target(labels), t, before, value))
    return out


@dataclass(frozen=True)
class Presence:
    """``target`` was ``added`` (its first scrape after an absence, at ``at_seconds``) or
    removed (``added`` false: its last scrape before one, at ``at_seconds``)."""

    target: str
    at_seconds: float
    added: bool


def target_set_changes(
    scrapes: Mapping[str, Sequence[float]],
    start: float,
    end: float,
    absent_rounds: int,
    read_from: float,
) -> list[Presence]:
    """Targets added or removed (see the module docstring). ``scrapes``: each target's scrape
    times (failed scrapes included: a target that is down is still there) read from
    ``read_from``. NOTE: absence is counted in the other targets' scrapes, not in seconds, so
    a collector that stalls (no target scraped) removes nothing, at any scrape interval.

    A target is added at a scrape ``t`` in ``(start, end]`` when another target was scraped
    ``absent_rounds`` times since its scrape before (or since ``read_from``) and it was not;
    removed at a scrape ``t`` after which another target was scraped ``absent_rounds`` times
    before it was scraped again, found in the range that holds that ``absent_rounds``-th
    scrape (when the absence became certain)."""
    ordered = {name: sorted(times) for name, times in scrapes.items() if times}
    out: list[Presence] = []
    for target, mine in sorted(ordered.items()):
        others = [times for name, times in ordered.items() if name != target]
        for low, t in [(read_from, mine[0]), *itertools.pairwise(mine)]:
            if _inside(t, start, end) and _most_between(others, low, t) >= absent_rounds:
                out.append(Presence(target, t, True))
        for t, high in [*itertools.pairwise(mine), (mine[-1], math.inf)]:
            known = _certain_at(others, t, high, absent_rounds)
            if known is not None and _inside(known, start, end):
                out.append(Presence(target, t, False))
    return sorted(out, key=lambda p: (p.at_seconds, p.target, p.added))


def _most_between(others: Sequence[Sequence[float]], low: float, high: float) -> int:
    """The most scrapes any of ``others`` (sorted times) had in ``(low, high)``."""
    return max(
        (bisect.bisect_left(times, high) - bisect.bisect_right(times, low) for times in others),
        default=0,
    )


def _certain_at(
    others: Sequence[Sequence[float]], t: float, high: float, rounds: int
) -> float | None:
    """When an absence after a scrape at ``t`` became certain: the earliest time one of
    ``others`` (sorted times) had been scraped ``rounds`` times after ``t`` and before
    ``high`` (the target's next scrape); ``None`` when none had."""
    found = []
    for times in others:
        i = bisect.bisect_right(times, t) + rounds - 1
        if i < len(times) and times[i] < high:
            found.append(times[i])
    return min(found, default=None)

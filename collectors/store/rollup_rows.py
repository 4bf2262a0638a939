"""The 1-minute roll-up rows of one series, built from its raw readings (pure functions).

The minute ``(M, M + 60]`` holds the snapshot pairs whose *later* snapshot falls in it (a
snapshot exactly at ``M + 60`` belongs to that minute and is the baseline of the next); a
series' first snapshot ends no pair. A minute whose pairs span two layouts is stored with
``other_layout_id`` set and no counts: a read that reaches it raises the layout change.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

from collectors.store.raw import MINUTE, RawSnapshot, RawValue, minute_start, pair_increase


@dataclass(slots=True)
class _HistogramMinute:
    layout_id: int
    counts: list[float]
    other_layout_id: int | None = None
    pairs: int = 0
    sum_value: float | None = 0.0


@dataclass(slots=True)
class _SampleMinute:
    first: float
    pairs: int = 0
    increase: float = 0.0
    samples: int = 0
    total: float = 0.0
    low: float = field(init=False)
    high: float = field(init=False)
    last: float = field(init=False)

    def __post_init__(self) -> None:
        self.low = self.high = self.last = self.first


def histogram_minutes(
    sid: int, snaps: list[RawSnapshot], m_first: float, m_last: float
) -> list[dict[str, object]]:
    """``histogram_rollups`` rows of series ``sid`` for the minutes ``m_first..m_last``
    (``snaps`` from the baseline of ``m_first`` to the end of ``m_last``)."""
    minutes: dict[float, _HistogramMinute] = {}
    for prev, cur in itertools.pairwise(snaps):
        if not m_first < cur.timestamp_seconds <= m_last + MINUTE:
            continue
        m = minute_start(cur.timestamp_seconds)
        minute = minutes.get(m)
        if minute is None:
            minute = minutes[m] = _HistogramMinute(prev.layout_id, [0.0] * len(prev.counts))
        minute.pairs += 1
        for layout in (prev.layout_id, cur.layout_id):
            if layout != minute.layout_id and minute.other_layout_id is None:
                minute.other_layout_id = layout
        if minute.other_layout_id is not None:
            continue
        counts, sum_value = pair_increase(prev, cur)
        minute.counts = [x + y for x, y in zip(minute.counts, counts, strict=True)]
        if minute.sum_value is not None:
            minute.sum_value = None if sum_value is None else minute.sum_value + sum_value
    rows = []
    for m, minute in minutes.items():
        counts = minute.counts if minute.other_layout_id is None else []
        rows.append(
            {
                "series_id": sid,
                "start_seconds": m,
                "layout_id": minute.layout_id,
                "other_layout_id": minute.other_layout_id,
                "pairs": minute.pairs,
                "sum_value": minute.sum_value,
                "counts_json": json.dumps(counts),
                "count": counts[-1] if counts else 0.0,
            }
        )
    return rows


def sample_minutes(
    sid: int, values: list[RawValue], m_first: float, m_last: float
) -> list[dict[str, object]]:
    """``sample_rollups`` rows of series ``sid`` for the minutes ``m_first..m_last``: the
    counter increase of the minute's pairs, and its gauge readings' count, last, min, max
    and sum."""
    minutes: dict[float, _SampleMinute] = {}
    previous: float | None = None
    for t, v in values:
        if m_first < t <= m_last + MINUTE:
            m = minute_start(t)
            minute = minutes.get(m)
            if minute is None:
                minute = minutes[m] = _SampleMinute(v)
            minute.samples += 1
            minute.last = v
            minute.low = min(minute.low, v)
            minute.high = max(minute.high, v)
            minute.total += v
            if previous is not None:
                minute.pairs += 1
                minute.increase += v - previous if v >= previous else v
        previous = v
    return [
        {
            "series_id": sid,
            "start_seconds": m,
            "pairs": minute.pairs,
            "increase": minute.increase,
            "samples": minute.samples,
            "last_value": minute.last,
            "min_value": minute.low,
            "max_value": minute.high,
            "sum_value": minute.total,
        }
        for m, minute in minutes.items()
    ]

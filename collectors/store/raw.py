"""Raw readings as the window rule reads them, shared by the window engine and the roll-up
builder: a series' rows from its baseline (the last one at or before a window's start) to
the last one at or before its end, and the reset-corrected increase of one snapshot pair.

The rule everything rests on: a window's increase is the sum, over consecutive snapshot
pairs of a series whose *later* snapshot lies in ``(t0, t1]``, of each pair's reset-corrected
increase. So the roll-up minute ``(M, M + 60]`` holds the pairs whose later snapshot falls in
it, and any window whose edges are minute boundaries is the sum of its minutes.
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from collectors.store.models import HistogramSnapshotRow, ValueSample

MINUTE = 60.0


class RawSnapshot(NamedTuple):
    """One stored histogram snapshot, counts decoded, its layout as an id."""

    timestamp_seconds: float
    layout_id: int
    counts: list[float]
    sum_value: float | None


class RawValue(NamedTuple):
    """One stored counter or gauge reading."""

    timestamp_seconds: float
    value: float


def minute_start(t: float) -> float:
    """Start ``M`` of the roll-up minute ``(M, M + 60]`` that holds ``t``."""
    return math.ceil(t / MINUTE) * MINUTE - MINUTE


def _from_baseline(
    raw: type[HistogramSnapshotRow] | type[ValueSample], *columns: InstrumentedAttribute
) -> Select:
    """Rows of series ``:sid`` from its last one at or before ``:a`` (else from ``:a``) to
    its last one at or before ``:b``, in time order: the raw window rule."""
    sid, a = bindparam("sid"), bindparam("a")
    baseline = (
        select(func.max(raw.timestamp_seconds))
        .where(raw.series_id == sid, raw.timestamp_seconds <= a)
        .scalar_subquery()
    )
    return (
        select(*columns)
        .where(
            raw.series_id == sid,
            raw.timestamp_seconds >= func.coalesce(baseline, a),
            raw.timestamp_seconds <= bindparam("b"),
        )
        .order_by(raw.timestamp_seconds)
    )


# NOTE: statements built once: per series, building and compiling them cost more than running
# them on SQLite.
_SNAPSHOT_ROWS = _from_baseline(
    HistogramSnapshotRow,
    HistogramSnapshotRow.timestamp_seconds,
    HistogramSnapshotRow.layout_id,
    HistogramSnapshotRow.counts_json,
    HistogramSnapshotRow.sum_value,
)
_VALUE_ROWS = _from_baseline(ValueSample, ValueSample.timestamp_seconds, ValueSample.value)


def raw_snapshots(session: Session, sid: int, a: float, b: float) -> list[RawSnapshot]:
    """Snapshots of series ``sid`` from its last one at or before ``a`` (else from ``a``) to
    its last at or before ``b``, in time order."""
    rows = session.connection().execute(_SNAPSHOT_ROWS, {"sid": sid, "a": a, "b": b})
    return [RawSnapshot(t, layout, json.loads(counts), s) for t, layout, counts, s in rows]


def raw_values(session: Session, sid: int, a: float, b: float) -> list[RawValue]:
    """Counter or gauge readings of series ``sid``, with the same rule as
    :func:`raw_snapshots`."""
    rows = session.connection().execute(_VALUE_ROWS, {"sid": sid, "a": a, "b": b})
    return [RawValue(t, v) for t, v in rows]


def pair_increase(prev: RawSnapshot, cur: RawSnapshot) -> tuple[list[float], float | None]:
    """A pair's increase (counts, sum): the difference, or the later snapshot itself after a
    reset (any bucket going down), as ``slo.histogram_increase`` does."""
    # NOTE: unpacked, not read by name: this runs once per stored pair of every raw read.
    _, _, before, before_sum = prev
    _, _, after, after_sum = cur
    is_reset = any(x < y for x, y in zip(after, before, strict=True))
    counts = list(after) if is_reset else [x - y for x, y in zip(after, before, strict=True)]
    if before_sum is None or after_sum is None:
        return counts, None
    return counts, after_sum if is_reset else after_sum - before_sum


def value_increase(before: float, after: float) -> float:
    """A counter pair's increase, reset corrected (a drop means the counter started over)."""
    return after - before if after >= before else after

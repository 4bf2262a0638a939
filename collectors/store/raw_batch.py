"""The raw window rule of :mod:`collectors.store.raw` for many series in one query: per
series, its rows from its baseline (the last one at or before ``a``, else from ``a``) to the
last one at or before ``b``.

NOTE: one ``UNION ALL`` of the per-series statement, not one ``IN`` over the series: each
part keeps its own baseline lookup (one index seek), where a baseline correlated with an
``IN`` would scan every series' history up to ``a``. A window over 16 replicas then costs one
round trip instead of 16; the per-statement overhead, not SQLite, was most of a short raw
read's cost.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Sequence

from sqlalchemy import Select, bindparam, func, select, union_all
from sqlalchemy.orm import Session

from collectors.store.models import HistogramSnapshotRow, ValueSample

#: Series per statement (3 parameters each, far below SQLite's limit of 32 766).
_SERIES_PER_QUERY = 64
_Raw = type[HistogramSnapshotRow] | type[ValueSample]


def snapshot_rows(
    session: Session, ids: Sequence[int], a: float, b: float
) -> dict[int, list[tuple[float, int, str, float | None]]]:
    """Per series of ``ids``: ``(t, layout id, counts JSON, sum)`` by the raw window rule,
    in time order (series without rows are absent)."""
    return _rows(session, HistogramSnapshotRow, ids, a, b)


def value_rows(
    session: Session, ids: Sequence[int], a: float, b: float
) -> dict[int, list[tuple[float, float]]]:
    """Per series of ``ids``: ``(t, value)`` by the raw window rule, in time order."""
    return _rows(session, ValueSample, ids, a, b)


def _rows(session: Session, raw: _Raw, ids: Sequence[int], a: float, b: float) -> dict:
    out: dict[int, list] = {}
    connection = session.connection()
    for first in range(0, len(ids), _SERIES_PER_QUERY):
        chunk = ids[first : first + _SERIES_PER_QUERY]
        params: dict[str, float] = {f"sid{i}": sid for i, sid in enumerate(chunk)}
        params.update(a=a, b=b)
        rows = connection.execute(_statement(raw, len(chunk)), params)
        for sid, group in itertools.groupby(rows, key=operator.itemgetter(0)):
            out.setdefault(sid, []).extend(row[1:] for row in group)
    return out


@functools.cache
def _statement(raw: _Raw, parts: int) -> Select:
    """``parts`` copies of the raw rule, series ``:sid0`` ... ``:sid{parts-1}``, ordered by
    series and time (built once per size: compiling costs more than running it)."""
    if raw is HistogramSnapshotRow:
        columns = (raw.layout_id, raw.counts_json, raw.sum_value)
    else:
        columns = (raw.value,)
    selects = []
    for i in range(parts):
        sid, a = bindparam(f"sid{i}"), bindparam("a")
        baseline = (
            select(func.max(raw.timestamp_seconds))
            .where(raw.series_id == sid, raw.timestamp_seconds <= a)
            .scalar_subquery()
        )
        selects.append(
            select(raw.series_id, raw.timestamp_seconds, *columns).where(
                raw.series_id == sid,
                raw.timestamp_seconds >= func.coalesce(baseline, a),
                raw.timestamp_seconds <= bindparam("b"),
            )
        )
    if parts == 1:
        (only,) = selects
        return only.order_by(raw.timestamp_seconds)
    union = union_all(*selects).subquery()
    return select(union).order_by(union.c.series_id, union.c.timestamp_seconds)

"""The exact step sums of :mod:`collectors.store.step_engine`, vectorised: one roll-up query
for all the selected series, their counts decoded in one JSON call, and numpy over the
``(rows, buckets)`` matrices instead of a Python loop per row and bucket.

Bit-for-bit the figures of the reference loop (``StepEngine(vectorised=False)``): the same
float additions in the same order. Per series, its roll-up minutes in time order, then its
raw pairs interval by interval, each added into its step (``np.add.at`` adds repeated
indices one after the other, in index order); then the series added into the merged steps
in selection order. NOTE: accumulators start at ``-0.0``, the exact identity of float
addition (``-0.0 + x == x`` for every ``x``, ``-0.0`` and NaN included), so "copy the first
part, add the rest" and "add every part to ``-0.0``" give the same bits, and a step a series
does not reach adds ``-0.0``, which changes nothing.

Anything off the common path returns ``None``, and the caller runs the reference loop, which
then raises (or answers) exactly as before: a layout change inside the window, a roll-up
minute that holds one, or selected series with more than one layout.
"""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from collectors.store import raw_batch
from collectors.store.catalog import Catalog
from collectors.store.models import HistogramRollup, SampleRollup
from collectors.store.raw import MINUTE
from slo import ClassicHistogram
from slo.histogram import histograms_from_rows

# NOTE: one query for every selected series (an expanding IN), ordered so that each series'
# rows come together and in time order.
_HISTOGRAM_ROLLUPS = (
    select(
        HistogramRollup.series_id,
        HistogramRollup.start_seconds,
        HistogramRollup.layout_id,
        HistogramRollup.other_layout_id,
        HistogramRollup.counts_json,
        HistogramRollup.sum_value,
    )
    .where(
        HistogramRollup.series_id.in_(bindparam("sids", expanding=True)),
        HistogramRollup.start_seconds >= bindparam("lo"),
        HistogramRollup.start_seconds <= bindparam("hi"),
    )
    .order_by(HistogramRollup.series_id, HistogramRollup.start_seconds)
)
_SAMPLE_ROLLUPS = (
    select(
        SampleRollup.series_id,
        SampleRollup.start_seconds,
        SampleRollup.pairs,
        SampleRollup.increase,
    )
    .where(
        SampleRollup.series_id.in_(bindparam("sids", expanding=True)),
        SampleRollup.start_seconds >= bindparam("lo"),
        SampleRollup.start_seconds <= bindparam("hi"),
    )
    .order_by(SampleRollup.series_id, SampleRollup.start_seconds)
)
#: Series per roll-up query (SQLite allows 32 766 parameters; PostgreSQL more).
_IDS_PER_QUERY = 500


@dataclass
class _Parts:
    """One series' increases in the order they are added: step index, counts, sum (0 where
    none) and whether the sum is missing."""

    steps: list[np.ndarray]
    counts: list[np.ndarray]
    sums: list[np.ndarray]
    no_sum: list[np.ndarray]


def histogram_steps(
    session: Session,
    catalog: Catalog,
    ids: Sequence[int],
    bounds: Sequence[float],
    minutes: Sequence[float],
    intervals: Sequence[tuple[float, float]],
) -> list[ClassicHistogram | None] | None:
    """Step ``k``'s merged increase over ``(bounds[k], bounds[k + 1]]`` of series ``ids``,
    ``minutes`` read from roll-ups and ``intervals`` raw (the step engine's plan); ``None``
    where the reference loop must answer instead (see the module's note)."""
    steps = len(bounds) - 1
    edges = np.asarray(bounds, dtype=float)
    wanted = set(minutes)
    rollups = _histogram_rollups(session, ids, minutes)
    raws = [(a, raw_batch.snapshot_rows(session, ids, a, b)) for a, b in intervals]
    layout: int | None = None
    merged: np.ndarray | None = None
    merged_sum = np.full(steps, -0.0)
    merged_no_sum = np.zeros(steps, dtype=bool)
    present = np.zeros(steps, dtype=bool)
    for sid in ids:
        parts = _Parts([], [], [], [])
        rows = [r for r in rollups.get(sid, ()) if r[0] in wanted]
        if rows:
            if any(r[2] is not None for r in rows):
                return None  # a minute holding a layout change: the reference raises it
            layouts = {r[1] for r in rows}
            if len(layouts) > 1 or (layout is not None and layouts != {layout}):
                return None
            layout = rows[0][1]
            starts = np.fromiter((r[0] for r in rows), dtype=float, count=len(rows))
            parts.steps.append(np.searchsorted(edges, starts + MINUTE, side="left") - 1)
            parts.counts.append(_decode([r[3] for r in rows]))
            _add_sums(parts, [r[4] for r in rows])
        for a, by_series in raws:
            raw = by_series.get(sid, ())
            if len(raw) < 2:
                continue
            layouts = {r[1] for r in raw}
            if len(layouts) > 1 or (layout is not None and layouts != {layout}):
                return None  # a layout change, or layouts that differ: the reference raises
            layout = raw[0][1]
            times = np.fromiter((r[0] for r in raw), dtype=float, count=len(raw))
            snaps = _decode([r[2] for r in raw])
            sums = [r[3] for r in raw]
            later = times[1:] > a
            before, after = snaps[:-1][later], snaps[1:][later]
            # NOTE: pair_increase, row-wise: a reset (any bucket going down) counts the later
            # snapshot itself.
            reset = (after < before).any(axis=1)
            parts.steps.append(np.searchsorted(edges, times[1:][later], side="left") - 1)
            parts.counts.append(np.where(reset[:, None], after, after - before))
            pair_sums: list[float | None] = []
            for i in np.flatnonzero(later).tolist():
                x, y = sums[i], sums[i + 1]
                if x is None or y is None:
                    pair_sums.append(None)
                else:
                    pair_sums.append(y if reset[len(pair_sums)] else y - x)
            _add_sums(parts, pair_sums)
        if not parts.steps:
            continue
        ks = np.concatenate(parts.steps)
        if not len(ks):
            continue
        counts = np.concatenate(parts.counts)
        if merged is None:
            merged = np.full((steps, counts.shape[1]), -0.0)
        elif counts.shape[1] != merged.shape[1]:
            return None
        acc = np.full_like(merged, -0.0)
        acc_sum = np.full(steps, -0.0)
        np.add.at(acc, ks, counts)
        np.add.at(acc_sum, ks, np.concatenate(parts.sums))
        merged += acc
        merged_sum += acc_sum
        merged_no_sum[ks[np.concatenate(parts.no_sum)]] = True
        present[ks] = True
    if merged is None or layout is None:
        return [None] * steps
    upper_bounds = catalog.bounds(session, layout)
    if len(upper_bounds) != merged.shape[1]:
        return None
    out: list[ClassicHistogram | None] = [None] * steps
    chosen = np.flatnonzero(present)
    sums = merged_sum[chosen].tolist()
    no_sum = merged_no_sum[chosen].tolist()
    built = histograms_from_rows(
        upper_bounds,
        merged[chosen].tolist(),
        [None if missing else s for s, missing in zip(sums, no_sum, strict=True)],
    )
    for k, histogram in zip(chosen.tolist(), built, strict=True):
        out[k] = histogram
    return out


def counter_steps(
    session: Session,
    ids: Sequence[int],
    bounds: Sequence[float],
    minutes: Sequence[float],
    intervals: Sequence[tuple[float, float]],
) -> list[float | None]:
    """Step ``k``'s counter increase summed over series ``ids``, as the reference loop adds
    it: every series' roll-up minutes then raw pairs, series after series, into one sum per
    step starting at ``0.0``."""
    steps = len(bounds) - 1
    edges = np.asarray(bounds, dtype=float)
    wanted = set(minutes)
    rollups = _sample_rollups(session, ids, minutes)
    raws = [(a, raw_batch.value_rows(session, ids, a, b)) for a, b in intervals]
    ks: list[np.ndarray] = []
    increases: list[np.ndarray] = []
    for sid in ids:
        rows = [r for r in rollups.get(sid, ()) if r[0] in wanted and r[1] > 0]
        if rows:
            starts = np.fromiter((r[0] for r in rows), dtype=float, count=len(rows))
            ks.append(np.searchsorted(edges, starts + MINUTE, side="left") - 1)
            increases.append(np.fromiter((r[2] for r in rows), dtype=float, count=len(rows)))
        for a, by_series in raws:
            raw = by_series.get(sid, ())
            if len(raw) < 2:
                continue
            times = np.fromiter((r[0] for r in raw), dtype=float, count=len(raw))
            values = np.fromiter((r[1] for r in raw), dtype=float, count=len(raw))
            later = times[1:] > a
            before, after = values[:-1][later], values[1:][later]
            ks.append(np.searchsorted(edges, times[1:][later], side="left") - 1)
            # NOTE: value_increase: a drop means the counter started over.
            increases.append(np.where(after >= before, after - before, after))
    out = np.zeros(steps)
    present = np.zeros(steps, dtype=bool)
    if ks:
        all_ks = np.concatenate(ks)
        np.add.at(out, all_ks, np.concatenate(increases))
        present[all_ks] = True
    totals = out.tolist()
    return [totals[k] if present[k] else None for k in range(steps)]


def _decode(texts: list[str]) -> np.ndarray:
    """The count lists ``texts`` (JSON) as one matrix, decoded by a single JSON call."""
    return np.array(json.loads("[" + ",".join(texts) + "]"), dtype=float, ndmin=2)


def _add_sums(parts: _Parts, sums: list[float | None]) -> None:
    parts.sums.append(np.array([0.0 if s is None else s for s in sums], dtype=float))
    parts.no_sum.append(np.array([s is None for s in sums], dtype=bool))


def _histogram_rollups(
    session: Session, ids: Sequence[int], minutes: Sequence[float]
) -> dict[int, list[tuple]]:
    """Per series, its roll-up rows ``(start, layout, other layout, counts JSON, sum)`` over
    the planned minutes' span, in time order."""
    return _rollup_rows(session, _HISTOGRAM_ROLLUPS, ids, minutes)


def _sample_rollups(
    session: Session, ids: Sequence[int], minutes: Sequence[float]
) -> dict[int, list[tuple]]:
    """Per series, its ``sample_rollups`` rows ``(start, pairs, increase)``, in time order."""
    return _rollup_rows(session, _SAMPLE_ROLLUPS, ids, minutes)


def _rollup_rows(
    session: Session, statement, ids: Sequence[int], minutes: Sequence[float]
) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    if not minutes or not ids:
        return out
    connection = session.connection()
    for chunk_start in range(0, len(ids), _IDS_PER_QUERY):
        chunk = list(ids[chunk_start : chunk_start + _IDS_PER_QUERY])
        # NOTE: iterated, not .all(): SQLAlchemy's all() costs about twice as much per row.
        rows = connection.execute(statement, {"sids": chunk, "lo": minutes[0], "hi": minutes[-1]})
        for sid, group in itertools.groupby(rows, key=operator.itemgetter(0)):
            out.setdefault(sid, []).extend(row[1:] for row in group)
    return out

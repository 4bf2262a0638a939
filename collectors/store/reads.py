"""Plain reads of stored metrics: series, readings, snapshots, scrapes, exemplars and the
rolled-up gauge minutes. Windows and step series are :mod:`collectors.store.windows`.

Everything returned is plain data (``slo`` types, the named tuples of
:mod:`collectors.store.records`); no SQLAlchemy object leaves this module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from collectors.canonical import RAW_PREFIX, Labels
from collectors.store.catalog import Catalog
from collectors.store.codec import decode_labels
from collectors.store.models import (
    ExemplarRow,
    HistogramSnapshotRow,
    SampleRollup,
    Scrape,
    Series,
    Target,
    ValueSample,
)
from collectors.store.records import ScrapeStatus, SeriesInfo, StoredExemplar
from slo import ClassicHistogram, HistogramSnapshot, Sample


@dataclass(frozen=True)
class GaugeMinute:
    """One series' readings in the minute ``(start_seconds, start_seconds + 60]``."""

    start_seconds: float
    samples: int
    last: float
    min: float
    max: float
    avg: float


class MetricReads:
    """Series, readings and scrapes as stored, over the store's sessions."""

    def __init__(self, sessions: sessionmaker[Session], catalog: Catalog) -> None:
        self._sessions = sessions
        self._catalog = catalog

    def series(self, family: str, labels: Mapping[str, str] | None = None) -> list[SeriesInfo]:
        """Series of ``family`` whose labels include every pair in ``labels``. A breakdown
        label (``tenant``) must be named to select series that carry it."""
        with self._sessions() as session:
            return [s.info for s in self._catalog.select(session, family, labels)]

    def raw_family_names(self) -> list[str]:
        """The raw families stored (``raw:`` + a sample name no dialect maps), sorted."""
        query = select(Series.family).where(Series.family.startswith(RAW_PREFIX)).distinct()
        with self._sessions() as session:
            return sorted(session.scalars(query))

    def samples(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[Sample]]:
        """Counter or gauge readings with ``start <= t <= end``, per series, in time order."""
        with self._sessions() as session:
            chosen = self._catalog.select(session, family, labels)
            return {s.info.labels: _values(session, s.series_id, start, end) for s in chosen}

    def snapshots(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[HistogramSnapshot]]:
        """Cumulative histogram snapshots with ``start <= t <= end``, per series, in order."""
        with self._sessions() as session:
            chosen = self._catalog.select(session, family, labels)
            return {
                s.info.labels: self._snapshots(session, s.series_id, start, end) for s in chosen
            }

    def scrapes(
        self, target: str, start: float = -math.inf, end: float = math.inf
    ) -> list[ScrapeStatus]:
        """The stored scrapes of ``target`` with ``start <= t <= end``, oldest first."""
        query = (
            select(Scrape.timestamp_seconds, Scrape.is_up, Scrape.error)
            .join(Target, Target.id == Scrape.target_id)
            .where(Target.name == target)
        )
        # NOTE: infinite edges are left out of the SQL rather than sent as float infinities.
        if start > -math.inf:
            query = query.where(Scrape.timestamp_seconds >= start)
        if end < math.inf:
            query = query.where(Scrape.timestamp_seconds <= end)
        if not start <= end:  # NaN edges or an empty range
            return []
        with self._sessions() as session:
            rows = session.execute(query.order_by(Scrape.timestamp_seconds))
            return [ScrapeStatus(t, up, err) for t, up, err in rows]

    def exemplars(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> list[StoredExemplar]:
        """Exemplars seen in scrapes over [start, end] of the selected series."""
        with self._sessions() as session:
            ids = [s.series_id for s in self._catalog.select(session, family, labels)]
            rows = session.execute(
                select(ExemplarRow.upper_bound, ExemplarRow.value, ExemplarRow.labels_json)
                .join(Scrape, Scrape.id == ExemplarRow.scrape_id)
                .where(
                    ExemplarRow.series_id.in_(ids),
                    Scrape.timestamp_seconds >= start,
                    Scrape.timestamp_seconds <= end,
                )
            )
            return [StoredExemplar(b, v, decode_labels(j)) for b, v, j in rows]

    def gauge_minutes(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[GaugeMinute]]:
        """Per series, the rolled-up minutes ``(M, M + 60]`` with ``start <= M < end``:
        reading count, last, min, max and average. Roll-ups only: minutes not rolled up yet
        are absent (read them with :meth:`samples`)."""
        with self._sessions() as session:
            result = {}
            for sid, info in self._catalog.select(session, family, labels):
                rows = session.execute(
                    select(
                        SampleRollup.start_seconds,
                        SampleRollup.samples,
                        SampleRollup.last_value,
                        SampleRollup.min_value,
                        SampleRollup.max_value,
                        SampleRollup.sum_value,
                    )
                    .where(
                        SampleRollup.series_id == sid,
                        SampleRollup.start_seconds >= start,
                        SampleRollup.start_seconds < end,
                    )
                    .order_by(SampleRollup.start_seconds)
                )
                result[info.labels] = [
                    GaugeMinute(m, n, last, low, high, total / n)
                    for m, n, last, low, high, total in rows
                ]
            return result

    def _snapshots(
        self, session: Session, sid: int, start: float, end: float
    ) -> list[HistogramSnapshot]:
        rows = session.execute(
            select(
                HistogramSnapshotRow.timestamp_seconds,
                HistogramSnapshotRow.layout_id,
                HistogramSnapshotRow.counts_json,
                HistogramSnapshotRow.sum_value,
            )
            .where(
                HistogramSnapshotRow.series_id == sid,
                HistogramSnapshotRow.timestamp_seconds >= start,
                HistogramSnapshotRow.timestamp_seconds <= end,
            )
            .order_by(HistogramSnapshotRow.timestamp_seconds)
        )
        bounds = self._catalog.bounds
        return [
            HistogramSnapshot(
                t, ClassicHistogram(bounds(session, layout_id), tuple(json.loads(counts)), s)
            )
            for t, layout_id, counts, s in rows
        ]


def _values(session: Session, sid: int, start: float, end: float) -> list[Sample]:
    rows = session.execute(
        select(ValueSample.timestamp_seconds, ValueSample.value)
        .where(
            ValueSample.series_id == sid,
            ValueSample.timestamp_seconds >= start,
            ValueSample.timestamp_seconds <= end,
        )
        .order_by(ValueSample.timestamp_seconds)
    )
    return [Sample(t, v) for t, v in rows]

"""The store's repository API: the only way other packages write or read stored metrics.

It returns plain data (``slo`` types, tuples); no SQLAlchemy object leaves this module.
Windows follow ``shared/DESIGN.md``: the distribution over [t0, t1] is the difference of
cumulative snapshots, corrected for resets, summed across the selected series when their
layouts match (``slo.LayoutMismatchError`` otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from collectors import canonical as c
from collectors.canonical import Flag, Labels
from collectors.store.codec import (
    decode_bounds,
    decode_labels,
    encode_bounds,
    encode_labels,
    split_flags,
)
from collectors.store.connection import default_url, make_engine
from collectors.store.models import (
    ExemplarRow,
    HistogramSnapshotRow,
    Layout,
    Scrape,
    Series,
    Target,
    ValueSample,
)
from collectors.store.records import (
    DuplicateSeriesError,
    ScrapeRecord,
    SemanticsMismatchError,
    SeriesInfo,
)
from collectors.store.rollups import RollupsMixin
from collectors.store.schema import upgrade_schema
from collectors.store.traces import TracesMixin
from slo import (
    ClassicHistogram,
    HistogramSnapshot,
    Sample,
    counter_increase,
    histogram_increase,
    merge_histograms,
)

#: ``Series.kind`` of samples no dialect maps.
RAW_KIND = "raw"


class Store(TracesMixin, RollupsMixin):
    """Stored scrapes behind a small API. ``url`` is any SQLAlchemy URL (default
    :func:`default_url`); SQLite runs in WAL mode with foreign keys on. The schema is
    brought to the latest Alembic revision on open."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_url()
        self.engine: Engine = make_engine(self.url)
        upgrade_schema(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._layout_ids: dict[str, int] = {}

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # -- writing ---------------------------------------------------------------------------

    def write_scrape(self, record: ScrapeRecord) -> bool:
        """Store one scrape atomically. Returns ``False`` (and writes nothing) when a scrape of
        the same target at the same timestamp is already stored."""
        # NOTE: a concurrent writer may insert the same scrape, or a shared row (a target, a
        # layout), between our check and our insert; the unique constraints then refuse ours.
        # One retry sees their row and either reuses it or finds the scrape already stored.
        for attempt in range(2):
            with self._sessions() as session:
                try:
                    written = self._write(session, record)
                    session.commit()
                    return written
                except IntegrityError:
                    session.rollback()
                    self._layout_ids.clear()
                    if attempt == 1:
                        raise
                except BaseException:
                    self._layout_ids.clear()  # ids made in the rolled-back transaction are void
                    raise
        raise AssertionError("unreachable")

    def _write(self, session: Session, record: ScrapeRecord) -> bool:
        target = session.scalar(select(Target).where(Target.name == record.target))
        if target is None:
            target = Target(name=record.target, dialect=record.dialect)
            session.add(target)
            session.flush()
        elif record.dialect and target.dialect != record.dialect:
            target.dialect = record.dialect
        existing = session.scalar(
            select(Scrape.id).where(
                Scrape.target_id == target.id,
                Scrape.timestamp_seconds == record.timestamp_seconds,
            )
        )
        if existing is not None:
            return False
        scrape = Scrape(
            target_id=target.id,
            timestamp_seconds=record.timestamp_seconds,
            duration_seconds=record.duration_seconds,
            is_up=record.is_up,
            error=record.error,
        )
        session.add(scrape)
        session.flush()
        series_ids = _SeriesCache(session, target.id)
        ts = record.timestamp_seconds
        rows: list[object] = []
        for s in record.samples:
            sid = series_ids.get(s.family, s.labels, s.kind.value, s.flags, s.source)
            rows.append(ValueSample(series_id=sid, scrape_id=scrape.id, timestamp_seconds=ts, value=s.value))  # fmt: skip
        for r in record.raw:
            # NOTE: raw series have kind "raw"; their declared type is kept as the source.
            sid = series_ids.get(c.RAW_PREFIX + r.name, r.labels, RAW_KIND, (), r.family_type)
            rows.append(ValueSample(series_id=sid, scrape_id=scrape.id, timestamp_seconds=ts, value=r.value))  # fmt: skip
        for h in record.histograms:
            sid = series_ids.get(h.family, h.labels, c.Kind.HISTOGRAM.value, h.flags, h.source)
            rows.append(
                HistogramSnapshotRow(
                    series_id=sid,
                    scrape_id=scrape.id,
                    timestamp_seconds=ts,
                    layout_id=self._layout_id(session, h.upper_bounds),
                    counts_json=json.dumps(list(h.cumulative_counts)),
                    sum_value=h.sum_value,
                    count=h.count,
                )
            )
            rows.extend(
                ExemplarRow(
                    series_id=sid,
                    scrape_id=scrape.id,
                    upper_bound=e.upper_bound,
                    value=e.value,
                    labels_json=encode_labels(e.labels),
                    timestamp_seconds=e.timestamp_seconds,
                )
                for e in h.exemplars
            )
        session.add_all(rows)
        return True

    def _layout_id(self, session: Session, bounds: tuple[float, ...]) -> int:
        text = encode_bounds(bounds)
        if text in self._layout_ids:
            return self._layout_ids[text]
        layout_id = session.scalar(select(Layout.id).where(Layout.bounds_json == text))
        if layout_id is None:
            layout = Layout(bounds_json=text)
            session.add(layout)
            session.flush()
            layout_id = layout.id
        # NOTE: write_scrape clears this cache whenever its transaction rolls back.
        self._layout_ids[text] = layout_id
        return layout_id

    # -- reading ---------------------------------------------------------------------------

    def series(self, family: str, labels: Mapping[str, str] | None = None) -> list[SeriesInfo]:
        """Series of ``family`` whose labels include every pair in ``labels``. A breakdown
        label (``tenant``) must be named to select series that carry it."""
        with self._sessions() as session:
            return [info for _, info in self._select(session, family, labels)]

    def samples(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[Sample]]:
        """Counter or gauge readings with ``start <= t <= end``, per series, in time order."""
        with self._sessions() as session:
            chosen = self._select(session, family, labels)
            return {info.labels: self._values(session, sid, start, end) for sid, info in chosen}

    def snapshots(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[HistogramSnapshot]]:
        """Cumulative histogram snapshots with ``start <= t <= end``, per series, in order."""
        with self._sessions() as session:
            chosen = self._select(session, family, labels)
            return {info.labels: self._snapshots(session, sid, start, end) for sid, info in chosen}

    def histogram_window(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> ClassicHistogram | None:
        """The distribution observed over [start, end] across the selected series.

        Per series: the increase from its last snapshot at or before ``start`` (or its first
        one inside the window) to its last one at or before ``end``, resets corrected
        (``slo.histogram_increase``); then the series are added (``slo.merge_histograms``).
        No extrapolation: align ``start``/``end`` with scrapes for exact figures.
        ``None`` when no series has two snapshots in that span. Raises
        ``slo.LayoutMismatchError`` when layouts differ (within a series or across series) and
        :class:`SemanticsMismatchError` when the series' semantic flags differ.
        """
        with self._sessions() as session:
            chosen = self._select(session, family, labels)
            _require_same_flags(family, [info for _, info in chosen])
            increases = []
            for sid, _ in chosen:
                baseline = _baseline_time(session, HistogramSnapshotRow, sid, start)
                delta = histogram_increase(self._snapshots(session, sid, baseline, end))
                if delta is not None:
                    increases.append(delta)
        return merge_histograms(increases) if increases else None

    def counter_window(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> float | None:
        """A counter's increase over [start, end] summed across the selected series, resets
        corrected, with the same window rule as :meth:`histogram_window`."""
        with self._sessions() as session:
            chosen = self._select(session, family, labels)
            _require_same_flags(family, [info for _, info in chosen])
            total, found = 0.0, False
            for sid, _ in chosen:
                baseline = _baseline_time(session, ValueSample, sid, start)
                values = [s.value for s in self._values(session, sid, baseline, end)]
                if len(values) >= 2:
                    total += counter_increase(values)
                    found = True
        return total if found else None

    def scrapes(self, target: str) -> list[tuple[float, bool, str]]:
        """``(timestamp_seconds, is_up, error)`` of every stored scrape of ``target``."""
        with self._sessions() as session:
            rows = session.execute(
                select(Scrape.timestamp_seconds, Scrape.is_up, Scrape.error)
                .join(Target, Target.id == Scrape.target_id)
                .where(Target.name == target)
                .order_by(Scrape.timestamp_seconds)
            )
            return [(t, up, err) for t, up, err in rows]

    def exemplars(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> list[tuple[float, float, Labels]]:
        """``(upper_bound, value, labels)`` of exemplars seen in scrapes over [start, end]."""
        with self._sessions() as session:
            ids = [sid for sid, _ in self._select(session, family, labels)]
            rows = session.execute(
                select(ExemplarRow.upper_bound, ExemplarRow.value, ExemplarRow.labels_json)
                .join(Scrape, Scrape.id == ExemplarRow.scrape_id)
                .where(
                    ExemplarRow.series_id.in_(ids),
                    Scrape.timestamp_seconds >= start,
                    Scrape.timestamp_seconds <= end,
                )
            )
            return [(b, v, decode_labels(j)) for b, v, j in rows]

    def _select(
        self, session: Session, family: str, labels: Mapping[str, str] | None
    ) -> list[tuple[int, SeriesInfo]]:
        wanted = dict(labels or {})
        rows = session.execute(
            select(Series.id, Series.labels_json, Series.kind, Series.flags).where(
                Series.family == family
            )
        )
        chosen = []
        for sid, labels_json, kind, flags in rows:
            have = dict(decode_labels(labels_json))
            if any(have.get(k) != v for k, v in wanted.items()):
                continue
            if any(k in have and k not in wanted for k in c.BREAKDOWN_LABELS):
                continue
            info = SeriesInfo(family, tuple(sorted(have.items())), kind, split_flags(flags))
            chosen.append((sid, info))
        return chosen

    def _values(self, session: Session, sid: int, start: float, end: float) -> list[Sample]:
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

    def _snapshots(
        self, session: Session, sid: int, start: float, end: float
    ) -> list[HistogramSnapshot]:
        rows = session.execute(
            select(
                HistogramSnapshotRow.timestamp_seconds,
                Layout.bounds_json,
                HistogramSnapshotRow.counts_json,
                HistogramSnapshotRow.sum_value,
            )
            .join(Layout, Layout.id == HistogramSnapshotRow.layout_id)
            .where(
                HistogramSnapshotRow.series_id == sid,
                HistogramSnapshotRow.timestamp_seconds >= start,
                HistogramSnapshotRow.timestamp_seconds <= end,
            )
            .order_by(HistogramSnapshotRow.timestamp_seconds)
        )
        return [
            HistogramSnapshot(
                t,
                ClassicHistogram(decode_bounds(bounds), tuple(json.loads(counts)), sum_value),
            )
            for t, bounds, counts, sum_value in rows
        ]


class _SeriesCache:
    """Series ids of one write, created on first use; each series may appear once."""

    def __init__(self, session: Session, target_id: int) -> None:
        self.session = session
        self.target_id = target_id
        self.ids: dict[tuple[str, str, str], int] = {}

    def get(
        self, family: str, labels: Labels, kind: str, flags: Iterable[Flag], source: str
    ) -> int:
        labels_json = encode_labels(labels)
        flags_text = ",".join(sorted(f.value for f in flags if f in c.SEMANTIC_FLAGS))
        key = (family, labels_json, flags_text)
        if key in self.ids:
            raise DuplicateSeriesError(
                f"scrape holds {family} {dict(labels)} twice; a dialect mapped two source "
                "series onto one canonical series: give them distinct labels or keep one raw"
            )
        sid = self.session.scalar(
            select(Series.id).where(
                Series.family == family,
                Series.labels_json == labels_json,
                Series.flags == flags_text,
            )
        )
        if sid is None:
            series = Series(
                target_id=self.target_id,
                family=family,
                kind=kind,
                labels_json=labels_json,
                flags=flags_text,
                source=source,
            )
            self.session.add(series)
            self.session.flush()
            sid = series.id
        self.ids[key] = sid
        return sid


def _baseline_time(session: Session, table: type, sid: int, start: float) -> float:
    """The last reading at or before ``start`` (the state at the window's start), else
    ``start`` itself."""
    latest = session.scalar(
        select(table.timestamp_seconds)
        .where(table.series_id == sid, table.timestamp_seconds <= start)
        .order_by(table.timestamp_seconds.desc())
        .limit(1)
    )
    return start if latest is None else latest


def _require_same_flags(family: str, infos: list[SeriesInfo]) -> None:
    kinds = {info.flags for info in infos}
    if len(kinds) > 1:
        described = sorted(",".join(sorted(f)) or "(none)" for f in kinds)
        raise SemanticsMismatchError(
            f"series of {family} selected with different semantic flags {described}; "
            "narrow the label selector (e.g. by target) so that one meaning is merged"
        )

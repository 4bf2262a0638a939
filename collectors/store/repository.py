"""The store's repository API: the only way other packages write or read stored metrics.

It returns plain data (``slo`` types, tuples); no SQLAlchemy object leaves this module.
Windows follow ``shared/DESIGN.md``: the distribution over [t0, t1] is the difference of
cumulative snapshots, corrected for resets, summed across the selected series when their
layouts match (``slo.LayoutMismatchError`` otherwise).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping

from sqlalchemy import Connection, Engine, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from collectors import canonical as c
from collectors.canonical import Flag, Labels
from collectors.store.codec import (
    decode_labels,
    digest,
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
from collectors.store.windows import WindowSemantics, parse_semantics, require_finite_edges
from slo import (
    ClassicHistogram,
    HistogramSnapshot,
    Sample,
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
        # NOTE: ids of committed rows, so that a write looks up only what it has not seen.
        self._target_ids: dict[str, tuple[int, str]] = {}  # name -> (id, dialect)
        self._series_ids: dict[_SeriesKey, int] = {}
        self._layout_ids: dict[tuple[float, ...], int] = {}
        self._identities: dict[tuple[str, Labels, frozenset[Flag]], _SeriesKey] = {}
        self._write_lock = threading.Lock()

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # -- writing ---------------------------------------------------------------------------

    def write_scrape(self, record: ScrapeRecord) -> bool:
        """Store one scrape atomically. Returns ``False`` (and writes nothing) when a scrape of
        the same target at the same timestamp is already stored."""
        return self.write_scrapes([record])[0]

    def write_scrapes(self, records: Iterable[ScrapeRecord]) -> list[bool]:
        """Store a batch of scrapes in one transaction. ``result[i]`` is ``False`` when
        ``records[i]`` was already stored (or came earlier in the batch): a scrape is stored
        once per target and timestamp, however often it is written. Raises
        :class:`DuplicateSeriesError`, writing nothing, when any record holds a series twice."""
        prepared = [self._prepare(record) for record in records]
        if not prepared:
            return []
        # NOTE: a concurrent writer may insert the same scrape, or a shared row (a target, a
        # series, a layout), between our check and our insert; the unique constraints then
        # refuse ours. One retry sees their rows and reuses them or finds the scrape stored.
        with self._write_lock:
            for attempt in range(2):
                fresh = _NewIds()
                try:
                    with self.engine.begin() as connection:
                        written = self._write_batch(connection, prepared, fresh)
                except IntegrityError:
                    self._forget_ids()  # a cached id may name a row deleted since
                    if attempt == 1:
                        raise
                    continue
                # NOTE: ids join the caches only once their transaction committed; those of a
                # rolled-back transaction never do.
                self._remember_ids(fresh)
                return written
        raise AssertionError("unreachable")

    def _forget_ids(self) -> None:
        self._target_ids.clear()
        self._series_ids.clear()
        self._layout_ids.clear()

    def _remember_ids(self, fresh: _NewIds) -> None:
        for cache, new in (
            (self._target_ids, fresh.targets),
            (self._series_ids, fresh.series),
            (self._layout_ids, fresh.layouts),
        ):
            if len(cache) + len(new) > _MAX_CACHED_IDS:  # label churn: start over, stay bounded
                cache.clear()
            cache.update(new)

    def _identity(self, family: str, labels: Labels, flags: frozenset[Flag]) -> _SeriesKey:
        """The stored identity of a series: family, canonical label JSON, semantic flags."""
        key = (family, labels, flags)
        identity = self._identities.get(key)
        if identity is None:
            semantic = ",".join(sorted(f.value for f in flags if f in c.SEMANTIC_FLAGS))
            identity = (family, encode_labels(labels), semantic)
            if len(self._identities) >= _MAX_CACHED_IDS:
                self._identities.clear()
            self._identities[key] = identity
        return identity

    def _prepare(self, record: ScrapeRecord) -> _Prepared:
        """The record's series identities, in the order samples, raw, histograms; refuses a
        record that holds one series twice."""
        identity = self._identity
        keys = [identity(s.family, s.labels, s.flags) for s in record.samples]
        keys += [identity(c.RAW_PREFIX + r.name, r.labels, _NO_FLAGS) for r in record.raw]
        keys += [identity(h.family, h.labels, h.flags) for h in record.histograms]
        if len(set(keys)) != len(keys):
            seen: set[_SeriesKey] = set()
            family, labels_json, _ = next(k for k in keys if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise DuplicateSeriesError(
                f"scrape holds {family} {dict(decode_labels(labels_json))} twice; a dialect "
                "mapped two source series onto one canonical series: give them distinct labels "
                "or keep one raw"
            )
        return record, keys

    def _write_batch(
        self, connection: Connection, prepared: list[_Prepared], fresh: _NewIds
    ) -> list[bool]:
        target_ids = self._resolve_targets(connection, [record for record, _ in prepared], fresh)
        # -- which scrapes are new: not stored, and not earlier in this batch
        wanted = {(target_ids[r.target], r.timestamp_seconds) for r, _ in prepared}
        stored: set[tuple[int, float]] = set()
        for chunk in _chunks(sorted(wanted)):
            rows = connection.execute(
                select(Scrape.target_id, Scrape.timestamp_seconds).where(
                    Scrape.target_id.in_({tid for tid, _ in chunk}),
                    Scrape.timestamp_seconds.in_({ts for _, ts in chunk}),
                )
            )
            stored.update((tid, ts) for tid, ts in rows)
        written: list[bool] = []
        todo: list[tuple[int, _Prepared]] = []
        for item in prepared:
            record = item[0]
            identity = (target_ids[record.target], record.timestamp_seconds)
            is_new = identity not in stored
            stored.add(identity)
            written.append(is_new)
            if is_new:
                todo.append((identity[0], item))
        if not todo:
            return written
        scrape_ids = connection.execute(
            insert(Scrape).returning(Scrape.id, sort_by_parameter_order=True),
            [
                {
                    "target_id": tid,
                    "timestamp_seconds": r.timestamp_seconds,
                    "duration_seconds": r.duration_seconds,
                    "is_up": r.is_up,
                    "error": r.error.replace("\x00", "\ufffd"),  # PostgreSQL text holds no NUL
                }
                for tid, (r, _) in todo
            ],
        ).scalars().all()  # fmt: skip
        series_ids = self._resolve_series(connection, todo, fresh)
        layout_ids = self._resolve_layouts(
            connection, {h.upper_bounds for _, (r, _) in todo for h in r.histograms}, fresh
        )
        values: list[tuple[object, ...]] = []
        snapshots: list[tuple[object, ...]] = []
        exemplars: list[tuple[object, ...]] = []
        for scrape_id, (_, (record, keys)) in zip(scrape_ids, todo, strict=True):
            ts = record.timestamp_seconds
            sids = [series_ids[k] for k in keys]
            num_values = len(record.samples) + len(record.raw)
            # NOTE: a NaN reading is no reading: SQLite turns NaN into NULL (refused by the
            # NOT NULL columns), and a NaN would poison every window over the series anyway.
            values.extend(
                (sid, scrape_id, ts, item.value)
                for sid, item in zip(sids[:num_values], (*record.samples, *record.raw), strict=True)
                if item.value == item.value
            )
            for sid, h in zip(sids[num_values:], record.histograms, strict=True):
                if h.count != h.count or any(n != n for n in h.cumulative_counts):
                    continue
                sum_value = None if h.sum_value != h.sum_value else h.sum_value
                layout_id = layout_ids[h.upper_bounds]
                counts = json.dumps(h.cumulative_counts)
                snapshots.append((sid, scrape_id, ts, layout_id, counts, sum_value, h.count))
                exemplars.extend(
                    (
                        sid,
                        scrape_id,
                        e.upper_bound,
                        e.value,
                        encode_labels(e.labels),
                        e.timestamp_seconds,
                    )
                    for e in h.exemplars
                )
        # NOTE: the bulk rows go to the driver's executemany as plain tuples: building them
        # through Core costs more CPU than the database spends storing them.
        for table, columns, rows in (
            (ValueSample, _VALUE_COLUMNS, values),
            (HistogramSnapshotRow, _SNAPSHOT_COLUMNS, snapshots),
            (ExemplarRow, _EXEMPLAR_COLUMNS, exemplars),
        ):
            if rows:
                connection.exec_driver_sql(_insert_sql(connection, table, columns), rows)
        return written

    def _resolve_targets(
        self, connection: Connection, records: list[ScrapeRecord], fresh: _NewIds
    ) -> dict[str, int]:
        """Target ids by name, creating targets on first sight; a record's non-empty dialect
        becomes its target's (the last one in the batch wins)."""
        dialects: dict[str, str] = {}
        for record in records:
            if record.dialect or record.target not in dialects:
                dialects[record.target] = record.dialect
        known = {n: self._target_ids[n] for n in dialects if n in self._target_ids}
        missing = sorted(set(dialects) - set(known))
        for chunk in _chunks(missing):
            rows = connection.execute(
                select(Target.name, Target.id, Target.dialect).where(Target.name.in_(chunk))
            )
            known.update((name, (tid, dialect)) for name, tid, dialect in rows)
        new = [n for n in missing if n not in known]
        if new:
            ids = connection.execute(
                insert(Target).returning(Target.id, sort_by_parameter_order=True),
                [{"name": n, "dialect": dialects[n]} for n in new],
            ).scalars().all()  # fmt: skip
            known.update((n, (tid, dialects[n])) for n, tid in zip(new, ids, strict=True))
        for name, dialect in dialects.items():
            tid, stored_dialect = known[name]
            if dialect and dialect != stored_dialect:
                connection.execute(update(Target).where(Target.id == tid).values(dialect=dialect))
                known[name] = (tid, dialect)
        fresh.targets.update(known)
        return {name: tid for name, (tid, _) in known.items()}

    def _resolve_series(
        self, connection: Connection, todo: list[tuple[int, _Prepared]], fresh: _NewIds
    ) -> dict[_SeriesKey, int]:
        """Series ids of every key in ``todo``, creating series on first sight (owned by the
        target of the first scrape that holds them)."""
        ids: dict[_SeriesKey, int] = {}
        pending: dict[_SeriesKey, dict[str, object]] = {}
        cache = self._series_ids
        for tid, (record, keys) in todo:
            kinds = [s.kind.value for s in record.samples]
            kinds += [RAW_KIND] * len(record.raw)
            kinds += [c.Kind.HISTOGRAM.value] * len(record.histograms)
            sources = [s.source for s in record.samples]
            sources += [r.family_type for r in record.raw]
            sources += [h.source for h in record.histograms]
            for key, kind, source in zip(keys, kinds, sources, strict=True):
                if key in ids or key in pending:
                    continue
                sid = cache.get(key)
                if sid is not None:
                    ids[key] = sid
                    continue
                family, labels_json, flags = key
                pending[key] = {
                    "target_id": tid,
                    "family": family,
                    "kind": kind,
                    "labels_json": labels_json,
                    "labels_hash": digest(labels_json),
                    "flags": flags,
                    "source": source,
                }
        if pending:
            for chunk in _chunks(sorted({row["labels_hash"] for row in pending.values()})):
                rows = connection.execute(
                    select(Series.id, Series.family, Series.labels_json, Series.flags).where(
                        Series.labels_hash.in_(chunk)
                    )
                )
                for sid, family, labels_json, flags in rows:
                    if pending.pop((family, labels_json, flags), None) is not None:
                        ids[(family, labels_json, flags)] = sid
        if pending:
            new_ids = connection.execute(
                insert(Series).returning(Series.id, sort_by_parameter_order=True),
                list(pending.values()),
            ).scalars().all()  # fmt: skip
            ids.update(zip(pending, new_ids, strict=True))
        fresh.series.update(ids)
        return ids

    def _resolve_layouts(
        self, connection: Connection, layouts: set[tuple[float, ...]], fresh: _NewIds
    ) -> dict[tuple[float, ...], int]:
        """Layout ids of the given bucket bounds, creating layouts on first sight."""
        ids = {b: self._layout_ids[b] for b in layouts if b in self._layout_ids}
        texts = {b: encode_bounds(b) for b in layouts if b not in ids}
        by_hash = {digest(text): b for b, text in texts.items()}
        for chunk in _chunks(sorted(by_hash)):
            rows = connection.execute(
                select(Layout.id, Layout.bounds_hash).where(Layout.bounds_hash.in_(chunk))
            )
            for lid, bounds_hash in rows:
                ids[by_hash.pop(bounds_hash)] = lid
        if by_hash:
            hashes = sorted(by_hash)
            new_ids = connection.execute(
                insert(Layout).returning(Layout.id, sort_by_parameter_order=True),
                [{"bounds_json": texts[by_hash[h]], "bounds_hash": h} for h in hashes],
            ).scalars().all()  # fmt: skip
            ids.update((by_hash[h], lid) for h, lid in zip(hashes, new_ids, strict=True))
        fresh.layouts.update(ids)
        return ids

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
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> ClassicHistogram | None:
        """The distribution observed over [start, end] across the selected series.

        Per series: the increase from its last snapshot at or before ``start`` (or its first
        one inside the window) to its last one at or before ``end``, resets corrected
        (as ``slo.histogram_increase``); then the series are added (as
        ``slo.merge_histograms``). Equivalently: the sum of the increases of the series'
        consecutive snapshot pairs whose later snapshot lies in ``(start, end]``. Whole
        minutes ``(M, M + 60]`` inside the window are read from 1-minute roll-ups once
        maintenance has rolled them up (``use_rollups=False``: raw snapshots only), the
        partial minutes at the edges from raw snapshots; both give the same figures. Where
        raw rows are past retention, only the window's whole minutes are counted.
        No extrapolation: align ``start``/``end`` with scrapes for exact figures.

        ``semantics="prometheus-2"`` (or ``"prometheus-3"``) gives instead what Prometheus 2.x
        (3.x) answers for ``sum by (le) (increase(<family>_bucket[end - start]))`` evaluated
        at ``end`` on the same samples: only snapshots inside the range, each bucket series
        extrapolated (:mod:`collectors.store.windows`); raw snapshots only, so a window
        older than the raw retention is refused.

        ``None`` when no series has two snapshots in that span (or ``end <= start``). Raises
        :class:`~collectors.store.windows.LayoutChangeError` (an ``slo.LayoutMismatchError``)
        naming the target and the time when a series' layout changes inside the window,
        ``slo.LayoutMismatchError`` naming both targets when selected series' layouts differ,
        and :class:`SemanticsMismatchError` when the series' semantic flags differ.
        """
        mode = parse_semantics(semantics)
        require_finite_edges(start, end, mode)
        if not end > start:
            return None
        with self._sessions() as session:
            ids = self._chosen_ids(session, family, labels)
            (result,) = self._histogram_steps_as(session, ids, [start, end], use_rollups, mode)
        return result

    def counter_window(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> float | None:
        """A counter's increase over [start, end] summed across the selected series, resets
        corrected, with the same window rule (and roll-ups) as :meth:`histogram_window`;
        a Prometheus ``semantics`` gives ``sum(increase(<counter>[end - start]))`` at ``end``."""
        mode = parse_semantics(semantics)
        require_finite_edges(start, end, mode)
        if not end > start:
            return None
        with self._sessions() as session:
            ids = self._chosen_ids(session, family, labels)
            (result,) = self._counter_steps_as(session, ids, [start, end], use_rollups, mode)
        return result

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
        return [
            HistogramSnapshot(
                t,
                ClassicHistogram(
                    self._bounds(session, layout_id), tuple(json.loads(counts)), sum_value
                ),
            )
            for t, layout_id, counts, sum_value in rows
        ]


#: A series' stored identity: family, canonical label JSON, semantic flags (sorted, ",").
_SeriesKey = tuple[str, str, str]
#: A record ready to write, with the identity of each of its series (samples, raw, histograms).
_Prepared = tuple[ScrapeRecord, list[_SeriesKey]]
_NO_FLAGS: frozenset[Flag] = frozenset()
#: Bound of each id cache; past it a cache starts over (label churn cannot grow it forever).
_MAX_CACHED_IDS = 1_000_000
#: Bound parameters per ``IN (...)`` lookup (SQLite and PostgreSQL both take far more).
_CHUNK = 500


_VALUE_COLUMNS = ("series_id", "scrape_id", "timestamp_seconds", "value")
_SNAPSHOT_COLUMNS = ("series_id", "scrape_id", "timestamp_seconds", "layout_id", "counts_json", "sum_value", "count")  # fmt: skip
_EXEMPLAR_COLUMNS = ("series_id", "scrape_id", "upper_bound", "value", "labels_json", "timestamp_seconds")  # fmt: skip


def _insert_sql(connection: Connection, table: type, columns: tuple[str, ...]) -> str:
    """A plain ``INSERT`` of ``columns`` in the driver's own parameter style."""
    marker = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    names = ", ".join(f'"{c}"' for c in columns)
    name = table.__tablename__  # type: ignore[attr-defined]
    return f'INSERT INTO "{name}" ({names}) VALUES ({", ".join([marker] * len(columns))})'


class _NewIds:
    """Ids one write transaction resolved; they join the store's caches once it commits."""

    def __init__(self) -> None:
        self.targets: dict[str, tuple[int, str]] = {}
        self.series: dict[_SeriesKey, int] = {}
        self.layouts: dict[tuple[float, ...], int] = {}


def _chunks(items: list, size: int = _CHUNK) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


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

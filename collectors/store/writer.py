"""The scrape writer: one transaction per batch of scrapes, bulk inserts, and a retry when a
concurrent writer got there first.

A scrape is stored once per target and timestamp, however often it is written. Its readings
go in as plain driver ``executemany`` rows (:func:`collectors.store.sql.insert_sql`); the
ids of targets, series and layouts come from the :class:`~collectors.store.catalog.Catalog`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable

from sqlalchemy import Connection, Engine, insert, select
from sqlalchemy.exc import IntegrityError

from collectors import canonical as c
from collectors.canonical import Flag
from collectors.store.catalog import RAW_KIND, Catalog, NewSeries, ResolvedIds, SeriesKey
from collectors.store.codec import decode_labels, encode_labels
from collectors.store.models import ExemplarRow, HistogramSnapshotRow, Scrape, ValueSample
from collectors.store.records import DuplicateSeriesError, ScrapeRecord
from collectors.store.sql import chunks, insert_sql

_NO_FLAGS: frozenset[Flag] = frozenset()
_VALUE_COLUMNS = ("series_id", "scrape_id", "timestamp_seconds", "value")
_SNAPSHOT_COLUMNS = ("series_id", "scrape_id", "timestamp_seconds", "layout_id", "counts_json", "sum_value", "count")  # fmt: skip
_EXEMPLAR_COLUMNS = ("series_id", "scrape_id", "upper_bound", "value", "labels_json", "timestamp_seconds")  # fmt: skip

#: A record ready to write, with the identity of each of its series (samples, raw, histograms).
_Prepared = tuple[ScrapeRecord, list[SeriesKey]]


class ScrapeWriter:
    """Writes scrapes through ``engine``, one writer at a time (``write_lock``, shared with
    the store's other writers: SQLite takes one writer per file)."""

    def __init__(self, engine: Engine, catalog: Catalog, write_lock: threading.Lock) -> None:
        self._engine = engine
        self._catalog = catalog
        self._write_lock = write_lock

    def write_scrapes(self, records: Iterable[ScrapeRecord]) -> list[bool]:
        """Store a batch of scrapes in one transaction. ``result[i]`` is ``False`` when
        ``records[i]`` was already stored (or came earlier in the batch). Raises
        :class:`DuplicateSeriesError`, writing nothing, when any record holds a series twice."""
        prepared = [self._prepare(record) for record in records]
        if not prepared:
            return []
        # NOTE: a concurrent writer may insert the same scrape, or a shared row (a target, a
        # series, a layout), between our check and our insert; the unique constraints then
        # refuse ours. One retry sees their rows and reuses them or finds the scrape stored.
        with self._write_lock:
            for attempt in range(2):
                resolved = ResolvedIds()
                try:
                    with self._engine.begin() as connection:
                        written = self._write_batch(connection, prepared, resolved)
                except IntegrityError:
                    self._catalog.forget()  # a cached id may name a row deleted since
                    if attempt == 1:
                        raise
                    continue
                # NOTE: ids join the catalog only once their transaction committed.
                self._catalog.remember(resolved)
                return written
        raise AssertionError("unreachable")

    def _prepare(self, record: ScrapeRecord) -> _Prepared:
        """The record's series identities, in the order samples, raw, histograms; refuses a
        record that holds one series twice."""
        identity = self._catalog.identity
        keys = [identity(s.family, s.labels, s.flags) for s in record.samples]
        keys += [identity(c.RAW_PREFIX + r.name, r.labels, _NO_FLAGS) for r in record.raw]
        keys += [identity(h.family, h.labels, h.flags) for h in record.histograms]
        if len(set(keys)) != len(keys):
            seen: set[SeriesKey] = set()
            for family, labels_json, flags in keys:
                if (family, labels_json, flags) in seen:
                    raise DuplicateSeriesError(
                        f"scrape holds {family} {dict(decode_labels(labels_json))} twice; a "
                        "dialect mapped two source series onto one canonical series: give them "
                        "distinct labels or keep one raw"
                    )
                seen.add((family, labels_json, flags))
        return record, keys

    def _write_batch(
        self, connection: Connection, prepared: list[_Prepared], resolved: ResolvedIds
    ) -> list[bool]:
        records = [record for record, _ in prepared]
        target_ids = self._catalog.resolve_targets(connection, records, resolved)
        # -- which scrapes are new: not stored, and not earlier in this batch
        wanted = {(target_ids[r.target], r.timestamp_seconds) for r in records}
        stored: set[tuple[int, float]] = set()
        for chunk in chunks(sorted(wanted)):
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
        series_ids = self._series_ids(connection, todo, resolved)
        layout_ids = self._catalog.resolve_layouts(
            connection, {h.upper_bounds for _, (r, _) in todo for h in r.histograms}, resolved
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
        for table, columns, rows in (
            (ValueSample.__tablename__, _VALUE_COLUMNS, values),
            (HistogramSnapshotRow.__tablename__, _SNAPSHOT_COLUMNS, snapshots),
            (ExemplarRow.__tablename__, _EXEMPLAR_COLUMNS, exemplars),
        ):
            if rows:
                connection.exec_driver_sql(insert_sql(connection, table, columns), rows)
        return written

    def _series_ids(
        self, connection: Connection, todo: list[tuple[int, _Prepared]], resolved: ResolvedIds
    ) -> dict[SeriesKey, int]:
        """Series ids of every key in ``todo``, creating series on first sight (owned by the
        target of the first scrape that holds them)."""
        ids: dict[SeriesKey, int] = {}
        pending: dict[SeriesKey, NewSeries] = {}
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
                sid = self._catalog.cached_series_id(key)
                if sid is not None:
                    ids[key] = sid
                else:
                    pending[key] = NewSeries(tid, kind, source)
        if pending:
            ids.update(self._catalog.resolve_series(connection, pending, resolved))
        resolved.series.update(ids)
        return ids

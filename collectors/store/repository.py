"""The store's public API, :class:`Store`: a thin facade over the parts it composes.

The parts, one concept each: :mod:`~collectors.store.catalog` (identities, cached ids,
layout bounds, series selection), :mod:`~collectors.store.writer` (scrape writes),
:mod:`~collectors.store.reads` (series, readings, scrapes, exemplars),
:mod:`~collectors.store.windows` (windows and step series over raw rows and roll-ups),
:mod:`~collectors.store.maintenance` (roll-ups and retention) and
:mod:`~collectors.store.traces` (spans and request records); the knob lab's runs and
points are :mod:`~collectors.store.lab_sql`, the change events :mod:`~collectors.store.change_sql`. ``Store`` implements the protocols of
:mod:`collectors.store.protocols` (``MetricsReader``, ``RequestReader``, ``ScrapeStore``,
``TraceStore``, ``LabStore``, ``LabReader``, ``ChangeStore``, ``ChangeReader``); a consumer should depend on those, not on this
class.
The alert evaluator's tables are on its schema too, but their reads and writes live with
alerts (``alerts.sql.alert_state_of(store)``, over :attr:`Store.sessions` and
:attr:`Store.write_lock`): the store knows nothing of alerts.
It returns plain data (``slo`` types, named tuples); no SQLAlchemy object leaves the store.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from collectors.canonical import Labels
from collectors.request_records import RequestRecord, SpanRecord
from collectors.store.catalog import Catalog
from collectors.store.change_records import ChangeEvent
from collectors.store.change_sql import SQLChanges
from collectors.store.connection import default_url, make_engine
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunStatus
from collectors.store.lab_sql import SQLLab
from collectors.store.maintenance import Maintenance
from collectors.store.protocols import DEFAULT_STEP_SECONDS
from collectors.store.reads import GaugeMinute, MetricReads
from collectors.store.records import (
    CounterStep,
    HistogramStep,
    QuantileStep,
    ScrapeRecord,
    ScrapeStatus,
    SeriesInfo,
    StoredExemplar,
)
from collectors.store.retention import MaintenanceReport, RetentionPolicy
from collectors.store.schema import require_current_schema, upgrade_schema
from collectors.store.traces import Traces
from collectors.store.window_semantics import WindowSemantics
from collectors.store.windows import Windows
from collectors.store.writer import ScrapeWriter
from slo import SMALL_DELTA_TOLERANCE, ClassicHistogram, HistogramSnapshot, Sample


class Store:
    """Stored scrapes, traces and request records behind a small API. ``url`` is any
    SQLAlchemy URL (default :func:`~collectors.store.default_url`); SQLite runs in WAL mode
    with foreign keys on.

    ``migrate=True`` (writers: the collector) brings the schema to the latest Alembic
    revision on open. ``migrate=False`` (readers) changes nothing: it checks the revision and
    raises :class:`~collectors.store.SchemaOutOfDateError` (saying how to migrate) when the
    schema is absent or not the latest.

    ``vectorised=False`` reads windows through the reference loops
    (:mod:`collectors.store.step_engine`) instead of numpy: the same figures, bit for bit,
    more slowly; for benchmarks that measure both side by side."""

    def __init__(
        self, url: str | None = None, *, migrate: bool = True, vectorised: bool = True
    ) -> None:
        self.url = url or default_url()
        self.engine: Engine = make_engine(self.url)
        try:
            if migrate:
                upgrade_schema(self.engine)
            else:
                require_current_schema(self.engine)
        except BaseException:
            self.engine.dispose()
            raise
        sessions = sessionmaker(self.engine, expire_on_commit=False)
        # NOTE: one writer at a time per Store (scrapes, spans, maintenance): SQLite takes one
        # writer per file, and a second would wait out its busy timeout and fail.
        write_lock = threading.Lock()
        catalog = Catalog()
        self._writer = ScrapeWriter(self.engine, catalog, write_lock)
        self._reads = MetricReads(sessions, catalog)
        self._windows = Windows(sessions, catalog, vectorised=vectorised)
        self._maintenance = Maintenance(sessions, write_lock)
        self._traces = Traces(sessions, write_lock)
        self._sessions = sessions
        self._write_lock = write_lock
        self._lab = SQLLab(sessions, write_lock)
        self._changes = SQLChanges(sessions, write_lock)

    @property
    def sessions(self) -> sessionmaker[Session]:
        """The store's session factory, for the parts kept beside it (``alerts.sql``'s alert
        state) that read and write their own tables of its schema."""
        return self._sessions

    @property
    def write_lock(self) -> threading.Lock:
        """The store's one write lock: a part writing its own tables takes it as the scrape,
        span and maintenance writers do (SQLite takes one writer per file)."""
        return self._write_lock

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # -- writing (ScrapeStore, TraceStore) ---------------------------------------------------

    def write_scrape(self, record: ScrapeRecord) -> bool:
        """Store one scrape atomically. Returns ``False`` (and writes nothing) when a scrape of
        the same target at the same timestamp is already stored."""
        return self._writer.write_scrapes([record])[0]

    def write_scrapes(self, records: Iterable[ScrapeRecord]) -> list[bool]:
        """Store a batch of scrapes in one transaction. ``result[i]`` is ``False`` when
        ``records[i]`` was already stored (or came earlier in the batch): a scrape is stored
        once per target and timestamp, however often it is written. Raises
        :class:`~collectors.store.DuplicateSeriesError`, writing nothing, when any record
        holds a series twice."""
        return self._writer.write_scrapes(records)

    def write_spans(self, spans: Sequence[SpanRecord]) -> int:
        """Store ``spans`` in one transaction; returns how many were new. A span whose
        ``(trace_id, span_id)`` is already stored (or repeated in ``spans``) is skipped."""
        return self._traces.write_spans(spans)

    def write_requests(self, records: Sequence[RequestRecord]) -> int:
        """Store request records in one transaction; returns how many were new. Identity is
        the request span's ``(trace_id, span_id)``, as for spans."""
        return self._traces.write_requests(records)

    def maintain(self, now: float, policy: RetentionPolicy | None = None) -> MaintenanceReport:
        """Roll up complete minutes, then apply retention (raw rows once rolled up, roll-ups,
        spans and request records), doing at most a batch of each; call it every collector
        cycle with the current time (unix seconds). See
        :meth:`collectors.store.maintenance.Maintenance.maintain`."""
        return self._maintenance.maintain(now, policy)

    # -- plain reads (MetricsReader) ---------------------------------------------------------

    def series(self, family: str, labels: Mapping[str, str] | None = None) -> list[SeriesInfo]:
        """Series of ``family`` whose labels include every pair in ``labels``. A breakdown
        label (``tenant``) must be named to select series that carry it."""
        return self._reads.series(family, labels)

    def raw_family_names(self) -> list[str]:
        """The raw families stored (``raw:`` + a sample name no dialect maps), sorted."""
        return self._reads.raw_family_names()

    def samples(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[Sample]]:
        """Counter or gauge readings with ``start <= t <= end``, per series, in time order."""
        return self._reads.samples(family, labels, start, end)

    def snapshots(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[HistogramSnapshot]]:
        """Cumulative histogram snapshots with ``start <= t <= end``, per series, in order."""
        return self._reads.snapshots(family, labels, start, end)

    def scrapes(
        self, target: str, start: float = -math.inf, end: float = math.inf
    ) -> list[ScrapeStatus]:
        """``(timestamp_seconds, is_up, error)`` of the stored scrapes of ``target`` with
        ``start <= timestamp <= end`` (default: all), oldest first."""
        return self._reads.scrapes(target, start, end)

    def exemplars(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> list[StoredExemplar]:
        """``(upper_bound, value, labels)`` of exemplars seen in scrapes over [start, end]."""
        return self._reads.exemplars(family, labels, start, end)

    def gauge_minutes(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[GaugeMinute]]:
        """Per series, the rolled-up minutes ``(M, M + 60]`` with ``start <= M < end``:
        reading count, last, min, max and average. Roll-ups only: minutes not rolled up yet
        are absent (read them with :meth:`samples`)."""
        return self._reads.gauge_minutes(family, labels, start, end)

    # -- windows and step series (MetricsReader) ----------------------------------------------

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
        extrapolated (:mod:`collectors.store.prometheus_windows`); raw snapshots only, so a
        window older than the raw retention is refused.

        ``None`` when no series has two snapshots in that span (or ``end <= start``). Raises
        :class:`~collectors.store.LayoutChangeError` (an ``slo.LayoutMismatchError``)
        naming the target and the time when a series' layout changes inside the window,
        ``slo.LayoutMismatchError`` naming both targets when selected series' layouts differ,
        and :class:`~collectors.store.SemanticsMismatchError` when the series' semantic
        flags differ.
        """
        return self._windows.histogram_window(
            family, labels, start, end, use_rollups=use_rollups, semantics=semantics
        )

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
        return self._windows.counter_window(
            family, labels, start, end, use_rollups=use_rollups, semantics=semantics
        )

    def histogram_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[HistogramStep]:
        """The merged distribution of each step: ``(t, histogram_window(t - step, t))`` for
        ``t = start + step, start + 2 step, ...`` up to ``end`` (``None`` where no series has a
        snapshot pair in the step). Whole minutes come from roll-ups (where maintenance has
        rolled them up; ``use_rollups=False`` reads raw snapshots only), the rest from raw
        snapshots: the figures are the same. ``semantics`` as in :meth:`histogram_window`
        (a Prometheus one is a range query with ``[step]`` ranges, from raw snapshots).
        Raises as :meth:`histogram_window` does when a step mixes layouts or the selected
        series' semantic flags differ."""
        return self._windows.histogram_series(
            family, labels, start, end, step_seconds, use_rollups=use_rollups, semantics=semantics
        )

    def quantile_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        qs: Sequence[float] = (0.5, 0.95, 0.99),
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
        small_delta_tolerance: float = SMALL_DELTA_TOLERANCE,
    ) -> list[QuantileStep]:
        """``slo.histogram_quantile`` (Prometheus-exact, with the bucket interval holding the
        true value) of each ``q`` in ``qs`` for each step of :meth:`histogram_series`;
        ``None`` for a step without data (a step with zero observations gives NaN values).
        ``small_delta_tolerance``: that of Prometheus >= 2.49 by default; 0 reproduces 2.42."""
        return self._windows.quantile_series(
            family,
            labels,
            start,
            end,
            qs,
            step_seconds,
            use_rollups=use_rollups,
            semantics=semantics,
            small_delta_tolerance=small_delta_tolerance,
        )

    def counter_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[CounterStep]:
        """``(t, counter_window(t - step, t))`` per step, as :meth:`histogram_series`."""
        return self._windows.counter_series(
            family, labels, start, end, step_seconds, use_rollups=use_rollups, semantics=semantics
        )

    def histogram_windows_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, ClassicHistogram]:
        """:meth:`histogram_window` of each target of the selection."""
        return self._windows.histogram_windows_by_target(
            family, labels, start, end, use_rollups=use_rollups, semantics=semantics
        )

    def counter_windows_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, float]:
        """:meth:`counter_window` of each target of the selection."""
        return self._windows.counter_windows_by_target(
            family, labels, start, end, use_rollups=use_rollups, semantics=semantics
        )

    def histogram_series_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        targets: Sequence[str] | None = None,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, list[HistogramStep]]:
        """:meth:`histogram_series` of each target of the selection (``targets`` only)."""
        return self._windows.histogram_series_by_target(
            family, labels, start, end, step_seconds, targets=targets, use_rollups=use_rollups,
            semantics=semantics,
        )  # fmt: skip

    def counter_series_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, list[CounterStep]]:
        """:meth:`counter_series` of each target of the selection."""
        return self._windows.counter_series_by_target(
            family, labels, start, end, step_seconds, use_rollups=use_rollups, semantics=semantics
        )

    def scrapes_by_target(
        self, targets: Sequence[str], start: float = -math.inf, end: float = math.inf
    ) -> dict[str, list[ScrapeStatus]]:
        """:meth:`scrapes` of each of ``targets``."""
        return {t: self.scrapes(t, start, end) for t in targets}

    def rollup_coverage(self) -> float:
        """Minutes ending at or before this time are read from roll-ups (``-inf``: none)."""
        return self._windows.rollup_coverage()

    # -- change events (ChangeStore, ChangeReader) -------------------------------------------

    def write_change_events(self, events: Sequence[ChangeEvent]) -> int:
        """Store change events in one transaction; returns how many were new (an event's
        identity is stored once, however often it is written)."""
        return self._changes.write_change_events(events)

    def change_events(
        self, start: float, end: float, *, target: str | None = None, limit: int = 1000
    ) -> list[ChangeEvent]:
        """The newest ``limit`` change events with ``start <= at <= end`` (of ``target`` only,
        when given), oldest first."""
        return self._changes.change_events(start, end, target=target, limit=limit)

    # -- requests and traces (RequestReader) -------------------------------------------------

    def requests(
        self,
        start: float,
        end: float,
        *,
        tenant: str | None = None,
        model: str | None = None,
        replica: str | None = None,
        finish_reason: str | None = None,
        limit: int = 10_000,
    ) -> list[RequestRecord]:
        """Request records that arrived in ``start <= arrival <= end``, oldest first, at most
        ``limit``; each filter given must match exactly."""
        return self._traces.requests(
            start,
            end,
            tenant=tenant,
            model=model,
            replica=replica,
            finish_reason=finish_reason,
            limit=limit,
        )

    def request(self, request_id: str) -> RequestRecord | None:
        """The record of ``request_id`` (the earliest, should two spans carry one id)."""
        return self._traces.request(request_id)

    def trace(self, trace_id: str) -> list[SpanRecord]:
        """Every stored span of ``trace_id`` (32 hex digits, any case), by start time."""
        return self._traces.trace(trace_id)

    # -- knob lab runs and points (LabStore, LabReader; see collectors.store.lab_sql) ---------

    def create_lab_run(self, run: LabRun) -> int:
        return self._lab.create_lab_run(run)

    def add_lab_point(self, point: LabPoint) -> None:
        self._lab.add_lab_point(point)

    def finish_lab_run(self, run_id: int, status: LabRunStatus, error: str | None = None) -> None:
        self._lab.finish_lab_run(run_id, status, error)

    def lab_runs(self, kind: LabRunKind | None = None, limit: int = 100) -> list[LabRun]:
        return self._lab.lab_runs(kind, limit)

    def lab_run(self, run_id: int) -> LabRun | None:
        return self._lab.lab_run(run_id)

    def lab_points(self, run_id: int) -> list[LabPoint]:
        return self._lab.lab_points(run_id)

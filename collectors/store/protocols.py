"""What the store's readers and writers depend on: small protocols, not the SQL store.

The alert evaluator, triage and the console read metrics through :class:`MetricsReader` and
requests through :class:`RequestReader`; the collector's writers write through
:class:`ScrapeStore` and :class:`TraceStore`. :class:`collectors.store.Store` (SQLAlchemy)
implements all four; :class:`collectors.store.fake.FakeMetricsReader` implements
:class:`MetricsReader` over plain in-memory data, so rule and triage logic is tested without a
database (``tests/collectors/test_reader_contract.py`` proves the two agree). A PromQL
push-down to Prometheus/Thanos (DESIGN.md, fleet scale) is a third implementation of the same
reader.

Semantics are those of the SQL store's docstrings: a window over ``[start, end]`` is the sum of
the increases of consecutive snapshot pairs whose later snapshot lies in ``(start, end]``,
resets corrected, summed across the selected series (``semantics="prometheus-2"`` or
``"prometheus-3"``: what that Prometheus answers for ``increase(...[end - start])``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from collectors.canonical import Labels
from collectors.request_records import RequestRecord, SpanRecord
from collectors.store.change_records import ChangeEvent
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunStatus
from collectors.store.records import (
    CounterStep,
    HistogramStep,
    QuantileStep,
    ScrapeRecord,
    ScrapeStatus,
    SeriesInfo,
    StoredExemplar,
)
from collectors.store.window_semantics import WindowSemantics
from slo import SMALL_DELTA_TOLERANCE, ClassicHistogram, HistogramSnapshot, Sample

#: A label selector: every pair must match; ``None`` selects every series of the family.
Selector = Mapping[str, str] | None
#: The step of the step-series reads when none is given.
DEFAULT_STEP_SECONDS = 60.0


@runtime_checkable
class MetricsReader(Protocol):
    """Stored metrics: series, readings, windows and step series, exemplars, scrapes."""

    def series(self, family: str, labels: Selector = None) -> list[SeriesInfo]: ...

    def samples(
        self, family: str, labels: Selector, start: float, end: float
    ) -> dict[Labels, list[Sample]]: ...

    def snapshots(
        self, family: str, labels: Selector, start: float, end: float
    ) -> dict[Labels, list[HistogramSnapshot]]: ...

    def histogram_window(
        self,
        family: str,
        labels: Selector,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> ClassicHistogram | None: ...

    def counter_window(
        self,
        family: str,
        labels: Selector,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> float | None: ...

    def histogram_series(
        self,
        family: str,
        labels: Selector,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[HistogramStep]: ...

    def quantile_series(
        self,
        family: str,
        labels: Selector,
        start: float,
        end: float,
        qs: Sequence[float] = (0.5, 0.95, 0.99),
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
        small_delta_tolerance: float = SMALL_DELTA_TOLERANCE,
    ) -> list[QuantileStep]: ...

    def counter_series(
        self,
        family: str,
        labels: Selector,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[CounterStep]: ...

    def exemplars(
        self, family: str, labels: Selector, start: float, end: float
    ) -> list[StoredExemplar]: ...

    def scrapes(
        self, target: str, start: float = -math.inf, end: float = math.inf
    ) -> list[ScrapeStatus]: ...

    # Per-replica reads: each target's window, in one read where the reader can (a server
    # answers every target in one query; a per-replica rule over 500 replicas would otherwise
    # send 500).

    def histogram_windows_by_target(
        self,
        family: str,
        labels: Selector,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, ClassicHistogram]: ...

    def counter_windows_by_target(
        self,
        family: str,
        labels: Selector,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, float]: ...

    def histogram_series_by_target(
        self,
        family: str,
        labels: Selector,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        targets: Sequence[str] | None = None,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, list[HistogramStep]]: ...

    def counter_series_by_target(
        self,
        family: str,
        labels: Selector,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, list[CounterStep]]: ...

    def scrapes_by_target(
        self, targets: Sequence[str], start: float = -math.inf, end: float = math.inf
    ) -> dict[str, list[ScrapeStatus]]: ...


@runtime_checkable
class RequestReader(Protocol):
    """Stored request records and trace spans."""

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
    ) -> list[RequestRecord]: ...

    def request(self, request_id: str) -> RequestRecord | None: ...

    def trace(self, trace_id: str) -> list[SpanRecord]: ...


@runtime_checkable
class ScrapeStore(Protocol):
    """What the collector's writer needs: ``write_scrapes`` in one transaction, one flag per
    record (``False``: that scrape, target and timestamp, was already stored)."""

    def write_scrapes(self, records: Sequence[ScrapeRecord]) -> list[bool]: ...


@runtime_checkable
class TraceStore(Protocol):
    """What the OTLP receiver's writer needs: idempotent span and request-record writes,
    each returning how many rows were new."""

    def write_spans(self, spans: Sequence[SpanRecord]) -> int: ...

    def write_requests(self, records: Sequence[RequestRecord]) -> int: ...


@runtime_checkable
class RawFamilies(Protocol):
    """Which raw families a reader holds (``raw:`` + a sample name no dialect maps): the
    change detector finds every ``*_info`` gauge through it, whatever engine exposes it."""

    def raw_family_names(self) -> list[str]: ...


@runtime_checkable
class ChangeStore(Protocol):
    """What the change detector writes: idempotent change events, the count that was new."""

    def write_change_events(self, events: Sequence[ChangeEvent]) -> int: ...


@runtime_checkable
class ChangeReader(Protocol):
    """What triage, ``tailwatch changes list`` and the console read: the newest ``limit``
    change events in ``[start, end]`` (of one target when given), oldest first."""

    def change_events(
        self, start: float, end: float, *, target: str | None = None, limit: int = 1000
    ) -> list[ChangeEvent]: ...


@runtime_checkable
class LabStore(Protocol):
    """What ``tailwatch sweep`` and ``tailwatch replay`` write: a run first (its id back),
    each point as it is measured, then the run's end."""

    def create_lab_run(self, run: LabRun) -> int: ...

    def add_lab_point(self, point: LabPoint) -> None: ...

    def finish_lab_run(
        self, run_id: int, status: LabRunStatus, error: str | None = None
    ) -> None: ...


@runtime_checkable
class LabReader(Protocol):
    """What the knob lab reads: runs newest first, one run, its points in measured order."""

    def lab_runs(self, kind: LabRunKind | None = None, limit: int = 100) -> list[LabRun]: ...

    def lab_run(self, run_id: int) -> LabRun | None: ...

    def lab_points(self, run_id: int) -> list[LabPoint]: ...

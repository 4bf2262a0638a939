"""Retention and 1-minute roll-ups: the ``Store`` methods that maintain and read them live
here, mixed into :class:`collectors.store.repository.Store`.

The rule everything rests on: a window's increase is the sum, over consecutive snapshot
pairs of a series whose *later* snapshot lies in ``(t0, t1]``, of each pair's reset-corrected
increase. That is exactly the raw rule of ``Store.histogram_window`` (from the last snapshot
at or before ``t0`` to the last at or before ``t1``): a pair is counted in the window of its
later snapshot. So the minute ``(M, M + 60]`` rolls up the pairs whose later snapshot falls in
it (a snapshot exactly at ``M + 60`` belongs to that minute, and is the baseline of the next),
and any window whose edges are minute boundaries is the sum of its minutes' roll-ups, equal
to the raw computation. A series' first snapshot ends no pair, as in the raw rule.

Late data. Each maintenance call rolls up the scrapes stored since the last one (by scrape
id, which the database hands out in commit order on SQLite; on PostgreSQL a concurrent writer
may commit a lower id late, which a recount notices). A late scrape changes the pair it falls
into: the minute it lies in and the minute of the series' next snapshot after it are rolled up
again from raw. Readers use roll-ups only for minutes before the oldest scrape not yet rolled
up, so a read is exact at any moment, not only after maintenance has caught up.

Retention deletes raw rows only for scrapes already rolled up (and settled), oldest first, in
bounded batches; roll-ups past their own retention go the same way. Raw data that arrives
later than the raw retention (its minute is gone) is dropped on arrival: its neighbours are no
longer there to compute its increase.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.orm import Session

from collectors.store.codec import decode_bounds
from collectors.store.models import (
    ExemplarRow,
    HistogramRollup,
    HistogramSnapshotRow,
    Layout,
    RequestRow,
    RollupState,
    SampleRollup,
    Scrape,
    SpanRow,
    ValueSample,
)
from collectors.store.windows import (
    LayoutChangeError,
    WindowSemantics,
    layouts_differ_error,
    parse_semantics,
    prometheus_counter_steps,
    prometheus_histogram_steps,
    series_name,
)
from slo import (
    SMALL_DELTA_TOLERANCE,
    ClassicHistogram,
    HistogramSnapshot,
    LayoutMismatchError,
    QuantileResult,
    Sample,
)

MINUTE = 60.0
DEFAULT_RAW_RETENTION_SECONDS = 48 * 3600.0
DEFAULT_ROLLUP_RETENTION_SECONDS = 30 * 86400.0
#: Spans (whole traces) are kept 14 days, as Grafana Tempo keeps blocks by default; request
#: records, which goodput over SLO windows needs, as long as the roll-ups.
DEFAULT_SPAN_RETENTION_SECONDS = 14 * 86400.0
MIN_RETENTION_SECONDS = 600.0
#: Most steps one series query may return (a 30-day range at 1-minute steps is 43 200).
MAX_STEPS = 200_000
_IN_CHUNK = 500

#: One raw histogram snapshot: (timestamp, layout id, cumulative counts, sum or None).
_Snap = tuple[float, int, list[float], float | None]


def _from_baseline(raw: Any, *columns: Any) -> Any:
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


def _following(raw: Any) -> Any:
    return (
        select(raw.timestamp_seconds)
        .where(raw.series_id == bindparam("sid"), raw.timestamp_seconds > bindparam("t"))
        .order_by(raw.timestamp_seconds)
        .limit(1)
    )


def _rollups_between(table: Any, *columns: Any) -> Any:
    return (
        select(*columns)
        .where(
            table.series_id == bindparam("sid"),
            table.start_seconds >= bindparam("lo"),
            table.start_seconds <= bindparam("hi"),
        )
        .order_by(table.start_seconds)
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
_NEXT = {HistogramRollup: _following(HistogramSnapshotRow), SampleRollup: _following(ValueSample)}
_CLEAR = {
    table: delete(table).where(
        table.series_id == bindparam("sid"),
        table.start_seconds >= bindparam("lo"),
        table.start_seconds <= bindparam("hi"),
    )
    for table in (HistogramRollup, SampleRollup)
}
_HISTOGRAM_ROLLUPS = _rollups_between(
    HistogramRollup,
    HistogramRollup.start_seconds,
    HistogramRollup.layout_id,
    HistogramRollup.other_layout_id,
    HistogramRollup.counts_json,
    HistogramRollup.sum_value,
)
_SAMPLE_ROLLUPS = _rollups_between(
    SampleRollup, SampleRollup.start_seconds, SampleRollup.pairs, SampleRollup.increase
)


@dataclass(frozen=True)
class RetentionPolicy:
    """How long data is kept and how much one :meth:`RollupsMixin.maintain` call may do.

    ``rollup_lag_seconds``: a minute is rolled up once ``now`` is this far past its end, so
    that its last scrapes have arrived (only an economy: later data is rolled up again).
    ``settle_seconds``: how long a database transaction may stay in flight; a scrape id is
    treated as final (no lower id can still commit) this long after it was seen.
    """

    raw_retention_seconds: float = DEFAULT_RAW_RETENTION_SECONDS
    rollup_retention_seconds: float = DEFAULT_ROLLUP_RETENTION_SECONDS
    rollup_lag_seconds: float = 10.0
    settle_seconds: float = 30.0
    max_scrapes_per_call: int = 5000
    max_deleted_scrapes_per_call: int = 5000
    max_rollup_minutes_deleted_per_call: int = 10
    span_retention_seconds: float = DEFAULT_SPAN_RETENTION_SECONDS
    max_trace_rows_deleted_per_call: int = 20000

    def __post_init__(self) -> None:
        # NOTE: raw rows must outlive the roll-up lag and settling by a few minutes, or
        # scrapes would pass the raw retention before they are rolled up (and be dropped).
        for name in ("raw_retention_seconds", "rollup_retention_seconds", "span_retention_seconds"):
            value = getattr(self, name)
            if not (
                isinstance(value, int | float)
                and math.isfinite(value)
                and value >= MIN_RETENTION_SECONDS
            ):
                raise ValueError(
                    f"{name}: expected a number of seconds >= {MIN_RETENTION_SECONDS:g}, "
                    f"got {value!r}"
                )
        for name in ("rollup_lag_seconds", "settle_seconds"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: expected a number of seconds >= 0, got {value!r}")
        for name in (
            "max_scrapes_per_call",
            "max_deleted_scrapes_per_call",
            "max_rollup_minutes_deleted_per_call",
            "max_trace_rows_deleted_per_call",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class MaintenanceReport:
    """What one :meth:`RollupsMixin.maintain` call did. ``more_to_do``: a batch limit was
    reached (call again soon); otherwise everything due at ``now`` is done."""

    scrapes_rolled_up: int = 0
    late_scrapes: int = 0
    dropped_late_scrapes: int = 0
    recounted: bool = False
    series_recomputed: int = 0
    rollup_rows_written: int = 0
    raw_scrapes_deleted: int = 0
    rollup_rows_deleted: int = 0
    spans_deleted: int = 0
    request_records_deleted: int = 0
    more_to_do: bool = False


@dataclass(frozen=True)
class GaugeMinute:
    """One series' readings in the minute ``(start_seconds, start_seconds + 60]``."""

    start_seconds: float
    samples: int
    last: float
    min: float
    max: float
    avg: float


def minute_start(t: float) -> float:
    """Start ``M`` of the roll-up minute ``(M, M + 60]`` that holds ``t``."""
    return math.ceil(t / MINUTE) * MINUTE - MINUTE


def step_bounds(start: float, end: float, step_seconds: float) -> list[float]:
    """``start, start + step, ...`` up to ``end``: the edges of the steps of a series query
    (step ``k`` covers ``(bounds[k], bounds[k + 1]]``)."""
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ValueError(f"start and end must be finite, got start={start!r} end={end!r}")
    if not (math.isfinite(step_seconds) and step_seconds > 0):
        raise ValueError(f"step_seconds: expected a number > 0, got {step_seconds!r}")
    count = math.floor((end - start) / step_seconds + 1e-9)
    if count > MAX_STEPS:
        raise ValueError(
            f"step_seconds={step_seconds:g} over {end - start:g} s gives {count} steps "
            f"(at most {MAX_STEPS}); use a longer step"
        )
    return [start + k * step_seconds for k in range(max(count, 0) + 1)]


class RollupsMixin:
    """Roll-ups and retention. Uses ``self._sessions`` (a ``sessionmaker``), ``self.engine``
    and ``self._select`` of ``Store``."""

    _sessions: Any
    _write_lock: Any
    engine: Any

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self, now: float, policy: RetentionPolicy | None = None) -> MaintenanceReport:
        """Roll up complete minutes, then apply retention, doing at most a batch of each.

        Idempotent and incremental: call it every collector cycle with the current time
        (``now``, unix seconds); a call with nothing to do costs a few small queries. Minutes
        that received late scrapes are rolled up again. Raw rows (samples, histogram
        snapshots, exemplars, scrapes) older than ``policy.raw_retention_seconds`` are deleted
        only once rolled up; roll-ups older than ``policy.rollup_retention_seconds`` are
        deleted. ``report.more_to_do`` says a batch limit stopped it early."""
        policy = policy or RetentionPolicy()
        # NOTE: one writer at a time per Store (see Store.write_scrapes); each call is bounded.
        with self._write_lock:
            return self._maintain(now, policy)

    def _maintain(self, now: float, policy: RetentionPolicy) -> MaintenanceReport:
        with self._sessions() as session:
            if session.get_bind().dialect.name == "postgresql":
                # NOTE: one snapshot for the whole roll-up, so the recount of scrape ids and
                # the rows rolled up agree.
                session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            rolled = self._roll_up(session, now, policy)
            session.commit()
        with self._sessions() as session:
            expired = self._expire(session, now, policy)
            traces = _expire_traces(session, now, policy)
            session.commit()
        more_to_do = rolled.pop("more_to_do") or expired["more_to_do"] or traces["more_to_do"]
        return MaintenanceReport(
            **rolled,
            raw_scrapes_deleted=expired["raw_scrapes_deleted"],
            rollup_rows_deleted=expired["rollup_rows_deleted"],
            spans_deleted=traces["spans"],
            request_records_deleted=traces["requests"],
            more_to_do=more_to_do,
        )

    def _roll_up(self, session: Session, now: float, policy: RetentionPolicy) -> dict[str, Any]:
        state = session.scalar(select(RollupState).where(RollupState.id == 1).with_for_update())
        if state is None:
            state = RollupState(id=1, processed_scrape_id=0, settled_scrape_id=0, processed_count=0)  # fmt: skip
            session.add(state)
            session.flush()
        horizon = -math.inf if state.raw_horizon_seconds is None else state.raw_horizon_seconds
        # NOTE: the minute at the horizon has lost its baseline; only later ones are redone.
        first_redoable = horizon + MINUTE
        ranges: list[tuple[int, int]] = []
        recounted = False
        if state.processed_scrape_id > state.settled_scrape_id:
            seen = _count_ids(session, state.settled_scrape_id, state.processed_scrape_id)
            if seen != state.processed_count:  # a lower id committed after a higher one
                ranges.append((state.settled_scrape_id, state.processed_scrape_id))
                recounted = True
                state.processed_count = seen
        ready = math.floor((now - policy.rollup_lag_seconds) / MINUTE) * MINUTE
        limit = policy.max_scrapes_per_call
        candidates = session.execute(
            select(Scrape.id, Scrape.timestamp_seconds)
            .where(Scrape.id > state.processed_scrape_id)
            .order_by(Scrape.id)
            .limit(limit + 1)
        ).all()
        taken = list(itertools.takewhile(lambda row: row[1] <= ready, candidates[:limit]))
        more_to_do = len(taken) == limit and len(candidates) > limit
        newest = state.newest_seconds
        late = 0 if newest is None else sum(1 for _, t in taken if t <= minute_start(newest))
        dropped = [i for i, t in taken if minute_start(t) < first_redoable]
        _delete_raw_rows(session, dropped, keep_scrapes=True)
        if taken:
            ranges.append((state.processed_scrape_id, taken[-1][0]))
        touched_h: dict[int, tuple[float, float]] = {}
        touched_v: dict[int, tuple[float, float]] = {}
        for low, high in ranges:
            _touch(session, HistogramSnapshotRow, low, high, touched_h)
            _touch(session, ValueSample, low, high, touched_v)
        written = 0
        for sid, span in touched_h.items():
            written += self._redo_minutes(session, HistogramRollup, sid, span, first_redoable)
        for sid, span in touched_v.items():
            written += self._redo_minutes(session, SampleRollup, sid, span, first_redoable)
        if taken:
            state.processed_scrape_id = taken[-1][0]
            state.processed_count += len(taken)
            newest_taken = max(t for _, t in taken)
            state.newest_seconds = newest_taken if newest is None else max(newest, newest_taken)
        if state.mark_seconds is not None and now - state.mark_seconds >= policy.settle_seconds:
            # Every id up to the mark has committed by now and, after the recount above, has
            # been rolled up: nothing below it can appear any more.
            assert state.mark_scrape_id is not None
            state.settled_scrape_id = state.mark_scrape_id
            state.processed_count = _count_ids(
                session, state.settled_scrape_id, state.processed_scrape_id
            )
            state.mark_scrape_id = state.mark_seconds = None
        if state.mark_seconds is None and state.processed_scrape_id > state.settled_scrape_id:
            state.mark_scrape_id, state.mark_seconds = state.processed_scrape_id, now
        return {
            "scrapes_rolled_up": len(taken) - len(dropped),
            "late_scrapes": late,
            "dropped_late_scrapes": len(dropped),
            "recounted": recounted,
            "series_recomputed": len(touched_h) + len(touched_v),
            "rollup_rows_written": written,
            "more_to_do": more_to_do,
        }

    def _redo_minutes(
        self,
        session: Session,
        table: type[HistogramRollup] | type[SampleRollup],
        sid: int,
        span: tuple[float, float],
        first_redoable: float,
    ) -> int:
        """Roll up again the minutes of series ``sid`` that new snapshots in ``span`` change:
        from the minute of the first to the minute of the series' next snapshot after the
        last (whose pair now starts at a new snapshot)."""
        conn = session.connection()
        first, last = span
        following = conn.execute(_NEXT[table], {"sid": sid, "t": last}).scalar()
        m_first = max(minute_start(first), first_redoable)
        m_last = minute_start(last if following is None else following)
        if m_last < m_first:
            return 0
        conn.execute(_CLEAR[table], {"sid": sid, "lo": m_first, "hi": m_last})
        if table is HistogramRollup:
            snaps = self._raw_snapshots(session, sid, m_first, m_last + MINUTE)
            rows = _histogram_minutes(sid, snaps, m_first, m_last)
        else:
            values = self._raw_values(session, sid, m_first, m_last + MINUTE)
            rows = _sample_minutes(sid, values, m_first, m_last)
        if rows:
            conn.execute(insert(table), rows)
        return len(rows)

    def _expire(self, session: Session, now: float, policy: RetentionPolicy) -> dict[str, Any]:
        state = session.get(RollupState, 1)
        deleted_scrapes = deleted_rollups = 0
        more_to_do = False
        if state is not None:
            cutoff = math.floor((now - policy.raw_retention_seconds) / MINUTE) * MINUTE
            newest_id = session.scalar(select(func.max(Scrape.id)))
            # NOTE: the newest scrape is always kept: SQLite may reuse the highest id once it
            # is deleted, and a reused id would look already rolled up.
            limit = policy.max_deleted_scrapes_per_call
            ids = list(
                session.scalars(
                    select(Scrape.id)
                    .where(
                        Scrape.timestamp_seconds < cutoff,
                        Scrape.id <= state.settled_scrape_id,
                        Scrape.id < (newest_id or 0),
                    )
                    .order_by(Scrape.timestamp_seconds)
                    .limit(limit + 1)
                )
            )
            more_to_do = len(ids) > limit
            ids = ids[:limit]
            _delete_raw_rows(session, ids, keep_scrapes=False)
            deleted_scrapes = len(ids)
            if ids and (state.raw_horizon_seconds is None or state.raw_horizon_seconds < cutoff):
                state.raw_horizon_seconds = cutoff
            rollup_cutoff = math.floor((now - policy.rollup_retention_seconds) / MINUTE) * MINUTE
            span = policy.max_rollup_minutes_deleted_per_call * MINUTE
            for table in (HistogramRollup, SampleRollup):
                oldest = session.scalar(select(func.min(table.start_seconds)))
                if oldest is None or oldest >= rollup_cutoff:
                    continue
                upto = min(rollup_cutoff, oldest + span)
                more_to_do = more_to_do or upto < rollup_cutoff
                result = session.execute(delete(table).where(table.start_seconds < upto))
                deleted_rollups += result.rowcount or 0  # type: ignore[attr-defined]
        return {
            "raw_scrapes_deleted": deleted_scrapes,
            "rollup_rows_deleted": deleted_rollups,
            "more_to_do": more_to_do,
        }

    # -- reading ---------------------------------------------------------------------------

    def histogram_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = MINUTE,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[tuple[float, ClassicHistogram | None]]:
        """The merged distribution of each step: ``(t, histogram_window(t - step, t))`` for
        ``t = start + step, start + 2 step, ...`` up to ``end`` (``None`` where no series has a
        snapshot pair in the step). Whole minutes come from roll-ups (where maintenance has
        rolled them up; ``use_rollups=False`` reads raw snapshots only), the rest from raw
        snapshots: the figures are the same. ``semantics`` as in :meth:`histogram_window`
        (a Prometheus one is a range query with ``[step]`` ranges, from raw snapshots).
        Raises as :meth:`histogram_window` does when a step mixes layouts or the selected
        series' semantic flags differ."""
        mode = parse_semantics(semantics)
        bounds = step_bounds(start, end, step_seconds)
        with self._sessions() as session:
            ids = self._chosen_ids(session, family, labels)
            steps = self._histogram_steps_as(session, ids, bounds, use_rollups, mode)
        return list(zip(bounds[1:], steps, strict=True))

    def quantile_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        qs: Sequence[float] = (0.5, 0.95, 0.99),
        step_seconds: float = MINUTE,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
        small_delta_tolerance: float = SMALL_DELTA_TOLERANCE,
    ) -> list[tuple[float, tuple[QuantileResult, ...] | None]]:
        """``slo.histogram_quantile`` (Prometheus-exact, with the bucket interval holding the
        true value) of each ``q`` in ``qs`` for each step of :meth:`histogram_series`;
        ``None`` for a step without data (a step with zero observations gives NaN values).
        ``small_delta_tolerance``: that of Prometheus >= 2.49 by default; 0 reproduces 2.42."""
        steps = self.histogram_series(
            family, labels, start, end, step_seconds, use_rollups=use_rollups, semantics=semantics
        )
        out: list[tuple[float, tuple[QuantileResult, ...] | None]] = []
        for t, h in steps:
            quantiles = None
            if h is not None:
                quantiles = tuple(h.quantile(q, small_delta_tolerance=small_delta_tolerance) for q in qs)  # fmt: skip
            out.append((t, quantiles))
        return out

    def counter_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = MINUTE,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[tuple[float, float | None]]:
        """``(t, counter_window(t - step, t))`` per step, as :meth:`histogram_series`."""
        mode = parse_semantics(semantics)
        bounds = step_bounds(start, end, step_seconds)
        with self._sessions() as session:
            ids = self._chosen_ids(session, family, labels)
            steps = self._counter_steps_as(session, ids, bounds, use_rollups, mode)
        return list(zip(bounds[1:], steps, strict=True))

    def gauge_minutes(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Any, list[GaugeMinute]]:
        """Per series, the rolled-up minutes ``(M, M + 60]`` with ``start <= M < end``:
        reading count, last, min, max and average. Roll-ups only: minutes not rolled up yet
        are absent (read them with ``Store.samples``)."""
        with self._sessions() as session:
            chosen = self._select(session, family, labels)  # type: ignore[attr-defined]
            result = {}
            for sid, info in chosen:
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

    def rollup_coverage(self) -> float:
        """Minutes ending at or before this time are read from roll-ups (``-inf``: none)."""
        with self._sessions() as session:
            return self._coverage(session)

    # -- the read engine (also behind Store.histogram_window / counter_window) --------------

    def _chosen_ids(
        self, session: Session, family: str, labels: Mapping[str, str] | None
    ) -> list[int]:
        from collectors.store.repository import _require_same_flags

        chosen = self._select(session, family, labels)  # type: ignore[attr-defined]
        _require_same_flags(family, [info for _, info in chosen])
        return [sid for sid, _ in chosen]

    def _coverage(self, session: Session) -> float:
        """Roll-ups are complete for every minute ending at or before the returned time:
        before the oldest scrape not yet rolled up (and settled), or before the raw horizon
        (where raw rows are gone)."""
        state = session.get(RollupState, 1)
        if state is None:
            return -math.inf
        # NOTE: ``+ 0`` keeps SQLite from answering min() by walking the whole time index
        # (checking ids as it goes) instead of the few ids above the settled one.
        pending = session.scalar(
            select(func.min(Scrape.timestamp_seconds + 0)).where(
                Scrape.id > state.settled_scrape_id
            )
        )
        clean = math.inf if pending is None else minute_start(pending)
        horizon = -math.inf if state.raw_horizon_seconds is None else state.raw_horizon_seconds
        return max(clean, horizon)

    def _plan(
        self, session: Session, bounds: list[float], use_rollups: bool
    ) -> tuple[list[float], list[tuple[float, float]]]:
        """The minutes read from roll-ups (each inside one step, before the coverage) and the
        ``(a, b]`` intervals read raw (everything else)."""
        low, high = bounds[0], bounds[-1]
        minutes: list[float] = []
        if use_rollups and len(bounds) > 1:
            limit = min(high, self._coverage(session))
            m = math.ceil(low / MINUTE) * MINUTE
            while m + MINUTE <= limit:
                k = bisect.bisect_right(bounds, m) - 1
                if bounds[k + 1] >= m + MINUTE:
                    minutes.append(m)
                m += MINUTE
        intervals: list[tuple[float, float]] = []
        cursor = low
        for m in minutes:
            if m > cursor:
                intervals.append((cursor, m))
            cursor = m + MINUTE
        if cursor < high:
            intervals.append((cursor, high))
        return minutes, intervals

    def _histogram_steps_as(
        self,
        session: Session,
        ids: list[int],
        bounds: list[float],
        use_rollups: bool,
        semantics: WindowSemantics,
    ) -> list[ClassicHistogram | None]:
        if semantics is WindowSemantics.EXACT:
            return self._histogram_steps(session, ids, bounds, use_rollups)

        def snapshots_of(sid: int, a: float, b: float) -> list[HistogramSnapshot]:
            # NOTE: the raw reader's rows start at the snapshot at or before ``a``; the
            # Prometheus reader takes only those inside each range from them.
            return [
                HistogramSnapshot(t, ClassicHistogram(self._bounds(session, layout), tuple(c), s))
                for t, layout, c, s in self._raw_snapshots(session, sid, a, b)
            ]

        return prometheus_histogram_steps(session, ids, bounds, semantics, snapshots_of)

    def _counter_steps_as(
        self,
        session: Session,
        ids: list[int],
        bounds: list[float],
        use_rollups: bool,
        semantics: WindowSemantics,
    ) -> list[float | None]:
        if semantics is WindowSemantics.EXACT:
            return self._counter_steps(session, ids, bounds, use_rollups)

        def values_of(sid: int, a: float, b: float) -> list[Sample]:
            return [Sample(t, v) for t, v in self._raw_values(session, sid, a, b)]

        return prometheus_counter_steps(session, ids, bounds, semantics, values_of)

    def _histogram_steps(
        self, session: Session, ids: list[int], bounds: list[float], use_rollups: bool
    ) -> list[ClassicHistogram | None]:
        steps = len(bounds) - 1
        if steps < 1:
            return []
        minutes, intervals = self._plan(session, bounds, use_rollups)
        wanted = set(minutes)
        merged: list[list[Any] | None] = [None] * steps
        owners: dict[int, int] = {}  # layout id -> the first series merged with it
        for sid in ids:
            acc: list[list[Any] | None] = [None] * steps
            if minutes:
                rows = session.connection().execute(
                    _HISTOGRAM_ROLLUPS, {"sid": sid, "lo": minutes[0], "hi": minutes[-1]}
                )
                for m, layout, other, counts, sum_value in rows:
                    if m not in wanted:
                        continue
                    if other is not None:
                        raise self._change_in_minute(session, sid, m, layout, other)
                    k = bisect.bisect_left(bounds, m + MINUTE) - 1
                    self._add(session, acc, k, layout, json.loads(counts), sum_value)
            for a, b in intervals:
                snaps = self._raw_snapshots(session, sid, a, b)
                change = self._first_change(session, sid, snaps, a)
                if change is not None:
                    raise change
                for prev, cur in itertools.pairwise(snaps):
                    if cur[0] <= a:
                        continue
                    counts, sum_value = _hist_pair(prev, cur)
                    k = bisect.bisect_left(bounds, cur[0]) - 1
                    self._add(session, acc, k, cur[1], counts, sum_value)
            for k, item in enumerate(acc):
                if item is None:
                    continue
                owners.setdefault(item[0], sid)
                held = merged[k]
                if held is not None and held[0] != item[0]:
                    raise layouts_differ_error(
                        series_name(session, owners[held[0]]),
                        self._bounds(session, held[0]),
                        series_name(session, sid),
                        self._bounds(session, item[0]),
                    )
                self._add(session, merged, k, item[0], item[1], item[2])
        out: list[ClassicHistogram | None] = []
        for item in merged:
            if item is None:
                out.append(None)
            else:
                bounds_k = self._bounds(session, item[0])
                out.append(ClassicHistogram(bounds_k, tuple(item[1]), item[2]))
        return out

    def _add(
        self,
        session: Session,
        acc: list[list[Any] | None],
        k: int,
        layout: int,
        counts: list[float],
        sum_value: float | None,
    ) -> None:
        item = acc[k]
        if item is None:
            acc[k] = [layout, list(counts), sum_value]
            return
        if item[0] != layout:
            self._layout_error(session, item[0], layout, "merge")
        item[1] = [x + y for x, y in zip(item[1], counts, strict=True)]
        item[2] = None if item[2] is None or sum_value is None else item[2] + sum_value

    def _counter_steps(
        self, session: Session, ids: list[int], bounds: list[float], use_rollups: bool
    ) -> list[float | None]:
        steps = len(bounds) - 1
        if steps < 1:
            return []
        minutes, intervals = self._plan(session, bounds, use_rollups)
        wanted = set(minutes)
        out: list[float | None] = [None] * steps
        for sid in ids:
            if minutes:
                rows = session.connection().execute(
                    _SAMPLE_ROLLUPS, {"sid": sid, "lo": minutes[0], "hi": minutes[-1]}
                )
                for m, pairs, increase in rows:
                    if m in wanted and pairs > 0:
                        k = bisect.bisect_left(bounds, m + MINUTE) - 1
                        out[k] = (out[k] or 0.0) + increase
            for a, b in intervals:
                values = self._raw_values(session, sid, a, b)
                for (_, before), (t, after) in itertools.pairwise(values):
                    if t <= a:
                        continue
                    k = bisect.bisect_left(bounds, t) - 1
                    out[k] = (out[k] or 0.0) + (after - before if after >= before else after)
        return out

    def _raw_snapshots(self, session: Session, sid: int, a: float, b: float) -> list[_Snap]:
        """Snapshots of ``sid`` from its last one at or before ``a`` to its last at or
        before ``b``, as plain tuples (counts decoded, layouts as ids)."""
        rows = session.connection().execute(_SNAPSHOT_ROWS, {"sid": sid, "a": a, "b": b})
        return [(t, layout, json.loads(counts), s) for t, layout, counts, s in rows]

    def _raw_values(
        self, session: Session, sid: int, a: float, b: float
    ) -> list[tuple[float, float]]:
        rows = session.connection().execute(_VALUE_ROWS, {"sid": sid, "a": a, "b": b})
        return [(t, v) for t, v in rows]

    def _bounds(self, session: Session, layout_id: int) -> tuple[float, ...]:
        """A layout's bounds; layouts never change once stored, so they are cached."""
        cache: dict[int, tuple[float, ...]] = self.__dict__.setdefault("_bounds_by_layout", {})
        if layout_id not in cache:
            text = session.scalar(select(Layout.bounds_json).where(Layout.id == layout_id))
            cache[layout_id] = decode_bounds(text)
        return cache[layout_id]

    def _first_change(
        self, session: Session, sid: int, snaps: list[_Snap], after: float
    ) -> LayoutChangeError | None:
        """The error for the first pair of ``snaps`` (raw snapshots of series ``sid``) whose
        later snapshot lies after ``after`` (the raw window rule) and whose layouts differ."""
        for prev, cur in itertools.pairwise(snaps):
            if cur[0] > after and prev[1] != cur[1]:
                left, right = self._bounds(session, prev[1]), self._bounds(session, cur[1])
                return LayoutChangeError(series_name(session, sid), prev[0], cur[0], left, right)
        return None

    def _change_in_minute(
        self, session: Session, sid: int, m: float, layout: int, other: int
    ) -> LayoutChangeError:
        """The error for a rolled-up minute ``(m, m + 60]`` that holds a layout change: the
        exact snapshots from raw where they are still kept, else the minute's bounds."""
        snaps = self._raw_snapshots(session, sid, m, m + MINUTE)
        change = self._first_change(session, sid, snaps, m)
        if change is not None:
            return change
        left, right = self._bounds(session, layout), self._bounds(session, other)
        name = series_name(session, sid)
        return LayoutChangeError(name, m, m + MINUTE, left, right, is_exact=False)

    def _layout_error(self, session: Session, left: int, right: int, where: str) -> None:
        first, second = self._bounds(session, left), self._bounds(session, right)
        raise LayoutMismatchError(
            f"bucket layouts differ ({where}): {len(first)} vs {len(second)} bounds; "
            "merge only series with the same buckets, or query them separately",
            first,
            second,
        )


# -- pure helpers -------------------------------------------------------------------------


def _hist_pair(prev: _Snap, cur: _Snap) -> tuple[list[float], float | None]:
    """A pair's increase: the difference, or the later snapshot itself after a reset (any
    bucket going down), as ``slo.histogram_increase`` does."""
    before, after = prev[2], cur[2]
    is_reset = any(x < y for x, y in zip(after, before, strict=True))
    counts = list(after) if is_reset else [x - y for x, y in zip(after, before, strict=True)]
    if prev[3] is None or cur[3] is None:
        return counts, None
    return counts, cur[3] if is_reset else cur[3] - prev[3]


def _histogram_minutes(
    sid: int, snaps: list[_Snap], m_first: float, m_last: float
) -> list[dict[str, Any]]:
    rows: dict[float, dict[str, Any]] = {}
    for prev, cur in itertools.pairwise(snaps):
        if not m_first < cur[0] <= m_last + MINUTE:
            continue
        m = minute_start(cur[0])
        row = rows.get(m)
        if row is None:
            row = rows[m] = {
                "series_id": sid,
                "start_seconds": m,
                "layout_id": prev[1],
                "other_layout_id": None,
                "pairs": 0,
                "counts": [0.0] * len(prev[2]),
                "sum_value": 0.0,
            }
        row["pairs"] += 1
        for layout in (prev[1], cur[1]):
            if layout != row["layout_id"] and row["other_layout_id"] is None:
                row["other_layout_id"] = layout
        if row["other_layout_id"] is not None:
            continue
        counts, sum_value = _hist_pair(prev, cur)
        row["counts"] = [x + y for x, y in zip(row["counts"], counts, strict=True)]
        if row["sum_value"] is not None:
            row["sum_value"] = None if sum_value is None else row["sum_value"] + sum_value
    out = []
    for row in rows.values():
        counts = row.pop("counts") if row["other_layout_id"] is None else []
        out.append(
            {**row, "counts_json": json.dumps(counts), "count": counts[-1] if counts else 0.0}
        )
    return out


def _sample_minutes(
    sid: int, values: list[tuple[float, float]], m_first: float, m_last: float
) -> list[dict[str, Any]]:
    rows: dict[float, dict[str, Any]] = {}
    previous: float | None = None
    for t, v in values:
        if m_first < t <= m_last + MINUTE:
            m = minute_start(t)
            row = rows.get(m)
            if row is None:
                row = rows[m] = {
                    "series_id": sid,
                    "start_seconds": m,
                    "pairs": 0,
                    "increase": 0.0,
                    "samples": 0,
                    "last_value": v,
                    "min_value": v,
                    "max_value": v,
                    "sum_value": 0.0,
                }
            row["samples"] += 1
            row["last_value"] = v
            row["min_value"] = min(row["min_value"], v)
            row["max_value"] = max(row["max_value"], v)
            row["sum_value"] += v
            if previous is not None:
                row["pairs"] += 1
                row["increase"] += v - previous if v >= previous else v
        previous = v
    return list(rows.values())


def _count_ids(session: Session, low: int, high: int) -> int:
    return session.scalar(
        select(func.count()).select_from(Scrape).where(Scrape.id > low, Scrape.id <= high)
    )


def _touch(
    session: Session,
    raw: type[HistogramSnapshotRow] | type[ValueSample],
    low: int,
    high: int,
    touched: dict[int, tuple[float, float]],
) -> None:
    """Widen ``touched[series] = (first, last)`` by the snapshots of scrapes in (low, high]."""
    rows = session.execute(
        select(raw.series_id, func.min(raw.timestamp_seconds), func.max(raw.timestamp_seconds))
        .where(raw.scrape_id > low, raw.scrape_id <= high)
        .group_by(raw.series_id)
    )
    for sid, first, last in rows:
        if sid in touched:
            first, last = min(first, touched[sid][0]), max(last, touched[sid][1])
        touched[sid] = (first, last)


def _delete_raw_rows(session: Session, ids: list[int], *, keep_scrapes: bool) -> None:
    for chunk in _chunks(ids, _IN_CHUNK):
        for table in (ExemplarRow, ValueSample, HistogramSnapshotRow):
            session.execute(delete(table).where(table.scrape_id.in_(chunk)))
        if not keep_scrapes:
            session.execute(delete(Scrape).where(Scrape.id.in_(chunk)))


def _chunks(items: list[int], size: int) -> Iterator[list[int]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _expire_traces(session: Session, now: float, policy: RetentionPolicy) -> dict[str, Any]:
    """Delete spans that started before the span retention and request records that arrived
    before the roll-up retention, oldest first, at most a batch of each."""
    limit = policy.max_trace_rows_deleted_per_call
    deleted: dict[str, Any] = {"more_to_do": False}
    for key, table, column, keep in (
        ("spans", SpanRow, SpanRow.start_seconds, policy.span_retention_seconds),
        ("requests", RequestRow, RequestRow.arrival_seconds, policy.rollup_retention_seconds),
    ):
        ids = list(
            session.scalars(
                select(table.id).where(column < now - keep).order_by(column).limit(limit + 1)
            )
        )
        deleted["more_to_do"] = deleted["more_to_do"] or len(ids) > limit
        ids = ids[:limit]
        for start in range(0, len(ids), 1000):  # NOTE: bounded IN lists
            session.execute(delete(table).where(table.id.in_(ids[start : start + 1000])))
        deleted[key] = len(ids)
    return deleted

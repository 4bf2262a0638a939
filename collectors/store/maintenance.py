"""Maintenance: 1-minute roll-ups built as scrapes arrive, and retention.

Each maintenance call rolls up the scrapes stored since the last one (by scrape id, which the
database hands out in commit order on SQLite; on PostgreSQL a concurrent writer may commit a
lower id late, which a recount notices). A late scrape changes the pair it falls into: the
minute it lies in and the minute of the series' next snapshot after it are rolled up again
from raw (:mod:`collectors.store.rollup_rows`). Readers use roll-ups only for minutes before
the oldest scrape not yet rolled up, so a read is exact at any moment, not only after
maintenance has caught up.

Retention deletes raw rows only for scrapes already rolled up (and settled), oldest first, in
bounded batches; roll-ups past their own retention go the same way; spans and request records
are expired beside them (:func:`collectors.store.traces.expire_traces`), and so is the alert
evaluator's history (:func:`collectors.store.alert_retention.expire_alert_records`). Raw data
that arrives later than the raw retention (its minute is gone) is dropped on arrival: its
neighbours are no longer there to compute its increase.
"""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass, replace

from sqlalchemy import Select, bindparam, delete, func, insert, select
from sqlalchemy.orm import Session, sessionmaker

from collectors.store.alert_retention import expire_alert_records
from collectors.store.models import (
    ExemplarRow,
    HistogramRollup,
    HistogramSnapshotRow,
    RollupState,
    SampleRollup,
    Scrape,
    ValueSample,
)
from collectors.store.raw import MINUTE, minute_start, raw_snapshots, raw_values
from collectors.store.retention import MaintenanceReport, RetentionPolicy
from collectors.store.rollup_rows import histogram_minutes, sample_minutes
from collectors.store.sql import chunks
from collectors.store.traces import expire_traces

_RollupTable = type[HistogramRollup] | type[SampleRollup]


def _following(raw: type[HistogramSnapshotRow] | type[ValueSample]) -> Select:
    return (
        select(raw.timestamp_seconds)
        .where(raw.series_id == bindparam("sid"), raw.timestamp_seconds > bindparam("t"))
        .order_by(raw.timestamp_seconds)
        .limit(1)
    )


# NOTE: statements built once (per series, compiling them would cost more than running them).
_NEXT = {HistogramRollup: _following(HistogramSnapshotRow), SampleRollup: _following(ValueSample)}
_CLEAR = {
    table: delete(table).where(
        table.series_id == bindparam("sid"),
        table.start_seconds >= bindparam("lo"),
        table.start_seconds <= bindparam("hi"),
    )
    for table in (HistogramRollup, SampleRollup)
}


class Maintenance:
    """Rolls up and expires the store's data, one writer at a time (``write_lock``)."""

    def __init__(self, sessions: sessionmaker[Session], write_lock: threading.Lock) -> None:
        self._sessions = sessions
        self._write_lock = write_lock

    def maintain(self, now: float, policy: RetentionPolicy | None = None) -> MaintenanceReport:
        """Roll up complete minutes, then apply retention, doing at most a batch of each.

        Idempotent and incremental: call it every collector cycle with the current time
        (``now``, unix seconds); a call with nothing to do costs a few small queries. Minutes
        that received late scrapes are rolled up again. Raw rows (samples, histogram
        snapshots, exemplars, scrapes) older than ``policy.raw_retention_seconds`` are deleted
        only once rolled up; roll-ups older than ``policy.rollup_retention_seconds`` are
        deleted. ``report.more_to_do`` says a batch limit stopped it early."""
        policy = policy or RetentionPolicy()
        with self._write_lock:
            with self._sessions() as session:
                if session.get_bind().dialect.name == "postgresql":
                    # NOTE: one snapshot for the whole roll-up, so the recount of scrape ids
                    # and the rows rolled up agree.
                    session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
                report = _roll_up(session, now, policy)
                session.commit()
            with self._sessions() as session:
                expired = _expire_raw(session, now, policy)
                traces = expire_traces(
                    session,
                    span_cutoff_seconds=now - policy.span_retention_seconds,
                    request_cutoff_seconds=now - policy.rollup_retention_seconds,
                    limit=policy.max_trace_rows_deleted_per_call,
                )
                alerts = expire_alert_records(
                    session,
                    cutoff_seconds=now - policy.alert_retention_seconds,
                    limit=policy.max_alert_rows_deleted_per_call,
                )
                session.commit()
        return replace(
            report,
            raw_scrapes_deleted=expired.raw_scrapes_deleted,
            rollup_rows_deleted=expired.rollup_rows_deleted,
            spans_deleted=traces.spans_deleted,
            request_records_deleted=traces.request_records_deleted,
            alert_transitions_deleted=alerts.alert_transitions_deleted,
            incidents_deleted=alerts.incidents_deleted,
            rule_failures_deleted=alerts.rule_failures_deleted,
            notified_deleted=alerts.notified_deleted,
            silences_deleted=alerts.silences_deleted,
            change_events_deleted=alerts.change_events_deleted,
            more_to_do=any(r.more_to_do for r in (report, expired, traces, alerts)),
        )


def _roll_up(session: Session, now: float, policy: RetentionPolicy) -> MaintenanceReport:
    state = session.scalar(select(RollupState).where(RollupState.id == 1).with_for_update())
    if state is None:
        state = RollupState(id=1, processed_scrape_id=0, settled_scrape_id=0, processed_count=0)
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
        written += _redo_minutes(session, HistogramRollup, sid, span, first_redoable)
    for sid, span in touched_v.items():
        written += _redo_minutes(session, SampleRollup, sid, span, first_redoable)
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
    return MaintenanceReport(
        scrapes_rolled_up=len(taken) - len(dropped),
        late_scrapes=late,
        dropped_late_scrapes=len(dropped),
        recounted=recounted,
        series_recomputed=len(touched_h) + len(touched_v),
        rollup_rows_written=written,
        more_to_do=more_to_do,
    )


def _redo_minutes(
    session: Session,
    table: _RollupTable,
    sid: int,
    span: tuple[float, float],
    first_redoable: float,
) -> int:
    """Roll up again the minutes of series ``sid`` that new snapshots in ``span`` change:
    from the minute of the first to the minute of the series' next snapshot after the last
    (whose pair now starts at a new snapshot)."""
    conn = session.connection()
    first, last = span
    following = conn.execute(_NEXT[table], {"sid": sid, "t": last}).scalar()
    m_first = max(minute_start(first), first_redoable)
    m_last = minute_start(last if following is None else following)
    if m_last < m_first:
        return 0
    conn.execute(_CLEAR[table], {"sid": sid, "lo": m_first, "hi": m_last})
    if table is HistogramRollup:
        snaps = raw_snapshots(session, sid, m_first, m_last + MINUTE)
        rows = histogram_minutes(sid, snaps, m_first, m_last)
    else:
        values = raw_values(session, sid, m_first, m_last + MINUTE)
        rows = sample_minutes(sid, values, m_first, m_last)
    if rows:
        conn.execute(insert(table), rows)
    return len(rows)


@dataclass(frozen=True)
class _RawExpiry:
    raw_scrapes_deleted: int = 0
    rollup_rows_deleted: int = 0
    more_to_do: bool = False


def _expire_raw(session: Session, now: float, policy: RetentionPolicy) -> _RawExpiry:
    """Delete raw rows past the raw retention (rolled-up, settled scrapes only) and roll-ups
    past theirs, oldest first, at most a batch of each."""
    state = session.get(RollupState, 1)
    if state is None:
        return _RawExpiry()
    cutoff = math.floor((now - policy.raw_retention_seconds) / MINUTE) * MINUTE
    newest_id = session.scalar(select(func.max(Scrape.id)))
    # NOTE: the newest scrape is always kept: SQLite may reuse the highest id once it is
    # deleted, and a reused id would look already rolled up.
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
    if ids and (state.raw_horizon_seconds is None or state.raw_horizon_seconds < cutoff):
        state.raw_horizon_seconds = cutoff
    rollup_cutoff = math.floor((now - policy.rollup_retention_seconds) / MINUTE) * MINUTE
    span = policy.max_rollup_minutes_deleted_per_call * MINUTE
    deleted_rollups = 0
    for table in (HistogramRollup, SampleRollup):
        oldest = session.scalar(select(func.min(table.start_seconds)))
        if oldest is None or oldest >= rollup_cutoff:
            continue
        upto = min(rollup_cutoff, oldest + span)
        more_to_do = more_to_do or upto < rollup_cutoff
        result = session.execute(delete(table).where(table.start_seconds < upto))
        deleted_rollups += getattr(result, "rowcount", 0) or 0
    return _RawExpiry(len(ids), deleted_rollups, more_to_do)


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
    for chunk in chunks(ids):
        for table in (ExemplarRow, ValueSample, HistogramSnapshotRow):
            session.execute(delete(table).where(table.scrape_id.in_(chunk)))
        if not keep_scrapes:
            session.execute(delete(Scrape).where(Scrape.id.in_(chunk)))

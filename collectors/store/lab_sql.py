"""The knob lab's runs and points in the store (:class:`~collectors.store.protocols.LabStore`
and :class:`~collectors.store.protocols.LabReader` over the tables of revision 0006).

Input is checked and copied by :mod:`collectors.store.lab_codec`, as ``FakeLab`` does, so the
two refuse the same records and give back the same values. Each write is one transaction: a
point is visible to the console as soon as ``add_lab_point`` returns. Reads return the frozen
dataclasses of :mod:`collectors.store.lab_records`, never SQLAlchemy objects.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from collectors.store.lab_codec import (
    check_end,
    check_limit,
    check_point,
    check_run,
    decode,
    encode,
)
from collectors.store.lab_models import LabPointRow, LabRunRow
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunNotFound, LabRunStatus


class SQLLab:
    """Lab runs and points; writes take ``write_lock`` (the store's, shared with its other
    writers)."""

    def __init__(self, sessions: sessionmaker[Session], write_lock: threading.Lock) -> None:
        self._sessions = sessions
        self._write_lock = write_lock

    # -- writing (LabStore) ------------------------------------------------------------------

    def create_lab_run(self, run: LabRun) -> int:
        """Store ``run`` (its ``id`` is ignored) and return the id the store gave it. Raises
        ``ValueError`` naming the field, writing nothing, for a value it cannot keep exactly."""
        run = check_run(run)
        row = {
            "kind": run.kind.value,
            "status": run.status.value,
            "name": run.name,
            "target": run.target,
            "simulated": run.simulated,
            "created_at_seconds": run.created_at,
            "finished_at_seconds": run.finished_at,
            "sweep_knob": run.sweep_knob,
            "num_repeats": run.num_repeats,
            "num_planned_points": run.num_planned_points,
            "window_start_seconds": run.window[0] if run.window else None,
            "window_end_seconds": run.window[1] if run.window else None,
            "error": run.error,
            "knobs_json": encode(run.knobs, "knobs"),
            "workload_json": encode(run.workload, "workload"),
            "knob_values_json": encode(list(run.knob_values), "knob_values"),
            "rates_json": encode(list(run.rates), "rates"),
        }
        with self._write_lock, self._sessions.begin() as session:
            return session.execute(
                insert(LabRunRow).values(row).returning(LabRunRow.id)
            ).scalar_one()

    def add_lab_point(self, point: LabPoint) -> None:
        """Append ``point`` to its run. Raises :class:`LabRunNotFound` when the store holds no
        run ``point.run_id``, ``ValueError`` for a value it cannot keep exactly."""
        point = check_point(point)
        row = {
            "run_id": point.run_id,
            "knob_value_json": encode(point.knob_value, "knob_value"),
            "rate": point.rate,
            "repeat": point.repeat,
            "measured_at_seconds": point.measured_at,
            "summary_json": encode(point.summary, "summary"),
            "samples_json": encode(point.samples, "samples"),
        }
        with self._write_lock, self._sessions.begin() as session:
            _require_run(session, point.run_id)
            session.execute(insert(LabPointRow).values(row))

    def finish_lab_run(self, run_id: int, status: LabRunStatus, error: str | None = None) -> None:
        """Set the run's status, error and end time (now). Raises :class:`LabRunNotFound`."""
        status = check_end(status, error)
        values = {"status": status.value, "error": error, "finished_at_seconds": time.time()}
        with self._write_lock, self._sessions.begin() as session:
            _require_run(session, run_id)
            session.execute(update(LabRunRow).where(LabRunRow.id == run_id).values(values))

    # -- reading (LabReader) -----------------------------------------------------------------

    def lab_runs(self, kind: LabRunKind | None = None, limit: int = 100) -> list[LabRun]:
        """Runs of ``kind`` (default: all), newest ``created_at`` first (then newest id), at
        most ``limit``."""
        query = select(LabRunRow).order_by(LabRunRow.created_at_seconds.desc(), LabRunRow.id.desc())
        if kind is not None:
            query = query.where(LabRunRow.kind == LabRunKind(kind).value)
        with self._sessions() as session:
            return [_run(row) for row in session.scalars(query.limit(check_limit(limit)))]

    def lab_run(self, run_id: int) -> LabRun | None:
        with self._sessions() as session:
            row = session.get(LabRunRow, run_id)
            return None if row is None else _run(row)

    def lab_points(self, run_id: int) -> list[LabPoint]:
        """The run's points in the order they were added (none for an unknown run)."""
        query = select(LabPointRow).where(LabPointRow.run_id == run_id).order_by(LabPointRow.id)
        with self._sessions() as session:
            return [_point(row) for row in session.scalars(query)]


def _require_run(session: Session, run_id: int) -> None:
    if session.scalar(select(LabRunRow.id).where(LabRunRow.id == run_id)) is None:
        raise LabRunNotFound(f"lab run {run_id} does not exist")


def _run(row: LabRunRow) -> LabRun:
    window = None
    if row.window_start_seconds is not None and row.window_end_seconds is not None:
        window = (row.window_start_seconds, row.window_end_seconds)
    return LabRun(
        kind=LabRunKind(row.kind),
        name=row.name,
        created_at=row.created_at_seconds,
        target=row.target,
        simulated=row.simulated,
        knobs=decode(row.knobs_json),
        workload=decode(row.workload_json),
        sweep_knob=row.sweep_knob,
        knob_values=tuple(decode(row.knob_values_json)),
        rates=tuple(decode(row.rates_json)),
        num_repeats=row.num_repeats,
        num_planned_points=row.num_planned_points,
        status=LabRunStatus(row.status),
        error=row.error,
        finished_at=row.finished_at_seconds,
        window=window,
        id=row.id,
    )


def _point(row: LabPointRow) -> LabPoint:
    return LabPoint(
        run_id=row.run_id,
        knob_value=decode(row.knob_value_json),
        rate=row.rate,
        repeat=row.repeat,
        summary=decode(row.summary_json),
        samples=decode(row.samples_json),
        measured_at=row.measured_at_seconds,
    )

"""Change events in the store (:class:`~collectors.store.protocols.ChangeStore` and
:class:`~collectors.store.protocols.ChangeReader` over the table of revision 0008).

Writes are idempotent on the event's identity, with only portable SQL, as the span writes
are: the batch's identities are looked up, the new rows inserted in one statement, and a
concurrent writer that stored one between the two makes the unique constraint refuse ours
and one retry skip it. Reads return :class:`ChangeEvent` values, never SQLAlchemy objects.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from collectors.store.change_models import ChangeEventRow
from collectors.store.change_records import (
    ChangeEvent,
    ChangeKind,
    check_limit,
    check_range,
    newest,
)
from collectors.store.codec import digest
from collectors.store.sql import chunks


def identity_hash(event: ChangeEvent) -> str:
    """The SHA-256 of the event's identity (its float time written exactly, as ``repr``)."""
    return digest(json.dumps(event.key, separators=(",", ":")))


def _row(event: ChangeEvent) -> dict[str, object]:
    return {
        "at_seconds": event.at_seconds,
        "target": event.target,
        "kind": event.kind.value,
        "source": event.source,
        "subject": event.subject,
        "before": event.before,
        "after": event.after,
        "identity_hash": identity_hash(event),
    }


def _event(row: ChangeEventRow) -> ChangeEvent:
    return ChangeEvent(
        row.at_seconds,
        row.target,
        ChangeKind(row.kind),
        row.subject,
        row.before,
        row.after,
        row.source,
    )


class SQLChanges:
    """Change events; writes take ``write_lock`` (the store's, shared with its other writers)."""

    def __init__(self, sessions: sessionmaker[Session], write_lock: threading.Lock) -> None:
        self._sessions = sessions
        self._write_lock = write_lock

    def write_change_events(self, events: Sequence[ChangeEvent]) -> int:
        """Store ``events`` in one transaction; returns how many were new (an event already
        stored, or repeated in ``events``, is skipped)."""
        rows = list({r["identity_hash"]: r for r in map(_row, events)}.values())
        if not rows:
            return 0
        with self._write_lock:
            for attempt in range(2):
                with self._sessions() as session:
                    try:
                        new = self._new(session, rows)
                        if new:
                            session.execute(insert(ChangeEventRow), new)
                        session.commit()
                        return len(new)
                    except IntegrityError:
                        # NOTE: another writer stored some of these between our look-up and
                        # our insert; the retry's look-up sees them.
                        session.rollback()
                        if attempt == 1:
                            raise
        raise AssertionError("unreachable")

    @staticmethod
    def _new(session: Session, rows: list[dict[str, object]]) -> list[dict[str, object]]:
        hashes = [str(r["identity_hash"]) for r in rows]
        stored: set[str] = set()
        for chunk in chunks(hashes):
            query = select(ChangeEventRow.identity_hash).where(
                ChangeEventRow.identity_hash.in_(chunk)
            )
            stored.update(session.scalars(query))
        return [r for r in rows if r["identity_hash"] not in stored]

    def change_events(
        self, start: float, end: float, *, target: str | None = None, limit: int = 1000
    ) -> list[ChangeEvent]:
        """The newest ``limit`` events with ``start <= at_seconds <= end`` (of ``target``
        only, when given; ``""`` is the fleet's), oldest first."""
        check_range(start, end)
        check_limit(limit)
        where = [ChangeEventRow.at_seconds >= start, ChangeEventRow.at_seconds <= end]
        if target is not None:
            where.append(ChangeEventRow.target == target)
        # NOTE: the limit-th newest time first, then every event from it on: events that share
        # that time are cut in the identity's order (Python's), not the database collation's
        oldest_kept = (
            select(ChangeEventRow.at_seconds)
            .where(*where)
            .order_by(ChangeEventRow.at_seconds.desc())
            .offset(limit - 1)
            .limit(1)
        )
        with self._sessions() as session:
            cut = session.scalar(oldest_kept)
            if cut is not None:
                where.append(ChangeEventRow.at_seconds >= cut)
            events = [_event(row) for row in session.scalars(select(ChangeEventRow).where(*where))]
        return newest(events, limit)
